// CUDA kernels behind ptkit's CUDA ops: host-side launchers, torch-free.
//
// The op layer (cuda/ops.cpp, compiled by the host C++ compiler against torch's
// stable ABI) validates inputs, allocates outputs, picks the current stream and
// device, and calls these launchers. Each launcher enqueues its kernel(s) on
// `stream` and returns the launch status (cudaGetLastError() after the launch);
// it never synchronises and never throws.
#pragma once

#include <cstdint>

#include "ptkit/kernel_types.h"

// Only the runtime's opaque types are needed here, so the op layer does not have
// to include CUDA headers beyond cuda_runtime_api.h.
#include <cuda_runtime_api.h>

namespace ptkit::cuda {

using ::ptkit::Activation;
using ::ptkit::DType;

// y[r, :] = x[r, :] * rsqrt(mean(x[r, :]^2) + eps) * weight; fp32 accumulation.
// All tensors contiguous; rows = number of rows, cols = last dimension.
struct RmsNormArgs {
  const void* x;
  const void* weight;
  void* y;
  int64_t rows;
  int64_t cols;
  float eps;
  DType dtype;
};
cudaError_t launch_rms_norm(const RmsNormArgs& args, cudaStream_t stream);

// y[r, c] = silu(x[r, c]) * x[r, d + c]; x is [rows, 2d] and y [rows, d], contiguous.
struct SiluAndMulArgs {
  const void* x;
  void* y;
  int64_t rows;
  int64_t d;
  DType dtype;
};
cudaError_t launch_silu_and_mul(const SiluAndMulArgs& args, cudaStream_t stream);

// y[m, n] = act(sum_k x[m, k] * w[n, k] + bias[n]); x [m, k], w [n, k], y [m, n], contiguous.
struct LinearArgs {
  const void* x;
  const void* w;
  const void* bias;  // nullptr: no bias
  void* y;
  int64_t m;
  int64_t k;
  int64_t n;
  Activation activation;
  DType dtype;
};
constexpr int64_t kGemvMaxRows = 16;
// Decode GEMV (m <= kGemvMaxRows): bias and activation fused into the same kernel.
cudaError_t launch_gemv(const LinearArgs& args, cudaStream_t stream);
// Epilogue of the large-m path (after a library GEMM wrote y): y = act(y + bias) in place.
cudaError_t launch_bias_activation(const LinearArgs& args, cudaStream_t stream);

}  // namespace ptkit::cuda
