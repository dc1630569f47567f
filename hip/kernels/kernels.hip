// HIP kernels behind ptkit's GPU op layer (the launchers of ptkit/gpu/launchers.h).
//
// Hand-written rather than hipified from cuda/: the CUDA GEMV runs on tensor cores
// through inline PTX (mma.sync) and 32-lane warps, neither of which translates. These
// kernels are written for any wavefront size (64 on CDNA gfx9xx, 32 on RDNA gfx11xx /
// gfx12xx): every reduction uses warpSize, never a literal.
//
// Every kernel loads fp32 / fp16 / bf16, computes in fp32 and rounds once, on the
// store. bf16 is handled as its 16 bits (no vendor bf16 header: they changed between
// ROCm 5 and 7). Index arithmetic is 64-bit and the kernels loop over whatever the
// grid does not cover.
#include <hip/hip_runtime.h>

#include <atomic>
#include <cstdint>
#include <cstring>

#include "ptkit/gpu/launchers.h"

namespace ptkit::gpu {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 65535;

// ---- element types: storage <-> fp32 ----------------------------------------------

struct Bf16 {
  uint16_t bits;
};

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(_Float16 v) { return static_cast<float>(v); }
__device__ __forceinline__ float to_float(Bf16 v) {
  const uint32_t bits = static_cast<uint32_t>(v.bits) << 16;
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

template <class T>
__device__ __forceinline__ T from_float(float v);
template <>
__device__ __forceinline__ float from_float<float>(float v) { return v; }
template <>
__device__ __forceinline__ _Float16 from_float<_Float16>(float v) { return static_cast<_Float16>(v); }
template <>
__device__ __forceinline__ Bf16 from_float<Bf16>(float v) {
  uint32_t bits;
  memcpy(&bits, &v, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return Bf16{static_cast<uint16_t>((bits >> 16) | 0x40u)};  // quiet NaN
  bits += 0x7fffu + ((bits >> 16) & 1u);  // round to nearest even, as torch does
  return Bf16{static_cast<uint16_t>(bits >> 16)};
}

// ---- epilogue -----------------------------------------------------------------------

// silu, gelu and gelu_tanh take their limits at +-inf (+inf, -0), where the formulas
// meet -inf * 0 = NaN: ptkit's semantics on every backend (docs/using.md).
__device__ __forceinline__ float minus_zero_at_minus_infinity(float v, float y) {
  return v == -INFINITY ? -0.0f : y;
}

__device__ __forceinline__ float activate(float v, Activation act) {
  switch (act) {
    case Activation::relu:
      return v > 0.f ? v : 0.f;
    case Activation::gelu:
      return minus_zero_at_minus_infinity(v, 0.5f * v * (1.f + erff(v * 0.70710678118654752f)));
    case Activation::gelu_tanh:
      return minus_zero_at_minus_infinity(
          v, 0.5f * v * (1.f + tanhf(0.79788456080286536f * (v + 0.044715f * v * v * v))));
    case Activation::silu:
      return minus_zero_at_minus_infinity(v, v / (1.f + expf(-v)));
    case Activation::none:
    default:
      return v;
  }
}

// ---- reductions ---------------------------------------------------------------------

__device__ __forceinline__ float warp_sum(float v) {
  for (int offset = warpSize / 2; offset > 0; offset /= 2) v += __shfl_xor(v, offset, warpSize);
  return v;
}

// Sum over the block; every thread gets the result. `scratch` holds one float per
// wavefront (kThreads / 32 at most) plus the broadcast slot.
__device__ float block_sum(float v, float* scratch) {
  const int lane = threadIdx.x % warpSize;
  const int wave = threadIdx.x / warpSize;
  const int waves = (blockDim.x + warpSize - 1) / warpSize;
  v = warp_sum(v);
  if (lane == 0) scratch[wave] = v;
  __syncthreads();
  if (wave == 0) {
    float total = lane < waves ? scratch[lane] : 0.f;
    total = warp_sum(total);
    if (lane == 0) scratch[kThreads / 32] = total;
  }
  __syncthreads();
  const float total = scratch[kThreads / 32];
  __syncthreads();  // scratch is reused by the next row
  return total;
}

// Largest value over the block, as block_sum.
__device__ float block_max(float v, float* scratch) {
  const int lane = threadIdx.x % warpSize;
  const int wave = threadIdx.x / warpSize;
  const int waves = (blockDim.x + warpSize - 1) / warpSize;
  for (int offset = warpSize / 2; offset > 0; offset /= 2) v = fmaxf(v, __shfl_xor(v, offset, warpSize));
  if (lane == 0) scratch[wave] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    float m = 0.f;
    for (int i = 0; i < waves; ++i) m = fmaxf(m, scratch[i]);
    scratch[kThreads / 32] = m;
  }
  __syncthreads();
  const float m = scratch[kThreads / 32];
  __syncthreads();  // scratch is reused next
  return m;
}

// A running sum with Kahan's compensation: the sum of n terms is off by a few
// roundings whatever n (a plain running sum drifts by up to n of them).
struct CompensatedSum {
  float sum = 0.f;
  float c = 0.f;
  __device__ __forceinline__ void add(float v) {
    const float y = v - c;
    const float t = sum + y;
    // Once the sum overflows it stays inf, as a plain sum does (inf - inf would make c,
    // then the sum, NaN, and hide the overflow from the rescue that looks for inf).
    c = isinf(t) ? 0.0f : (t - sum) - y;
    sum = t;
  }
};

// ---- kernels ------------------------------------------------------------------------

// One block per row: the row is read twice (sum of squares, then scale), from cache
// the second time for the row lengths of normalisation layers. Each thread's share of
// the squares is summed with Kahan's compensation, then a tree over the block: within
// a few fp32 roundings for any row length. A row whose fp32 squares overflow (all
// values finite, |x| above ~1.8e19) is summed again scaled by its largest |x|, so it
// normalises as in float64 instead of to 0 (as the CPU kernel and the reference).
template <class T>
__global__ void __launch_bounds__(kThreads) rms_norm_kernel(const T* __restrict__ x, const T* __restrict__ w,
                                                            T* __restrict__ y, int64_t rows, int64_t cols,
                                                            float eps) {
  __shared__ float scratch[kThreads / 32 + 1];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* xr = x + row * cols;
    T* yr = y + row * cols;
    CompensatedSum acc;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      const float v = to_float(xr[c]);
      acc.add(v * v);
    }
    const float sum = block_sum(acc.sum, scratch);
    if (isinf(sum)) {  // the same in every thread: the block takes this branch or not
      float m = 0.f;
      for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, fabsf(to_float(xr[c])));
      m = block_max(m, scratch);
      if (isfinite(m)) {  // every value finite: the squares overflowed
        float scaled = 0.f;
        for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
          const float v = to_float(xr[c]) / m;  // <= 1: no overflow
          scaled += v * v;
        }
        const float inv = rsqrtf(block_sum(scaled, scratch) / static_cast<float>(cols) + (eps / m) / m);
        for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
          yr[c] = from_float<T>((to_float(xr[c]) / m) * inv * to_float(w[c]));
        }
        continue;
      }
    }
    const float inv = rsqrtf(sum / static_cast<float>(cols) + eps);
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      yr[c] = from_float<T>(to_float(xr[c]) * inv * to_float(w[c]));
    }
  }
}

template <class T>
__global__ void __launch_bounds__(kThreads) silu_and_mul_kernel(const T* __restrict__ x, T* __restrict__ y,
                                                                int64_t rows, int64_t d) {
  const int64_t total = rows * d;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / d;
    const int64_t c = i - r * d;
    const float a = to_float(x[r * 2 * d + c]);
    const float b = to_float(x[r * 2 * d + d + c]);
    y[i] = from_float<T>(a / (1.f + expf(-a)) * b);
  }
}

// Decode GEMV: one wavefront per output feature n computes it for all m (<= 16) rows,
// so w is streamed from memory exactly once; lanes stride over k, then reduce.
template <class T>
__global__ void __launch_bounds__(kThreads) gemv_kernel(const T* __restrict__ x, const T* __restrict__ w,
                                                        const T* __restrict__ bias, T* __restrict__ y, int64_t m,
                                                        int64_t k, int64_t n, Activation act) {
  const int lane = threadIdx.x % warpSize;
  const int64_t waves_per_block = blockDim.x / warpSize;
  for (int64_t col = blockIdx.x * waves_per_block + threadIdx.x / warpSize; col < n;
       col += static_cast<int64_t>(gridDim.x) * waves_per_block) {
    float acc[kGemvMaxRows];
#pragma unroll
    for (int r = 0; r < kGemvMaxRows; ++r) acc[r] = 0.f;
    const T* wr = w + col * k;
    for (int64_t i = lane; i < k; i += warpSize) {
      const float wv = to_float(wr[i]);
#pragma unroll
      for (int r = 0; r < kGemvMaxRows; ++r) {
        if (r < m) acc[r] += to_float(x[r * k + i]) * wv;
      }
    }
    const float b = bias != nullptr ? to_float(bias[col]) : 0.f;
#pragma unroll
    for (int r = 0; r < kGemvMaxRows; ++r) {
      if (r < m) {  // uniform across the wavefront, so every lane joins the shuffles
        const float sum = warp_sum(acc[r]);
        if (lane == 0) y[r * n + col] = from_float<T>(activate(sum + b, act));
      }
    }
  }
}

template <class T>
__global__ void __launch_bounds__(kThreads) bias_activation_kernel(T* __restrict__ y, const T* __restrict__ bias,
                                                                   int64_t rows, int64_t n, Activation act) {
  const int64_t total = rows * n;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float b = bias != nullptr ? to_float(bias[i % n]) : 0.f;
    y[i] = from_float<T>(activate(to_float(y[i]) + b, act));
  }
}

// ---- launch helpers -----------------------------------------------------------------

int64_t blocks_for(int64_t work_items, int64_t per_block) {
  const int64_t blocks = (work_items + per_block - 1) / per_block;
  return blocks < 1 ? 1 : (blocks > kMaxBlocks ? kMaxBlocks : blocks);
}

// Wavefronts in a block of kThreads on the current device: its wavefront size is 64 on
// CDNA (gfx9xx) and 32 on RDNA (gfx11xx, gfx12xx), asked once per device. A device
// that cannot say gets wave64's count: the grid then loops, it is never wrong.
int64_t waves_per_block() {
  constexpr int kMaxDevices = 64;
  static std::atomic<int> known[kMaxDevices] = {};
  int device = 0;
  if (hipGetDevice(&device) != hipSuccess) {
    (void)hipGetLastError();  // not this launch's error
    return kThreads / 64;
  }
  const bool cached = device >= 0 && device < kMaxDevices;
  int warp = cached ? known[device].load(std::memory_order_relaxed) : 0;
  if (warp <= 0) {
    if (hipDeviceGetAttribute(&warp, hipDeviceAttributeWarpSize, device) != hipSuccess || warp <= 0) {
      (void)hipGetLastError();
      warp = 64;
    }
    if (cached) known[device].store(warp, std::memory_order_relaxed);
  }
  return kThreads / warp;
}

LaunchError launch_status() {
  const hipError_t status = hipGetLastError();
  if (status == hipSuccess) return {};
  return {hipGetErrorName(status), hipGetErrorString(status)};
}

LaunchError invalid(const char* what) { return {"ptkit::invalid_argument", what}; }

// Calls f(T{}) with the storage type of `dtype`.
template <class F>
LaunchError with_dtype(DType dtype, F&& f) {
  switch (dtype) {
    case DType::f32:
      return f(float{});
    case DType::f16:
      return f(_Float16{});
    case DType::bf16:
      return f(Bf16{});
  }
  return invalid("unknown dtype");
}

hipStream_t hip_stream(Stream stream) { return static_cast<hipStream_t>(stream); }

}  // namespace

LaunchError launch_rms_norm(const RmsNormArgs& a, Stream stream) {
  if (a.rows < 0 || a.cols <= 0) return invalid("rms_norm: rows must be >= 0 and cols > 0");
  return with_dtype(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    hipLaunchKernelGGL(rms_norm_kernel<T>, dim3(blocks_for(a.rows, 1)), dim3(kThreads), 0, hip_stream(stream),
                       static_cast<const T*>(a.x), static_cast<const T*>(a.weight), static_cast<T*>(a.y),
                       a.rows, a.cols, a.eps);
    return launch_status();
  });
}

LaunchError launch_silu_and_mul(const SiluAndMulArgs& a, Stream stream) {
  if (a.rows < 0 || a.d < 0) return invalid("silu_and_mul: rows and d must be >= 0");
  return with_dtype(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    hipLaunchKernelGGL(silu_and_mul_kernel<T>, dim3(blocks_for(a.rows * a.d, kThreads)), dim3(kThreads), 0,
                       hip_stream(stream), static_cast<const T*>(a.x), static_cast<T*>(a.y), a.rows, a.d);
    return launch_status();
  });
}

// The GEMV kernel is written for any wavefront size (warpSize, never a literal).
bool gemv_runs_on(Stream) { return true; }

LaunchError launch_gemv(const LinearArgs& a, Stream stream) {
  if (a.m < 0 || a.m > kGemvMaxRows || a.k < 0 || a.n < 0) {
    return invalid("gemv: expected 0 <= m <= 16, k >= 0 and n >= 0");
  }
  return with_dtype(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    // One wavefront per output feature: a block serves kThreads / warpSize features.
    hipLaunchKernelGGL(gemv_kernel<T>, dim3(blocks_for(a.n, waves_per_block())), dim3(kThreads), 0,
                       hip_stream(stream),
                       static_cast<const T*>(a.x), static_cast<const T*>(a.w), static_cast<const T*>(a.bias),
                       static_cast<T*>(a.y), a.m, a.k, a.n, a.activation);
    return launch_status();
  });
}

LaunchError launch_bias_activation(const LinearArgs& a, Stream stream) {
  if (a.m < 0 || a.n < 0) return invalid("bias_activation: m and n must be >= 0");
  return with_dtype(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    hipLaunchKernelGGL(bias_activation_kernel<T>, dim3(blocks_for(a.m * a.n, kThreads)), dim3(kThreads), 0,
                       hip_stream(stream), static_cast<T*>(a.y), static_cast<const T*>(a.bias), a.m, a.n,
                       a.activation);
    return launch_status();
  });
}

}  // namespace ptkit::gpu
