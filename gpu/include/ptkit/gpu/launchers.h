// The contract between ptkit's GPU op layer (gpu/ops.cpp) and each GPU kernel tree
// (cuda/, hip/, xpu/): argument structs and launcher functions, torch-free and free
// of any vendor header, so that one op layer serves every GPU backend.
//
// A launcher enqueues its kernel(s) on `stream` and returns a LaunchError that is
// empty when the launch succeeded; it never synchronises and never throws.
#pragma once

#include <cstdint>

#include "ptkit/kernel_types.h"

namespace ptkit::gpu {

// cudaStream_t, hipStream_t or sycl::queue*: opaque to the op layer.
using Stream = void*;

// The backend's current stream on device `device_index`: the one torch's own kernels
// use there, so ptkit's kernels are ordered with them (each tree implements it).
Stream current_stream(int32_t device_index);

// Empty on success; otherwise the runtime's error name and message (static strings,
// or thread-local storage valid until the next launch on this thread).
struct LaunchError {
  const char* name = nullptr;
  const char* message = nullptr;
  explicit operator bool() const { return name != nullptr; }
};

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
LaunchError launch_rms_norm(const RmsNormArgs& args, Stream stream);

// y[r, c] = silu(x[r, c]) * x[r, d + c]; x is [rows, 2d] and y [rows, d], contiguous.
struct SiluAndMulArgs {
  const void* x;
  void* y;
  int64_t rows;
  int64_t d;
  DType dtype;
};
LaunchError launch_silu_and_mul(const SiluAndMulArgs& args, Stream stream);

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
// Decode shapes (m <= kGemvMaxRows) take the GEMV launcher, bias and activation fused,
// where the device meets the GEMV kernel's preconditions (gemv_runs_on: e.g. the SYCL
// kernel needs sub-groups of 16); elsewhere the op layer takes the library GEMM path.
constexpr int64_t kGemvMaxRows = 16;
bool gemv_runs_on(Stream stream);
LaunchError launch_gemv(const LinearArgs& args, Stream stream);
// Epilogue of the large-m path (after a library GEMM wrote y): y = act(y + bias) in place.
LaunchError launch_bias_activation(const LinearArgs& args, Stream stream);

}  // namespace ptkit::gpu
