// CPU kernels, compiled once per instruction-set level (see kernels.h).
// PTKIT_CPU_ISA is the namespace of this copy, PTKIT_CPU_ISA_NAME its name.
//
// Every kernel computes in fp32 and rounds once, on the store. Each one is an
// explicit vector main loop (8-lane f32x8 from simd.h; element-wise loops take 16
// elements a step) plus a tail for sizes that are not a multiple of the step. The
// tails of loops with transcendental math (silu, gelu …) run the same vector code
// on a zero-padded copy, so that a value's result does not depend on where in a
// row it sits; the others (rms_norm, gemv's k tail) are plain scalar loops.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "ptkit/cpu/dot_products.h"
#include "ptkit/cpu/elements.h"
#include "ptkit/cpu/gemv_amx.h"
#include "ptkit/cpu/kernels.h"
#include "ptkit/cpu/simd.h"

#ifndef PTKIT_CPU_ISA
#error "compile through ptkit_add_kernel_library, which defines PTKIT_CPU_ISA"
#endif

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"  // see simd.h
#endif

namespace ptkit::cpu::PTKIT_CPU_ISA {
namespace {

using simd::f32x4;
using simd::f32x8;
using simd::kWidth;
using namespace elements;
using namespace dot_products;

// ---------------------------------------------------------------------------
// rms_norm: pass 1 sums squares, pass 2 scales; the row (<= a few tens of KiB) is
// still in L1/L2 for the second read. Pass 1 is blocked: four float32 vector
// accumulators over at most kSumBlock elements, each block's sum added to a double,
// so the error of the sum stays near float32's unit roundoff for rows of any length
// (a running float32 sum over 2^27 elements is off by several percent).
constexpr int64_t kSumBlock = 4096;  // a multiple of 4 * kWidth

template <class E>
double sum_of_squares(const typename E::T* x, int64_t cols) {
  double total = 0.0;
  for (int64_t begin = 0; begin < cols; begin += kSumBlock) {
    const int64_t end = std::min(cols, begin + kSumBlock);
    const int64_t e32 = end - (end - begin) % (4 * kWidth);
    simd::Accumulator s0 = simd::accumulator(), s1 = s0, s2 = s0, s3 = s0;
    int64_t c = begin;
    for (; c < e32; c += 4 * kWidth) {
      f32x8 v0, v1, v2, v3;
      E::load2(x + c, v0, v1);
      E::load2(x + c + 2 * kWidth, v2, v3);
      s0 = simd::fmadd_into(v0, v0, s0);
      s1 = simd::fmadd_into(v1, v1, s1);
      s2 = simd::fmadd_into(v2, v2, s2);
      s3 = simd::fmadd_into(v3, v3, s3);
    }
    for (; c + kWidth <= end; c += kWidth) {
      const f32x8 v = E::load(x + c);
      s0 = simd::fmadd_into(v, v, s0);
    }
    using simd::value;
    float block = simd::hsum((value(s0) + value(s1)) + (value(s2) + value(s3)));
    for (; c < end; ++c) {
      const float v = E::load1(x + c);
      block += v * v;
    }
    if (!std::isfinite(block)) {
      // The float32 squares overflowed (|x| > ~1.8e19) or the block holds an inf or a
      // NaN: the block again in double, where finite inputs cannot overflow.
      double exact = 0.0;
      for (int64_t i = begin; i < end; ++i) {
        const double v = E::load1(x + i);
        exact += v * v;
      }
      total += exact;
    } else {
      total += static_cast<double>(block);
    }
  }
  return total;
}

template <class E, bool Stream>
void rms_norm_rows(const RmsNormArgs& a, int64_t row_begin, int64_t row_end) {
  using T = typename E::T;
  const T* w = static_cast<const T*>(a.weight);
  const int64_t cols = a.cols;
  const int64_t c16 = cols - cols % (2 * kWidth);
  for (int64_t r = row_begin; r < row_end; ++r) {
    const T* x = static_cast<const T*>(a.x) + r * a.x_row_stride;
    T* y = static_cast<T*>(a.y) + r * a.y_row_stride;
    const double ss = sum_of_squares<E>(x, cols);

    // Pass 2: y = x * inv * w (the row is still in L1 / L2).
    const double inv_exact = 1.0 / std::sqrt(ss / static_cast<double>(cols) + a.eps);
    const float inv = static_cast<float>(inv_exact);
    if (inv < std::numeric_limits<float>::min() && inv_exact > 0.0) {
      // A row of huge values: 1 / rms is below float32's normal range; scale in double.
      for (int64_t c = 0; c < cols; ++c) {
        const double v = static_cast<double>(E::load1(x + c)) * inv_exact * E::load1(w + c);
        E::store1(y + c, static_cast<float>(v));
      }
      continue;
    }
    // While this row is scaled from the cache, the next one is fetched for pass 1 (the
    // hardware prefetcher does not cross into it early enough): bf16 rows of 4096 from
    // memory 27 % faster, fp32 12 %, on one core of AMD's Zen 1.
    const T* next = r + 1 < row_end ? x + a.x_row_stride : nullptr;
    const f32x8 vinv = simd::splat(inv);
    int64_t c = 0;
    for (; c < c16; c += 2 * kWidth) {
      if (next != nullptr) simd::prefetch(next + c);
      f32x8 x0, x1, w0, w1;
      E::load2(x + c, x0, x1);
      E::load2(w + c, w0, w1);
      E::template store2<Stream>(y + c, x0 * vinv * w0, x1 * vinv * w1);
    }
    for (; c + kWidth <= cols; c += kWidth) {
      E::store(y + c, E::load(x + c) * vinv * E::load(w + c));
    }
    for (; c < cols; ++c) {
      E::store1(y + c, E::load1(x + c) * inv * E::load1(w + c));
    }
  }
}

// body(std::true_type) where the op asked for streaming stores (stream_output) and every
// row of y the slice writes starts 32-byte aligned, then the fence they need; else
// body(std::false_type), plain stores.
template <class F>
PTKIT_INLINE void with_output_stores(bool stream_output, const void* y, int64_t row_stride_bytes, F&& body) {
  if (stream_output && simd::streamable(y) && row_stride_bytes % 32 == 0) {
    body(std::true_type{});
    simd::stream_fence();
  } else {
    body(std::false_type{});
  }
}

void rms_norm(const RmsNormArgs& a, int64_t row_begin, int64_t row_end) {
  dispatch(a.dtype, [&](auto e) {
    using E = decltype(e);
    using T = typename E::T;
    const T* y = static_cast<const T*>(a.y) + row_begin * a.y_row_stride;
    with_output_stores(a.stream_output, y, a.y_row_stride * int64_t{sizeof(T)}, [&](auto stream) {
      rms_norm_rows<E, decltype(stream)::value>(a, row_begin, row_end);
    });
  });
}

// ---------------------------------------------------------------------------
// silu_and_mul

// silu of every value of a 16-bit type E, indexed by its bits. bf16 and fp16 gates are
// looked up (8 loads) rather than computed (exp and a division): the same results, as a
// value's silu does not depend on its neighbours (simd::silu), and in cache 2.8 times as
// fast at x86-64-v3 on AMD's Zen 1. 256 KiB, built on first use (65536 silu, ~0.1 ms);
// the gates of a model's activations touch a small part of it.
template <class E>
const float* silu_table() {
  static_assert(sizeof(typename E::T) == 2);
  static const std::vector<float> table = [] {
    std::vector<float> t(65536);
    typename E::T bits[kWidth];
    for (uint32_t i = 0; i < t.size(); i += kWidth) {
      for (int k = 0; k < kWidth; ++k) bits[k] = static_cast<typename E::T>(i + k);
      simd::store_f32(t.data() + i, simd::silu(E::load(bits)));
    }
    return t;
  }();
  return table.data();
}

// silu of 8 / 16 gates, in E::load's / E::load2's order.
template <class E>
PTKIT_INLINE f32x8 silu_of(const float* table, const typename E::T* g) {
  if constexpr (sizeof(typename E::T) == 2) {
    return E::lookup(table, g);
  } else {
    return simd::silu(E::load(g));
  }
}
template <class E>
PTKIT_INLINE void silu_of2(const float* table, const typename E::T* g, f32x8& a, f32x8& b) {
  if constexpr (sizeof(typename E::T) == 2) {
    E::lookup2(table, g, a, b);
  } else {
    E::load2(g, a, b);
    a = simd::silu(a), b = simd::silu(b);
  }
}

// Inputs from memory (where the output is too: Stream): the gates and ups this many
// elements ahead are asked for while these compute, 1 KiB of fp32 (near a row's end the
// requests for the ups run on into the next row's gates, which the thread usually takes
// next); with the hardware prefetchers alone, the loads and the math ran more in turn.
// Zen 4, 2 threads, 4096 x 8192 from memory, time 0.93-0.96 at avx512-bf16, 0.89-0.92 at
// x86-64-v3, 0.97-0.98 on SSE2 (compute-bound there); in cache it cost 3 % (bf16), hence
// only with Stream.
constexpr int64_t kPrefetchAhead = 256;

template <class E, bool Stream>
void silu_and_mul_cols(const SiluAndMulArgs& a, int64_t row, int64_t col_begin, int64_t col_end) {
  using T = typename E::T;
  const T* g = static_cast<const T*>(a.x) + row * a.x_row_stride;
  const T* u = g + a.d;
  T* y = static_cast<T*>(a.y) + row * a.y_row_stride;
  const float* table = nullptr;
  if constexpr (sizeof(T) == 2) table = silu_table<E>();
  int64_t c = col_begin;
  for (; c + 2 * kWidth <= col_end; c += 2 * kWidth) {
    if constexpr (Stream) {
      simd::prefetch_ahead(g + c, kPrefetchAhead * sizeof(T));
      simd::prefetch_ahead(u + c, kPrefetchAhead * sizeof(T));
    }
    f32x8 s0, s1, u0, u1;
    silu_of2<E>(table, g + c, s0, s1);
    E::load2(u + c, u0, u1);
    E::template store2<Stream>(y + c, s0 * u0, s1 * u1);
  }
  for (; c + kWidth <= col_end; c += kWidth) {
    E::store(y + c, silu_of<E>(table, g + c) * E::load(u + c));
  }
  if (c < col_end) {
    const int64_t rest = col_end - c;
    const f32x8 r = simd::silu(load_partial<E>(g + c, rest)) * load_partial<E>(u + c, rest);
    store_partial<E>(y + c, r, rest);
  }
}

void silu_and_mul(const SiluAndMulArgs& a, int64_t row, int64_t col_begin, int64_t col_end) {
  dispatch(a.dtype, [&](auto e) {
    using E = decltype(e);
    using T = typename E::T;
    const T* y = static_cast<const T*>(a.y) + row * a.y_row_stride + col_begin;
    with_output_stores(a.stream_output, y, 0, [&](auto stream) {  // one row
      silu_and_mul_cols<E, decltype(stream)::value>(a, row, col_begin, col_end);
    });
  });
}

// ---------------------------------------------------------------------------
// Epilogue of the large-m path

template <class E, Activation A>
void bias_activation_rows(const LinearArgs& a, int64_t row_begin, int64_t row_end) {
  using T = typename E::T;
  const T* bias = static_cast<const T*>(a.bias);
  for (int64_t m = row_begin; m < row_end; ++m) {
    T* y = static_cast<T*>(a.y) + m * a.y_row_stride;
    int64_t c = 0;
    for (; c + 2 * kWidth <= a.n; c += 2 * kWidth) {
      f32x8 v0, v1;
      E::load2(y + c, v0, v1);
      if (bias != nullptr) {
        f32x8 b0, b1;
        E::load2(bias + c, b0, b1);
        v0 += b0;
        v1 += b1;
      }
      E::store2(y + c, activate<A>(v0), activate<A>(v1));
    }
    for (; c + kWidth <= a.n; c += kWidth) {
      finish8<E, A>(E::load(y + c), bias ? bias + c : nullptr, y + c, kWidth);
    }
    if (c < a.n) {
      const int64_t rest = a.n - c;
      finish8<E, A>(load_partial<E>(y + c, rest), bias ? bias + c : nullptr, y + c, rest);
    }
  }
}

void bias_activation(const LinearArgs& a, int64_t row_begin, int64_t row_end) {
  dispatch(a.dtype, [&](auto e) {
    dispatch_activation(a.activation, [&](auto act) {
      bias_activation_rows<decltype(e), decltype(act)::value>(a, row_begin, row_end);
    });
  });
}

// ---------------------------------------------------------------------------
// gemv: y[m, n] = act(x[m, :] . w[n, :] + bias[n]) for m <= 16.
//
// Streams w: every weight element comes from memory once for all m rows of x.
// Outputs go in tiles of 8 columns, k in chunks (chunk_for); within a chunk, each
// group of x rows passes over the tile's weight rows in register blocks of NR
// weight rows x MR x rows (NR x MR accumulators, NR weight and 1 x register), and
// the groups after the first find the weight chunk in L1. The x rows are packed
// (dot_products.h: fp32, or bf16 as stored for the bf16 dot products) chunk-major,
// so that a chunk of all m rows is one contiguous block that stays in L1 (rows k
// apart would, for k = 4096 fp32, all fall into the same L1 sets). The m x 8 sums
// of a tile are reduced and finished (bias, activation, one rounding) together, 8
// columns per vector. How the products are summed is the policy D's
// (dot_products.h); on amx-bf16 the tile unit takes bf16 first (gemv_amx.h).

constexpr int kTileN = 8;  // output columns per tile (the epilogue's vector)
// k elements per chunk (a multiple of the policy's step). Weights in cache: long chunks
// when one or two x rows make each chunk little work, else 16 steps (x chunk of 16 rows:
// 8 KiB for 8 fp32 lanes, 16 KiB for 16 lanes or 32 bf16), so that the accumulators'
// reload between chunks stays small next to the chunk's products. Weights from memory
// (prefetch_weights), where each chunk asks for the next tile's 8 rows of it at once:
// short chunks, so that those requests come in small bursts, 128 elements for up to 4
// rows, beyond that 512 bytes of a row (at most 16 steps). Zen 4, 2 threads, 4096 x 4096
// from memory, time against the chunks for the cache (two interleaved runs): 1-2 rows
// 0.68-0.71 fp32 and 0.80-0.91 bf16 on SSE2, 0.75-0.98 from x86-64-v3 up; 4-16 rows
// 0.81-0.90 at x86-64-v4 (fp32) and avx512-bf16, 0.96-1.05 elsewhere. In cache they
// would cost (x86-64-v3 fp32, one row: 0.16 -> 0.21 cycles per weight).
template <class D>
PTKIT_INLINE int64_t chunk_for(int64_t m, bool weights_from_memory) {
  if (weights_from_memory) {
    constexpr int64_t kShort = 128, kRowBytes = 512;
    static_assert(kShort % D::kStep == 0 && kRowBytes / sizeof(typename D::T) % D::kStep == 0);
    return m <= 4 ? kShort : std::min<int64_t>(16 * D::kStep, kRowBytes / sizeof(typename D::T));
  }
  return m <= 2 ? std::max(512, 16 * D::kStep) : 16 * D::kStep;
}

template <class D>
using Accumulators = typename D::Acc[kGemvMaxRows][kTileN];

// acc[m0 + j][n0 + i] += x_j . w_i over [0, len) (a multiple of D::kStep), for NR
// weight rows `ws` apart and MR x rows `xs` apart.
template <class D, int NR, int MR>
PTKIT_INLINE void micro(const typename D::T* w, int64_t ws, const typename D::XT* x, int64_t xs, int64_t len,
                        Accumulators<D>& acc, int m0, int n0) {
  typename D::Acc c[MR][NR];
  for (int j = 0; j < MR; ++j)
    for (int i = 0; i < NR; ++i) c[j][i] = acc[m0 + j][n0 + i];
  for (int64_t kk = 0; kk < len; kk += D::kStep) {
    decltype(D::load_w(w)) wv[NR];
    for (int i = 0; i < NR; ++i) wv[i] = D::load_w(w + i * ws + kk);
    for (int j = 0; j < MR; ++j) {
      const auto xv = D::load_x(x + j * xs + kk);
      for (int i = 0; i < NR; ++i) c[j][i] = D::madd(xv, wv[i], c[j][i]);
    }
  }
  for (int j = 0; j < MR; ++j)
    for (int i = 0; i < NR; ++i) acc[m0 + j][n0 + i] = c[j][i];
}

template <class D, int NR, int MR_MAX>
PTKIT_INLINE void micro_rows(int mr, const typename D::T* w, int64_t ws, const typename D::XT* x, int64_t xs,
                             int64_t len, Accumulators<D>& acc, int m0, int n0) {
  if constexpr (MR_MAX > 1) {
    if (mr == MR_MAX) return micro<D, NR, MR_MAX>(w, ws, x, xs, len, acc, m0, n0);
    return micro_rows<D, NR, MR_MAX - 1>(mr, w, ws, x, xs, len, acc, m0, n0);
  } else {
    return micro<D, NR, 1>(w, ws, x, xs, len, acc, m0, n0);
  }
}

// x packed chunk-major: chunk c (k in [c chunk, (c + 1) chunk)) holds the m rows'
// pieces one after the other, `chunk` apart. Reused across calls on a thread.
template <class XT>
struct XBlock {
  const XT* base;
  int64_t chunk;         // k elements per chunk
  int64_t chunk_stride;  // elements from one chunk to the next
  int64_t row_stride;    // elements from one row to the next within a chunk
  PTKIT_INLINE const XT* at(int64_t row, int64_t k) const {
    return base + (k / chunk) * chunk_stride + row * row_stride + k % chunk;
  }
};

template <class D>
XBlock<typename D::XT> pack_x(const LinearArgs& a, int64_t chunk) {
  using T = typename D::T;
  using XT = typename D::XT;
  thread_local std::vector<XT> buf;
  const int64_t chunks = (a.k + chunk - 1) / chunk;
  buf.resize(static_cast<size_t>(chunks * a.m * chunk));
  const XBlock<XT> xb{buf.data(), chunk, a.m * chunk, chunk};
  for (int64_t m = 0; m < a.m; ++m) {
    const T* src = static_cast<const T*>(a.x) + m * a.x_row_stride;
    for (int64_t k0 = 0; k0 < a.k; k0 += chunk) {
      D::pack(src + k0, buf.data() + (k0 / chunk) * xb.chunk_stride + m * chunk, std::min(chunk, a.k - k0));
    }
  }
  return xb;
}

// Asks for `rows` weight rows' [0, len) into L2, a cache line at a time.
template <class T>
PTKIT_INLINE void prefetch_rows(const T* w, int64_t ws, int rows, int64_t len) {
  constexpr int64_t kLine = 64 / sizeof(T);
  for (int r = 0; r < rows; ++r)
    for (int64_t c = 0; c < len; c += kLine) simd::prefetch<simd::CacheLevel::l2>(w + r * ws + c);
}

template <class E, class D, int NR, int MR_MAX>
void gemv_tiles(const LinearArgs& a, int64_t n_begin, int64_t n_end) {
  using T = typename E::T;
  using XT = typename D::XT;
  const int64_t m = a.m;
  const int64_t k = a.k;
  const int64_t kv = k - k % D::kStep;  // vector part of k
  const int64_t ws = a.w_row_stride;
  const T* w = static_cast<const T*>(a.w);
  const T* bias = static_cast<const T*>(a.bias);
  T* y = static_cast<T*>(a.y);

  // x with one or two rows is read where it is when packing would not change it.
  const int64_t chunk = chunk_for<D>(m, a.prefetch_weights);
  XBlock<XT> xb;
  if (D::kPackedIsStored && m <= 2) {
    xb = {static_cast<const XT*>(a.x), chunk, chunk, a.x_row_stride};
  } else {
    xb = pack_x<D>(a, chunk);
  }
  // Groups of at most MR_MAX x rows, as even as possible (16 = 6 + 5 + 5).
  const int groups = static_cast<int>((m + MR_MAX - 1) / MR_MAX);
  int group_begin[kGemvMaxRows + 1] = {};
  for (int g = 0; g < groups; ++g) group_begin[g + 1] = static_cast<int>(m * (g + 1) / groups);

  for (int64_t n0 = n_begin; n0 < n_end; n0 += kTileN) {
    const int cols = static_cast<int>(std::min<int64_t>(kTileN, n_end - n0));
    Accumulators<D> acc;
    for (int64_t j = 0; j < m; ++j)
      for (int i = 0; i < kTileN; ++i) acc[j][i] = D::zero();

    // Weights from memory: the next tile's are asked for, chunk by chunk, while this
    // tile computes (the hardware prefetchers, following 8 rows in pieces of a chunk,
    // left the reads and the FMAs to run in turn). In cache it would only cost.
    const int next_rows =
        a.prefetch_weights ? static_cast<int>(std::clamp<int64_t>(n_end - n0 - kTileN, 0, kTileN)) : 0;
    for (int64_t k0 = 0; k0 < kv; k0 += chunk) {
      const int64_t len = std::min(chunk, kv - k0);
      if (next_rows > 0) prefetch_rows(w + (n0 + kTileN) * ws + k0, ws, next_rows, len);
      for (int g = 0; g < groups; ++g) {
        const int m0 = group_begin[g];
        const int mr = group_begin[g + 1] - m0;
        const XT* xg = xb.at(m0, k0);
        int sub = 0;
        for (; sub + NR <= cols; sub += NR) {
          micro_rows<D, NR, MR_MAX>(mr, w + (n0 + sub) * ws + k0, ws, xg, xb.row_stride, len, acc, m0, sub);
        }
        for (; sub < cols; ++sub) {
          micro_rows<D, 1, MR_MAX>(mr, w + (n0 + sub) * ws + k0, ws, xg, xb.row_stride, len, acc, m0, sub);
        }
      }
    }

    // Reduce the lanes, add the k tail, then bias + activation on 8 columns at once.
    for (int64_t j = 0; j < m; ++j) {
      float tail[kTileN] = {};
      for (int i = 0; i < cols; ++i) {
        const T* wr = w + (n0 + i) * ws;
        float s = 0.0f;
        for (int64_t kk = kv; kk < k; ++kk) s += D::x1(xb.at(j, kk)) * E::load1(wr + kk);
        tail[i] = s;
      }
      const auto& r = acc[j];
      const f32x8 sums =
          simd::concat(simd::hsum4(D::fold(r[0]), D::fold(r[1]), D::fold(r[2]), D::fold(r[3])),
                       simd::hsum4(D::fold(r[4]), D::fold(r[5]), D::fold(r[6]), D::fold(r[7])));
      const f32x8 v = sums + simd::load_f32(tail);
      const T* b = bias ? bias + n0 : nullptr;
      T* out = y + j * a.y_row_stride + n0;
      dispatch_activation(a.activation, [&](auto act) { finish8<E, decltype(act)::value>(v, b, out, cols); });
    }
  }
}

template <class E, class D>
void gemv_blocked(const LinearArgs& a, int64_t n_begin, int64_t n_end) {
  constexpr Blocking b = D::kBlocking;
  if (a.m == 1) {
    gemv_tiles<E, D, b.one_nr, 1>(a, n_begin, n_end);
  } else if (a.m == 2) {
    gemv_tiles<E, D, b.two_nr, 2>(a, n_begin, n_end);
  } else {
    gemv_tiles<E, D, b.many_nr, b.many_mr>(a, n_begin, n_end);
  }
}

// The best policy this level has for the weights' element type.
template <class E>
void gemv_cols(const LinearArgs& a, int64_t n_begin, int64_t n_end) {
#if defined(PTKIT_SIMD_AMX_BF16)
  if constexpr (std::is_same_v<E, BF16>) n_begin = amx::gemv_bf16(a, n_begin, n_end);
#endif
#if defined(PTKIT_SIMD_AVX512_BF16)
  if constexpr (std::is_same_v<E, BF16>) return gemv_blocked<E, Bf16DotX86>(a, n_begin, n_end);
#elif defined(PTKIT_SIMD_NEON_BF16)
  if constexpr (std::is_same_v<E, BF16>) return gemv_blocked<E, Bf16DotNeon>(a, n_begin, n_end);
#elif !defined(PTKIT_SIMD_AVX512)
  if constexpr (std::is_same_v<E, BF16>) return gemv_blocked<E, Bf16PairsF32x8>(a, n_begin, n_end);
#endif
#if defined(PTKIT_SIMD_AVX512)
  gemv_blocked<E, FmaF32x16<E>>(a, n_begin, n_end);
#else
  gemv_blocked<E, FmaF32x8<E>>(a, n_begin, n_end);
#endif
}

void gemv(const LinearArgs& a, int64_t n_begin, int64_t n_end) {
  dispatch(a.dtype, [&](auto e) { gemv_cols<decltype(e)>(a, n_begin, n_end); });
}

// Where the GEMV stops paying: x86-64's baseline (SSE2, no FMA: a multiply and an add per
// 4 products) is compute-bound on fp32 from about 8 rows, where the library GEMM (MKL with
// SSE4.2) is faster (measured on a 2-core Xeon: 16 rows 10.7-12.2 ms, the GEMM 10.1 ms;
// 4 rows 3.0 ms, the GEMM 4.4 ms). On AMD's CPUs MKL runs its AVX2 GEMM whatever the cap
// (perf on a Zen 4; bench_cpu.py's MKL_ON_AMD): 16 rows 1.9 cycles per weight in cache on
// one core, the SSE2 GEMV 3.5. Its bf16 GEMV stays faster than the library's at 16 rows.
#if defined(__x86_64__) && !defined(__AVX__)
constexpr int64_t kGemvRowsF32 = 4;
#else
constexpr int64_t kGemvRowsF32 = kGemvMaxRows;
#endif

}  // namespace

extern const KernelTable table = {PTKIT_CPU_ISA_NAME, rms_norm, silu_and_mul, gemv, bias_activation,
                                  {kGemvRowsF32, kGemvMaxRows, kGemvMaxRows}};

}  // namespace ptkit::cpu::PTKIT_CPU_ISA
