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

// ---------------------------------------------------------------------------
// Element types: storage type, 8-lane vector load/store, scalar load/store.

// load2 / store2 move 16 elements as two vectors, in an order of the type's
// choosing (the same for both): for element-wise loops only.
struct F32 {
  using T = float;
  static PTKIT_INLINE f32x8 load(const T* p) { return simd::load_f32(p); }
  static PTKIT_INLINE void store(T* p, f32x8 v) { simd::store_f32(p, v); }
  static PTKIT_INLINE void load2(const T* p, f32x8& a, f32x8& b) { a = load(p), b = load(p + kWidth); }
  static PTKIT_INLINE void store2(T* p, f32x8 a, f32x8 b) { store(p, a), store(p + kWidth, b); }
  static PTKIT_INLINE float load1(const T* p) { return *p; }
  static PTKIT_INLINE void store1(T* p, float v) { *p = v; }
};

struct F16 {
  using T = uint16_t;  // IEEE binary16 bits
  static PTKIT_INLINE f32x8 load(const T* p) { return simd::load_f16(p); }
  static PTKIT_INLINE void store(T* p, f32x8 v) { simd::store_f16(p, v); }
  static PTKIT_INLINE void load2(const T* p, f32x8& a, f32x8& b) { a = load(p), b = load(p + kWidth); }
  static PTKIT_INLINE void store2(T* p, f32x8 a, f32x8 b) { store(p, a), store(p + kWidth, b); }
  static PTKIT_INLINE float load1(const T* p) { return simd::f16_to_float(*p); }
  static PTKIT_INLINE void store1(T* p, float v) { *p = simd::float_to_f16(v); }
};

struct BF16 {
  using T = uint16_t;  // upper half of an fp32
  static PTKIT_INLINE f32x8 load(const T* p) { return simd::load_bf16(p); }
  static PTKIT_INLINE void store(T* p, f32x8 v) { simd::store_bf16(p, v); }
  // Even / odd elements: no shuffles (simd::load_bf16_pair).
  static PTKIT_INLINE void load2(const T* p, f32x8& a, f32x8& b) { simd::load_bf16_pair(p, a, b); }
  static PTKIT_INLINE void store2(T* p, f32x8 a, f32x8 b) { simd::store_bf16_pair(p, a, b); }
  static PTKIT_INLINE float load1(const T* p) {
    const uint32_t bits = static_cast<uint32_t>(*p) << 16;
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
  }
  static PTKIT_INLINE void store1(T* p, float v) {
    uint32_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    if ((bits & 0x7fffffffu) > 0x7f800000u) {
      *p = static_cast<uint16_t>((bits >> 16) | 0x40u);  // quiet NaN
    } else {
      *p = static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
    }
  }
};

// The first `count` (< 8) lanes from p, zeros after.
template <class E>
PTKIT_INLINE f32x8 load_partial(const typename E::T* p, int64_t count) {
  typename E::T buf[kWidth] = {};
  std::memcpy(buf, p, static_cast<size_t>(count) * sizeof(typename E::T));
  return E::load(buf);
}
template <class E>
PTKIT_INLINE void store_partial(typename E::T* p, f32x8 v, int64_t count) {
  typename E::T buf[kWidth];
  E::store(buf, v);
  std::memcpy(p, buf, static_cast<size_t>(count) * sizeof(typename E::T));
}

// Calls f(E{}) with the element type for `t`.
template <class F>
PTKIT_INLINE void dispatch(DType t, F&& f) {
  switch (t) {
    case DType::f32:
      f(F32{});
      return;
    case DType::f16:
      f(F16{});
      return;
    case DType::bf16:
      f(BF16{});
      return;
  }
}

// ---------------------------------------------------------------------------
// Activations on fp32 lanes.

template <Activation A>
PTKIT_INLINE f32x8 activate(f32x8 v) {
  if constexpr (A == Activation::none) {
    return v;
  } else if constexpr (A == Activation::relu) {
    return simd::select(v < simd::zero(), simd::zero(), v);  // NaN stays NaN
  } else if constexpr (A == Activation::gelu) {
    return simd::gelu(v);
  } else if constexpr (A == Activation::gelu_tanh) {
    return simd::gelu_tanh(v);
  } else {
    return simd::silu(v);
  }
}

template <class F>
PTKIT_INLINE void dispatch_activation(Activation a, F&& f) {
  switch (a) {
    case Activation::none:
      f(std::integral_constant<Activation, Activation::none>{});
      return;
    case Activation::relu:
      f(std::integral_constant<Activation, Activation::relu>{});
      return;
    case Activation::gelu:
      f(std::integral_constant<Activation, Activation::gelu>{});
      return;
    case Activation::gelu_tanh:
      f(std::integral_constant<Activation, Activation::gelu_tanh>{});
      return;
    case Activation::silu:
      f(std::integral_constant<Activation, Activation::silu>{});
      return;
  }
}

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
    f32x8 s0 = simd::zero(), s1 = simd::zero(), s2 = simd::zero(), s3 = simd::zero();
    int64_t c = begin;
    for (; c < e32; c += 4 * kWidth) {
      f32x8 v0, v1, v2, v3;
      E::load2(x + c, v0, v1);
      E::load2(x + c + 2 * kWidth, v2, v3);
      s0 = simd::fmadd(v0, v0, s0);
      s1 = simd::fmadd(v1, v1, s1);
      s2 = simd::fmadd(v2, v2, s2);
      s3 = simd::fmadd(v3, v3, s3);
    }
    for (; c + kWidth <= end; c += kWidth) {
      const f32x8 v = E::load(x + c);
      s0 = simd::fmadd(v, v, s0);
    }
    float block = simd::hsum((s0 + s1) + (s2 + s3));
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

template <class E>
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
    const f32x8 vinv = simd::splat(inv);
    int64_t c = 0;
    for (; c < c16; c += 2 * kWidth) {
      f32x8 x0, x1, w0, w1;
      E::load2(x + c, x0, x1);
      E::load2(w + c, w0, w1);
      E::store2(y + c, x0 * vinv * w0, x1 * vinv * w1);
    }
    for (; c + kWidth <= cols; c += kWidth) {
      E::store(y + c, E::load(x + c) * vinv * E::load(w + c));
    }
    for (; c < cols; ++c) {
      E::store1(y + c, E::load1(x + c) * inv * E::load1(w + c));
    }
  }
}

void rms_norm(const RmsNormArgs& a, int64_t row_begin, int64_t row_end) {
  dispatch(a.dtype, [&](auto e) { rms_norm_rows<decltype(e)>(a, row_begin, row_end); });
}

// ---------------------------------------------------------------------------
// silu_and_mul

template <class E>
void silu_and_mul_cols(const SiluAndMulArgs& a, int64_t row, int64_t col_begin, int64_t col_end) {
  using T = typename E::T;
  const T* g = static_cast<const T*>(a.x) + row * a.x_row_stride;
  const T* u = g + a.d;
  T* y = static_cast<T*>(a.y) + row * a.y_row_stride;
  int64_t c = col_begin;
  for (; c + 2 * kWidth <= col_end; c += 2 * kWidth) {
    f32x8 g0, g1, u0, u1;
    E::load2(g + c, g0, g1);
    E::load2(u + c, u0, u1);
    E::store2(y + c, simd::silu(g0) * u0, simd::silu(g1) * u1);
  }
  for (; c + kWidth <= col_end; c += kWidth) {
    E::store(y + c, simd::silu(E::load(g + c)) * E::load(u + c));
  }
  if (c < col_end) {
    const int64_t rest = col_end - c;
    const f32x8 r = simd::silu(load_partial<E>(g + c, rest)) * load_partial<E>(u + c, rest);
    store_partial<E>(y + c, r, rest);
  }
}

void silu_and_mul(const SiluAndMulArgs& a, int64_t row, int64_t col_begin, int64_t col_end) {
  dispatch(a.dtype, [&](auto e) { silu_and_mul_cols<decltype(e)>(a, row, col_begin, col_end); });
}

// ---------------------------------------------------------------------------
// Epilogue: out[c] = act(v[c] + bias[c]) for `count` values, v in fp32.

template <class E, Activation A>
PTKIT_INLINE void finish8(const f32x8& value, const typename E::T* bias, typename E::T* out, int64_t count) {
  f32x8 v = value;
  if (count == kWidth) {
    if (bias != nullptr) v += E::load(bias);
    E::store(out, activate<A>(v));
  } else {
    if (bias != nullptr) v += load_partial<E>(bias, count);
    store_partial<E>(out, activate<A>(v), count);
  }
}

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
// the groups after the first find the weight chunk in L1. The x rows are copied
// (widened to fp32) chunk-major, so that a chunk of all m rows is one contiguous
// block that stays in L1 (rows k apart would, for k = 4096 fp32, all fall into
// the same L1 sets). The m x 8 sums of a tile are reduced and finished (bias,
// activation, one rounding) together, 8 columns per vector.
//
// Blocking (chosen by measurement on Zen 3): fp32 weights 4 x 2 (6 loads per 8
// FMAs; 8 groups for m = 16). bf16 / fp16 weights, widened to fp32 in registers
// (paid once per group): 8 x 1 for m = 1 (8 accumulator chains), 4 x 2 for m = 2,
// else 2 x 6 (up to 6 x rows in one pass, 16 rows in three).

constexpr int kTileN = 8;        // output columns per tile (the epilogue's vector)
// k elements per chunk (a multiple of 8): long chunks when one or two x rows make
// each chunk little work, short ones (x chunk of 16 rows: 8 KiB) otherwise.
PTKIT_INLINE int64_t chunk_for(int64_t m) { return m <= 2 ? 512 : 128; }

using Acc = f32x8[kGemvMaxRows][kTileN];

// Keeps v in a register: otherwise GCC folds the loads into the FMAs as memory
// operands and loads every weight vector once per x row.
PTKIT_INLINE f32x8 in_register(f32x8 v) {
#if !defined(PTKIT_SIMD_PORTABLE) && defined(__AVX__) && (defined(__x86_64__) || defined(__i386__))
  __asm__("" : "+x"(v));
#endif
  return v;
}

// acc[m0 + j][n0 + i] += x_j . w_i over [0, len) (a multiple of 8), for NR weight
// rows `ws` apart and MR x rows `xs` apart.
template <class E, int NR, int MR>
PTKIT_INLINE void micro(const typename E::T* w, int64_t ws, const float* x, int64_t xs, int64_t len, Acc& acc,
                        int m0, int n0) {
  f32x8 c[MR][NR];
  for (int j = 0; j < MR; ++j)
    for (int i = 0; i < NR; ++i) c[j][i] = acc[m0 + j][n0 + i];
  for (int64_t kk = 0; kk < len; kk += kWidth) {
    f32x8 wv[NR];
    for (int i = 0; i < NR; ++i) wv[i] = in_register(E::load(w + i * ws + kk));
    for (int j = 0; j < MR; ++j) {
      const f32x8 xv = in_register(simd::load_f32(x + j * xs + kk));
      for (int i = 0; i < NR; ++i) c[j][i] = simd::fmadd(xv, wv[i], c[j][i]);
    }
  }
  for (int j = 0; j < MR; ++j)
    for (int i = 0; i < NR; ++i) acc[m0 + j][n0 + i] = c[j][i];
}

template <class E, int NR, int MR_MAX>
PTKIT_INLINE void micro_rows(int mr, const typename E::T* w, int64_t ws, const float* x, int64_t xs, int64_t len,
                             Acc& acc, int m0, int n0) {
  if constexpr (MR_MAX > 1) {
    if (mr == MR_MAX) return micro<E, NR, MR_MAX>(w, ws, x, xs, len, acc, m0, n0);
    return micro_rows<E, NR, MR_MAX - 1>(mr, w, ws, x, xs, len, acc, m0, n0);
  } else {
    return micro<E, NR, 1>(w, ws, x, xs, len, acc, m0, n0);
  }
}

// x as fp32, chunk-major: chunk c (k in [c chunk, (c + 1) chunk)) holds the m rows'
// pieces one after the other, `chunk` apart. Reused across calls on a thread.
struct XBlock {
  const float* base;
  int64_t chunk;         // k elements per chunk
  int64_t chunk_stride;  // floats from one chunk to the next
  int64_t row_stride;    // floats from one row to the next within a chunk
  PTKIT_INLINE const float* at(int64_t row, int64_t k) const {
    return base + (k / chunk) * chunk_stride + row * row_stride + k % chunk;
  }
};

template <class E>
XBlock pack_x(const LinearArgs& a, int64_t chunk) {
  using T = typename E::T;
  thread_local std::vector<float> buf;
  const int64_t chunks = (a.k + chunk - 1) / chunk;
  buf.resize(static_cast<size_t>(chunks * a.m * chunk));
  const XBlock xb{buf.data(), chunk, a.m * chunk, chunk};
  for (int64_t m = 0; m < a.m; ++m) {
    const T* src = static_cast<const T*>(a.x) + m * a.x_row_stride;
    for (int64_t k0 = 0; k0 < a.k; k0 += chunk) {
      float* dst = buf.data() + (k0 / chunk) * xb.chunk_stride + m * chunk;
      const int64_t len = std::min(chunk, a.k - k0);
      int64_t c = 0;
      for (; c + kWidth <= len; c += kWidth) simd::store_f32(dst + c, E::load(src + k0 + c));
      for (; c < len; ++c) dst[c] = E::load1(src + k0 + c);
    }
  }
  return xb;
}

template <class E, int NR, int MR_MAX>
void gemv_tiles(const LinearArgs& a, int64_t n_begin, int64_t n_end) {
  using T = typename E::T;
  const int64_t m = a.m;
  const int64_t k = a.k;
  const int64_t kv = k - k % kWidth;  // vector part of k
  const int64_t ws = a.w_row_stride;
  const T* w = static_cast<const T*>(a.w);
  const T* bias = static_cast<const T*>(a.bias);
  T* y = static_cast<T*>(a.y);

  // fp32 x with one or two rows is read as it is; anything else is packed.
  const int64_t chunk = chunk_for(m);
  XBlock xb;
  if (std::is_same_v<E, F32> && m <= 2) {
    xb = {static_cast<const float*>(a.x), chunk, chunk, a.x_row_stride};
  } else {
    xb = pack_x<E>(a, chunk);
  }
  // Groups of at most MR_MAX x rows, as even as possible (16 = 6 + 5 + 5).
  const int groups = static_cast<int>((m + MR_MAX - 1) / MR_MAX);
  int group_begin[kGemvMaxRows + 1] = {};
  for (int g = 0; g < groups; ++g) group_begin[g + 1] = static_cast<int>(m * (g + 1) / groups);

  for (int64_t n0 = n_begin; n0 < n_end; n0 += kTileN) {
    const int cols = static_cast<int>(std::min<int64_t>(kTileN, n_end - n0));
    Acc acc;
    for (int64_t j = 0; j < m; ++j)
      for (int i = 0; i < kTileN; ++i) acc[j][i] = simd::zero();

    for (int64_t k0 = 0; k0 < kv; k0 += chunk) {
      const int64_t len = std::min(chunk, kv - k0);
      for (int g = 0; g < groups; ++g) {
        const int m0 = group_begin[g];
        const int mr = group_begin[g + 1] - m0;
        const float* xg = xb.at(m0, k0);
        int sub = 0;
        for (; sub + NR <= cols; sub += NR) {
          micro_rows<E, NR, MR_MAX>(mr, w + (n0 + sub) * ws + k0, ws, xg, xb.row_stride, len, acc, m0, sub);
        }
        for (; sub < cols; ++sub) {
          micro_rows<E, 1, MR_MAX>(mr, w + (n0 + sub) * ws + k0, ws, xg, xb.row_stride, len, acc, m0, sub);
        }
      }
    }

    // Reduce the lanes, add the k tail, then bias + activation on 8 columns at once.
    for (int64_t j = 0; j < m; ++j) {
      float tail[kTileN] = {};
      for (int i = 0; i < cols; ++i) {
        const T* wr = w + (n0 + i) * ws;
        float s = 0.0f;
        for (int64_t kk = kv; kk < k; ++kk) s += *xb.at(j, kk) * E::load1(wr + kk);
        tail[i] = s;
      }
      const f32x8 sums = simd::concat(simd::hsum4(acc[j][0], acc[j][1], acc[j][2], acc[j][3]),
                                      simd::hsum4(acc[j][4], acc[j][5], acc[j][6], acc[j][7]));
      const f32x8 v = sums + simd::load_f32(tail);
      const T* b = bias ? bias + n0 : nullptr;
      T* out = y + j * a.y_row_stride + n0;
      dispatch_activation(a.activation, [&](auto act) { finish8<E, decltype(act)::value>(v, b, out, cols); });
    }
  }
}

template <class E>
void gemv_cols(const LinearArgs& a, int64_t n_begin, int64_t n_end) {
  if constexpr (std::is_same_v<E, F32>) {
    gemv_tiles<E, 4, 2>(a, n_begin, n_end);
  } else if (a.m == 1) {
    gemv_tiles<E, 8, 1>(a, n_begin, n_end);  // 8 accumulator chains
  } else if (a.m == 2) {
    gemv_tiles<E, 4, 2>(a, n_begin, n_end);
  } else {
    gemv_tiles<E, 2, 6>(a, n_begin, n_end);
  }
}

void gemv(const LinearArgs& a, int64_t n_begin, int64_t n_end) {
  dispatch(a.dtype, [&](auto e) { gemv_cols<decltype(e)>(a, n_begin, n_end); });
}

}  // namespace

extern const KernelTable table = {PTKIT_CPU_ISA_NAME, rms_norm, silu_and_mul, gemv, bias_activation};

}  // namespace ptkit::cpu::PTKIT_CPU_ISA
