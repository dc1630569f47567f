// What every backend's op layer shares: error messages in one format
// ("ptkit.<op>: expected …, got …", the same as src/ptkit_ops/_checks.py), shape and
// dtype checks, output allocation. Header-only, stable ABI only.
#pragma once

#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace ptkit::op_support {

using torch::headeronly::ScalarType;
using torch::stable::Tensor;

// Invalid input: the message alone, no source location; torch raises it in Python
// as RuntimeError.
template <typename... Parts>
[[noreturn]] void fail(const Parts&... parts) {
  std::ostringstream message;
  (message << ... << parts);
  throw std::runtime_error(message.str());
}

#define PTKIT_CHECK(cond, ...)       \
  do {                               \
    if (!(cond)) ::ptkit::op_support::fail(__VA_ARGS__); \
  } while (false)

inline const char* dtype_name(ScalarType t) {
  switch (t) {
    case ScalarType::Float: return "float32";
    case ScalarType::Half: return "float16";
    case ScalarType::BFloat16: return "bfloat16";
    case ScalarType::Double: return "float64";
    case ScalarType::Long: return "int64";
    case ScalarType::Int: return "int32";
    case ScalarType::Short: return "int16";
    case ScalarType::Char: return "int8";
    case ScalarType::Byte: return "uint8";
    case ScalarType::Bool: return "bool";
    case ScalarType::ComplexFloat: return "complex64";
    case ScalarType::ComplexDouble: return "complex128";
    default: return "an unsupported dtype";
  }
}

inline std::string shape_of(const std::vector<int64_t>& sizes) {
  std::ostringstream s;
  s << "[";
  for (size_t i = 0; i < sizes.size(); ++i) s << (i ? ", " : "") << sizes[i];
  s << "]";
  return s.str();
}

inline std::string shape_of(const Tensor& t) {
  std::vector<int64_t> sizes;
  for (int64_t i = 0; i < t.dim(); ++i) sizes.push_back(t.size(i));
  return shape_of(sizes);
}

// 0 = float32, 1 = float16, 2 = bfloat16: the order of every backend's DType enum.
inline int32_t float_dtype_index(const char* op, const char* arg, const Tensor& t) {
  switch (t.scalar_type()) {
    case ScalarType::Float: return 0;
    case ScalarType::Half: return 1;
    case ScalarType::BFloat16: return 2;
    default:
      fail("ptkit.", op, ": expected ", arg, " of dtype float32, float16 or bfloat16, got ",
           dtype_name(t.scalar_type()));
  }
}

// A None where a tensor is expected reaches a kernel as an undefined tensor (the
// dispatcher chose the kernel from the other arguments): say so before touching it.
inline void check_defined(const char* op, const char* arg, const Tensor& t) {
  PTKIT_CHECK(t.defined(), "ptkit.", op, ": expected ", arg, " to be a torch.Tensor, got None");
}

inline void check_same_dtype(const char* op, const char* arg, const Tensor& t, const Tensor& x) {
  PTKIT_CHECK(t.scalar_type() == x.scalar_type(), "ptkit.", op, ": expected ", arg, " of dtype ",
              dtype_name(x.scalar_type()), " (the dtype of x), got ", dtype_name(t.scalar_type()));
}

inline void check_at_least_1d(const char* op, const Tensor& x) {
  PTKIT_CHECK(x.dim() >= 1, "ptkit.", op, ": expected x with at least 1 dimension, got a 0-d tensor");
}

inline Tensor as_contiguous(const Tensor& t) {
  return t.is_contiguous() ? t : torch::stable::contiguous(t);
}

inline std::vector<int64_t> sizes_with_last(const Tensor& t, int64_t last) {
  std::vector<int64_t> sizes;
  for (int64_t i = 0; i + 1 < t.dim(); ++i) sizes.push_back(t.size(i));
  sizes.push_back(last);
  return sizes;
}

// Rows of a [..., last] tensor, from the leading dimensions (numel / last is
// undefined when last == 0).
inline int64_t leading_rows(const Tensor& t) {
  int64_t rows = 1;
  for (int64_t i = 0; i + 1 < t.dim(); ++i) rows *= t.size(i);
  return rows;
}

inline Tensor new_empty(const Tensor& like, const std::vector<int64_t>& sizes) {
  return torch::stable::empty(sizes, like.scalar_type(), std::nullopt, like.device());
}

// The prefill path of fused_linear on every backend: x viewed as [rows, k] and the
// library GEMM (torch's matmul: oneDNN/MKL, cuBLAS …) into a contiguous [rows, n];
// the backend then runs its bias + activation epilogue on the result in place.
struct LibraryLinear {
  Tensor x2d;
  Tensor y;
};
inline LibraryLinear library_linear(const Tensor& x, const Tensor& weight, int64_t rows) {
  Tensor x2d = torch::stable::reshape(x, {rows, x.size(-1)});
  Tensor y = as_contiguous(torch::stable::matmul(x2d, torch::stable::transpose(weight, 0, 1)));
  return {x2d, y};
}

inline size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t previous = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t substitute = previous + (a[i - 1] != b[j - 1] ? 1 : 0);
      previous = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, substitute});
    }
  }
  return row[b.size()];
}

// Index into ptkit_ops.ACTIVATIONS (none, relu, gelu, gelu_tanh, silu). A wrong name gets
// the hint src/ptkit_ops/_checks.py gives (ACTIVATION_ALIASES, then the first name within
// two edits), so that a mistake reads the same on every path (tests compare them).
inline int32_t activation_index(const std::string& name) {
  static const char* const names[] = {"none", "relu", "gelu", "gelu_tanh", "silu"};
  for (int32_t i = 0; i < 5; ++i) {
    if (name == names[i]) return i;
  }
  static const char* const aliases[][2] = {{"swish", "silu"},
                                           {"gelu_new", "gelu_tanh"},
                                           {"gelu_pytorch_tanh", "gelu_tanh"},
                                           {"identity", "none"},
                                           {"linear", "none"}};
  std::string lower = name;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::string hint;
  for (const auto& alias : aliases) {
    if (lower == alias[0]) hint = " (" + name + " is " + alias[1] + ": pass activation='" + alias[1] + "')";
  }
  if (hint.empty()) {
    size_t best = 3;
    for (int32_t i = 0; i < 5; ++i) {
      const size_t distance = edit_distance(lower, names[i]);
      if (distance < best) {
        best = distance;
        hint = std::string(" (did you mean '") + names[i] + "'?)";
      }
    }
  }
  fail("ptkit.fused_linear: expected activation to be one of none, relu, gelu, gelu_tanh, silu, got '",
       name, "'", hint);
}

// Shape checks of each op, shared by every backend.
inline void check_rms_norm(const Tensor& x, const Tensor& weight, double eps) {
  check_at_least_1d("rms_norm", x);
  const int64_t cols = x.size(-1);
  PTKIT_CHECK(weight.dim() == 1 && weight.size(0) == cols, "ptkit.rms_norm: expected weight of shape [",
              cols, "] (the last dimension of x), got ", shape_of(weight));
  PTKIT_CHECK(eps >= 0.0, "ptkit.rms_norm: expected eps >= 0, got ", eps);
}

inline void check_silu_and_mul(const Tensor& x) {
  check_at_least_1d("silu_and_mul", x);
  PTKIT_CHECK(x.size(-1) % 2 == 0,
              "ptkit.silu_and_mul: expected an even last dimension (gate and up halves), got ", x.size(-1));
}

// out= of the elementwise ops, after the backend has checked its device: x's dtype,
// the result's shape, contiguous (ptkit_ops/_checks.py's check_out, which has already run
// for calls from Python).
inline void check_out_layout(const char* op, const Tensor& out, const Tensor& x, const std::vector<int64_t>& sizes) {
  check_same_dtype(op, "out", out, x);
  bool same = out.dim() == static_cast<int64_t>(sizes.size());
  for (int64_t i = 0; same && i < out.dim(); ++i) same = out.size(i) == sizes[static_cast<size_t>(i)];
  PTKIT_CHECK(same, "ptkit.", op, ": expected out of shape ", shape_of(sizes), ", got ", shape_of(out));
  if (!out.is_contiguous()) {
    std::vector<int64_t> strides;
    for (int64_t i = 0; i < out.dim(); ++i) strides.push_back(out.stride(i));
    fail("ptkit.", op, ": expected a contiguous out, got strides ", shape_of(strides),
         ": pass out.contiguous() and copy back, or call without out=");
  }
}

inline void check_fused_linear(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias) {
  check_at_least_1d("fused_linear", x);
  const int64_t k = x.size(-1);
  PTKIT_CHECK(weight.dim() == 2 && weight.size(1) == k,
              "ptkit.fused_linear: expected weight of shape [out_features, ", k,
              "] (in_features = the last dimension of x), got ", shape_of(weight));
  if (bias.has_value()) {
    check_same_dtype("fused_linear", "bias", *bias, x);
    PTKIT_CHECK(bias->dim() == 1 && bias->size(0) == weight.size(0),
                "ptkit.fused_linear: expected bias of shape [", weight.size(0), "] (out_features), got ",
                shape_of(*bias));
  }
}

}  // namespace ptkit::op_support
