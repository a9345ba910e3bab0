# Sourced by scripts/bench and scripts/bench-compare: builds og_bench and its models for one
# source tree. Nothing is downloaded.

# og_bench_prepare SRC BUILD: Release-configures BUILD if needed, builds og_bench, and writes the
# models of SRC's tools/make_bench_models.py to BUILD/bench-models (again when that script changed).
# Returns 3 when SRC has no benchmark suite (an older revision).
og_bench_prepare() {
  local src=$1 build=$2
  if [[ ! -f $src/bench/CMakeLists.txt || ! -f $src/tools/make_bench_models.py ]]; then
    echo "bench: $src has no benchmark suite (bench/, tools/make_bench_models.py)" >&2
    return 3
  fi
  if [[ ! -f $build/build.ninja ]]; then
    cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DOG_BUILD_TESTS=OFF >&2
  fi
  local build_type
  build_type=$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$build/CMakeCache.txt")
  if [[ $build_type != Release ]]; then
    echo "bench: $build is a $build_type build; benchmarks need Release (use another --build)" >&2
    return 1
  fi
  ninja -C "$build" -j"$(nproc)" og_bench >&2
  local models=$build/bench-models
  if [[ ! -f $models/manifest.json || $src/tools/make_bench_models.py -nt $models/manifest.json ]]; then
    rm -rf "$models"
    /usr/bin/python3 "$src/tools/make_bench_models.py" "$models" >&2
  fi
}

# Fails with the install command when the ONNX Runtime oracle is missing.
og_bench_require_ort() {
  local oracle=$1/tests/oracle
  if [[ ! -d $oracle/node_modules/onnxruntime-node ]]; then
    echo "bench: onnxruntime-node is not installed; run:" >&2
    echo "  cd $oracle && ONNXRUNTIME_NODE_INSTALL=skip npm ci --omit=optional --ignore-scripts" >&2
    return 1
  fi
}
