// The GEMM driver body, written once over a vector-traits type `V` and compiled per instruction
// set. Include this only from the per-ISA translation units, each declaring its `V` in an
// anonymous namespace: every instantiation then stays private to its unit, so code built with
// -mavx512f can never be merged by the linker into the AVX2 or scalar path.
//
// V provides: reg, kWidth (floats per reg), kVecs (regs per tile row), kRows (tile rows),
// kKc/kMc/kNc (blocking), zero, set1, broadcast, fma, add, mul, and load/load_partial/
// store/store_partial for float, Float16 and BFloat16 (16-bit types convert to/from f32).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "ops/cpu/gemm_kernels.h"

#define OG_GEMM_UNROLL _Pragma("GCC unroll 32")

namespace onnx_genai::gemm_impl {

template <class V>
struct Gemm {
  using reg = typename V::reg;
  static constexpr int W = V::kWidth;
  static constexpr int NV = V::kVecs;
  static constexpr int NR = W * NV;
  static constexpr int MR = V::kRows;
  // GEMV accumulators: k is unrolled so that enough independent FMA chains are in flight to
  // cover the FMA latency (4 cycles, 2 ports => 8 chains).
  static constexpr int kGemvChains = 8;

  template <typename T>
  static reg load_n(const T* p, int n) {
    return n >= W ? V::load(p) : (n > 0 ? V::load_partial(p, n) : V::zero());
  }
  template <typename T>
  static void store_n(T* p, reg v, int n) {
    if (n >= W) V::store(p, v);
    else if (n > 0) V::store_partial(p, v, n);
  }

  // C[ROWS x cols] = (accumulate ? C : 0) + A_tile * B_panel.
  //   a: packed A tile [kc][ROWS] - one broadcast per row per k step
  //   b: packed B panel [kc][NR]  - NV vector loads per k step, read front to back
  //   c: row-major with leading dimension ldc; only the first `cols` (<= NR) columns are stored
  // All ROWS x NV accumulators live in registers for the whole kc loop.
  template <int ROWS>
  static void tile(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, int cols, bool accumulate) {
    reg acc[ROWS][NV];
    OG_GEMM_UNROLL for (int r = 0; r < ROWS; ++r) {
      OG_GEMM_UNROLL for (int v = 0; v < NV; ++v) acc[r][v] = V::zero();
    }
    for (int64_t k = 0; k < kc; ++k) {
      reg bv[NV];
      OG_GEMM_UNROLL for (int v = 0; v < NV; ++v) bv[v] = V::load(b + v * W);
      OG_GEMM_UNROLL for (int r = 0; r < ROWS; ++r) {
        const reg av = V::broadcast(a + r);
        OG_GEMM_UNROLL for (int v = 0; v < NV; ++v) acc[r][v] = V::fma(av, bv[v], acc[r][v]);
      }
      a += ROWS;
      b += NR;
    }
    OG_GEMM_UNROLL for (int r = 0; r < ROWS; ++r) {
      float* row = c + r * ldc;
      OG_GEMM_UNROLL for (int v = 0; v < NV; ++v) {
        const int n = cols - v * W;
        reg x = acc[r][v];
        if (accumulate) x = V::add(x, load_n(row + v * W, n));
        store_n(row + v * W, x, n);
      }
    }
  }

  using TileFn = void (*)(int64_t, const float*, const float*, float*, int64_t, int, bool);
  template <size_t... R>
  static constexpr std::array<TileFn, MR + 1> make_tiles(std::index_sequence<R...>) {
    return {nullptr, &tile<static_cast<int>(R) + 1>...};
  }
  // kTiles[r] handles a tile of r rows (1 <= r <= MR): M is cut into nearly equal tiles, so
  // M = 32 on a 14-row kernel runs as 11 + 11 + 10 instead of 14 + 14 + 4.
  static constexpr std::array<TileFn, MR + 1> kTiles = make_tiles(std::make_index_sequence<MR>());

  // A tile of `rows` rows starting at `a` (element (i, k) at a[i*rs + k*cs]) -> dst[kc][rows].
  template <typename T>
  static void pack_a_tile(const T* a, int64_t rs, int64_t cs, int64_t rows, int64_t kc, float* dst) {
    if (cs == 1) {
      // Widen W elements at a time (f16 has no cheap scalar conversion), then interleave.
      alignas(64) float tmp[W];
      for (int64_t i = 0; i < rows; ++i) {
        const T* src = a + i * rs;
        for (int64_t k = 0; k < kc; k += W) {
          const int n = static_cast<int>(std::min<int64_t>(W, kc - k));
          V::store(tmp, load_n(src + k, n));
          for (int j = 0; j < n; ++j) dst[(k + j) * rows + i] = tmp[j];
        }
      }
    } else {
      for (int64_t k = 0; k < kc; ++k) {
        for (int64_t i = 0; i < rows; ++i) dst[k * rows + i] = static_cast<float>(a[i * rs + k * cs]);
      }
    }
  }

  // B block [kc, nc] starting at `b` (element (k, n) at b[k*rs + n*cs]) -> NR-wide panels
  // [kc][NR], `panel_stride` floats apart, zero-padded past nc.
  template <typename T>
  static void pack_b_block(const T* b, int64_t rs, int64_t cs, int64_t kc, int64_t nc, int64_t panel_stride,
                           float* dst) {
    for (int64_t p0 = 0; p0 < nc; p0 += NR) {
      const int cols = static_cast<int>(std::min<int64_t>(NR, nc - p0));
      float* d = dst + (p0 / NR) * panel_stride;
      if (cs == 1) {
        for (int64_t k = 0; k < kc; ++k) {
          const T* src = b + k * rs + p0;
          OG_GEMM_UNROLL for (int v = 0; v < NV; ++v) V::store(d + k * NR + v * W, load_n(src + v * W, cols - v * W));
        }
      } else {
        // Transposed source (B given as [N, K]): walk each source row contiguously.
        for (int j = 0; j < NR; ++j) {
          const T* src = b + (p0 + j) * cs;
          for (int64_t k = 0; k < kc; ++k) d[k * NR + j] = j < cols ? static_cast<float>(src[k * rs]) : 0.0f;
        }
      }
    }
  }

  template <typename T>
  static void pack_b_matrix(const GemmOperand& b, int64_t k, int64_t n, float* dst) {
    pack_b_block(static_cast<const T*>(b.data), b.rs, b.cs, k, n, k * NR, dst);
  }

  static void pack_b(const GemmOperand& b, int64_t k, int64_t n, float* dst) {
    switch (b.dtype) {
      case DType::kF16: return pack_b_matrix<Float16>(b, k, n, dst);
      case DType::kBF16: return pack_b_matrix<BFloat16>(b, k, n, dst);
      default: return pack_b_matrix<float>(b, k, n, dst);
    }
  }

  // y[0, cols) = a[0, k) * B[k][cols], B rows `ldb` elements apart, NVG vectors per row.
  // kFull: all NVG*W columns are readable (packed panels are zero-padded); otherwise loads are
  // masked to `cols`. Stores are always limited to `cols`.
  template <int NVG, bool kFull, typename T>
  static void gemv_block(int64_t k, const float* a, const T* b, int64_t ldb, int cols, float* y) {
    constexpr int U = std::max(1, kGemvChains / NVG);
    reg acc[U][NVG];
    OG_GEMM_UNROLL for (int u = 0; u < U; ++u) {
      OG_GEMM_UNROLL for (int v = 0; v < NVG; ++v) acc[u][v] = V::zero();
    }
    auto load_b = [&](const T* p, int v) { return kFull ? V::load(p + v * W) : load_n(p + v * W, cols - v * W); };
    int64_t kk = 0;
    for (; kk + U <= k; kk += U) {
      OG_GEMM_UNROLL for (int u = 0; u < U; ++u) {
        const reg av = V::broadcast(a + kk + u);
        const T* row = b + (kk + u) * ldb;
        OG_GEMM_UNROLL for (int v = 0; v < NVG; ++v) acc[u][v] = V::fma(av, load_b(row, v), acc[u][v]);
      }
    }
    for (; kk < k; ++kk) {
      const reg av = V::broadcast(a + kk);
      OG_GEMM_UNROLL for (int v = 0; v < NVG; ++v) acc[0][v] = V::fma(av, load_b(b + kk * ldb, v), acc[0][v]);
    }
    OG_GEMM_UNROLL for (int v = 0; v < NVG; ++v) {
      reg sum = acc[0][v];
      OG_GEMM_UNROLL for (int u = 1; u < U; ++u) sum = V::add(sum, acc[u][v]);
      store_n(y + v * W, sum, cols - v * W);
    }
  }

  // out[0, n) = alpha * acc + beta * bias (bias element j at bias[j * bias_cs]; null = none).
  template <typename T>
  static void finish_row(const float* acc, T* out, int64_t n, float alpha, const T* bias, int64_t bias_cs, float beta) {
    const reg va = V::set1(alpha);
    const reg vb = V::set1(beta);
    for (int64_t j = 0; j < n; j += W) {
      const int cnt = static_cast<int>(std::min<int64_t>(W, n - j));
      reg x = V::mul(load_n(acc + j, cnt), va);
      if (bias != nullptr) {
        const reg bj = bias_cs == 0 ? V::set1(static_cast<float>(bias[0])) : load_n(bias + j, cnt);
        x = V::fma(bj, vb, x);
      }
      store_n(out + j, x, cnt);
    }
  }

  template <typename T>
  struct Task {
    const GemmPlan& plan;
    const GemmArgs& args;
    float* ws;

    int64_t m() const { return plan.shape.m; }
    int64_t n() const { return plan.shape.n; }
    int64_t k() const { return plan.shape.k; }
    T* out(int64_t batch, int64_t row) const { return static_cast<T*>(args.c) + (batch * m() + row) * n(); }
    const T* bias_row(int64_t row) const {
      return args.bias.data == nullptr ? nullptr : static_cast<const T*>(args.bias.data) + row * args.bias.rs;
    }
    void finish(const float* acc, int64_t batch, int64_t row, int64_t col, int64_t cols) const {
      const T* bias = bias_row(row);
      finish_row(acc, out(batch, row) + col, cols, args.alpha, bias == nullptr ? nullptr : bias + col * args.bias.cs,
                 args.bias.cs, args.beta);
    }

    // One (batch, row block, column block) of the blocked GEMM.
    void gemm(int64_t batch, int64_t mb, int64_t nb) const {
      const int64_t m0 = mb * plan.mc, rows = std::min(plan.mc, m() - m0);
      const int64_t n0 = nb * plan.nc, cols = std::min(plan.nc, n() - n0);
      const T* a = static_cast<const T*>(args.a.data) + args.a_offsets[batch] + m0 * args.a.rs;
      float* a_pack = ws;
      float* b_pack = ws + plan.a_pack_floats;
      // f32 output accumulates in place; 16-bit output in an f32 tile converted at the end.
      constexpr bool kDirect = std::is_same_v<T, float>;
      float* c = kDirect ? reinterpret_cast<float*>(out(batch, m0)) + n0 : b_pack + plan.b_pack_floats;
      const int64_t ldc = kDirect ? n() : plan.nc;
      const int64_t tiles = (rows + MR - 1) / MR;
      const int64_t tile_rows = rows / tiles, extra = rows % tiles;
      const int64_t k_blocks = std::max<int64_t>(1, (k() + plan.kc - 1) / plan.kc);
      for (int64_t kb = 0; kb < k_blocks; ++kb) {
        const int64_t k0 = kb * plan.kc, kc = std::min(plan.kc, k() - k0);
        for (int64_t t = 0, r0 = 0; t < tiles; r0 += tile_rows + (t < extra), ++t) {
          pack_a_tile(a + r0 * args.a.rs + k0 * args.a.cs, args.a.rs, args.a.cs, tile_rows + (t < extra), kc,
                      a_pack + r0 * kc);
        }
        const float* panels;
        int64_t panel_stride;
        if (args.packed_b != nullptr) {
          panel_stride = args.packed_b->panel_stride();
          panels = args.packed_b->matrix(args.b_offsets[batch]) + (n0 / NR) * panel_stride + k0 * NR;
        } else {
          const T* b = static_cast<const T*>(args.b.data) + args.b_offsets[batch];
          panel_stride = kc * NR;
          pack_b_block(b + k0 * args.b.rs + n0 * args.b.cs, args.b.rs, args.b.cs, kc, cols, panel_stride, b_pack);
          panels = b_pack;
        }
        // Each B panel (kc x NR = 32 KiB on AVX-512) stays cache-hot while every A tile of the
        // block streams past it.
        for (int64_t p = 0; p * NR < cols; ++p) {
          const int pc = static_cast<int>(std::min<int64_t>(NR, cols - p * NR));
          for (int64_t t = 0, r0 = 0; t < tiles; r0 += tile_rows + (t < extra), ++t) {
            const int64_t tr = tile_rows + (t < extra);
            kTiles[static_cast<size_t>(tr)](kc, a_pack + r0 * kc, panels + p * panel_stride, c + r0 * ldc + p * NR,
                                           ldc, pc, kb > 0);
          }
        }
      }
      if (plan.epilogue || !kDirect) {
        for (int64_t r = 0; r < rows; ++r) finish(c + r * ldc, batch, m0 + r, n0, cols);
      }
    }

    // One (batch, column block) of y = a B for M == 1.
    void gemv(int64_t batch, int64_t nb) const {
      const int64_t n0 = nb * plan.nc, n1 = std::min(n(), n0 + plan.nc);
      const T* a_src = static_cast<const T*>(args.a.data) + args.a_offsets[batch];
      const float* a = ws;  // the row widened to f32 unless it already is contiguous f32
      if constexpr (std::is_same_v<T, float>) {
        if (args.a.cs == 1) a = a_src;
      }
      if (a == ws) {
        for (int64_t i = 0; i < k(); ++i) ws[i] = static_cast<float>(a_src[i * args.a.cs]);
      }
      constexpr bool kDirect = std::is_same_v<T, float>;
      const bool direct = kDirect && !plan.epilogue;
      alignas(64) float y_tmp[4 * W];
      if (args.packed_b != nullptr) {
        const int64_t stride = args.packed_b->panel_stride();
        const float* matrix = args.packed_b->matrix(args.b_offsets[batch]);
        for (int64_t j = n0; j < n1; j += NR) {
          const int cols = static_cast<int>(std::min<int64_t>(NR, n1 - j));
          float* y = direct ? reinterpret_cast<float*>(out(batch, 0)) + j : y_tmp;
          gemv_block<NV, true>(k(), a, matrix + (j / NR) * stride, NR, cols, y);
          if (!direct) finish(y, batch, 0, j, cols);
        }
      } else {
        constexpr int kCols = 4 * W;  // a 256-byte (AVX-512) strip of each B row per k step
        const T* b = static_cast<const T*>(args.b.data) + args.b_offsets[batch];
        for (int64_t j = n0; j < n1; j += kCols) {
          const int cols = static_cast<int>(std::min<int64_t>(kCols, n1 - j));
          float* y = direct ? reinterpret_cast<float*>(out(batch, 0)) + j : y_tmp;
          if (cols == kCols) gemv_block<4, true>(k(), a, b + j, args.b.rs, cols, y);
          else gemv_block<4, false>(k(), a, b + j, args.b.rs, cols, y);
          if (!direct) finish(y, batch, 0, j, cols);
        }
      }
    }
  };

  template <typename T>
  static void run_tasks(const GemmPlan& plan, const GemmArgs& args, int64_t begin, int64_t end, float* ws) {
    const Task<T> task{plan, args, ws};
    const int64_t per_batch = plan.m_blocks * plan.n_blocks;
    for (int64_t t = begin; t < end; ++t) {
      const int64_t batch = t / per_batch, rem = t % per_batch;
      // Row blocks vary fastest so consecutive tasks of a chunk reuse the same B columns.
      const int64_t nb = rem / plan.m_blocks, mb = rem % plan.m_blocks;
      if (plan.gemv) task.gemv(batch, nb);
      else task.gemm(batch, mb, nb);
    }
  }

  static void run_chunk(const GemmPlan& plan, const GemmArgs& args, int64_t chunk, float* ws) {
    const int64_t begin = plan.tasks * chunk / plan.chunks;
    const int64_t end = plan.tasks * (chunk + 1) / plan.chunks;
    switch (plan.dtype) {
      case DType::kF16: return run_tasks<Float16>(plan, args, begin, end, ws);
      case DType::kBF16: return run_tasks<BFloat16>(plan, args, begin, end, ws);
      default: return run_tasks<float>(plan, args, begin, end, ws);
    }
  }

  static GemmKernelSet kernel_set() {
    GemmKernelSet set;
    set.mr = MR;
    set.nr = NR;
    set.kc = V::kKc;
    set.mc = V::kMc;
    set.nc = V::kNc;
    set.pack_b = &pack_b;
    set.run_chunk = &run_chunk;
    return set;
  }
};

}  // namespace onnx_genai::gemm_impl
