# Kernels compiled for a wider ISA live in their own translation units and are picked at run
# time (core/cpu_features.h), so one binary runs on AVX2-only and AVX-512 machines alike.
set(OG_AVX2_FLAGS -mavx2 -mfma -mf16c)
# GCC 12's own AVX-512 headers trip -Wmaybe-uninitialized (their _mm512_undefined_* helpers),
# so that warning is off for these files only.
set(OG_AVX512_FLAGS -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512bf16 -mavx512vnni -mfma -mf16c
    -Wno-maybe-uninitialized)

# og_simd_sources(<target> AVX2 <files...> AVX512 <files...>)
function(og_simd_sources target)
  cmake_parse_arguments(ARG "" "" "AVX2;AVX512" ${ARGN})
  target_sources(${target} PRIVATE ${ARG_AVX2} ${ARG_AVX512})
  if(ARG_AVX2)
    set_source_files_properties(${ARG_AVX2} PROPERTIES COMPILE_OPTIONS "${OG_AVX2_FLAGS}")
  endif()
  if(ARG_AVX512)
    set_source_files_properties(${ARG_AVX512} PROPERTIES COMPILE_OPTIONS "${OG_AVX512_FLAGS}")
  endif()
endfunction()
