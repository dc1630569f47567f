// ptkit's CPU ops on the LibTorch stable ABI: validation, output allocation and
// threading; the arithmetic lives in kernels/ (torch-free, one copy per ISA level).
//
// The schemas are defined once, in Python (ptkit/ops/_library.py); this file only
// registers CPU implementations for them.
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "ptkit/cpu/kernels.h"
#include "ptkit/op_support.h"

namespace {

using torch::stable::Tensor;
using namespace ptkit::op_support;
namespace k = ptkit::cpu;

void check_cpu(const char* op, const char* arg, const Tensor& t) {
  check_defined(op, arg, t);
  PTKIT_CHECK(t.is_cpu(), "ptkit.", op, ": expected ", arg,
              " on the CPU (this is the CPU kernel), got a tensor on another device");
}

// Aim for slices of at least this many elements per thread: smaller ones cost
// more in scheduling than they gain.
constexpr int64_t kMinElementsPerTask = 32768;

// Tensors of at least this many bytes do not stay in the cache from one op to the next.
// 16 MiB: about what a 32 MiB L3 (the 2-core EPYC of benchmarks/results) keeps beside
// the other operands. Such outputs are written with streaming stores (kernels.h's
// stream_output): they would only evict the inputs, and a plain store reads each line
// before writing it (there: silu_and_mul(out=) of [4096, 8192] fp32 9.2 -> 6.3 ms,
// rms_norm(out=) of [4096, 4096] fp32 5.8 -> 4.8 ms). Such weights the GEMV asks for
// ahead (kernels.h's prefetch_weights).
constexpr int64_t kCachedBytes = int64_t{16} << 20;

bool too_large_for_caches(const Tensor& t) {
  return t.numel() * static_cast<int64_t>(t.element_size()) >= kCachedBytes;
}

// out= of the elementwise ops: on the CPU, then op_support's layout rule.
void check_out(const char* op, const Tensor& out, const Tensor& x, const std::vector<int64_t>& sizes) {
  check_cpu(op, "out", out);
  check_out_layout(op, out, x, sizes);
}

// y: contiguous, x's shape and dtype.
void rms_norm_into(const Tensor& x, const Tensor& weight, double eps, k::DType dtype, Tensor& y) {
  const int64_t cols = x.size(-1);
  if (y.numel() == 0) return;
  const k::RmsNormArgs args{x.const_data_ptr(), weight.const_data_ptr(), y.mutable_data_ptr(),
                            cols, cols, cols, static_cast<float>(eps), dtype, too_large_for_caches(y)};
  const k::RmsNormFn fn = k::select_kernels().rms_norm;
  const int64_t grain = std::max<int64_t>(1, kMinElementsPerTask / cols);
  torch::stable::parallel_for(0, leading_rows(x), grain, [&](int64_t b, int64_t e) { fn(args, b, e); });
}

Tensor rms_norm(Tensor x, Tensor weight, double eps) {
  const char* op = "rms_norm";
  check_cpu(op, "x", x);
  check_cpu(op, "weight", weight);
  const auto dtype = static_cast<k::DType>(float_dtype_index(op, "x", x));
  check_same_dtype(op, "weight", weight, x);
  check_rms_norm(x, weight, eps);
  x = as_contiguous(x);
  weight = as_contiguous(weight);
  Tensor y = new_empty(x, sizes_with_last(x, x.size(-1)));
  rms_norm_into(x, weight, eps, dtype, y);
  return y;
}

void rms_norm_out(Tensor x, Tensor weight, double eps, Tensor out) {
  const char* op = "rms_norm";
  check_cpu(op, "x", x);
  check_cpu(op, "weight", weight);
  const auto dtype = static_cast<k::DType>(float_dtype_index(op, "x", x));
  check_same_dtype(op, "weight", weight, x);
  check_rms_norm(x, weight, eps);
  check_out(op, out, x, sizes_with_last(x, x.size(-1)));
  x = as_contiguous(x);
  weight = as_contiguous(weight);
  rms_norm_into(x, weight, eps, dtype, out);
}

// y: contiguous, x's leading shape and d columns.
void silu_and_mul_into(const Tensor& x, k::DType dtype, Tensor& y) {
  const int64_t width = x.size(-1);
  const int64_t d = width / 2;
  if (y.numel() == 0) return;
  const k::SiluAndMulArgs args{x.const_data_ptr(), y.mutable_data_ptr(), d, width, d, dtype, too_large_for_caches(y)};
  const k::SiluAndMulFn fn = k::select_kernels().silu_and_mul;
  // Tiles of one row's columns, so that a single long row is still split across threads.
  constexpr int64_t kTile = 4096;
  const int64_t tiles_per_row = (d + kTile - 1) / kTile;
  const int64_t grain = std::max<int64_t>(1, kMinElementsPerTask / std::min(d, kTile));
  torch::stable::parallel_for(0, leading_rows(x) * tiles_per_row, grain, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const int64_t row = t / tiles_per_row;
      const int64_t col = (t % tiles_per_row) * kTile;
      fn(args, row, col, std::min(d, col + kTile));
    }
  });
}

Tensor silu_and_mul(Tensor x) {
  const char* op = "silu_and_mul";
  check_cpu(op, "x", x);
  const auto dtype = static_cast<k::DType>(float_dtype_index(op, "x", x));
  check_silu_and_mul(x);
  x = as_contiguous(x);
  Tensor y = new_empty(x, sizes_with_last(x, x.size(-1) / 2));
  silu_and_mul_into(x, dtype, y);
  return y;
}

void silu_and_mul_out(Tensor x, Tensor out) {
  const char* op = "silu_and_mul";
  check_cpu(op, "x", x);
  const auto dtype = static_cast<k::DType>(float_dtype_index(op, "x", x));
  check_silu_and_mul(x);
  check_out(op, out, x, sizes_with_last(x, x.size(-1) / 2));
  x = as_contiguous(x);
  silu_and_mul_into(x, dtype, out);
}

Tensor fused_linear(Tensor x, Tensor weight, std::optional<Tensor> bias, std::string activation) {
  const char* op = "fused_linear";
  const auto act = static_cast<k::Activation>(activation_index(activation));
  check_cpu(op, "x", x);
  check_cpu(op, "weight", weight);
  const auto dtype = static_cast<k::DType>(float_dtype_index(op, "x", x));
  check_same_dtype(op, "weight", weight, x);
  if (bias.has_value()) check_cpu(op, "bias", *bias);
  check_fused_linear(x, weight, bias);
  x = as_contiguous(x);
  weight = as_contiguous(weight);
  if (bias.has_value()) bias = as_contiguous(*bias);
  const int64_t kdim = x.size(-1);
  const int64_t n = weight.size(0);
  const int64_t rows = leading_rows(x);
  const std::vector<int64_t> out_sizes = sizes_with_last(x, n);
  const void* bias_ptr = bias.has_value() ? bias->const_data_ptr() : nullptr;
  const k::KernelTable& kernels = k::select_kernels();

  if (rows <= kernels.gemv_max_rows[static_cast<int>(dtype)]) {
    Tensor y = new_empty(x, out_sizes);
    if (y.numel() == 0) return y;
    const k::LinearArgs args{x.const_data_ptr(), weight.const_data_ptr(), bias_ptr, y.mutable_data_ptr(),
                             rows, kdim, n, kdim, kdim, n, act, dtype, too_large_for_caches(weight)};
    // Split n in whole tiles of the kernel's 8 output columns (its epilogue vector).
    constexpr int64_t kTile = 8;
    const int64_t tiles = (n + kTile - 1) / kTile;
    const int64_t grain =
        std::max<int64_t>(1, kMinElementsPerTask / std::max<int64_t>(1, kdim * rows * kTile));
    torch::stable::parallel_for(0, tiles, grain, [&](int64_t b, int64_t e) {
      kernels.gemv(args, b * kTile, std::min(n, e * kTile));
    });
    return y;
  }

  // Prefill-sized inputs: the library GEMM, then bias and activation in one pass.
  auto [x2d, y] = library_linear(x, weight, rows);
  if ((bias.has_value() || act != k::Activation::none) && y.numel() > 0) {
    const k::LinearArgs args{x2d.const_data_ptr(), weight.const_data_ptr(), bias_ptr, y.mutable_data_ptr(),
                             rows, kdim, n, kdim, kdim, n, act, dtype, false};
    const int64_t grain = std::max<int64_t>(1, kMinElementsPerTask / std::max<int64_t>(1, n));
    torch::stable::parallel_for(0, rows, grain,
                                [&](int64_t b, int64_t e) { kernels.bias_activation(args, b, e); });
  }
  return torch::stable::reshape(y, out_sizes);
}

}  // namespace

STABLE_TORCH_LIBRARY_IMPL(ptkit, CPU, m) {
  m.impl("rms_norm", TORCH_BOX(&rms_norm));
  m.impl("silu_and_mul", TORCH_BOX(&silu_and_mul));
  m.impl("fused_linear", TORCH_BOX(&fused_linear));
  m.impl("rms_norm.out", TORCH_BOX(&rms_norm_out));
  m.impl("silu_and_mul.out", TORCH_BOX(&silu_and_mul_out));
}
