// ptkit's GPU ops on the LibTorch stable ABI, one op layer for every GPU kernel tree:
// validation, allocation, the current device and stream. The kernels live in the
// backend's tree (cuda/, hip/ or xpu/) behind ptkit/gpu/launchers.h.
//
// CUDA and HIP register under the CUDA dispatch key (a ROCm build of torch runs AMD
// GPUs as "cuda" devices); XPU builds define PTKIT_GPU_XPU and register under XPU.
// Compiled by the host C++ compiler; no vendor header is included here.
#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>

#include <optional>
#include <string>

#include "ptkit/gpu/launchers.h"
#include "ptkit/op_support.h"

namespace {

using torch::stable::Tensor;
using namespace ptkit::op_support;
namespace g = ptkit::gpu;

#if defined(PTKIT_GPU_XPU)
constexpr const char* kDevice = "xpu";
bool on_this_backend(const Tensor& t) { return t.device().type() == torch::headeronly::DeviceType::XPU; }
#else
constexpr const char* kDevice = "cuda";
bool on_this_backend(const Tensor& t) { return t.is_cuda(); }
#endif

void check_device(const char* op, const char* arg, const Tensor& t, const Tensor& x) {
  check_defined(op, arg, t);
  check_defined(op, "x", x);
  PTKIT_CHECK(on_this_backend(t), "ptkit.", op, ": expected ", arg, " on a ", kDevice,
              " device (this is the ", kDevice, " kernel), got a tensor on another device");
  PTKIT_CHECK(t.get_device_index() == x.get_device_index(), "ptkit.", op, ": expected ", arg, " on ",
              kDevice, ":", x.get_device_index(), " (the device of x), got ", kDevice, ":",
              t.get_device_index());
}

// Runs on x's device and on torch's current stream there, as torch's own kernels do.
struct GpuContext {
  torch::stable::accelerator::DeviceGuard guard;
  g::Stream stream;

  explicit GpuContext(const Tensor& x)
      : guard(x.get_device_index()), stream(g::current_stream(x.get_device_index())) {}
};

void check_launch(const char* op, const g::LaunchError& error) {
  PTKIT_CHECK(!error, "ptkit.", op, ": ", kDevice, " kernel launch failed: ", error.name, ": ",
              error.message);
}

// y: contiguous, x's shape and dtype; x and weight contiguous.
void rms_norm_into(const char* op, const Tensor& x, const Tensor& weight, double eps, ptkit::DType dtype,
                   Tensor& y) {
  if (y.numel() == 0) return;
  GpuContext ctx(x);
  const g::RmsNormArgs args{x.const_data_ptr(), weight.const_data_ptr(), y.mutable_data_ptr(),
                            leading_rows(x), x.size(-1), static_cast<float>(eps), dtype};
  check_launch(op, g::launch_rms_norm(args, ctx.stream));
}

// The inputs' checks; returns x's dtype.
ptkit::DType check_rms_norm_inputs(const char* op, const Tensor& x, const Tensor& weight, double eps) {
  check_device(op, "x", x, x);
  check_device(op, "weight", weight, x);
  const auto dtype = static_cast<ptkit::DType>(float_dtype_index(op, "x", x));
  check_same_dtype(op, "weight", weight, x);
  check_rms_norm(x, weight, eps);
  return dtype;
}

Tensor rms_norm(Tensor x, Tensor weight, double eps) {
  const char* op = "rms_norm";
  const ptkit::DType dtype = check_rms_norm_inputs(op, x, weight, eps);
  x = as_contiguous(x);
  Tensor y = new_empty(x, sizes_with_last(x, x.size(-1)));
  rms_norm_into(op, x, as_contiguous(weight), eps, dtype, y);
  return y;
}

void rms_norm_out(Tensor x, Tensor weight, double eps, Tensor out) {
  const char* op = "rms_norm";
  const ptkit::DType dtype = check_rms_norm_inputs(op, x, weight, eps);
  check_device(op, "out", out, x);
  check_out_layout(op, out, x, sizes_with_last(x, x.size(-1)));
  rms_norm_into(op, as_contiguous(x), as_contiguous(weight), eps, dtype, out);
}

// y: contiguous, x's leading shape and half its last dimension; x contiguous.
void silu_and_mul_into(const char* op, const Tensor& x, ptkit::DType dtype, Tensor& y) {
  if (y.numel() == 0) return;
  GpuContext ctx(x);
  const g::SiluAndMulArgs args{x.const_data_ptr(), y.mutable_data_ptr(), leading_rows(x), x.size(-1) / 2,
                               dtype};
  check_launch(op, g::launch_silu_and_mul(args, ctx.stream));
}

// The input's checks; returns x's dtype.
ptkit::DType check_silu_and_mul_inputs(const char* op, const Tensor& x) {
  check_device(op, "x", x, x);
  const auto dtype = static_cast<ptkit::DType>(float_dtype_index(op, "x", x));
  check_silu_and_mul(x);
  return dtype;
}

Tensor silu_and_mul(Tensor x) {
  const char* op = "silu_and_mul";
  const ptkit::DType dtype = check_silu_and_mul_inputs(op, x);
  x = as_contiguous(x);
  Tensor y = new_empty(x, sizes_with_last(x, x.size(-1) / 2));
  silu_and_mul_into(op, x, dtype, y);
  return y;
}

void silu_and_mul_out(Tensor x, Tensor out) {
  const char* op = "silu_and_mul";
  const ptkit::DType dtype = check_silu_and_mul_inputs(op, x);
  check_device(op, "out", out, x);
  check_out_layout(op, out, x, sizes_with_last(x, x.size(-1) / 2));
  silu_and_mul_into(op, as_contiguous(x), dtype, out);
}

Tensor fused_linear(Tensor x, Tensor weight, std::optional<Tensor> bias, std::string activation) {
  const char* op = "fused_linear";
  const auto act = static_cast<ptkit::Activation>(activation_index(activation));
  check_device(op, "x", x, x);
  check_device(op, "weight", weight, x);
  const auto dtype = static_cast<ptkit::DType>(float_dtype_index(op, "x", x));
  check_same_dtype(op, "weight", weight, x);
  if (bias.has_value()) check_device(op, "bias", *bias, x);
  check_fused_linear(x, weight, bias);
  x = as_contiguous(x);
  weight = as_contiguous(weight);
  if (bias.has_value()) bias = as_contiguous(*bias);
  const int64_t kdim = x.size(-1);
  const int64_t n = weight.size(0);
  const int64_t rows = leading_rows(x);
  const std::vector<int64_t> out_sizes = sizes_with_last(x, n);
  GpuContext ctx(x);
  const void* bias_ptr = bias.has_value() ? bias->const_data_ptr() : nullptr;
  if (rows <= g::kGemvMaxRows && g::gemv_runs_on(ctx.stream)) {
    Tensor y = new_empty(x, out_sizes);
    if (y.numel() == 0) return y;
    const g::LinearArgs args{x.const_data_ptr(), weight.const_data_ptr(), bias_ptr, y.mutable_data_ptr(),
                             rows, kdim, n, act, dtype};
    check_launch(op, g::launch_gemv(args, ctx.stream));
    return y;
  }
  // Prefill-sized inputs: the vendor BLAS through torch's matmul, then bias and
  // activation in one pass.
  auto [x2d, y] = library_linear(x, weight, rows);
  if ((bias.has_value() || act != ptkit::Activation::none) && y.numel() > 0) {
    const g::LinearArgs args{x2d.const_data_ptr(), weight.const_data_ptr(), bias_ptr, y.mutable_data_ptr(),
                             rows, kdim, n, act, dtype};
    check_launch(op, g::launch_bias_activation(args, ctx.stream));
  }
  return torch::stable::reshape(y, out_sizes);
}

}  // namespace

#if defined(PTKIT_GPU_XPU)
STABLE_TORCH_LIBRARY_IMPL(ptkit, XPU, m) {
#else
STABLE_TORCH_LIBRARY_IMPL(ptkit, CUDA, m) {
#endif
  m.impl("rms_norm", TORCH_BOX(&rms_norm));
  m.impl("silu_and_mul", TORCH_BOX(&silu_and_mul));
  m.impl("fused_linear", TORCH_BOX(&fused_linear));
  m.impl("rms_norm.out", TORCH_BOX(&rms_norm_out));
  m.impl("silu_and_mul.out", TORCH_BOX(&silu_and_mul_out));
}
