// simd.h's vector types for a compiler without GCC/Clang vector extensions (MSVC):
// fixed-size lane arrays with the element-wise operators and semantics of the
// extensions, so that the kernels' code reads the same on every compiler.
//
// What the extensions define, kept here: a comparison gives a mask of the lane width
// (all ones for true, zero for false); integer +, -, * and << wrap around (done on the
// unsigned type, where C++ defines it); >> of a signed lane is arithmetic; a scalar
// operand is broadcast to every lane. The compiler may vectorize these loops; nothing
// here depends on it.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "ptkit/portability.h"

namespace ptkit::simd_portable {

template <class T, int N>
struct Vec {
  using value_type = T;
  T lane[N];

  PTKIT_INLINE T& operator[](int i) { return lane[i]; }
  PTKIT_INLINE T operator[](int i) const { return lane[i]; }
};

// The mask type of a comparison: signed integer lanes of the same width.
template <class T>
using MaskLane = std::conditional_t<sizeof(T) == 4, int32_t, std::conditional_t<sizeof(T) == 2, int16_t, int64_t>>;

// A scalar operand in the lane type without taking part in template deduction, so that
// `v & 1` and `v & 1u` both mean the lane type.
template <class T>
struct Same {
  using type = T;
};
template <class T>
using Scalar = typename Same<T>::type;

// Integer arithmetic wraps (as in the extensions), which C++ defines for unsigned only.
template <class T, class Op>
PTKIT_INLINE T wrapping(T a, T b, Op op) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(op(static_cast<U>(a), static_cast<U>(b)));
  } else {
    return op(a, b);
  }
}

template <class T, int N, class F>
PTKIT_INLINE Vec<T, N> lanewise(const Vec<T, N>& a, const Vec<T, N>& b, F f) {
  Vec<T, N> r;
  for (int i = 0; i < N; ++i) r.lane[i] = f(a.lane[i], b.lane[i]);
  return r;
}

template <class T, int N>
PTKIT_INLINE Vec<T, N> broadcast(T v) {
  Vec<T, N> r;
  for (int i = 0; i < N; ++i) r.lane[i] = v;
  return r;
}

// +, -, *, / and the bitwise operators, vector with vector or with a scalar either side,
// and their compound assignments.
#define PTKIT_PORTABLE_BINARY(op, body)                                                     \
  template <class T, int N>                                                                 \
  PTKIT_INLINE Vec<T, N> operator op(const Vec<T, N>& a, const Vec<T, N>& b) {              \
    return lanewise(a, b, [](T x, T y) { return body; });                                   \
  }                                                                                         \
  template <class T, int N>                                                                 \
  PTKIT_INLINE Vec<T, N> operator op(const Vec<T, N>& a, Scalar<T> b) {                     \
    return a op broadcast<T, N>(b);                                                         \
  }                                                                                         \
  template <class T, int N>                                                                 \
  PTKIT_INLINE Vec<T, N> operator op(Scalar<T> a, const Vec<T, N>& b) {                     \
    return broadcast<T, N>(a) op b;                                                         \
  }                                                                                         \
  template <class T, int N, class B>                                                        \
  PTKIT_INLINE Vec<T, N>& operator op##=(Vec<T, N>& a, const B& b) {                        \
    return a = a op b;                                                                      \
  }

PTKIT_PORTABLE_BINARY(+, wrapping(x, y, [](auto p, auto q) { return static_cast<decltype(p)>(p + q); }))
PTKIT_PORTABLE_BINARY(-, wrapping(x, y, [](auto p, auto q) { return static_cast<decltype(p)>(p - q); }))
PTKIT_PORTABLE_BINARY(*, wrapping(x, y, [](auto p, auto q) { return static_cast<decltype(p)>(p * q); }))
PTKIT_PORTABLE_BINARY(/, static_cast<T>(x / y))
PTKIT_PORTABLE_BINARY(&, static_cast<T>(x & y))
PTKIT_PORTABLE_BINARY(|, static_cast<T>(x | y))
PTKIT_PORTABLE_BINARY(^, static_cast<T>(x ^ y))
#undef PTKIT_PORTABLE_BINARY

template <class T, int N>
PTKIT_INLINE Vec<T, N> operator-(const Vec<T, N>& a) {
  if constexpr (std::is_integral_v<T>) {
    return broadcast<T, N>(0) - a;
  } else {
    Vec<T, N> r;
    for (int i = 0; i < N; ++i) r.lane[i] = -a.lane[i];
    return r;
  }
}
template <class T, int N>
PTKIT_INLINE Vec<T, N> operator~(const Vec<T, N>& a) {
  Vec<T, N> r;
  for (int i = 0; i < N; ++i) r.lane[i] = static_cast<T>(~a.lane[i]);
  return r;
}

// Shifts by a count every lane shares: << on the unsigned bits (wraps), >> as the lane
// type's own (arithmetic for a signed lane).
template <class T, int N>
PTKIT_INLINE Vec<T, N> operator<<(const Vec<T, N>& a, int count) {
  using U = std::make_unsigned_t<T>;
  Vec<T, N> r;
  for (int i = 0; i < N; ++i) r.lane[i] = static_cast<T>(static_cast<U>(static_cast<U>(a.lane[i]) << count));
  return r;
}
template <class T, int N>
PTKIT_INLINE Vec<T, N> operator>>(const Vec<T, N>& a, int count) {
  Vec<T, N> r;
  for (int i = 0; i < N; ++i) r.lane[i] = static_cast<T>(a.lane[i] >> count);
  return r;
}

// Comparisons: a mask of the lane width, -1 (all ones) where true.
#define PTKIT_PORTABLE_COMPARE(op)                                                               \
  template <class T, int N>                                                                      \
  PTKIT_INLINE Vec<MaskLane<T>, N> operator op(const Vec<T, N>& a, const Vec<T, N>& b) {         \
    Vec<MaskLane<T>, N> r;                                                                       \
    for (int i = 0; i < N; ++i) r.lane[i] = a.lane[i] op b.lane[i] ? MaskLane<T>(-1) : MaskLane<T>(0); \
    return r;                                                                                    \
  }                                                                                              \
  template <class T, int N>                                                                      \
  PTKIT_INLINE Vec<MaskLane<T>, N> operator op(const Vec<T, N>& a, Scalar<T> b) {                \
    return a op broadcast<T, N>(b);                                                              \
  }

PTKIT_PORTABLE_COMPARE(<)
PTKIT_PORTABLE_COMPARE(>)
PTKIT_PORTABLE_COMPARE(<=)
PTKIT_PORTABLE_COMPARE(>=)
PTKIT_PORTABLE_COMPARE(==)
PTKIT_PORTABLE_COMPARE(!=)
#undef PTKIT_PORTABLE_COMPARE

// Where the target has FMA (GCC and Clang say __FMA__; MSVC's /arch:AVX2 implies it),
// simd.h's fmadd is fused here too, so that both paths round alike.
#if defined(__FMA__) || (defined(_MSC_VER) && defined(__AVX2__))
#define PTKIT_SIMD_PORTABLE_FMA 1
#endif
template <int N>
PTKIT_INLINE Vec<float, N> fused_multiply_add(const Vec<float, N>& a, const Vec<float, N>& b, const Vec<float, N>& c) {
  Vec<float, N> r;
  for (int i = 0; i < N; ++i) r.lane[i] = std::fma(a.lane[i], b.lane[i], c.lane[i]);
  return r;
}

// Lane-wise value conversion, as __builtin_convertvector.
template <class To, class T, int N>
PTKIT_INLINE To convert(const Vec<T, N>& v) {
  using L = typename To::value_type;
  To r;
  for (int i = 0; i < N; ++i) r.lane[i] = static_cast<L>(v.lane[i]);
  return r;
}

// The same bits as another type of the same size.
template <class To, class From>
PTKIT_INLINE To bit_cast(const From& v) {
  static_assert(sizeof(To) == sizeof(From), "bit_cast between types of different sizes");
  To r;
  std::memcpy(&r, &v, sizeof r);
  return r;
}

}  // namespace ptkit::simd_portable
