// The current CUDA stream for the shared op layer (ptkit/gpu/launchers.h), from
// torch's CUDA shim (libtorch_cuda; available to every stable-ABI target >= 2.10).
#include <torch/csrc/inductor/aoti_torch/c/shim.h>  // aoti_torch_get_current_cuda_stream (USE_CUDA)

#include "ptkit/gpu/launchers.h"
#include "ptkit/op_support.h"

namespace ptkit::gpu {

Stream current_stream(int32_t device_index) {
  void* stream = nullptr;
  PTKIT_CHECK(aoti_torch_get_current_cuda_stream(device_index, &stream) == AOTI_TORCH_SUCCESS,
              "ptkit: cannot get the current CUDA stream of device ", device_index);
  return stream;
}

}  // namespace ptkit::gpu
