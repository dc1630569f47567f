// The CPU kernels' element types and epilogue, shared by the kernel sources of one
// instruction-set level (cpu_kernels.cpp, gemv_amx.cpp): included inside their
// ptkit::cpu::PTKIT_CPU_ISA namespace, like simd.h.
//
// Every kernel computes in fp32 and rounds once, on the store: an element type says how
// its storage becomes 8 fp32 lanes and back (F32, F16, BF16).
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "ptkit/cpu/kernels.h"
#include "ptkit/cpu/simd.h"

#ifndef PTKIT_CPU_ISA
#error "elements.h belongs to a per-ISA kernel source (PTKIT_CPU_ISA is not defined)"
#endif

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"  // see simd.h
#endif

namespace ptkit::cpu::PTKIT_CPU_ISA::elements {

using simd::f32x8;
using simd::kWidth;

// ---------------------------------------------------------------------------
// Element types: storage type, 8-lane vector load/store, scalar load/store.

// load2 / store2 move 16 elements as two vectors, in an order of the type's
// choosing (the same for both): for element-wise loops only. store2<true> writes them
// with streaming stores (simd::put_32_bytes: p 32-byte aligned, simd::stream_fence after).
// The 16-bit types also look their elements up in a table of 65536 fp32 values indexed
// by their bits (lookup, lookup2: in load's and load2's order).
struct F32 {
  using T = float;
  static PTKIT_INLINE f32x8 load(const T* p) { return simd::load_f32(p); }
  static PTKIT_INLINE void store(T* p, f32x8 v) { simd::store_f32(p, v); }
  static PTKIT_INLINE void load2(const T* p, f32x8& a, f32x8& b) { a = load(p), b = load(p + kWidth); }
  template <bool Stream = false>
  static PTKIT_INLINE void store2(T* p, f32x8 a, f32x8 b) {
    simd::put_32_bytes<Stream>(p, simd::as_i(a));
    simd::put_32_bytes<Stream>(p + kWidth, simd::as_i(b));
  }
  static PTKIT_INLINE float load1(const T* p) { return *p; }
  static PTKIT_INLINE void store1(T* p, float v) { *p = v; }
};

struct F16 {
  using T = uint16_t;  // IEEE binary16 bits
  static PTKIT_INLINE f32x8 load(const T* p) { return simd::load_f16(p); }
  static PTKIT_INLINE void store(T* p, f32x8 v) { simd::store_f16(p, v); }
  static PTKIT_INLINE void load2(const T* p, f32x8& a, f32x8& b) { a = load(p), b = load(p + kWidth); }
  template <bool Stream = false>
  static PTKIT_INLINE void store2(T* p, f32x8 a, f32x8 b) {
    simd::put_32_bytes<Stream>(p, simd::f16_pair_bits(a, b));
  }
  static PTKIT_INLINE f32x8 lookup(const float* table, const T* p) { return simd::lookup(table, p); }
  static PTKIT_INLINE void lookup2(const float* table, const T* p, f32x8& a, f32x8& b) {
    a = lookup(table, p), b = lookup(table, p + kWidth);
  }
  static PTKIT_INLINE float load1(const T* p) { return simd::f16_to_float(*p); }
  static PTKIT_INLINE void store1(T* p, float v) { *p = simd::float_to_f16(v); }
};

struct BF16 {
  using T = uint16_t;  // upper half of an fp32
  static PTKIT_INLINE f32x8 load(const T* p) { return simd::load_bf16(p); }
  static PTKIT_INLINE void store(T* p, f32x8 v) { simd::store_bf16(p, v); }
  static PTKIT_INLINE f32x8 lookup(const float* table, const T* p) { return simd::lookup(table, p); }
#if defined(PTKIT_SIMD_AVX512_BF16)
  // In order: one vcvtne2ps2bf16 converts both (simd::bf16_16_bits).
  static PTKIT_INLINE void load2(const T* p, f32x8& a, f32x8& b) { a = load(p), b = load(p + kWidth); }
  template <bool Stream = false>
  static PTKIT_INLINE void store2(T* p, f32x8 a, f32x8 b) {
    simd::put_32_bytes<Stream>(p, simd::bf16_16_bits(a, b));
  }
  static PTKIT_INLINE void lookup2(const float* table, const T* p, f32x8& a, f32x8& b) {
    a = lookup(table, p), b = lookup(table, p + kWidth);
  }
#else
  // Even / odd elements: no shuffles (simd::load_bf16_pair).
  static PTKIT_INLINE void load2(const T* p, f32x8& a, f32x8& b) { simd::load_bf16_pair(p, a, b); }
  template <bool Stream = false>
  static PTKIT_INLINE void store2(T* p, f32x8 a, f32x8 b) {
    simd::put_32_bytes<Stream>(p, simd::bf16_pair_bits(a, b));
  }
  static PTKIT_INLINE void lookup2(const float* table, const T* p, f32x8& a, f32x8& b) {
    a = simd::lookup(table, p, 2), b = simd::lookup(table, p + 1, 2);
  }
#endif
  static PTKIT_INLINE float load1(const T* p) {
    const uint32_t bits = static_cast<uint32_t>(*p) << 16;
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
  }
  static PTKIT_INLINE void store1(T* p, float v) {
#if defined(PTKIT_SIMD_AVX512_BF16)
    // One lane of the vector store, so that a value stores the same wherever it sits.
    T lanes[kWidth];
    simd::store_bf16(lanes, simd::splat(v));
    *p = lanes[0];
    return;
#endif
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
    return simd::max_nan(simd::zero(), v);  // NaN stays NaN
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

}  // namespace ptkit::cpu::PTKIT_CPU_ISA::elements

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
