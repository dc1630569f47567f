// How the decode GEMV (cpu_kernels.cpp) accumulates the dot products x . w on each
// instruction set: one policy per way, and the GEMV's register-blocked loop is written
// once over them. Included inside a per-ISA kernel source, like simd.h.
//
// A policy D has
//   XT        the type x is packed in (its k elements contiguous)
//   Acc       one accumulator register
//   kStep     the k elements one madd takes per accumulator
//   kBlocking the register blocks (weight rows x x rows) per number of x rows
//   load_w    kStep weights, as madd takes them (E: the weights' element type)
//   load_x    kStep packed x values
//   madd      acc + the products of x and w, summed pairwise into the lanes
//   fold      the 8 fp32 lanes whose sum is an accumulator's dot product
//   pack      a row piece of x (storage type) into XT; x1: one packed value as fp32
//
// FmaF32x8    every level: fp32 FMAs on 8 lanes, x and w widened to fp32
// Bf16PairsF32x8 bf16 below AVX-512: the same, weights widened as even / odd pairs
// FmaF32x16   x86-64-v4 and up: the same on 16 lanes (AVX-512F)
// Bf16DotX86  avx512-bf16 and up, bf16 only: vdpbf16ps, 32 products per instruction
// Bf16DotNeon neon-bf16, bf16 only: BFDOT, 8 products per instruction
// The 8-lane policies' accumulators are simd::Accumulator (two SSE registers on x86-64's
// baseline, where GCC spilled its generic 32-byte vectors carried through the loop).
// The bf16 dot products treat subnormal inputs as zero (the instructions do, like
// torch's own bf16 matmuls on these CPUs) and add each pair of products before the sum.
#pragma once

#include <cstdint>
#include <cstring>

#include "ptkit/cpu/elements.h"
#include "ptkit/cpu/simd.h"

#ifndef PTKIT_CPU_ISA
#error "dot_products.h belongs to a per-ISA kernel source (PTKIT_CPU_ISA is not defined)"
#endif

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"  // see simd.h
#endif

namespace ptkit::cpu::PTKIT_CPU_ISA::dot_products {

using simd::f32x8;
using simd::kWidth;
using namespace elements;

// Register blocks (NR weight rows x MR x rows: NR x MR accumulators, NR weight and one
// x register) for one x row, two, and more.
struct Blocking {
  int one_nr;
  int two_nr;
  int many_nr;
  int many_mr;
};

// Keeps v in a register: otherwise GCC folds the loads into the FMAs as memory
// operands and loads every weight vector once per x row.
template <class V>
PTKIT_INLINE V in_register(V v) {
#if !defined(PTKIT_SIMD_PORTABLE) && defined(__AVX__) && (defined(__x86_64__) || defined(__i386__))
  __asm__("" : "+v"(v));
#elif defined(PTKIT_SIMD_NEON)
  if constexpr (sizeof(V) == 16) __asm__("" : "+w"(v));  // an f32x8 is two registers there
#endif
  return v;
}

template <class E>
struct FmaF32x8 {
  using T = typename E::T;
  using XT = float;
  using Acc = simd::Accumulator;
  static constexpr int kStep = kWidth;
  // Chosen on Zen 3: fp32 weights 4 x 2 (6 loads per 8 FMAs). fp16 weights (bf16 take
  // Bf16PairsF32x8), widened in registers once per group: 8 x 1 for one row (8
  // accumulator chains), 4 x 2 for two, else 2 x 6 (16 rows in three passes).
  static constexpr bool kF32 = std::is_same_v<E, F32>;
#if defined(PTKIT_SIMD_SSE2)
  // 16 SSE registers: 2 x 1, 2 x 2, else 1 x 4. One Zen 1 core, weights in L2, cycles per
  // weight for 1 / 2 / 4 / 16 rows 0.54 / 0.70 / 1.54 / 6.0 -> 0.22 / 0.35 / 0.74 / 2.9
  // with the Accumulator (bf16 below: 0.31 / 0.67 / 1.30 / 5.2 -> 0.23 / 0.42 / 0.73 / 2.9).
  static constexpr Blocking kBlocking = kF32 ? Blocking{2, 2, 1, 4} : Blocking{8, 4, 2, 6};
#else
  static constexpr Blocking kBlocking = kF32 ? Blocking{4, 4, 4, 2} : Blocking{8, 4, 2, 6};
#endif
  static PTKIT_INLINE Acc zero() { return simd::accumulator(); }
  static PTKIT_INLINE f32x8 load_w(const T* p) { return in_register(E::load(p)); }
  static PTKIT_INLINE f32x8 load_x(const XT* p) { return in_register(simd::load_f32(p)); }
  static PTKIT_INLINE Acc madd(f32x8 x, f32x8 w, Acc c) { return simd::fmadd_into(x, w, c); }
  static PTKIT_INLINE f32x8 fold(Acc a) { return simd::value(a); }
  static PTKIT_INLINE void pack(const T* src, XT* dst, int64_t len) {
    int64_t c = 0;
    for (; c + kWidth <= len; c += kWidth) simd::store_f32(dst + c, E::load(src + c));
    for (; c < len; ++c) dst[c] = E::load1(src + c);
  }
  static PTKIT_INLINE float x1(const XT* p) { return *p; }
  static constexpr bool kPackedIsStored = kF32;  // fp32 x is read where it is
};

// bf16 weights where no bf16 dot product exists (and no AVX-512): 16 weights a step,
// widened as their even and odd elements (simd::load_bf16_pair: one load, a shift and
// an and, no shuffles) against x packed the same way, half FmaF32x8's widening work.
// Each madd is two dependent FMAs. Blocks 4 x 1, 4 x 2, else 2 x 4 (14 of 16 registers).
// One core of a Zen 1 at x86-64-v3, weights in L2, cycles per weight for 1 / 2 / 4 / 16
// x rows: 0.18 / 0.32 / 0.50 / 2.0 against FmaF32x8's 0.33 / 0.42 / 0.66 / 2.5 (4 rows
// is the FMA unit's bound); x86-64's SSE2 baseline 0.31 / 0.65 / 1.25 / 5.0 against
// 0.49 / 0.83 / 1.94 / 8.1.
struct Bf16PairsF32x8 {
  using T = uint16_t;
  using XT = float;
  using Acc = simd::Accumulator;
  struct Pair {
    f32x8 even, odd;
  };
  static constexpr int kStep = 2 * kWidth;
#if defined(PTKIT_SIMD_SSE2)
  static constexpr Blocking kBlocking{2, 2, 1, 4};
#else
  static constexpr Blocking kBlocking{4, 4, 2, 4};
#endif
  static PTKIT_INLINE Acc zero() { return simd::accumulator(); }
  static PTKIT_INLINE Pair load_w(const T* p) {
    Pair w;
    simd::load_bf16_pair(p, w.even, w.odd);
    return {in_register(w.even), in_register(w.odd)};
  }
  static PTKIT_INLINE Pair load_x(const XT* p) {
    return {in_register(simd::load_f32(p)), in_register(simd::load_f32(p + kWidth))};
  }
  static PTKIT_INLINE Acc madd(Pair x, Pair w, Acc c) {
    return simd::fmadd_into(x.odd, w.odd, simd::fmadd_into(x.even, w.even, c));
  }
  static PTKIT_INLINE f32x8 fold(Acc a) { return simd::value(a); }
  // Whole steps as 8 even then 8 odd values; the rest (the k tail) in order, for x1.
  static PTKIT_INLINE void pack(const T* src, XT* dst, int64_t len) {
    int64_t c = 0;
    for (; c + kStep <= len; c += kStep) {
      f32x8 even, odd;
      simd::load_bf16_pair(src + c, even, odd);
      simd::store_f32(dst + c, even);
      simd::store_f32(dst + c + kWidth, odd);
    }
    for (; c < len; ++c) dst[c] = BF16::load1(src + c);
  }
  static PTKIT_INLINE float x1(const XT* p) { return *p; }
  static constexpr bool kPackedIsStored = false;
};

#if defined(PTKIT_SIMD_AVX512)
// The lane sums of a 16-lane accumulator, as 8 lanes.
PTKIT_INLINE f32x8 fold16(__m512 a) {
  return simd::bit_cast<f32x8>(_mm256_add_ps(_mm512_castps512_ps256(a), _mm512_extractf32x8_ps(a, 1)));
}

template <class E>
struct FmaF32x16 {
  using T = typename E::T;
  using XT = float;
  using Acc = __m512;
  static constexpr int kStep = 16;
  static constexpr bool kF32 = std::is_same_v<E, F32>;
  // 32 registers: up to 24 accumulators with 4 weight vectors and one x.
  static constexpr Blocking kBlocking = kF32 ? Blocking{4, 4, 4, 4} : Blocking{8, 4, 4, 4};
  static PTKIT_INLINE Acc zero() { return _mm512_setzero_ps(); }
  static PTKIT_INLINE Acc load_w(const T* p) {
    if constexpr (std::is_same_v<E, F32>) {
      return in_register(_mm512_loadu_ps(p));
    } else if constexpr (std::is_same_v<E, F16>) {
      // maskz: GCC 12 warns that _mm512_cvtph_ps's undefined source may be uninitialized.
      return in_register(_mm512_maskz_cvtph_ps(0xffff, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))));
    } else {
      const __m512i wide = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
      return in_register(_mm512_castsi512_ps(_mm512_slli_epi32(wide, 16)));
    }
  }
  static PTKIT_INLINE Acc load_x(const XT* p) { return in_register(_mm512_loadu_ps(p)); }
  static PTKIT_INLINE Acc madd(Acc x, Acc w, Acc c) { return _mm512_fmadd_ps(x, w, c); }
  static PTKIT_INLINE f32x8 fold(Acc a) { return fold16(a); }
  static PTKIT_INLINE void pack(const T* src, XT* dst, int64_t len) { FmaF32x8<E>::pack(src, dst, len); }
  static PTKIT_INLINE float x1(const XT* p) { return *p; }
  static constexpr bool kPackedIsStored = kF32;
};
#endif

#if defined(PTKIT_SIMD_AVX512_BF16)
struct Bf16DotX86 {
  using T = uint16_t;
  using XT = uint16_t;  // bf16, as stored
  using Acc = __m512;
  static constexpr int kStep = 32;
  static constexpr Blocking kBlocking{8, 4, 4, 4};
  static PTKIT_INLINE Acc zero() { return _mm512_setzero_ps(); }
  static PTKIT_INLINE __m512bh load(const uint16_t* p) {
    return reinterpret_cast<__m512bh>(in_register(_mm512_loadu_si512(p)));
  }
  static PTKIT_INLINE __m512bh load_w(const T* p) { return load(p); }
  static PTKIT_INLINE __m512bh load_x(const XT* p) { return load(p); }
  static PTKIT_INLINE Acc madd(__m512bh x, __m512bh w, Acc c) { return _mm512_dpbf16_ps(c, x, w); }
  static PTKIT_INLINE f32x8 fold(Acc a) { return fold16(a); }
  static PTKIT_INLINE void pack(const T* src, XT* dst, int64_t len) {
    std::memcpy(dst, src, static_cast<size_t>(len) * sizeof(T));
  }
  static PTKIT_INLINE float x1(const XT* p) { return BF16::load1(p); }
  static constexpr bool kPackedIsStored = true;
};
#endif

#if defined(PTKIT_SIMD_NEON_BF16)
struct Bf16DotNeon {
  using T = uint16_t;
  using XT = uint16_t;
  using Acc = float32x4_t;
  static constexpr int kStep = 8;
  static constexpr Blocking kBlocking{8, 4, 4, 4};
  static PTKIT_INLINE Acc zero() { return vdupq_n_f32(0.0f); }
  static PTKIT_INLINE bfloat16x8_t load(const uint16_t* p) {
    return in_register(vreinterpretq_bf16_u16(vld1q_u16(p)));
  }
  static PTKIT_INLINE bfloat16x8_t load_w(const T* p) { return load(p); }
  static PTKIT_INLINE bfloat16x8_t load_x(const XT* p) { return load(p); }
  static PTKIT_INLINE Acc madd(bfloat16x8_t x, bfloat16x8_t w, Acc c) { return vbfdotq_f32(c, x, w); }
  static PTKIT_INLINE f32x8 fold(Acc a) { return simd::concat(simd::bit_cast<simd::f32x4>(a), simd::f32x4{}); }
  static PTKIT_INLINE void pack(const T* src, XT* dst, int64_t len) {
    std::memcpy(dst, src, static_cast<size_t>(len) * sizeof(T));
  }
  static PTKIT_INLINE float x1(const XT* p) { return BF16::load1(p); }
  static constexpr bool kPackedIsStored = true;
};
#endif

}  // namespace ptkit::cpu::PTKIT_CPU_ISA::dot_products

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
