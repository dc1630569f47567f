// The current stream for the shared op layer (ptkit/gpu/launchers.h) through torch's
// device-generic stable API: hipStream_t on a ROCm build of torch, sycl::queue* on an
// XPU build. Stream::nativeHandle() exists from the 2.13 stable ABI on, so libraries
// built with this file target torch >= 2.13 (the CUDA tree uses cuda/stream.cpp and
// keeps the 2.10 target).
#include <torch/csrc/stable/accelerator.h>

#include "ptkit/gpu/launchers.h"
#include "ptkit/op_support.h"

#if TORCH_FEATURE_VERSION < TORCH_VERSION_2_13_0
#error "gpu/current_stream.cpp needs TORCH_TARGET_VERSION >= 2.13 (Stream::nativeHandle)"
#endif

namespace ptkit::gpu {

Stream current_stream(int32_t device_index) {
  void* stream = torch::stable::accelerator::getCurrentStream(device_index).nativeHandle();
  PTKIT_CHECK(stream != nullptr, "ptkit: torch returned no current stream for device ", device_index);
  return stream;
}

}  // namespace ptkit::gpu
