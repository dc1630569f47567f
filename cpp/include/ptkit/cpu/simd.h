// Small portable SIMD helpers for ptkit's CPU kernels.
//
// Eight fp32 lanes as a GCC/Clang vector extension type (f32x8): one AVX register
// under -march=x86-64-v3, a pair of SSE / NEON registers on the baseline, where the
// compiler splits every operation in two. Raw intrinsics appear only behind
// feature macros (__F16C__, __FMA__, __AVX2__), each with a portable fallback.
//
// This header is included by the per-ISA kernel sources and puts everything in
// ptkit::cpu::PTKIT_CPU_ISA::simd: each instruction-set copy gets its own
// functions, so the linker can never merge an AVX2 body into the baseline copy.
#pragma once

#include <cstdint>
#include <cstring>

#if (defined(__x86_64__) || defined(__i386__)) && \
    (defined(__F16C__) || defined(__FMA__) || defined(__AVX2__))
#include <immintrin.h>
#define PTKIT_SIMD_X86_INTRINSICS 1
#endif

#ifndef PTKIT_CPU_ISA
#error "simd.h belongs to a per-ISA kernel source (PTKIT_CPU_ISA is not defined)"
#endif

#if defined(__GNUC__) && !defined(__clang__)
// 32-byte vectors passed between (always inlined) helpers without AVX: GCC warns
// that the ABI would differ; nothing here crosses a translation unit.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

#define PTKIT_INLINE inline __attribute__((always_inline))

namespace ptkit::cpu::PTKIT_CPU_ISA::simd {

constexpr int kWidth = 8;  // fp32 lanes per f32x8

typedef float f32x8 __attribute__((vector_size(32)));
typedef int32_t i32x8 __attribute__((vector_size(32)));
typedef uint32_t u32x8 __attribute__((vector_size(32)));
typedef uint16_t u16x8 __attribute__((vector_size(16)));
typedef float f32x4 __attribute__((vector_size(16)));

PTKIT_INLINE f32x8 splat(float v) { return f32x8{v, v, v, v, v, v, v, v}; }
PTKIT_INLINE i32x8 splat_i(int32_t v) { return i32x8{v, v, v, v, v, v, v, v}; }
PTKIT_INLINE f32x8 zero() { return f32x8{}; }

PTKIT_INLINE i32x8 as_i(f32x8 v) { return (i32x8)v; }
PTKIT_INLINE f32x8 as_f(i32x8 v) { return (f32x8)v; }

// Lane-wise mask ? a : b (mask lanes are all ones or all zeros).
PTKIT_INLINE f32x8 select(i32x8 mask, f32x8 a, f32x8 b) {
  return as_f((mask & as_i(a)) | (~mask & as_i(b)));
}
PTKIT_INLINE i32x8 select_i(i32x8 mask, i32x8 a, i32x8 b) { return (mask & a) | (~mask & b); }

// a * b + c, fused where the target has FMA (baseline x86-64 has not).
PTKIT_INLINE f32x8 fmadd(f32x8 a, f32x8 b, f32x8 c) {
#if defined(PTKIT_SIMD_X86_INTRINSICS) && defined(__FMA__)
  return _mm256_fmadd_ps(a, b, c);
#else
  return a * b + c;
#endif
}
// c - a * b
PTKIT_INLINE f32x8 fnmadd(f32x8 a, f32x8 b, f32x8 c) {
#if defined(PTKIT_SIMD_X86_INTRINSICS) && defined(__FMA__)
  return _mm256_fnmadd_ps(a, b, c);
#else
  return c - a * b;
#endif
}

// ---------------------------------------------------------------------------
// Loads and stores: fp32 in registers, fp32 / fp16 / bf16 in memory.

PTKIT_INLINE f32x8 load_f32(const float* p) {
  f32x8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
PTKIT_INLINE void store_f32(float* p, f32x8 v) { std::memcpy(p, &v, sizeof v); }

PTKIT_INLINE f32x8 load_bf16(const uint16_t* p) {
  u16x8 h;
  std::memcpy(&h, p, sizeof h);
  return (f32x8)(__builtin_convertvector(h, u32x8) << 16);
}

// Round to nearest even; a NaN stays a (quiet) NaN, as the scalar store does.
PTKIT_INLINE u32x8 bf16_bits(f32x8 v) {
  const i32x8 bits = as_i(v);
  const i32x8 nan = (bits & 0x7fffffff) > 0x7f800000;
  const u32x8 ub = (u32x8)bits;
  const u32x8 rounded = (ub + 0x7fffu + ((ub >> 16) & 1u)) >> 16;
  const u32x8 quiet = (ub >> 16) | 0x40u;
  return (u32x8)select_i(nan, (i32x8)quiet, (i32x8)rounded);
}
PTKIT_INLINE void store_bf16(uint16_t* p, f32x8 v) {
  const u32x8 b = bf16_bits(v);
#if defined(PTKIT_SIMD_X86_INTRINSICS) && defined(__AVX2__)
  // Every lane is <= 0xffff, so the unsigned-saturating pack is exact.
  const __m256i packed = _mm256_packus_epi32((__m256i)b, (__m256i)b);
  const __m128i out = _mm256_castsi256_si128(_mm256_permute4x64_epi64(packed, 0x08));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), out);
#else
  const u16x8 h = __builtin_convertvector(b, u16x8);
  std::memcpy(p, &h, sizeof h);
#endif
}

#if defined(__aarch64__)
typedef _Float16 f16x8 __attribute__((vector_size(16)));
#endif

PTKIT_INLINE f32x8 load_f16(const uint16_t* p) {
#if defined(PTKIT_SIMD_X86_INTRINSICS) && defined(__F16C__)
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
#elif defined(__aarch64__)
  f16x8 h;
  std::memcpy(&h, p, sizeof h);
  return __builtin_convertvector(h, f32x8);
#else
  // Exact integer conversion (the compiler would call libgcc once per lane).
  u16x8 h16;
  std::memcpy(&h16, p, sizeof h16);
  const i32x8 h = (i32x8)__builtin_convertvector(h16, u32x8);
  const i32x8 shifted_exp = splat_i(0x7c00 << 13);
  i32x8 o = (h & 0x7fff) << 13;
  const i32x8 e = o & shifted_exp;
  o += (127 - 15) << 23;
  o += (e == shifted_exp) & ((128 - 16) << 23);  // Inf / NaN
  const f32x8 magic = as_f(splat_i(113 << 23));
  const i32x8 denormal = as_i(as_f(o + (1 << 23)) - magic);
  o = select_i(e == 0, denormal, o);  // zero / subnormal
  return as_f(o | ((h & 0x8000) << 16));
#endif
}

PTKIT_INLINE void store_f16(uint16_t* p, f32x8 v) {
#if defined(PTKIT_SIMD_X86_INTRINSICS) && defined(__F16C__)
  const __m128i h = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), h);
#elif defined(__aarch64__)
  const f16x8 h = __builtin_convertvector(v, f16x8);
  std::memcpy(p, &h, sizeof h);
#else
  // Round to nearest even, overflow to Inf, NaN to quiet NaN, exact subnormals.
  const i32x8 bits = as_i(v);
  const i32x8 sign = bits & splat_i(static_cast<int32_t>(0x80000000u));
  const i32x8 a = bits ^ sign;  // |v|, as (non-negative) integer bits
  const i32x8 special = select_i(a > (255 << 23), splat_i(0x7e00), splat_i(0x7c00));
  const f32x8 denorm_magic = as_f(splat_i(((127 - 15) + (23 - 10) + 1) << 23));
  const i32x8 sub = as_i(as_f(a) + denorm_magic) - as_i(denorm_magic);
  const i32x8 mant_odd = (a >> 13) & 1;
  const i32x8 normal = (a - ((127 - 15) << 23) + 0xfff + mant_odd) >> 13;
  i32x8 o = select_i(a < (113 << 23), sub, normal);
  o = select_i(a >= ((127 + 16) << 23), special, o);
  o |= (sign >> 16) & 0x8000;
  const u16x8 h = __builtin_convertvector((u32x8)o, u16x8);
  std::memcpy(p, &h, sizeof h);
#endif
}

// ---------------------------------------------------------------------------
// Reductions.

PTKIT_INLINE f32x4 lo4(f32x8 v) { return __builtin_shufflevector(v, v, 0, 1, 2, 3); }
PTKIT_INLINE f32x4 hi4(f32x8 v) { return __builtin_shufflevector(v, v, 4, 5, 6, 7); }

PTKIT_INLINE float hsum(f32x8 v) {
  const f32x4 s = lo4(v) + hi4(v);
  const f32x4 t = s + __builtin_shufflevector(s, s, 2, 3, 0, 1);
  return t[0] + t[1];
}

// {sum(a), sum(b), sum(c), sum(d)}
PTKIT_INLINE f32x4 hsum4(f32x8 a, f32x8 b, f32x8 c, f32x8 d) {
  const f32x4 a4 = lo4(a) + hi4(a), b4 = lo4(b) + hi4(b);
  const f32x4 c4 = lo4(c) + hi4(c), d4 = lo4(d) + hi4(d);
  const f32x4 ab = __builtin_shufflevector(a4, b4, 0, 4, 2, 6) + __builtin_shufflevector(a4, b4, 1, 5, 3, 7);
  const f32x4 cd = __builtin_shufflevector(c4, d4, 0, 4, 2, 6) + __builtin_shufflevector(c4, d4, 1, 5, 3, 7);
  return __builtin_shufflevector(ab, cd, 0, 1, 4, 5) + __builtin_shufflevector(ab, cd, 2, 3, 6, 7);
}

PTKIT_INLINE f32x8 concat(f32x4 lo, f32x4 hi) {
  return __builtin_shufflevector(lo, hi, 0, 1, 2, 3, 4, 5, 6, 7);
}

// ---------------------------------------------------------------------------
// Math.

// e^x, within ~2 ulp over the whole fp32 range; no libm / libmvec call.
// x = n ln2 + r with |r| <= ln2/2 (Cody-Waite, two-constant ln2), e^r by a
// degree-6 polynomial (Cephes expf), 2^n built from exponent bits in two halves
// so that subnormal results and the overflow edge stay exact.
// x > 88.72… gives +inf, x < -103.97… gives +0, NaN stays NaN.
PTKIT_INLINE f32x8 exp(f32x8 x) {
  // Clamp (a NaN compares false and passes through unchanged).
  x = select(x > splat(89.0f), splat(89.0f), x);
  x = select(x < splat(-104.0f), splat(-104.0f), x);
  // n = round(x / ln2) by the 1.5 * 2^23 trick: t's low mantissa bits hold n.
  const f32x8 magic = splat(12582912.0f);
  const f32x8 t = fmadd(x, splat(1.44269504088896341f), magic);
  const f32x8 n = t - magic;
  f32x8 r = fnmadd(n, splat(0.693359375f), x);
  r = fnmadd(n, splat(-2.12194440e-4f), r);
  f32x8 p = splat(1.9875691500e-4f);
  p = fmadd(p, r, splat(1.3981999507e-3f));
  p = fmadd(p, r, splat(8.3334519073e-3f));
  p = fmadd(p, r, splat(4.1665795894e-2f));
  p = fmadd(p, r, splat(1.6666665459e-1f));
  p = fmadd(p, r, splat(5.0000001201e-1f));
  p = fmadd(p, r * r, r) + splat(1.0f);
  // 2^n = 2^n1 * 2^n2, n in [-150, 128] so both halves are normal numbers.
  const i32x8 ni = as_i(t) - as_i(magic);
  const i32x8 n1 = ni >> 1;
  const i32x8 n2 = ni - n1;
  return p * as_f((n1 + 127) << 23) * as_f((n2 + 127) << 23);
}

// x * sigmoid(x) = x / (1 + e^-x). x -> -inf gives -0 (e^-x is +inf there; the
// plain formula would make -inf / inf = NaN), +inf gives +inf, NaN stays NaN.
PTKIT_INLINE f32x8 silu(f32x8 x) {
  const f32x8 e = exp(-x);
  const f32x8 y = x / (splat(1.0f) + e);
  return select(x == splat(-__builtin_inff()), splat(-0.0f), y);
}

// erf(x): Eigen's / XLA's rational approximation x P(x^2) / Q(x^2) on [-4, 4]
// (|error| ~ 1e-7; erf(+-4) rounds to +-1 in fp32).
PTKIT_INLINE f32x8 erf(f32x8 x) {
  x = select(x > splat(4.0f), splat(4.0f), x);
  x = select(x < splat(-4.0f), splat(-4.0f), x);
  const f32x8 x2 = x * x;
  f32x8 p = splat(-2.72614225801306e-10f);
  p = fmadd(p, x2, splat(2.77068142495902e-08f));
  p = fmadd(p, x2, splat(-2.10102402082508e-06f));
  p = fmadd(p, x2, splat(-5.69250639462346e-05f));
  p = fmadd(p, x2, splat(-7.34990630326855e-04f));
  p = fmadd(p, x2, splat(-2.95459980854025e-03f));
  p = fmadd(p, x2, splat(-1.60960333262415e-02f));
  f32x8 q = splat(-1.45660718464996e-05f);
  q = fmadd(q, x2, splat(-2.13374055278905e-04f));
  q = fmadd(q, x2, splat(-1.68282697438203e-03f));
  q = fmadd(q, x2, splat(-7.37332916720468e-03f));
  q = fmadd(q, x2, splat(-1.42647390514189e-02f));
  return x * p / q;
}

}  // namespace ptkit::cpu::PTKIT_CPU_ISA::simd

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
