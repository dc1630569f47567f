// ptkit's CPU ops on the LibTorch stable ABI: validation, output allocation and
// threading; the arithmetic lives in kernels/ (torch-free, one copy per ISA level).
//
// The schemas are defined once, in Python (ptkit/ops/_schemas.py); this file only
// registers CPU implementations for them.
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>

#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "ptkit/cpu/kernels.h"

namespace {

using torch::headeronly::ScalarType;
using torch::stable::Tensor;
namespace k = ptkit::cpu;

// Invalid input: the message alone ("ptkit.<op>: expected …, got …"), no source location.
// torch turns the exception into a Python RuntimeError.
template <typename... Parts>
[[noreturn]] void fail(const Parts&... parts) {
  std::ostringstream message;
  (message << ... << parts);
  throw std::runtime_error(message.str());
}

#define PTKIT_CHECK(cond, ...) \
  do {                         \
    if (!(cond)) fail(__VA_ARGS__); \
  } while (false)

const char* dtype_name(ScalarType t) {
  switch (t) {
    case ScalarType::Float:
      return "float32";
    case ScalarType::Half:
      return "float16";
    case ScalarType::BFloat16:
      return "bfloat16";
    case ScalarType::Double:
      return "float64";
    case ScalarType::Long:
      return "int64";
    case ScalarType::Int:
      return "int32";
    case ScalarType::Short:
      return "int16";
    case ScalarType::Char:
      return "int8";
    case ScalarType::Byte:
      return "uint8";
    case ScalarType::Bool:
      return "bool";
    case ScalarType::ComplexFloat:
      return "complex64";
    case ScalarType::ComplexDouble:
      return "complex128";
    default:
      return "an unsupported dtype";
  }
}

std::string shape_of(const Tensor& t) {
  std::ostringstream s;
  s << "[";
  for (int64_t i = 0; i < t.dim(); ++i) s << (i ? ", " : "") << t.size(i);
  s << "]";
  return s.str();
}

k::DType kernel_dtype(const char* op, const char* arg, const Tensor& t) {
  switch (t.scalar_type()) {
    case ScalarType::Float:
      return k::DType::f32;
    case ScalarType::Half:
      return k::DType::f16;
    case ScalarType::BFloat16:
      return k::DType::bf16;
    default:
      fail("ptkit.", op, ": expected ", arg,
                      " of dtype float32, float16 or bfloat16, got ", dtype_name(t.scalar_type()));
  }
  return k::DType::f32;
}

void check_cpu(const char* op, const char* arg, const Tensor& t) {
  PTKIT_CHECK(t.is_cpu(), "ptkit.", op, ": expected ", arg,
                  " on the CPU (this is the CPU kernel), got a tensor on another device");
}

void check_same_dtype(const char* op, const char* arg, const Tensor& t, const Tensor& x) {
  PTKIT_CHECK(t.scalar_type() == x.scalar_type(), "ptkit.", op, ": expected ", arg,
                  " of dtype ", dtype_name(x.scalar_type()), " (the dtype of x), got ",
                  dtype_name(t.scalar_type()));
}

Tensor as_contiguous(const Tensor& t) {
  return t.is_contiguous() ? t : torch::stable::contiguous(t);
}

std::vector<int64_t> sizes_with_last(const Tensor& t, int64_t last) {
  std::vector<int64_t> sizes;
  for (int64_t i = 0; i + 1 < t.dim(); ++i) sizes.push_back(t.size(i));
  sizes.push_back(last);
  return sizes;
}

Tensor new_empty(const Tensor& like, const std::vector<int64_t>& sizes) {
  return torch::stable::empty(sizes, like.scalar_type(), std::nullopt, like.device());
}

// Aim for slices of at least this many elements per thread: smaller ones cost
// more in scheduling than they gain.
constexpr int64_t kMinElementsPerTask = 32768;

Tensor rms_norm(Tensor x, Tensor weight, double eps) {
  const char* op = "rms_norm";
  check_cpu(op, "x", x);
  check_cpu(op, "weight", weight);
  const k::DType dtype = kernel_dtype(op, "x", x);
  check_same_dtype(op, "weight", weight, x);
  PTKIT_CHECK(x.dim() >= 1, "ptkit.rms_norm: expected x with at least 1 dimension, got a 0-d tensor");
  const int64_t cols = x.size(-1);
  PTKIT_CHECK(weight.dim() == 1 && weight.size(0) == cols, "ptkit.rms_norm: expected weight of shape [",
                  cols, "] (the last dimension of x), got ", shape_of(weight));
  PTKIT_CHECK(eps >= 0.0, "ptkit.rms_norm: expected eps >= 0, got ", eps);

  x = as_contiguous(x);
  weight = as_contiguous(weight);
  Tensor y = new_empty(x, sizes_with_last(x, cols));
  if (x.numel() == 0) return y;
  const int64_t rows = x.numel() / cols;
  const k::RmsNormArgs args{x.const_data_ptr(), weight.const_data_ptr(), y.mutable_data_ptr(),
                            cols, cols, cols, static_cast<float>(eps), dtype};
  const k::RmsNormFn fn = k::select_kernels().rms_norm;
  const int64_t grain = std::max<int64_t>(1, kMinElementsPerTask / cols);
  torch::stable::parallel_for(0, rows, grain, [&](int64_t b, int64_t e) { fn(args, b, e); });
  return y;
}

Tensor silu_and_mul(Tensor x) {
  const char* op = "silu_and_mul";
  check_cpu(op, "x", x);
  const k::DType dtype = kernel_dtype(op, "x", x);
  PTKIT_CHECK(x.dim() >= 1, "ptkit.silu_and_mul: expected x with at least 1 dimension, got a 0-d tensor");
  const int64_t width = x.size(-1);
  PTKIT_CHECK(width % 2 == 0, "ptkit.silu_and_mul: expected an even last dimension (gate and up "
                  "halves), got ", width);
  const int64_t d = width / 2;
  x = as_contiguous(x);
  Tensor y = new_empty(x, sizes_with_last(x, d));
  if (y.numel() == 0) return y;
  const int64_t rows = x.numel() / width;
  const k::SiluAndMulArgs args{x.const_data_ptr(), y.mutable_data_ptr(), d, width, d, dtype};
  const k::SiluAndMulFn fn = k::select_kernels().silu_and_mul;
  // Tiles of one row's columns, so that a single long row is still split across threads.
  constexpr int64_t kTile = 4096;
  const int64_t tiles_per_row = (d + kTile - 1) / kTile;
  const int64_t grain = std::max<int64_t>(1, kMinElementsPerTask / std::min(d, kTile));
  torch::stable::parallel_for(0, rows * tiles_per_row, grain, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const int64_t row = t / tiles_per_row;
      const int64_t col = (t % tiles_per_row) * kTile;
      fn(args, row, col, std::min(d, col + kTile));
    }
  });
  return y;
}

k::Activation parse_activation(const std::string& name) {
  if (name == "none") return k::Activation::none;
  if (name == "relu") return k::Activation::relu;
  if (name == "gelu") return k::Activation::gelu;
  if (name == "gelu_tanh") return k::Activation::gelu_tanh;
  if (name == "silu") return k::Activation::silu;
  fail("ptkit.fused_linear: expected activation to be one of none, relu, gelu, "
                  "gelu_tanh, silu, got '", name, "'");
  return k::Activation::none;
}

Tensor fused_linear(Tensor x, Tensor weight, std::optional<Tensor> bias, std::string activation) {
  const char* op = "fused_linear";
  const k::Activation act = parse_activation(activation);
  check_cpu(op, "x", x);
  check_cpu(op, "weight", weight);
  const k::DType dtype = kernel_dtype(op, "x", x);
  check_same_dtype(op, "weight", weight, x);
  PTKIT_CHECK(x.dim() >= 1, "ptkit.fused_linear: expected x with at least 1 dimension, got a 0-d tensor");
  const int64_t kdim = x.size(-1);
  PTKIT_CHECK(weight.dim() == 2 && weight.size(1) == kdim, "ptkit.fused_linear: expected weight of "
                  "shape [out_features, ", kdim, "] (in_features = the last dimension of x), got ",
                  shape_of(weight));
  const int64_t n = weight.size(0);
  if (bias.has_value()) {
    check_cpu(op, "bias", *bias);
    check_same_dtype(op, "bias", *bias, x);
    PTKIT_CHECK(bias->dim() == 1 && bias->size(0) == n, "ptkit.fused_linear: expected bias of shape [",
                    n, "] (out_features), got ", shape_of(*bias));
    bias = as_contiguous(*bias);
  }
  x = as_contiguous(x);
  weight = as_contiguous(weight);
  const std::vector<int64_t> out_sizes = sizes_with_last(x, n);
  // Rows from the leading dimensions (numel / K is undefined when K == 0).
  int64_t rows = 1;
  for (int64_t i = 0; i + 1 < x.dim(); ++i) rows *= x.size(i);

  const k::KernelTable& kernels = k::select_kernels();
  if (rows <= k::kGemvMaxRows) {
    Tensor y = new_empty(x, out_sizes);
    if (y.numel() == 0) return y;
    const k::LinearArgs args{x.const_data_ptr(), weight.const_data_ptr(),
                             bias.has_value() ? bias->const_data_ptr() : nullptr,
                             y.mutable_data_ptr(), rows, kdim, n, kdim, kdim, n, act, dtype};
    const int64_t grain = std::max<int64_t>(1, kMinElementsPerTask / std::max<int64_t>(1, kdim * rows));
    torch::stable::parallel_for(0, n, grain, [&](int64_t b, int64_t e) { kernels.gemv(args, b, e); });
    return y;
  }

  // Prefill-sized inputs: the library GEMM, then bias and activation in one pass.
  Tensor x2d = torch::stable::reshape(x, {rows, kdim});
  Tensor y = torch::stable::matmul(x2d, torch::stable::transpose(weight, 0, 1));
  if (bias.has_value() || act != k::Activation::none) {
    y = as_contiguous(y);
    const k::LinearArgs args{x2d.const_data_ptr(), weight.const_data_ptr(),
                             bias.has_value() ? bias->const_data_ptr() : nullptr,
                             y.mutable_data_ptr(), rows, kdim, n, kdim, kdim, n, act, dtype};
    const int64_t grain = std::max<int64_t>(1, kMinElementsPerTask / std::max<int64_t>(1, n));
    torch::stable::parallel_for(0, rows, grain, [&](int64_t b, int64_t e) { kernels.bias_activation(args, b, e); });
  }
  return torch::stable::reshape(y, out_sizes);
}

}  // namespace

STABLE_TORCH_LIBRARY_IMPL(ptkit, CPU, m) {
  m.impl("rms_norm", TORCH_BOX(&rms_norm));
  m.impl("silu_and_mul", TORCH_BOX(&silu_and_mul));
  m.impl("fused_linear", TORCH_BOX(&fused_linear));
}
