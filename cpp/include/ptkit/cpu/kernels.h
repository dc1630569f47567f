// Raw CPU kernels behind ptkit's CPU ops.
//
// The kernels know nothing about torch: they take pointers, sizes and strides,
// and process one slice of the work so that the op layer (ops.cpp) can spread the
// slices over torch's thread pool with torch::stable::parallel_for. Each kernel
// source is compiled once per instruction-set level (CMake: ptkit_add_kernel_library
// ISA …) into its own namespace; select_kernels() picks the best level this CPU runs.
#pragma once

#include <cstdint>

#include "ptkit/kernel_types.h"

namespace ptkit::cpu {

using ::ptkit::Activation;
using ::ptkit::DType;

// y[r, :] = x[r, :] * rsqrt(mean(x[r, :]^2) + eps) * weight, fp32 accumulation.
// The last dimension is contiguous; rows are `*_row_stride` elements apart.
struct RmsNormArgs {
  const void* x;
  const void* weight;
  void* y;
  int64_t cols;
  int64_t x_row_stride;
  int64_t y_row_stride;
  float eps;
  DType dtype;
  bool stream_output;  // y too large for the caches: written around them (simd::put_32_bytes)
};
// Rows [row_begin, row_end).
using RmsNormFn = void (*)(const RmsNormArgs&, int64_t row_begin, int64_t row_end);

// y[r, c] = silu(x[r, c]) * x[r, d + c] for c in [0, d).
struct SiluAndMulArgs {
  const void* x;
  void* y;
  int64_t d;
  int64_t x_row_stride;
  int64_t y_row_stride;
  DType dtype;
  bool stream_output;  // as RmsNormArgs'
};
// Row `row`, output columns [col_begin, col_end).
using SiluAndMulFn = void (*)(const SiluAndMulArgs&, int64_t row, int64_t col_begin, int64_t col_end);

// y[m, n] = act(sum_k x[m, k] * w[n, k] + bias[n]); w is [n, k] with contiguous rows.
struct LinearArgs {
  const void* x;
  const void* w;
  const void* bias;  // nullptr: no bias
  void* y;
  int64_t m;
  int64_t k;
  int64_t n;
  int64_t x_row_stride;
  int64_t w_row_stride;
  int64_t y_row_stride;
  Activation activation;
  DType dtype;
  bool prefetch_weights;  // w too large for the caches: the GEMV asks for each tile's ahead
};
// Decode GEMV (m <= kGemvMaxRows): every row of x, outputs [n_begin, n_end), with
// bias and activation applied while each output is still in registers.
using GemvFn = void (*)(const LinearArgs&, int64_t n_begin, int64_t n_end);
// Epilogue of the large-m path: y[m, :] = act(y[m, :] + bias) in place, rows [row_begin, row_end).
using BiasActivationFn = void (*)(const LinearArgs&, int64_t row_begin, int64_t row_end);

constexpr int64_t kGemvMaxRows = 16;

struct KernelTable {
  const char* isa;  // the instruction-set level these kernels were compiled for
  RmsNormFn rms_norm;
  SiluAndMulFn silu_and_mul;
  GemvFn gemv;
  BiasActivationFn bias_activation;
  // Per dtype (DType's order): the most rows of x the GEMV takes; above it the library
  // GEMM (and the epilogue) is faster on the CPUs of this level. At most kGemvMaxRows.
  int64_t gemv_max_rows[3];
};

// The best table this CPU can run (decided once, on first use).
const KernelTable& select_kernels();

}  // namespace ptkit::cpu
