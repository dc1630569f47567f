// CUDA kernels behind ptkit's GPU op layer: the CUDA-typed launchers that
// cuda/kernels/kernels.cu implements. The op layer (gpu/ops.cpp) calls them through
// the backend-neutral ptkit/gpu/launchers.h, adapted at the end of kernels.cu.
#pragma once

#include <cuda_runtime_api.h>

#include "ptkit/gpu/launchers.h"

namespace ptkit::cuda {

using ::ptkit::Activation;
using ::ptkit::DType;
using ::ptkit::gpu::kGemvMaxRows;
using ::ptkit::gpu::LinearArgs;
using ::ptkit::gpu::RmsNormArgs;
using ::ptkit::gpu::SiluAndMulArgs;

// Each returns the launch status (cudaGetLastError() after the launch).
cudaError_t launch_rms_norm(const RmsNormArgs& args, cudaStream_t stream);
cudaError_t launch_silu_and_mul(const SiluAndMulArgs& args, cudaStream_t stream);
cudaError_t launch_gemv(const LinearArgs& args, cudaStream_t stream);
cudaError_t launch_bias_activation(const LinearArgs& args, cudaStream_t stream);

}  // namespace ptkit::cuda
