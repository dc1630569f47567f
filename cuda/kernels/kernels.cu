// CUDA kernels behind ptkit's CUDA ops (see ptkit/cuda/kernels.h).
//
// Every kernel loads fp32 / fp16 / bf16, computes in fp32 and rounds once, on the
// store. Loads and stores are 16 bytes wide (4 x fp32 or 8 x 16-bit) where the
// pointers are 16-byte aligned and the row length is a multiple of the vector
// width, so that no vector straddles two rows; otherwise a scalar path runs. Index
// arithmetic is 64-bit wherever a product of sizes can exceed 2^31, grids are
// capped (gridDim.y <= 65535, gridDim.x well below 2^31) and the kernels loop over
// whatever the grid does not cover.
//
// GEMV (decode, m <= 16): streams w once, bandwidth-bound. For fp16 / bf16 it runs
// on tensor cores (mma.sync m16n8k16, fp32 accumulators): x is the A operand (m
// rows padded to 8 or 16 with zeros), w the B operand, so each warp loads w with
// plain 16-byte loads, 8 consecutive k of one row per lane, and the k order inside
// each 32-wide tile is permuted identically for x and w (a dot product does not
// depend on the order of its terms). fp32 (and any layout the tensor-core path does
// not take) runs on CUDA cores with (rows x features) fp32 accumulators per lane.
#include "ptkit/cuda/kernels.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "common.cuh"

namespace ptkit::cuda {
namespace {

using detail::dynamic_smem;
using detail::ld_stream_v4;
using detail::mma_m16n8k16;

constexpr unsigned kFullMask = 0xffffffffu;
// Lanes of a warp: 32 on every NVIDIA GPU, and what the kernels are written for (their
// shuffles over kFullMask, mma.sync's fragments, lane = threadIdx.x & 31). The launchers
// size blocks from the device's own warp size (DeviceInfo::warp_size, as the HIP tree
// does) and refuse a device that reports another (cudaErrorNotSupported) rather than
// launch a shape the kernels were not written for.
constexpr int kWarpSize = 32;

__device__ __forceinline__ int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

template <class To, class From>
__device__ __forceinline__ To bit_cast(const From& from) {
  static_assert(sizeof(To) == sizeof(From), "bit_cast between types of different sizes");
  To to;
  memcpy(&to, &from, sizeof(To));
  return to;
}

// ---------------------------------------------------------------------------
// Element types: fp32 <-> storage conversions, one element or 16 bytes at a time.

template <class T>
struct Elem;

template <>
struct Elem<float> {
  static constexpr int kVec = 4;  // elements per 16 bytes
  __device__ static float to_f(float v) { return v; }
  __device__ static float from_f(float v) { return v; }
  __device__ static void unpack(const uint4& u, float* f) {
    f[0] = __uint_as_float(u.x);
    f[1] = __uint_as_float(u.y);
    f[2] = __uint_as_float(u.z);
    f[3] = __uint_as_float(u.w);
  }
  __device__ static uint4 pack(const float* f) {
    return make_uint4(__float_as_uint(f[0]), __float_as_uint(f[1]), __float_as_uint(f[2]),
                      __float_as_uint(f[3]));
  }
};

// Two 16-bit values in a 32-bit word: the lower address in the lower half.
template <class T, class Self>
struct Elem16 {
  static constexpr int kVec = 8;
  __device__ static void unpack(const uint4& u, float* f) {
    Self::unpack2(u.x, f);
    Self::unpack2(u.y, f + 2);
    Self::unpack2(u.z, f + 4);
    Self::unpack2(u.w, f + 6);
  }
  __device__ static uint4 pack(const float* f) {
    return make_uint4(Self::pack2(f[0], f[1]), Self::pack2(f[2], f[3]), Self::pack2(f[4], f[5]),
                      Self::pack2(f[6], f[7]));
  }
};

template <>
struct Elem<__nv_bfloat16> : Elem16<__nv_bfloat16, Elem<__nv_bfloat16>> {
  __device__ static float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
  __device__ static __nv_bfloat16 from_f(float v) { return __float2bfloat16_rn(v); }
  // A bf16 is the upper half of an fp32: widening is a shift.
  __device__ static void unpack2(uint32_t u, float* f) {
    f[0] = __uint_as_float(u << 16);
    f[1] = __uint_as_float(u & 0xffff0000u);
  }
  __device__ static uint32_t pack2(float a, float b) {
    return bit_cast<uint32_t>(__floats2bfloat162_rn(a, b));  // .x = a (low half), round to nearest even
  }
};

template <>
struct Elem<__half> : Elem16<__half, Elem<__half>> {
  __device__ static float to_f(__half v) { return __half2float(v); }
  __device__ static __half from_f(float v) { return __float2half_rn(v); }
  __device__ static void unpack2(uint32_t u, float* f) {
    const float2 v = __half22float2(bit_cast<__half2>(u));
    f[0] = v.x;
    f[1] = v.y;
  }
  __device__ static uint32_t pack2(float a, float b) { return bit_cast<uint32_t>(__floats2half2_rn(a, b)); }
};

// NV consecutive elements: NV == Elem<T>::kVec is one 16-byte access (the address
// must be 16-byte aligned), NV == 1 a scalar one. Raw keeps them in storage format.
template <class T, int NV>
struct Io {
  static_assert(NV == 1 || NV == Elem<T>::kVec, "a pack is one element or 16 bytes");
  static constexpr bool kVector = NV > 1;
  using Raw = std::conditional_t<kVector, uint4, T>;

  __device__ static Raw ldg(const T* p) {  // read-only for the kernel's lifetime
    if constexpr (kVector) {
      return __ldg(reinterpret_cast<const uint4*>(p));
    } else {
      return __ldg(p);
    }
  }
  __device__ static Raw ld(const T* p) {  // plain load (data the kernel also writes)
    if constexpr (kVector) {
      return *reinterpret_cast<const uint4*>(p);
    } else {
      return *p;
    }
  }
  __device__ static void st(T* p, const Raw& r) {
    if constexpr (kVector) {
      *reinterpret_cast<uint4*>(p) = r;
    } else {
      *p = r;
    }
  }
  __device__ static void to_f(const Raw& r, float (&f)[NV]) {
    if constexpr (kVector) {
      Elem<T>::unpack(r, f);
    } else {
      f[0] = Elem<T>::to_f(r);
    }
  }
  __device__ static Raw from_f(const float (&f)[NV]) {
    if constexpr (kVector) {
      return Elem<T>::pack(f);
    } else {
      return Elem<T>::from_f(f[0]);
    }
  }
  __device__ static Raw zero() {
    if constexpr (kVector) {
      return make_uint4(0u, 0u, 0u, 0u);
    } else {
      return Elem<T>::from_f(0.0f);
    }
  }
};

// ---------------------------------------------------------------------------
// Reductions.

// Sum over the warp, by xor butterfly: every lane ends with the same value (fp32
// addition is commutative, so both lanes of each exchange compute the same sum).
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFullMask, v, o);
  return v;
}

// Sum of `v` over the block; `buf` holds >= 32 floats of shared memory. Every
// thread gets the same value (each adds the per-warp sums in the same order). The
// caller must not write `buf` again before all threads have read it: alternate
// two buffers between consecutive calls, with this call's barrier between them.
__device__ __forceinline__ float block_sum(float v, float* buf) {
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int nwarps = (blockDim.x + 31) >> 5;
  v = warp_sum(v);
  if (lane == 0) buf[warp] = v;
  __syncthreads();
  float total = 0.0f;
  for (int i = 0; i < nwarps; ++i) total += buf[i];
  return total;
}

// Largest value over the warp / the block, as warp_sum / block_sum (same buffer rule).
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(kFullMask, v, o));
  return v;
}

__device__ __forceinline__ float block_max(float v, float* buf) {
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int nwarps = (blockDim.x + 31) >> 5;
  v = warp_max(v);
  if (lane == 0) buf[warp] = v;
  __syncthreads();
  float m = 0.0f;
  for (int i = 0; i < nwarps; ++i) m = fmaxf(m, buf[i]);
  return m;
}

// A running sum with Kahan's compensation: the sum of n terms is off by a few
// roundings whatever n (a plain running sum drifts by up to n of them).
struct CompensatedSum {
  float sum = 0.0f;
  float c = 0.0f;
  __device__ __forceinline__ void add(float v) {
    const float y = v - c;
    const float t = sum + y;
    // Once the sum overflows it stays inf, as a plain sum does (inf - inf would make c,
    // then the sum, NaN, and hide the overflow from the rescue that looks for inf).
    c = isinf(t) ? 0.0f : (t - sum) - y;
    sum = t;
  }
};

// Reduce-scatter of N (a power of two) per-lane values over the warp, with N/2 +
// N/4 + … shuffles instead of 5 N: at each step a lane keeps one half of its
// values, sends the other half to its partner (lane ^ O) and adds what it gets.
// Afterwards v[0 .. max(1, N/32)) hold totals over all 32 lanes: for N >= 32, lane
// L holds the original values L * (N/32) + i; for N < 32, lane L holds value
// L >> (5 - log2 N), as do the other lanes that agree with it in the upper bits.
template <int N, int O>
__device__ __forceinline__ void warp_reduce_scatter(float* v, int lane) {
  if constexpr (O > 0) {
    if constexpr (N == 1) {
      v[0] += __shfl_xor_sync(kFullMask, v[0], O);
      warp_reduce_scatter<1, O / 2>(v, lane);
    } else {
      constexpr int H = N / 2;
      const bool upper = (lane & O) != 0;
#pragma unroll
      for (int i = 0; i < H; ++i) {
        const float send = upper ? v[i] : v[i + H];
        const float keep = upper ? v[i + H] : v[i];
        v[i] = keep + __shfl_xor_sync(kFullMask, send, O);
      }
      warp_reduce_scatter<H, O / 2>(v, lane);
    }
  }
}

// ---------------------------------------------------------------------------
// Activations, in fp32. silu, gelu and gelu_tanh take their limits at +-inf (+inf, -0),
// where the formulas meet -inf * 0 = NaN: ptkit's semantics on every backend and on the
// reference (src/ptkit_ops/_library.py, docs/using.md).

__device__ __forceinline__ float minus_zero_at_minus_infinity(float v, float y) {
  return v == -INFINITY ? -0.0f : y;
}

template <Activation A>
__device__ __forceinline__ float activate(float v) {
  if constexpr (A == Activation::none) {
    return v;
  } else if constexpr (A == Activation::relu) {
    return v < 0.0f ? 0.0f : v;  // NaN stays NaN
  } else if constexpr (A == Activation::gelu) {
    // x Phi(x) = x erfc(-x / sqrt 2) / 2: no cancellation for negative x (1 + erf would).
    return minus_zero_at_minus_infinity(v, 0.5f * v * erfcf(-0.70710678118654752f * v));
  } else if constexpr (A == Activation::gelu_tanh) {
    // 0.5 x (1 + tanh(u)) = x / (1 + e^(-2u)), u = sqrt(2/pi) (x + 0.044715 x^3).
    const float two_u = 1.5957691216057308f * fmaf(0.044715f * v, v * v, v);
    return minus_zero_at_minus_infinity(v, v / (1.0f + expf(-two_u)));
  } else {
    return minus_zero_at_minus_infinity(v, v / (1.0f + expf(-v)));  // silu
  }
}

__device__ __forceinline__ float activate(float v, Activation a) {
  switch (a) {
    case Activation::relu:
      return activate<Activation::relu>(v);
    case Activation::gelu:
      return activate<Activation::gelu>(v);
    case Activation::gelu_tanh:
      return activate<Activation::gelu_tanh>(v);
    case Activation::silu:
      return activate<Activation::silu>(v);
    default:
      return v;
  }
}

// silu for silu_and_mul: fast exp and division for 16-bit outputs (a few fp32 ulp,
// far below their rounding), the accurate ones for fp32. silu(+inf) = inf,
// silu(-inf) = -0 (the limit), silu(x < -88) = -0.
template <class T>
__device__ __forceinline__ float silu_gate(float g) {
  if constexpr (std::is_same_v<T, float>) {
    return minus_zero_at_minus_infinity(g, g / (1.0f + expf(-g)));
  } else {
    return minus_zero_at_minus_infinity(g, __fdividef(g, 1.0f + __expf(-g)));
  }
}

// ---------------------------------------------------------------------------
// rms_norm. Three kernels, by row length in packs (NV elements each):
//  * warp per row, <= kRmsWarpPacks packs per lane held in registers;
//  * block per row, <= kRmsBlockPacks packs per thread held in registers;
//  * block per row, two passes over global memory (very long rows), each thread's
//    share summed with Kahan's compensation.
// Accumulation: the squares in fp32, a few roundings per thread, then a tree over
// the warp and the block: the sum of squares stays within ~(log2(threads) + 4) fp32
// roundings for any row length. A row whose fp32 squares overflow (all values finite
// but the sum inf: |x| above ~1.8e19) is summed again scaled by its largest |x|, so
// it normalises as in float64 instead of to 0 (as the CPU kernel and the reference).

constexpr int kRmsWarpPacks = 4;       // per lane: rows of <= 128 packs run warp per row
constexpr int kRmsBlockPacks = 8;      // per thread: rows of <= 4096 packs stay in registers
constexpr int kRmsBlockThreads = 512;  // (1024 would cap registers at 64: spills on sm_100+)
constexpr int kRmsWarpsPerBlock = 8;

template <class T, int NV>
__device__ __forceinline__ void rms_store(T* y, const T* weight, int64_t p, typename Io<T, NV>::Raw raw,
                                          float inv) {
  using IO = Io<T, NV>;
  float f[NV], g[NV];
  IO::to_f(raw, f);
  IO::to_f(IO::ldg(weight + p * NV), g);
#pragma unroll
  for (int e = 0; e < NV; ++e) f[e] = f[e] * inv * g[e];
  IO::st(y + p * NV, IO::from_f(f));
}

template <class T, int NV>
__device__ __forceinline__ float sum_squares(typename Io<T, NV>::Raw raw, float ss) {
  float f[NV];
  Io<T, NV>::to_f(raw, f);
#pragma unroll
  for (int e = 0; e < NV; ++e) ss = fmaf(f[e], f[e], ss);
  return ss;
}

// rsqrt(mean + eps), the mean as sum x (1 / cols) (as torch's mean).
__device__ __forceinline__ float rms_scale(float ss, float inv_cols, float eps) {
  return rsqrtf(fmaf(ss, inv_cols, eps));
}

template <class T, int NV>
__device__ __forceinline__ float max_abs(typename Io<T, NV>::Raw raw, float m) {
  float f[NV];
  Io<T, NV>::to_f(raw, f);
#pragma unroll
  for (int e = 0; e < NV; ++e) m = fmaxf(m, fabsf(f[e]));
  return m;
}

template <class T, int NV>
__device__ __forceinline__ float sum_scaled_squares(typename Io<T, NV>::Raw raw, float m, float ss) {
  float f[NV];
  Io<T, NV>::to_f(raw, f);
#pragma unroll
  for (int e = 0; e < NV; ++e) {
    const float v = f[e] / m;  // <= 1: no overflow
    ss = fmaf(v, v, ss);
  }
  return ss;
}

// The overflow rescue applies: the squares overflowed though every value is finite.
__device__ __forceinline__ bool squares_overflowed(float ss, float m) { return isinf(ss) && isfinite(m); }

// y = (x / m) * rsqrt(sum (x / m)^2 / cols + eps / m^2) * w: x * rsqrt(mean(x^2) + eps) * w
// without forming x^2.
template <class T, int NV>
__device__ __forceinline__ void rms_store_scaled(T* y, const T* weight, int64_t p, typename Io<T, NV>::Raw raw,
                                                 float inv, float m) {
  using IO = Io<T, NV>;
  float f[NV], g[NV];
  IO::to_f(raw, f);
  IO::to_f(IO::ldg(weight + p * NV), g);
#pragma unroll
  for (int e = 0; e < NV; ++e) f[e] = (f[e] / m) * inv * g[e];
  IO::st(y + p * NV, IO::from_f(f));
}

__device__ __forceinline__ float rms_scale_scaled(float ss, float inv_cols, float eps, float m) {
  return rsqrtf(fmaf(ss, inv_cols, (eps / m) / m));
}

// (Min. 1 block per SM stated: otherwise ptxas for sm_100+ aims at a higher
// occupancy, caps registers at 48 and spills.)
template <class T, int NV>
__global__ void __launch_bounds__(kRmsWarpsPerBlock * kWarpSize, 1)
    rms_norm_warp_kernel(const T* __restrict__ x, const T* __restrict__ weight, T* __restrict__ y,
                         int64_t rows, int64_t cols, float inv_cols, float eps) {
  using IO = Io<T, NV>;
  const int lane = threadIdx.x & 31;
  const int packs = static_cast<int>(cols / NV);  // <= 32 * kRmsWarpPacks
  const int64_t warps_per_grid = static_cast<int64_t>(gridDim.x) * (blockDim.x >> 5);
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5); r < rows;
       r += warps_per_grid) {
    const T* xr = x + r * cols;
    typename IO::Raw raw[kRmsWarpPacks];
#pragma unroll
    for (int i = 0; i < kRmsWarpPacks; ++i) {
      const int p = i * 32 + lane;
      raw[i] = p < packs ? IO::ldg(xr + static_cast<int64_t>(p) * NV) : IO::zero();
    }
    float ss = 0.0f;
#pragma unroll
    for (int i = 0; i < kRmsWarpPacks; ++i) ss = sum_squares<T, NV>(raw[i], ss);  // zeros add 0
    ss = warp_sum(ss);
    T* yr = y + r * cols;
    if (isinf(ss)) {  // the same on every lane: the whole warp takes this branch or not
      float m = 0.0f;
#pragma unroll
      for (int i = 0; i < kRmsWarpPacks; ++i) m = max_abs<T, NV>(raw[i], m);
      m = warp_max(m);
      if (squares_overflowed(ss, m)) {
        float scaled = 0.0f;
#pragma unroll
        for (int i = 0; i < kRmsWarpPacks; ++i) scaled = sum_scaled_squares<T, NV>(raw[i], m, scaled);
        const float inv = rms_scale_scaled(warp_sum(scaled), inv_cols, eps, m);
#pragma unroll
        for (int i = 0; i < kRmsWarpPacks; ++i) {
          const int p = i * 32 + lane;
          if (p < packs) rms_store_scaled<T, NV>(yr, weight, p, raw[i], inv, m);
        }
        continue;
      }
    }
    const float inv = rms_scale(ss, inv_cols, eps);
#pragma unroll
    for (int i = 0; i < kRmsWarpPacks; ++i) {
      const int p = i * 32 + lane;
      if (p < packs) rms_store<T, NV>(yr, weight, p, raw[i], inv);
    }
  }
}

template <class T, int NV>
__global__ void __launch_bounds__(kRmsBlockThreads)
    rms_norm_block_kernel(const T* __restrict__ x, const T* __restrict__ weight, T* __restrict__ y,
                          int64_t rows, int64_t cols, float inv_cols, float eps) {
  using IO = Io<T, NV>;
  __shared__ float buf[2][32];
  const int packs = static_cast<int>(cols / NV);  // <= blockDim.x * kRmsBlockPacks
  const int tid = threadIdx.x;
  const int nthreads = blockDim.x;
  int parity = 0;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x, parity ^= 1) {
    const T* xr = x + r * cols;
    typename IO::Raw raw[kRmsBlockPacks];
#pragma unroll
    for (int i = 0; i < kRmsBlockPacks; ++i) {
      const int p = i * nthreads + tid;
      raw[i] = p < packs ? IO::ldg(xr + static_cast<int64_t>(p) * NV) : IO::zero();
    }
    float ss = 0.0f;
#pragma unroll
    for (int i = 0; i < kRmsBlockPacks; ++i) ss = sum_squares<T, NV>(raw[i], ss);
    ss = block_sum(ss, buf[parity]);
    T* yr = y + r * cols;
    if (isinf(ss)) {  // the same in every thread; buffers alternate p, p^1, p, then p^1
      float m = 0.0f;
#pragma unroll
      for (int i = 0; i < kRmsBlockPacks; ++i) m = max_abs<T, NV>(raw[i], m);
      m = block_max(m, buf[parity ^ 1]);
      if (squares_overflowed(ss, m)) {
        float scaled = 0.0f;
#pragma unroll
        for (int i = 0; i < kRmsBlockPacks; ++i) scaled = sum_scaled_squares<T, NV>(raw[i], m, scaled);
        const float inv = rms_scale_scaled(block_sum(scaled, buf[parity]), inv_cols, eps, m);
#pragma unroll
        for (int i = 0; i < kRmsBlockPacks; ++i) {
          const int p = i * nthreads + tid;
          if (p < packs) rms_store_scaled<T, NV>(yr, weight, p, raw[i], inv, m);
        }
        continue;
      }
      __syncthreads();  // an inf in the row: the next row's block_sum writes buf[parity ^ 1] too
    }
    const float inv = rms_scale(ss, inv_cols, eps);
#pragma unroll
    for (int i = 0; i < kRmsBlockPacks; ++i) {
      const int p = i * nthreads + tid;
      if (p < packs) rms_store<T, NV>(yr, weight, p, raw[i], inv);
    }
  }
}

template <class T, int NV>
__global__ void __launch_bounds__(1024)
    rms_norm_loop_kernel(const T* __restrict__ x, const T* __restrict__ weight, T* __restrict__ y,
                         int64_t rows, int64_t cols, float inv_cols, float eps) {
  using IO = Io<T, NV>;
  __shared__ float buf[2][32];
  const int64_t packs = cols / NV;
  int parity = 0;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x, parity ^= 1) {
    const T* xr = x + r * cols;
    CompensatedSum acc;
#pragma unroll 4
    for (int64_t p = threadIdx.x; p < packs; p += blockDim.x) {
      float f[NV];
      IO::to_f(IO::ldg(xr + p * NV), f);
#pragma unroll
      for (int e = 0; e < NV; ++e) acc.add(f[e] * f[e]);
    }
    const float ss = block_sum(acc.sum, buf[parity]);
    T* yr = y + r * cols;
    if (isinf(ss)) {  // the same in every thread; buffers alternate p, p^1, p, then p^1
      float m = 0.0f;
      for (int64_t p = threadIdx.x; p < packs; p += blockDim.x) m = max_abs<T, NV>(IO::ldg(xr + p * NV), m);
      m = block_max(m, buf[parity ^ 1]);
      if (squares_overflowed(ss, m)) {
        float scaled = 0.0f;
        for (int64_t p = threadIdx.x; p < packs; p += blockDim.x) {
          scaled = sum_scaled_squares<T, NV>(IO::ldg(xr + p * NV), m, scaled);
        }
        const float inv = rms_scale_scaled(block_sum(scaled, buf[parity]), inv_cols, eps, m);
        for (int64_t p = threadIdx.x; p < packs; p += blockDim.x) {
          rms_store_scaled<T, NV>(yr, weight, p, IO::ldg(xr + p * NV), inv, m);
        }
        continue;
      }
      __syncthreads();  // an inf in the row: the next row's block_sum writes buf[parity ^ 1] too
    }
    const float inv = rms_scale(ss, inv_cols, eps);
#pragma unroll 4
    for (int64_t p = threadIdx.x; p < packs; p += blockDim.x) {
      rms_store<T, NV>(yr, weight, p, IO::ldg(xr + p * NV), inv);
    }
  }
}

// ---------------------------------------------------------------------------
// Element-wise kernels over [rows, packs]: blockDim = (bx, by), threads walk packs
// along x and rows along y (grid-stride both ways), kRowUnroll rows at a time so
// that several independent loads are in flight per thread.

constexpr int kElementwiseThreads = 256;
constexpr int kRowUnroll = 2;

template <class T, int NV>
__global__ void __launch_bounds__(kElementwiseThreads)
    silu_and_mul_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t rows, int64_t d) {
  using IO = Io<T, NV>;
  const int64_t packs = d / NV;
  const int64_t pack_stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t row_stride = static_cast<int64_t>(gridDim.y) * blockDim.y;
  for (int64_t p = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; p < packs; p += pack_stride) {
    const int64_t c = p * NV;
#pragma unroll 1
    for (int64_t r0 = static_cast<int64_t>(blockIdx.y) * blockDim.y + threadIdx.y; r0 < rows;
         r0 += kRowUnroll * row_stride) {
      typename IO::Raw gate[kRowUnroll], up[kRowUnroll];
#pragma unroll
      for (int i = 0; i < kRowUnroll; ++i) {
        const int64_t r = r0 + i * row_stride;
        if (r < rows) {
          const T* xr = x + r * 2 * d + c;
          gate[i] = IO::ldg(xr);
          up[i] = IO::ldg(xr + d);
        }
      }
#pragma unroll
      for (int i = 0; i < kRowUnroll; ++i) {
        const int64_t r = r0 + i * row_stride;
        if (r < rows) {
          float g[NV], u[NV];
          IO::to_f(gate[i], g);
          IO::to_f(up[i], u);
#pragma unroll
          for (int e = 0; e < NV; ++e) g[e] = silu_gate<T>(g[e]) * u[e];
          IO::st(y + r * d + c, IO::from_f(g));
        }
      }
    }
  }
}

// y = act(y + bias) in place; bias may be null.
template <class T, int NV, Activation A>
__global__ void __launch_bounds__(kElementwiseThreads)
    bias_activation_kernel(T* __restrict__ y, const T* __restrict__ bias, int64_t rows, int64_t n) {
  using IO = Io<T, NV>;
  const int64_t packs = n / NV;
  const int64_t pack_stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t row_stride = static_cast<int64_t>(gridDim.y) * blockDim.y;
  for (int64_t p = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; p < packs; p += pack_stride) {
    const int64_t c = p * NV;
    float b[NV];
    if (bias != nullptr) {
      IO::to_f(IO::ldg(bias + c), b);
    } else {
#pragma unroll
      for (int e = 0; e < NV; ++e) b[e] = 0.0f;
    }
#pragma unroll 1
    for (int64_t r0 = static_cast<int64_t>(blockIdx.y) * blockDim.y + threadIdx.y; r0 < rows;
         r0 += kRowUnroll * row_stride) {
      typename IO::Raw v[kRowUnroll];
#pragma unroll
      for (int i = 0; i < kRowUnroll; ++i) {
        const int64_t r = r0 + i * row_stride;
        if (r < rows) v[i] = IO::ld(y + r * n + c);
      }
#pragma unroll
      for (int i = 0; i < kRowUnroll; ++i) {
        const int64_t r = r0 + i * row_stride;
        if (r < rows) {
          float f[NV];
          IO::to_f(v[i], f);
#pragma unroll
          for (int e = 0; e < NV; ++e) f[e] = activate<A>(f[e] + b[e]);
          IO::st(y + r * n + c, IO::from_f(f));
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------
// GEMV on tensor cores (fp16 / bf16; x, w 16-byte aligned and k % 8 == 0).
//
// A block computes kBn = 8 * NT output features for all m rows; its warps split k
// into 32 * U wide steps, dealt round-robin (warp i takes steps i, i + W, …), so
// that together they read each w row in contiguous runs of W * 64 * U bytes.
// Per step and 32-wide k tile, lane (g = lane / 4, t = lane % 4) loads 16 bytes:
//   w[n0 + 8j + g][k0 + 8t .. 8t + 7]  for each of the NT n-tiles j  (B operand)
//   x[g][k0 + 8t .. 8t + 7] and, for m > 8, x[g + 8][…]               (A operand)
// and runs two mma.m16n8k16 per n-tile: the first on elements 0-3 of each 8, the
// second on elements 4-7. In the first, mma's k index 2t + i (i = 0, 1) is k0 + 8t
// + i and 2t + 8 + i is k0 + 8t + 2 + i; in the second they are offset by 4. That
// is a permutation of the tile's 32 k and the same for A and B (it depends on the
// k index alone), so the products and their sums are those of x[m] . w[n].
// Rows >= m of A are zeros (their x loads are clamped to row m - 1 and discarded);
// w rows >= n are clamped to row n - 1 and their outputs not stored. The last
// steps, k % (32 U), go 32 at a time with 8-element chunks past k zeroed.
// The warps' partial D tiles are summed through shared memory, in warp order, then
// + bias, activation, one rounding, store.

constexpr int kGemvMaxThreads = 512;

template <bool kBf16>
__device__ __forceinline__ void mma_k32(float (&acc)[4], const uint4& a_lo, const uint4& a_hi,
                                        const uint4& b) {
  mma_m16n8k16<kBf16>(acc, a_lo.x, a_hi.x, a_lo.y, a_hi.y, b.x, b.y);
  mma_m16n8k16<kBf16>(acc, a_lo.z, a_hi.z, a_lo.w, a_hi.w, b.z, b.w);
}

__device__ __forceinline__ uint4 select_v4(bool keep, const uint4& v) {
  return keep ? v : make_uint4(0u, 0u, 0u, 0u);
}

template <int NT, int U>
struct MmaFragments {
  uint4 b[U][NT];  // w: 8 consecutive k of row n0 + 8j + g per lane
  uint4 a_lo[U];   // x row g
  uint4 a_hi[U];   // x row g + 8 (zeros unless kHi)
};

// Loads one warp step (U 32-wide k tiles); k0 = first k of the step + 8 * (lane % 4).
template <class T, int NT, int U, bool kHi>
__device__ __forceinline__ void load_mma_step(MmaFragments<NT, U>& f, const T* const (&w_row)[NT],
                                              const T* x_lo, const T* x_hi, bool lo_ok, bool hi_ok,
                                              int64_t k0) {
#pragma unroll
  for (int u = 0; u < U; ++u) {
#pragma unroll
    for (int j = 0; j < NT; ++j) f.b[u][j] = ld_stream_v4(w_row[j] + k0 + 32 * u);
  }
#pragma unroll
  for (int u = 0; u < U; ++u) {
    f.a_lo[u] = select_v4(lo_ok, __ldg(reinterpret_cast<const uint4*>(x_lo + k0 + 32 * u)));
    f.a_hi[u] = kHi ? select_v4(hi_ok, __ldg(reinterpret_cast<const uint4*>(x_hi + k0 + 32 * u)))
                    : make_uint4(0u, 0u, 0u, 0u);
  }
}

// Largest block of the tensor-core kernel: 64-feature blocks take ~170 registers
// per thread (two steps of fragments in flight, 32 accumulators), so at most 8
// warps; the narrower ones fit in 128 registers with 16 warps. (The launcher uses
// the 8- and 16-feature ones; benchmarks/cuda_gemv_shapes.cu sweeps them all.)
template <int NT>
constexpr int kMmaMaxThreads = NT >= 8 ? 256 : 512;

template <class T, int NT, int U, bool kHi>
__global__ void __launch_bounds__(kMmaMaxThreads<NT>)
    gemv_mma_kernel(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ bias,
                    T* __restrict__ y, int m, int64_t k, int64_t n, Activation act) {
  constexpr bool kBf16 = std::is_same_v<T, __nv_bfloat16>;
  constexpr int kBn = 8 * NT;
  constexpr int kLd = kBn + 8;  // reduction buffer row stride (floats): spreads rows over banks
  constexpr int kRows = kHi ? 16 : 8;
  constexpr int kStep = 32 * U;
  float* red = dynamic_smem<float>();  // [nwarps][kRows][kLd]

  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int nwarps = blockDim.x >> 5;
  const int g = lane >> 2;
  const int t8 = (lane & 3) * 8;
  const bool lo_ok = g < m;
  const bool hi_ok = kHi && g + 8 < m;
  // Rows >= m read row m - 1 (valid memory, the same addresses as its own lanes) and are zeroed.
  const T* x_lo = x + static_cast<int64_t>(min(g, m - 1)) * k;
  const T* x_hi = x + static_cast<int64_t>(min(g + 8, m - 1)) * k;

  const int64_t nblocks = (n + kBn - 1) / kBn;
  const int64_t full = k / kStep;
  const int tail_tiles = static_cast<int>((k - full * kStep + 31) / 32);  // <= U
  for (int64_t nb = blockIdx.x; nb < nblocks; nb += gridDim.x) {
    const int64_t n0 = nb * kBn;
    const T* w_row[NT];
#pragma unroll
    for (int j = 0; j < NT; ++j) w_row[j] = w + min64(n0 + 8 * j + g, n - 1) * k;

    float acc[NT][4];
#pragma unroll
    for (int j = 0; j < NT; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;

    // Software pipeline: the loads of the warp's next step are issued (in their own
    // basic block) before the MMAs of this one, so that a warp always has two steps
    // of loads in flight and never waits on a load it has just issued.
    MmaFragments<NT, U> cur, next;
    int64_t s = warp;
    if (s < full) load_mma_step<T, NT, U, kHi>(cur, w_row, x_lo, x_hi, lo_ok, hi_ok, s * kStep + t8);
    for (; s < full; s += nwarps) {
      if (s + nwarps < full) {
        load_mma_step<T, NT, U, kHi>(next, w_row, x_lo, x_hi, lo_ok, hi_ok, (s + nwarps) * kStep + t8);
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
#pragma unroll
        for (int j = 0; j < NT; ++j) mma_k32<kBf16>(acc[j], cur.a_lo[u], cur.a_hi[u], cur.b[u][j]);
      }
      cur = next;
    }
    // k % kStep: 32-wide tiles, one per warp; a lane's 8-element chunk is wholly
    // inside [0, k) or wholly outside (k % 8 == 0). Outside chunks load offset 0
    // (valid: k >= 8 here) and are zeroed.
    for (int tile = warp; tile < tail_tiles; tile += nwarps) {
      const int64_t kc = full * kStep + 32 * tile + t8;
      const bool in = kc < k;
      const int64_t k0 = in ? kc : 0;
      const uint4 lo = select_v4(in && lo_ok, __ldg(reinterpret_cast<const uint4*>(x_lo + k0)));
      const uint4 hi = kHi ? select_v4(in && hi_ok, __ldg(reinterpret_cast<const uint4*>(x_hi + k0)))
                           : make_uint4(0u, 0u, 0u, 0u);
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        const uint4 b = select_v4(in, ld_stream_v4(w_row[j] + k0));
        mma_k32<kBf16>(acc[j], lo, hi, b);
      }
    }

    // D fragment: acc[j][0..1] = rows g, columns 8j + 2t + {0, 1}; acc[j][2..3] = row g + 8.
#pragma unroll
    for (int j = 0; j < NT; ++j) {
      const int c = 8 * j + (lane & 3) * 2;
      float* row_g = red + (warp * kRows + g) * kLd + c;
      if (lo_ok) *reinterpret_cast<float2*>(row_g) = make_float2(acc[j][0], acc[j][1]);
      if (hi_ok) *reinterpret_cast<float2*>(row_g + 8 * kLd) = make_float2(acc[j][2], acc[j][3]);
    }
    __syncthreads();
    for (int i = threadIdx.x; i < m * kBn; i += blockDim.x) {
      const int r = i / kBn;
      const int c = i % kBn;
      const int64_t col = n0 + c;
      if (col < n) {
        float sum = red[r * kLd + c];
        for (int v = 1; v < nwarps; ++v) sum += red[(v * kRows + r) * kLd + c];
        if (bias != nullptr) sum += Elem<T>::to_f(bias[col]);
        y[static_cast<int64_t>(r) * n + col] = Elem<T>::from_f(activate(sum, act));
      }
    }
    __syncthreads();  // `red` is rewritten for the next n-block
  }
}

// ---------------------------------------------------------------------------
// GEMV on CUDA cores: fp32, and 16-bit layouts the tensor-core kernel does not
// take (misaligned pointers, k % 8 != 0). A block computes NR output features for
// MB >= m rows; its warps split k into steps dealt round-robin; per step a lane
// covers UU chunks of VW consecutive k (16-byte loads when kVec, else scalars),
// chunks 32 * VW apart so that the warp reads contiguous runs. Each lane keeps
// MB x NR fp32 accumulators; a reduce-scatter over the warp and a sum over the
// warps through shared memory (both in a fixed order) give the dot products.

template <class T, int VW, bool kVec, bool kStream, bool kCheck>
__device__ __forceinline__ void load_chunk(const T* row, int64_t kb, int64_t k, float (&f)[VW]) {
  if constexpr (kVec) {
    // kb % VW == 0 and k % VW == 0: the chunk is wholly inside or outside [0, k).
    const bool in = !kCheck || kb < k;
    const T* p = row + (in ? kb : 0);
    uint4 raw = kStream ? ld_stream_v4(p) : __ldg(reinterpret_cast<const uint4*>(p));
    if (kCheck) raw = select_v4(in, raw);
    Elem<T>::unpack(raw, f);
  } else {
    static_assert(VW == 1, "scalar chunks are single elements");
    f[0] = (!kCheck || kb < k) ? Elem<T>::to_f(__ldg(row + kb)) : 0.0f;
  }
}

template <class T, int MB, int NR, int UU, bool kVec, bool kCheck>
__device__ __forceinline__ void gemv_simt_step(float (&acc)[MB * NR], const T* const (&w_row)[NR],
                                               const T* __restrict__ x, int m, int64_t k, int64_t kb0) {
  constexpr int VW = kVec ? Elem<T>::kVec : 1;
  float wf[UU][NR][VW];
#pragma unroll
  for (int u = 0; u < UU; ++u) {
#pragma unroll
    for (int j = 0; j < NR; ++j) {
      load_chunk<T, VW, kVec, true, kCheck>(w_row[j], kb0 + 32 * VW * u, k, wf[u][j]);
    }
  }
  // Rows r >= m (MB rounds m up) re-read row m - 1 and their sums are discarded:
  // unconditional loads that the compiler can issue ahead of the FMAs.
#pragma unroll
  for (int r = 0; r < MB; ++r) {
    const T* xr = x + static_cast<int64_t>(min(r, m - 1)) * k;
#pragma unroll
    for (int u = 0; u < UU; ++u) {
      float xf[VW];
      load_chunk<T, VW, kVec, false, kCheck>(xr, kb0 + 32 * VW * u, k, xf);
#pragma unroll
      for (int j = 0; j < NR; ++j) {
#pragma unroll
        for (int e = 0; e < VW; ++e) acc[r * NR + j] = fmaf(xf[e], wf[u][j][e], acc[r * NR + j]);
      }
    }
  }
}

// 16 rows x 4 features of accumulators plus the x rows loaded ahead need more
// than 128 registers: at most 8 warps there.
template <int MB>
constexpr int kSimtMaxThreads = MB >= 16 ? 256 : kGemvMaxThreads;

template <class T, int MB, int NR, int UU, bool kVec>
__global__ void __launch_bounds__(kSimtMaxThreads<MB>)
    gemv_simt_kernel(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ bias,
                     T* __restrict__ y, int m, int64_t k, int64_t n, Activation act) {
  constexpr int VW = kVec ? Elem<T>::kVec : 1;
  constexpr int kStep = 32 * VW * UU;
  constexpr int kN = MB * NR;  // accumulators per lane, a power of two
  static_assert((kN & (kN - 1)) == 0, "MB * NR must be a power of two");
  constexpr int kLog2N = kN >= 32 ? 5 : (kN >= 16 ? 4 : (kN >= 8 ? 3 : (kN >= 4 ? 2 : (kN >= 2 ? 1 : 0))));
  float* red = dynamic_smem<float>();  // [nwarps][kN]

  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int nwarps = blockDim.x >> 5;
  const int64_t nblocks = (n + NR - 1) / NR;
  const int64_t full = k / kStep;
  const int64_t steps = (k + kStep - 1) / kStep;
  for (int64_t nb = blockIdx.x; nb < nblocks; nb += gridDim.x) {
    const int64_t n0 = nb * NR;
    const T* w_row[NR];
#pragma unroll
    for (int j = 0; j < NR; ++j) w_row[j] = w + min64(n0 + j, n - 1) * k;
    float acc[kN];
#pragma unroll
    for (int i = 0; i < kN; ++i) acc[i] = 0.0f;

    int64_t s = warp;
    for (; s < full; s += nwarps) {
      gemv_simt_step<T, MB, NR, UU, kVec, false>(acc, w_row, x, m, k, s * kStep + lane * VW);
    }
    if (s < steps) gemv_simt_step<T, MB, NR, UU, kVec, true>(acc, w_row, x, m, k, s * kStep + lane * VW);

    warp_reduce_scatter<kN, 16>(acc, lane);
    if constexpr (kN >= 32) {
#pragma unroll
      for (int i = 0; i < kN / 32; ++i) red[warp * kN + lane * (kN / 32) + i] = acc[i];
    } else {
      constexpr int kShift = 5 - kLog2N;
      if ((lane & ((1 << kShift) - 1)) == 0) red[warp * kN + (lane >> kShift)] = acc[0];
    }
    __syncthreads();
    for (int i = threadIdx.x; i < m * NR; i += blockDim.x) {
      const int r = i / NR;
      const int j = i % NR;
      const int64_t col = n0 + j;
      if (col < n) {
        float sum = red[r * NR + j];
        for (int v = 1; v < nwarps; ++v) sum += red[v * kN + r * NR + j];
        if (bias != nullptr) sum += Elem<T>::to_f(bias[col]);
        y[static_cast<int64_t>(r) * n + col] = Elem<T>::from_f(activate(sum, act));
      }
    }
    __syncthreads();
  }
}

// ===========================================================================
// Host side.

constexpr int kMaxDevices = 64;

struct DeviceInfo {
  int id = 0;
  int sms = 0;
  int cc_major = 0;
  int warp_size = 0;
};

// SM count, compute capability and warp size of the current device, cached per device.
cudaError_t current_device(DeviceInfo* info) {
  static std::atomic<int> sms_cache[kMaxDevices];
  static std::atomic<int> cc_cache[kMaxDevices];
  static std::atomic<int> warp_cache[kMaxDevices];
  int dev = 0;
  cudaError_t err = cudaGetDevice(&dev);
  if (err != cudaSuccess) return err;
  info->id = dev;
  const bool cacheable = dev >= 0 && dev < kMaxDevices;
  if (cacheable) {
    info->sms = sms_cache[dev].load(std::memory_order_relaxed);
    info->cc_major = cc_cache[dev].load(std::memory_order_relaxed);
    info->warp_size = warp_cache[dev].load(std::memory_order_relaxed);
    if (info->sms > 0 && info->cc_major > 0 && info->warp_size > 0) return cudaSuccess;
  }
  err = cudaDeviceGetAttribute(&info->sms, cudaDevAttrMultiProcessorCount, dev);
  if (err != cudaSuccess) return err;
  err = cudaDeviceGetAttribute(&info->cc_major, cudaDevAttrComputeCapabilityMajor, dev);
  if (err != cudaSuccess) return err;
  err = cudaDeviceGetAttribute(&info->warp_size, cudaDevAttrWarpSize, dev);
  if (err != cudaSuccess) return err;
  if (info->warp_size != kWarpSize) return cudaErrorNotSupported;
  info->sms = std::max(info->sms, 1);
  info->cc_major = std::max(info->cc_major, 1);
  if (cacheable) {
    sms_cache[dev].store(info->sms, std::memory_order_relaxed);
    cc_cache[dev].store(info->cc_major, std::memory_order_relaxed);
    warp_cache[dev].store(info->warp_size, std::memory_order_relaxed);
  }
  return cudaSuccess;
}

// Per-kernel cache of resident blocks per SM, by device and warps per block (1, 2,
// 4, 8, 16: the shared memory a launch asks for is a function of the warps); 0 =
// not yet known. Lock-free: racing threads compute and store the same value.
constexpr int kWarpOptions = 5;
using OccupancySlots = std::atomic<int>[kMaxDevices * kWarpOptions];

int warp_option(int warps) { return warps >= 16 ? 4 : warps >= 8 ? 3 : warps >= 4 ? 2 : warps >= 2 ? 1 : 0; }

cudaError_t blocks_per_sm(const void* fn, OccupancySlots& slots, const DeviceInfo& dev, int warps, size_t smem,
                          int* blocks) {
  std::atomic<int>* slot =
      dev.id >= 0 && dev.id < kMaxDevices ? &slots[dev.id * kWarpOptions + warp_option(warps)] : nullptr;
  if (slot != nullptr) {
    *blocks = slot->load(std::memory_order_relaxed) - 1;
    if (*blocks >= 0) return cudaSuccess;
  }
  const cudaError_t err =
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks, fn, dev.warp_size * warps, smem);
  if (err != cudaSuccess) return err;
  if (slot != nullptr) slot->store(*blocks + 1, std::memory_order_relaxed);
  return cudaSuccess;
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// rms_norm ------------------------------------------------------------------

template <class T, int NV>
cudaError_t rms_norm_typed(const RmsNormArgs& a, const DeviceInfo& dev, cudaStream_t stream) {
  const T* x = static_cast<const T*>(a.x);
  const T* w = static_cast<const T*>(a.weight);
  T* y = static_cast<T*>(a.y);
  const int64_t packs = a.cols / NV;
  const float inv_cols = 1.0f / static_cast<float>(a.cols);
  const int64_t grid_cap = static_cast<int64_t>(dev.sms) * 64;
  if (packs <= dev.warp_size * kRmsWarpPacks) {
    const int64_t blocks = std::min(ceil_div(a.rows, kRmsWarpsPerBlock), grid_cap);
    rms_norm_warp_kernel<T, NV><<<static_cast<unsigned>(blocks), kRmsWarpsPerBlock * dev.warp_size, 0, stream>>>(
        x, w, y, a.rows, a.cols, inv_cols, a.eps);
  } else if (packs <= kRmsBlockThreads * kRmsBlockPacks) {
    // ~4 packs per thread: 64 bytes of each row in flight per thread.
    const int threads =
        static_cast<int>(std::min<int64_t>(kRmsBlockThreads, ceil_div(ceil_div(packs, 4), dev.warp_size) * dev.warp_size));
    const int64_t blocks = std::min(a.rows, grid_cap);
    rms_norm_block_kernel<T, NV><<<static_cast<unsigned>(blocks), threads, 0, stream>>>(
        x, w, y, a.rows, a.cols, inv_cols, a.eps);
  } else {
    const int64_t blocks = std::min(a.rows, grid_cap);
    rms_norm_loop_kernel<T, NV><<<static_cast<unsigned>(blocks), 1024, 0, stream>>>(
        x, w, y, a.rows, a.cols, inv_cols, a.eps);
  }
  return cudaGetLastError();
}

template <class T>
cudaError_t rms_norm_dispatch(const RmsNormArgs& a, const DeviceInfo& dev, cudaStream_t stream) {
  constexpr int kVec = Elem<T>::kVec;
  if (aligned16(a.x) && aligned16(a.weight) && aligned16(a.y) && a.cols % kVec == 0) {
    return rms_norm_typed<T, kVec>(a, dev, stream);
  }
  return rms_norm_typed<T, 1>(a, dev, stream);
}

// Element-wise launch shape over [rows, packs]: bx threads along packs (a power of
// two up to 256, fewer for short rows), the rest of the 256 along rows; enough
// blocks to fill the GPU, the kernels loop over the rest.
struct Elementwise2D {
  dim3 grid;
  dim3 block;
};

Elementwise2D plan_elementwise(int64_t rows, int64_t packs, const DeviceInfo& dev) {
  int bx = 1;
  while (bx < kElementwiseThreads && bx < packs) bx *= 2;
  const int by = kElementwiseThreads / bx;
  const int64_t max_blocks = static_cast<int64_t>(dev.sms) * (2048 / kElementwiseThreads);
  const int64_t gx = std::max<int64_t>(1, std::min(ceil_div(packs, bx), max_blocks));
  const int64_t gy = std::max<int64_t>(1, std::min({ceil_div(ceil_div(rows, by), kRowUnroll), int64_t{65535},
                                                     std::max<int64_t>(1, max_blocks / gx)}));
  return {dim3(static_cast<unsigned>(gx), static_cast<unsigned>(gy)), dim3(bx, by)};
}

// silu_and_mul ----------------------------------------------------------------

template <class T, int NV>
cudaError_t silu_and_mul_typed(const SiluAndMulArgs& a, const DeviceInfo& dev, cudaStream_t stream) {
  const Elementwise2D plan = plan_elementwise(a.rows, a.d / NV, dev);
  silu_and_mul_kernel<T, NV><<<plan.grid, plan.block, 0, stream>>>(static_cast<const T*>(a.x),
                                                                   static_cast<T*>(a.y), a.rows, a.d);
  return cudaGetLastError();
}

template <class T>
cudaError_t silu_and_mul_dispatch(const SiluAndMulArgs& a, const DeviceInfo& dev, cudaStream_t stream) {
  constexpr int kVec = Elem<T>::kVec;
  // x rows (2d), the up half (offset d) and y rows (d) stay 16-byte aligned iff d % kVec == 0.
  if (aligned16(a.x) && aligned16(a.y) && a.d % kVec == 0) return silu_and_mul_typed<T, kVec>(a, dev, stream);
  return silu_and_mul_typed<T, 1>(a, dev, stream);
}

// bias_activation ---------------------------------------------------------------

template <class T, int NV, Activation A>
cudaError_t bias_activation_typed(const LinearArgs& a, const DeviceInfo& dev, cudaStream_t stream) {
  const Elementwise2D plan = plan_elementwise(a.m, a.n / NV, dev);
  bias_activation_kernel<T, NV, A><<<plan.grid, plan.block, 0, stream>>>(
      static_cast<T*>(a.y), static_cast<const T*>(a.bias), a.m, a.n);
  return cudaGetLastError();
}

template <class T, int NV>
cudaError_t bias_activation_act(const LinearArgs& a, const DeviceInfo& dev, cudaStream_t stream) {
  switch (a.activation) {
    case Activation::none:
      return bias_activation_typed<T, NV, Activation::none>(a, dev, stream);
    case Activation::relu:
      return bias_activation_typed<T, NV, Activation::relu>(a, dev, stream);
    case Activation::gelu:
      return bias_activation_typed<T, NV, Activation::gelu>(a, dev, stream);
    case Activation::gelu_tanh:
      return bias_activation_typed<T, NV, Activation::gelu_tanh>(a, dev, stream);
    case Activation::silu:
      return bias_activation_typed<T, NV, Activation::silu>(a, dev, stream);
  }
  return cudaErrorInvalidValue;
}

template <class T>
cudaError_t bias_activation_dispatch(const LinearArgs& a, const DeviceInfo& dev, cudaStream_t stream) {
  constexpr int kVec = Elem<T>::kVec;
  if (aligned16(a.y) && (a.bias == nullptr || aligned16(a.bias)) && a.n % kVec == 0) {
    return bias_activation_act<T, kVec>(a, dev, stream);
  }
  return bias_activation_act<T, 1>(a, dev, stream);
}

// gemv ----------------------------------------------------------------------------
//
// Launch shape: for each candidate kernel (output features per block) and warp
// count, a model of the time, in weight rows read at full bandwidth: blocks run in
// waves of (SMs x resident blocks per SM); a wave moves its weight bytes at full
// bandwidth if it keeps enough bytes in flight (kInflightPerSm per SM, ~ bandwidth
// x latency), proportionally slower if not, and also pays kWaveFill of a latency's
// worth of bytes once (its blocks' first loads wait, its last ones drain); each
// block also re-reads x (m rows) from L2, counted at a quarter of the cost of weight
// rows. The cheapest wins; ties go to the earlier candidate (more features per
// block: less x traffic) and to more warps. Fitted on an H200 (one wave of 4-warp
// blocks beat four waves of 16-warp ones by 10 %: benchmarks/cuda_gemv_shapes.cu).

constexpr double kInflightPerSm = 64.0 * 1024.0;
constexpr double kWaveFill = 0.75;
constexpr double kXRowCost = 0.25;

struct GemvCandidate {
  const void* fn;
  OccupancySlots* occupancy;
  int rows_per_block;     // output features per block
  int64_t k_per_step;     // k per warp step
  double bytes_per_step;  // weight bytes a warp loads per step
  int steps_in_flight;    // steps a warp has loads in flight for (software pipeline depth)
  int max_warps;          // per block (the kernel's launch bounds)
  size_t smem_per_warp;
};

struct GemvChoice {
  int index = -1;
  int rows_per_block = 0;  // the chosen candidate's
  int64_t k_per_step = 0;
  int warps = 1;
  size_t smem = 0;
  int64_t blocks = 1;
};

cudaError_t choose_gemv(const GemvCandidate* cands, int count, const LinearArgs& a, const DeviceInfo& dev,
                        GemvChoice* choice) {
  double best = 0.0;
  const double target = kInflightPerSm * dev.sms;
  for (int i = 0; i < count; ++i) {
    const GemvCandidate& c = cands[i];
    const int64_t steps = ceil_div(a.k, c.k_per_step);
    const int64_t nblocks = ceil_div(a.n, c.rows_per_block);
    const double row_bytes = c.bytes_per_step / (c.rows_per_block * c.k_per_step) * static_cast<double>(a.k);
    const double fill_rows = kWaveFill * target / row_bytes;
    for (int warps = c.max_warps; warps >= 1; warps /= 2) {
      if (warps > 1 && warps / 2 >= steps) continue;  // at least half the warps get work
      const size_t smem = c.smem_per_warp * warps;
      int per_sm = 0;
      const cudaError_t err = blocks_per_sm(c.fn, *c.occupancy, dev, warps, smem, &per_sm);
      if (err != cudaSuccess) return err;
      if (per_sm <= 0) continue;
      const int64_t wave = static_cast<int64_t>(per_sm) * dev.sms;
      const int64_t busy_warps = std::min<int64_t>(warps, std::max<int64_t>(steps, 1));
      const int64_t depth =
          std::min<int64_t>(c.steps_in_flight, std::max<int64_t>(1, ceil_div(steps, warps)));
      const double block_inflight = c.bytes_per_step * static_cast<double>(busy_warps * depth);
      auto wave_cost = [&](int64_t blocks) {
        const double fill = std::min(1.0, static_cast<double>(blocks) * block_inflight / target);
        return static_cast<double>(blocks) * c.rows_per_block / fill;
      };
      const int64_t full_waves = nblocks / wave;
      const int64_t last = nblocks % wave;
      const int64_t waves = full_waves + (last > 0 ? 1 : 0);
      double cost = static_cast<double>(full_waves) * wave_cost(wave) + (last > 0 ? wave_cost(last) : 0.0);
      cost += fill_rows * static_cast<double>(waves);
      cost += kXRowCost * static_cast<double>(nblocks) * static_cast<double>(a.m);
      if (choice->index < 0 || cost < best * 0.97) {
        best = cost;
        choice->index = i;
        choice->rows_per_block = c.rows_per_block;
        choice->k_per_step = c.k_per_step;
        choice->warps = warps;
        choice->smem = smem;
        choice->blocks = nblocks;
      }
    }
  }
  return choice->index >= 0 ? cudaSuccess : cudaErrorInvalidConfiguration;
}

constexpr int64_t kMaxGridX = 0x7fffffff;

unsigned grid_x(int64_t blocks) {
  return static_cast<unsigned>(std::max<int64_t>(1, std::min(blocks, kMaxGridX)));
}

// Tensor-core path: candidates with 16 and 8 features per block, U 32-wide k tiles
// per step (2 KiB of w per warp step), two steps in flight. On an H200 the wider
// blocks (32 and 64 features) were slower at m = 1, 4 and 16 in every shape the
// launcher could give them (best 37.0-40.7 against 36.2-36.9 us for 128 MiB,
// benchmarks/cuda_gemv_shapes.cu).
template <int NT>
constexpr int kMmaU = 4 / NT;  // NT = 1, 2 (the sweep names its own U for the others)

template <class T, int NT, bool kHi>
cudaError_t launch_gemv_mma(const LinearArgs& a, const GemvChoice& c, const DeviceInfo& dev, cudaStream_t stream) {
  gemv_mma_kernel<T, NT, kMmaU<NT>, kHi><<<grid_x(c.blocks), dev.warp_size * c.warps, c.smem, stream>>>(
      static_cast<const T*>(a.x), static_cast<const T*>(a.w), static_cast<const T*>(a.bias),
      static_cast<T*>(a.y), static_cast<int>(a.m), a.k, a.n, a.activation);
  return cudaGetLastError();
}

template <class T, int NT, bool kHi>
GemvCandidate mma_candidate() {
  constexpr int kRows = kHi ? 16 : 8;
  static OccupancySlots occupancy;
  return {reinterpret_cast<const void*>(&gemv_mma_kernel<T, NT, kMmaU<NT>, kHi>),
          &occupancy,
          8 * NT,
          32 * kMmaU<NT>,
          32.0 * 16.0 * NT * kMmaU<NT>,
          2,
          kMmaMaxThreads<NT> / kWarpSize,
          static_cast<size_t>(kRows) * (8 * NT + 8) * sizeof(float)};
}

// The tensor-core launcher's choice (index 0: 16 features per block, 1: 8).
template <class T, bool kHi>
cudaError_t choose_tensor_core_gemv(const LinearArgs& a, const DeviceInfo& dev, GemvChoice* c) {
  const GemvCandidate cands[] = {mma_candidate<T, 2, kHi>(), mma_candidate<T, 1, kHi>()};
  return choose_gemv(cands, 2, a, dev, c);
}

template <class T, bool kHi>
cudaError_t gemv_tensor_cores(const LinearArgs& a, const DeviceInfo& dev, cudaStream_t stream) {
  GemvChoice c;
  const cudaError_t err = choose_tensor_core_gemv<T, kHi>(a, dev, &c);
  if (err != cudaSuccess) return err;
  return c.index == 0 ? launch_gemv_mma<T, 2, kHi>(a, c, dev, stream) : launch_gemv_mma<T, 1, kHi>(a, c, dev, stream);
}

// CUDA-core path: MB >= m rows, NR features per block (more when there are few
// rows, to re-read x less), UU chunks per lane per step.
template <int MB>
constexpr int kSimtRows = MB <= 4 ? 8 : 4;

template <class T, int MB, bool kVec>
cudaError_t gemv_cuda_cores_mb(const LinearArgs& a, const DeviceInfo& dev, cudaStream_t stream) {
  constexpr int NR = kSimtRows<MB>;
  constexpr int VW = kVec ? Elem<T>::kVec : 1;
  constexpr int UU = kVec ? 1 : 16 / static_cast<int>(sizeof(T));  // 16 bytes of each w row per lane
  static OccupancySlots occupancy;
  const GemvCandidate cand = {reinterpret_cast<const void*>(&gemv_simt_kernel<T, MB, NR, UU, kVec>),
                              &occupancy,
                              NR,
                              32 * VW * UU,
                              32.0 * NR * UU * VW * sizeof(T),
                              1,
                              kSimtMaxThreads<MB> / kWarpSize,
                              MB * NR * sizeof(float)};
  GemvChoice c;
  const cudaError_t err = choose_gemv(&cand, 1, a, dev, &c);
  if (err != cudaSuccess) return err;
  gemv_simt_kernel<T, MB, NR, UU, kVec><<<grid_x(c.blocks), dev.warp_size * c.warps, c.smem, stream>>>(
      static_cast<const T*>(a.x), static_cast<const T*>(a.w), static_cast<const T*>(a.bias),
      static_cast<T*>(a.y), static_cast<int>(a.m), a.k, a.n, a.activation);
  return cudaGetLastError();
}

template <class T, bool kVec>
cudaError_t gemv_cuda_cores(const LinearArgs& a, const DeviceInfo& dev, cudaStream_t stream) {
  if constexpr (std::is_same_v<T, float>) {
    if (a.m <= 1) return gemv_cuda_cores_mb<T, 1, kVec>(a, dev, stream);
    if (a.m <= 2) return gemv_cuda_cores_mb<T, 2, kVec>(a, dev, stream);
    if (a.m <= 4) return gemv_cuda_cores_mb<T, 4, kVec>(a, dev, stream);
    if (a.m <= 8) return gemv_cuda_cores_mb<T, 8, kVec>(a, dev, stream);
    return gemv_cuda_cores_mb<T, 16, kVec>(a, dev, stream);
  } else {  // fallback for 16-bit types: fewer instantiations
    if (a.m <= 1) return gemv_cuda_cores_mb<T, 1, kVec>(a, dev, stream);
    if (a.m <= 4) return gemv_cuda_cores_mb<T, 4, kVec>(a, dev, stream);
    return gemv_cuda_cores_mb<T, 16, kVec>(a, dev, stream);
  }
}

template <class T>
cudaError_t gemv_dispatch(const LinearArgs& a, const DeviceInfo& dev, cudaStream_t stream) {
  constexpr int kVec = Elem<T>::kVec;
  const bool vec = aligned16(a.x) && aligned16(a.w) && a.k % kVec == 0;
  if constexpr (std::is_same_v<T, float>) {
    return vec ? gemv_cuda_cores<T, true>(a, dev, stream) : gemv_cuda_cores<T, false>(a, dev, stream);
  } else {
    if (!vec || dev.cc_major < 8) return gemv_cuda_cores<T, false>(a, dev, stream);
    return a.m > 8 ? gemv_tensor_cores<T, true>(a, dev, stream) : gemv_tensor_cores<T, false>(a, dev, stream);
  }
}

bool valid_dtype(DType t) { return t == DType::f32 || t == DType::f16 || t == DType::bf16; }

bool valid_activation(Activation a) {
  return a == Activation::none || a == Activation::relu || a == Activation::gelu ||
         a == Activation::gelu_tanh || a == Activation::silu;
}

template <class F>
cudaError_t dispatch_dtype(DType t, F&& f) {
  switch (t) {
    case DType::f32:
      return f(float{});
    case DType::f16:
      return f(__half{});
    case DType::bf16:
      return f(__nv_bfloat16{});
  }
  return cudaErrorInvalidValue;
}

}  // namespace

cudaError_t launch_rms_norm(const RmsNormArgs& args, cudaStream_t stream) {
  if (!valid_dtype(args.dtype) || args.rows < 0 || args.cols < 0) return cudaErrorInvalidValue;
  if (args.rows == 0 || args.cols == 0) return cudaSuccess;  // nothing to write
  DeviceInfo dev;
  const cudaError_t err = current_device(&dev);
  if (err != cudaSuccess) return err;
  return dispatch_dtype(args.dtype,
                        [&](auto tag) { return rms_norm_dispatch<decltype(tag)>(args, dev, stream); });
}

cudaError_t launch_silu_and_mul(const SiluAndMulArgs& args, cudaStream_t stream) {
  if (!valid_dtype(args.dtype) || args.rows < 0 || args.d < 0) return cudaErrorInvalidValue;
  if (args.rows == 0 || args.d == 0) return cudaSuccess;
  DeviceInfo dev;
  const cudaError_t err = current_device(&dev);
  if (err != cudaSuccess) return err;
  return dispatch_dtype(args.dtype,
                        [&](auto tag) { return silu_and_mul_dispatch<decltype(tag)>(args, dev, stream); });
}

cudaError_t launch_gemv(const LinearArgs& args, cudaStream_t stream) {
  if (!valid_dtype(args.dtype) || !valid_activation(args.activation) || args.m < 0 || args.m > kGemvMaxRows ||
      args.k < 0 || args.n < 0) {
    return cudaErrorInvalidValue;
  }
  if (args.m == 0 || args.n == 0) return cudaSuccess;  // k == 0 still writes act(bias)
  DeviceInfo dev;
  const cudaError_t err = current_device(&dev);
  if (err != cudaSuccess) return err;
  return dispatch_dtype(args.dtype,
                        [&](auto tag) { return gemv_dispatch<decltype(tag)>(args, dev, stream); });
}

cudaError_t launch_bias_activation(const LinearArgs& args, cudaStream_t stream) {
  if (!valid_dtype(args.dtype) || !valid_activation(args.activation) || args.m < 0 || args.n < 0) {
    return cudaErrorInvalidValue;
  }
  if (args.m == 0 || args.n == 0) return cudaSuccess;
  if (args.bias == nullptr && args.activation == Activation::none) return cudaSuccess;  // identity
  DeviceInfo dev;
  const cudaError_t err = current_device(&dev);
  if (err != cudaSuccess) return err;
  return dispatch_dtype(args.dtype,
                        [&](auto tag) { return bias_activation_dispatch<decltype(tag)>(args, dev, stream); });
}

}  // namespace ptkit::cuda

// The backend-neutral launchers of ptkit/gpu/launchers.h, for the shared op layer.
namespace ptkit::gpu {
namespace {

LaunchError to_launch_error(cudaError_t status) {
  if (status == cudaSuccess) return {};
  return {cudaGetErrorName(status), cudaGetErrorString(status)};
}

cudaStream_t cuda_stream(Stream stream) { return static_cast<cudaStream_t>(stream); }

}  // namespace

LaunchError launch_rms_norm(const RmsNormArgs& args, Stream stream) {
  return to_launch_error(cuda::launch_rms_norm(args, cuda_stream(stream)));
}

LaunchError launch_silu_and_mul(const SiluAndMulArgs& args, Stream stream) {
  return to_launch_error(cuda::launch_silu_and_mul(args, cuda_stream(stream)));
}

// Every CUDA device has 32-lane warps, all the GEMV kernels assume.
bool gemv_runs_on(Stream) { return true; }

LaunchError launch_gemv(const LinearArgs& args, Stream stream) {
  return to_launch_error(cuda::launch_gemv(args, cuda_stream(stream)));
}

LaunchError launch_bias_activation(const LinearArgs& args, Stream stream) {
  return to_launch_error(cuda::launch_bias_activation(args, cuda_stream(stream)));
}

}  // namespace ptkit::gpu
