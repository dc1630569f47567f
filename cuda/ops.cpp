// ptkit's CUDA ops on the LibTorch stable ABI: validation, allocation, the current
// device and stream; the kernels live in kernels/ (launchers in ptkit/cuda/kernels.h).
// Compiled by the host compiler; only the launchers are CUDA code.
#include <torch/csrc/inductor/aoti_torch/c/shim.h>  // aoti_torch_get_current_cuda_stream (USE_CUDA)
#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>

#include <optional>
#include <string>

#include "ptkit/cuda/kernels.h"
#include "ptkit/op_support.h"

namespace {

using torch::stable::Tensor;
using namespace ptkit::op_support;
namespace k = ptkit::cuda;

void check_cuda(const char* op, const char* arg, const Tensor& t, const Tensor& x) {
  PTKIT_CHECK(t.is_cuda(), "ptkit.", op, ": expected ", arg,
              " on a CUDA device (this is the CUDA kernel), got a tensor on another device");
  PTKIT_CHECK(t.get_device_index() == x.get_device_index(), "ptkit.", op, ": expected ", arg, " on cuda:",
              x.get_device_index(), " (the device of x), got cuda:", t.get_device_index());
}

// Runs on x's device and on torch's current stream there, as torch's own kernels do.
struct CudaContext {
  torch::stable::accelerator::DeviceGuard guard;
  cudaStream_t stream;

  explicit CudaContext(const Tensor& x) : guard(x.get_device_index()), stream(nullptr) {
    void* s = nullptr;
    PTKIT_CHECK(aoti_torch_get_current_cuda_stream(x.get_device_index(), &s) == AOTI_TORCH_SUCCESS,
                "ptkit: cannot get the current CUDA stream of device ", x.get_device_index());
    stream = static_cast<cudaStream_t>(s);
  }
};

void check_launch(const char* op, cudaError_t status) {
  PTKIT_CHECK(status == cudaSuccess, "ptkit.", op, ": CUDA kernel launch failed: ",
              cudaGetErrorName(status), ": ", cudaGetErrorString(status));
}

Tensor rms_norm(Tensor x, Tensor weight, double eps) {
  const char* op = "rms_norm";
  check_cuda(op, "x", x, x);
  check_cuda(op, "weight", weight, x);
  const auto dtype = static_cast<k::DType>(float_dtype_index(op, "x", x));
  check_same_dtype(op, "weight", weight, x);
  check_rms_norm(x, weight, eps);
  x = as_contiguous(x);
  weight = as_contiguous(weight);
  const int64_t cols = x.size(-1);
  Tensor y = new_empty(x, sizes_with_last(x, cols));
  if (y.numel() == 0) return y;
  CudaContext ctx(x);
  const k::RmsNormArgs args{x.const_data_ptr(), weight.const_data_ptr(), y.mutable_data_ptr(),
                            leading_rows(x), cols, static_cast<float>(eps), dtype};
  check_launch(op, k::launch_rms_norm(args, ctx.stream));
  return y;
}

Tensor silu_and_mul(Tensor x) {
  const char* op = "silu_and_mul";
  check_cuda(op, "x", x, x);
  const auto dtype = static_cast<k::DType>(float_dtype_index(op, "x", x));
  check_silu_and_mul(x);
  x = as_contiguous(x);
  const int64_t d = x.size(-1) / 2;
  Tensor y = new_empty(x, sizes_with_last(x, d));
  if (y.numel() == 0) return y;
  CudaContext ctx(x);
  const k::SiluAndMulArgs args{x.const_data_ptr(), y.mutable_data_ptr(), leading_rows(x), d, dtype};
  check_launch(op, k::launch_silu_and_mul(args, ctx.stream));
  return y;
}

Tensor fused_linear(Tensor x, Tensor weight, std::optional<Tensor> bias, std::string activation) {
  const char* op = "fused_linear";
  const auto act = static_cast<k::Activation>(activation_index(activation));
  check_cuda(op, "x", x, x);
  check_cuda(op, "weight", weight, x);
  const auto dtype = static_cast<k::DType>(float_dtype_index(op, "x", x));
  check_same_dtype(op, "weight", weight, x);
  if (bias.has_value()) check_cuda(op, "bias", *bias, x);
  check_fused_linear(x, weight, bias);
  x = as_contiguous(x);
  weight = as_contiguous(weight);
  if (bias.has_value()) bias = as_contiguous(*bias);
  const int64_t kdim = x.size(-1);
  const int64_t n = weight.size(0);
  const int64_t rows = leading_rows(x);
  const std::vector<int64_t> out_sizes = sizes_with_last(x, n);
  CudaContext ctx(x);
  const void* bias_ptr = bias.has_value() ? bias->const_data_ptr() : nullptr;
  if (rows <= k::kGemvMaxRows) {
    Tensor y = new_empty(x, out_sizes);
    if (y.numel() == 0) return y;
    const k::LinearArgs args{x.const_data_ptr(), weight.const_data_ptr(), bias_ptr, y.mutable_data_ptr(),
                             rows, kdim, n, act, dtype};
    check_launch(op, k::launch_gemv(args, ctx.stream));
    return y;
  }
  // Prefill-sized inputs: cuBLAS through torch's matmul, then bias and activation in one pass.
  auto [x2d, y] = library_linear(x, weight, rows);
  if ((bias.has_value() || act != k::Activation::none) && y.numel() > 0) {
    const k::LinearArgs args{x2d.const_data_ptr(), weight.const_data_ptr(), bias_ptr, y.mutable_data_ptr(),
                             rows, kdim, n, act, dtype};
    check_launch(op, k::launch_bias_activation(args, ctx.stream));
  }
  return torch::stable::reshape(y, out_sizes);
}

}  // namespace

STABLE_TORCH_LIBRARY_IMPL(ptkit, CUDA, m) {
  m.impl("rms_norm", TORCH_BOX(&rms_norm));
  m.impl("silu_and_mul", TORCH_BOX(&silu_and_mul));
  m.impl("fused_linear", TORCH_BOX(&fused_linear));
}
