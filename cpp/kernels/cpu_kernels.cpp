// CPU kernels, compiled once per instruction-set level (see kernels.h).
// PTKIT_CPU_ISA is the namespace of this copy, PTKIT_CPU_ISA_NAME its name.
//
// Every kernel computes in fp32 and rounds once, on the store. Each one is an
// explicit 8-lane vector main loop (simd.h) plus a tail for sizes that are not a
// multiple of 8; element-wise tails run the same vector code on a zero-padded
// copy, so a value's result does not depend on where in a row it sits.
#include <algorithm>
#include <cmath>
#include <cstring>
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

struct F32 {
  using T = float;
  static PTKIT_INLINE f32x8 load(const T* p) { return simd::load_f32(p); }
  static PTKIT_INLINE void store(T* p, f32x8 v) { simd::store_f32(p, v); }
  static PTKIT_INLINE float load1(const T* p) { return *p; }
  static PTKIT_INLINE void store1(T* p, float v) { *p = v; }
};

struct F16 {
  using T = uint16_t;  // IEEE binary16 bits
  static PTKIT_INLINE f32x8 load(const T* p) { return simd::load_f16(p); }
  static PTKIT_INLINE void store(T* p, f32x8 v) { simd::store_f16(p, v); }
  static PTKIT_INLINE float load1(const T* p) {
    _Float16 h;
    std::memcpy(&h, p, sizeof h);
    return static_cast<float>(h);
  }
  static PTKIT_INLINE void store1(T* p, float v) {
    const _Float16 h = static_cast<_Float16>(v);
    std::memcpy(p, &h, sizeof h);
  }
};

struct BF16 {
  using T = uint16_t;  // upper half of an fp32
  static PTKIT_INLINE f32x8 load(const T* p) { return simd::load_bf16(p); }
  static PTKIT_INLINE void store(T* p, f32x8 v) { simd::store_bf16(p, v); }
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
    // 0.5 v (1 + erf(v / sqrt 2))
    const f32x8 e = simd::erf(v * simd::splat(0.70710678118654752f));
    return simd::splat(0.5f) * v * (simd::splat(1.0f) + e);
  } else if constexpr (A == Activation::gelu_tanh) {
    // 0.5 v (1 + tanh(u)) = v sigmoid(2u), u = sqrt(2/pi) (v + 0.044715 v^3):
    // no cancellation in 1 + tanh(u) for negative v.
    const f32x8 v3 = v * v * v;
    const f32x8 u2 = simd::splat(2.0f * 0.7978845608028654f) * simd::fmadd(simd::splat(0.044715f), v3, v);
    return v / (simd::splat(1.0f) + simd::exp(-u2));
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
// rms_norm: pass 1 sums squares with four accumulators, pass 2 scales; the row
// (<= a few tens of KiB) is still in L1/L2 for the second read.

template <class E>
void rms_norm_rows(const RmsNormArgs& a, int64_t row_begin, int64_t row_end) {
  using T = typename E::T;
  const T* w = static_cast<const T*>(a.weight);
  const int64_t cols = a.cols;
  const int64_t cv = cols - cols % kWidth;
  const int64_t cv4 = cols - cols % (4 * kWidth);
  for (int64_t r = row_begin; r < row_end; ++r) {
    const T* x = static_cast<const T*>(a.x) + r * a.x_row_stride;
    T* y = static_cast<T*>(a.y) + r * a.y_row_stride;

    f32x8 s0 = simd::zero(), s1 = simd::zero(), s2 = simd::zero(), s3 = simd::zero();
    int64_t c = 0;
    for (; c < cv4; c += 4 * kWidth) {
      const f32x8 v0 = E::load(x + c), v1 = E::load(x + c + kWidth);
      const f32x8 v2 = E::load(x + c + 2 * kWidth), v3 = E::load(x + c + 3 * kWidth);
      s0 = simd::fmadd(v0, v0, s0);
      s1 = simd::fmadd(v1, v1, s1);
      s2 = simd::fmadd(v2, v2, s2);
      s3 = simd::fmadd(v3, v3, s3);
    }
    for (; c < cv; c += kWidth) {
      const f32x8 v = E::load(x + c);
      s0 = simd::fmadd(v, v, s0);
    }
    float ss = simd::hsum((s0 + s1) + (s2 + s3));
    for (; c < cols; ++c) {
      const float v = E::load1(x + c);
      ss += v * v;
    }

    const float inv = 1.0f / std::sqrt(ss / static_cast<float>(cols) + a.eps);
    const f32x8 vinv = simd::splat(inv);
    for (c = 0; c < cv; c += kWidth) {
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
    const f32x8 r0 = simd::silu(E::load(g + c)) * E::load(u + c);
    const f32x8 r1 = simd::silu(E::load(g + c + kWidth)) * E::load(u + c + kWidth);
    E::store(y + c, r0);
    E::store(y + c + kWidth, r1);
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
// Bandwidth-bound on streaming w, so every weight element is read from memory
// once for all m rows of x. Outputs go in tiles of 8 columns (two register
// blocks of 4 weight rows); k goes in chunks of kChunk so that the 4 weight rows
// of a block (and, for bf16/fp16, their fp32 copy) stay in L1 while each group of
// 2 x rows passes over them: 4 x 2 accumulators, 4 weight and 2 x registers.

constexpr int kNr = 4;          // weight rows per register block
constexpr int kMr = 2;          // x rows per register block
constexpr int kTileN = 8;       // output columns per tile (the epilogue's vector)
constexpr int64_t kChunk = 512; // k elements per chunk (multiple of 8)

// acc[j][i] += x_j . w_i over [0, len) (len a multiple of 8) for NR weight rows
// and MR x rows. WE is the weight element type (F32 once packed).
template <class WE, int NR, int MR>
PTKIT_INLINE void micro(const typename WE::T* w, int64_t ws, const float* x, int64_t xs, int64_t len,
                        f32x8 (&acc)[kGemvMaxRows][kTileN], int m0, int n0) {
  f32x8 c[MR][NR];
  for (int j = 0; j < MR; ++j)
    for (int i = 0; i < NR; ++i) c[j][i] = acc[m0 + j][n0 + i];
  for (int64_t kk = 0; kk < len; kk += kWidth) {
    f32x8 wv[NR];
    for (int i = 0; i < NR; ++i) wv[i] = WE::load(w + i * ws + kk);
    for (int j = 0; j < MR; ++j) {
      const f32x8 xv = simd::load_f32(x + j * xs + kk);
      for (int i = 0; i < NR; ++i) c[j][i] = simd::fmadd(xv, wv[i], c[j][i]);
    }
  }
  for (int j = 0; j < MR; ++j)
    for (int i = 0; i < NR; ++i) acc[m0 + j][n0 + i] = c[j][i];
}

// All m rows against NR weight rows over one k chunk.
template <class WE, int NR>
PTKIT_INLINE void block_all_rows(const typename WE::T* w, int64_t ws, const float* x, int64_t xs,
                                 int64_t len, int64_t m, f32x8 (&acc)[kGemvMaxRows][kTileN], int n0) {
  int64_t j = 0;
  for (; j + kMr <= m; j += kMr) micro<WE, NR, kMr>(w, ws, x + j * xs, xs, len, acc, static_cast<int>(j), n0);
  if (j < m) micro<WE, NR, 1>(w, ws, x + j * xs, xs, len, acc, static_cast<int>(j), n0);
}

template <class WE>
PTKIT_INLINE void block_dispatch(int nr, const typename WE::T* w, int64_t ws, const float* x, int64_t xs,
                                 int64_t len, int64_t m, f32x8 (&acc)[kGemvMaxRows][kTileN], int n0) {
  switch (nr) {
    case 4:
      block_all_rows<WE, 4>(w, ws, x, xs, len, m, acc, n0);
      break;
    case 3:
      block_all_rows<WE, 3>(w, ws, x, xs, len, m, acc, n0);
      break;
    case 2:
      block_all_rows<WE, 2>(w, ws, x, xs, len, m, acc, n0);
      break;
    default:
      block_all_rows<WE, 1>(w, ws, x, xs, len, m, acc, n0);
      break;
  }
}

// fp32 copy of x for half-precision inputs, reused across calls on a thread.
const float* x_as_f32(const LinearArgs& a, int64_t& xs) {
  thread_local std::vector<float> buf;
  const int64_t k = a.k;
  buf.resize(static_cast<size_t>(a.m * k));
  dispatch(a.dtype, [&](auto e) {
    using E = decltype(e);
    using T = typename E::T;
    for (int64_t m = 0; m < a.m; ++m) {
      const T* src = static_cast<const T*>(a.x) + m * a.x_row_stride;
      float* dst = buf.data() + m * k;
      int64_t c = 0;
      for (; c + kWidth <= k; c += kWidth) simd::store_f32(dst + c, E::load(src + c));
      for (; c < k; ++c) dst[c] = E::load1(src + c);
    }
  });
  xs = k;
  return buf.data();
}

template <class E>
void gemv_cols(const LinearArgs& a, int64_t n_begin, int64_t n_end) {
  using T = typename E::T;
  const int64_t m = a.m;
  const int64_t k = a.k;
  const int64_t kv = k - k % kWidth;  // vector part of k
  const int64_t ws = a.w_row_stride;
  const T* w = static_cast<const T*>(a.w);
  const T* bias = static_cast<const T*>(a.bias);
  T* y = static_cast<T*>(a.y);

  int64_t xs = a.x_row_stride;
  const float* x = nullptr;
  if constexpr (std::is_same_v<E, F32>) {
    x = static_cast<const float*>(a.x);
  } else {
    x = x_as_f32(a, xs);
  }
  // Half-precision weights are widened once per chunk into an L1-resident fp32
  // block when more than one group of x rows will read them.
  constexpr bool kHalf = !std::is_same_v<E, F32>;
  const bool pack = kHalf && m > kMr;
  alignas(64) float packed[kNr * kChunk];

  for (int64_t n0 = n_begin; n0 < n_end; n0 += kTileN) {
    const int cols = static_cast<int>(std::min<int64_t>(kTileN, n_end - n0));
    f32x8 acc[kGemvMaxRows][kTileN];
    for (int64_t j = 0; j < m; ++j)
      for (int i = 0; i < kTileN; ++i) acc[j][i] = simd::zero();

    for (int64_t k0 = 0; k0 < kv; k0 += kChunk) {
      const int64_t len = std::min(kChunk, kv - k0);
      for (int sub = 0; sub < cols; sub += kNr) {
        const int nr = std::min(kNr, cols - sub);
        const T* wb = w + (n0 + sub) * ws + k0;
        if (pack) {
          for (int i = 0; i < nr; ++i)
            for (int64_t kk = 0; kk < len; kk += kWidth)
              simd::store_f32(packed + i * kChunk + kk, E::load(wb + i * ws + kk));
          block_dispatch<F32>(nr, packed, kChunk, x + k0, xs, len, m, acc, sub);
        } else {
          block_dispatch<E>(nr, wb, ws, x + k0, xs, len, m, acc, sub);
        }
      }
    }

    // Reduce the lanes, add the k tail, then bias + activation on 8 columns at once.
    for (int64_t j = 0; j < m; ++j) {
      float tail[kTileN] = {};
      for (int i = 0; i < cols; ++i) {
        const T* wr = w + (n0 + i) * ws;
        const float* xr = x + j * xs;
        float s = 0.0f;
        for (int64_t kk = kv; kk < k; ++kk) s += xr[kk] * E::load1(wr + kk);
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

void gemv(const LinearArgs& a, int64_t n_begin, int64_t n_end) {
  dispatch(a.dtype, [&](auto e) { gemv_cols<decltype(e)>(a, n_begin, n_end); });
}

}  // namespace

extern const KernelTable table = {PTKIT_CPU_ISA_NAME, rms_norm, silu_and_mul, gemv, bias_activation};

}  // namespace ptkit::cpu::PTKIT_CPU_ISA
