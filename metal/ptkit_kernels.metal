// ptkit's Metal (Apple GPU) kernels: rms_norm, silu_and_mul, and the two halves
// of fused_linear (a decode GEMV with a fused epilogue, and the epilogue alone for
// the library GEMM's output).
//
// The Python binding (src/ptkit/runtime/metal.py) launches them through
// torch.mps.compile_shader / torch.mps.load_metallib, whose calling convention
// fixes the shape of every signature here:
//   * each positional Python argument binds to the buffer index equal to its
//     position, so every buffer parameter carries an explicit [[buffer(i)]] with
//     i == its position (tests/unit/test_metal_binding.py checks it);
//   * a torch.Tensor binds as a `device` pointer, a Python float as
//     `constant float&` (4 bytes), a Python int as `constant long&` (8 bytes:
//     an `int&` here would read half of it);
//   * `threads` is the grid size in threads (dispatchThreads, so the last
//     threadgroup may be partial and no thread runs past the grid).
// The binding's table KERNELS must list the same buffer parameters, in order, with
// the same names; the unit test parses this file and compares. Change both together.
//
// Numerics: every kernel loads its inputs into float, computes in float and rounds
// once, on the store, to the tensor's type -- the contract of the reference
// implementations in src/ptkit_ops/_library.py. Transcendentals use the precise::
// variants so the accuracy does not depend on the fast-math setting the library
// was compiled with (torch compiles shader sources with fast math off; a
// .metallib built ahead of time must be built with -fno-fast-math too, or the
// compensated sums in gelu_erf may be folded away and inf/NaN inputs lose their
// IEEE results).
//
// All tensors are contiguous and row-major; the binding guarantees it.

#include <metal_stdlib>

// bfloat, and so a third of the instantiations, needs MSL 3.1. Fail with a
// message that says so (the binding records it and falls back to the reference)
// rather than with an unknown-type error further down.
#if __METAL_VERSION__ < 310
#error "ptkit's Metal kernels need Metal Shading Language 3.1 (macOS 14 or newer) for bfloat"
#endif

using namespace metal;

namespace ptkit {

// Activation codes, in the order of ACTIVATIONS in src/ptkit/ops/_checks.py (the
// binding passes the index). A runtime argument rather than a function constant:
// torch's shader-library API cannot set function constants, and the switch is
// uniform across the grid, so it costs one coherent branch per element.
constant constexpr long kActNone = 0;
constant constexpr long kActRelu = 1;
constant constexpr long kActGelu = 2;
constant constexpr long kActGeluTanh = 3;
constant constexpr long kActSilu = 4;

// Largest m (rows of x) that the gemv kernel serves: one fp32 accumulator per row
// lives in registers, so the bound is compile-time. The binding sends more rows to
// the library GEMM (GEMV_MAX_ROWS in metal.py must equal it).
constant constexpr int kGemvMaxRows = 16;

// Apple GPUs execute 32-wide simdgroups (every Apple GPU family). gemv maps one
// simdgroup to one output column by the grid position, and the binding dispatches
// 32 threads per column, so this is part of the binding contract.
constant constexpr uint kSimdWidth = 32;

// erfc(z) for z >= 0 as t * exp(-z^2 + P(t)), t = 1 / (1 + z / 2): the Chebyshev
// fit of Numerical Recipes (erfcc), relative error below 1.2e-7 for every z >= 0,
// i.e. about one fp32 ulp -- unlike Abramowitz-Stegun 7.1.26 (absolute error
// 1.5e-7, unbounded relative error in the tail). MSL has no erf/erfc. The same fit
// serves ptkit's CPU kernels (cpp/include/ptkit/cpu/simd.h), so the backends agree.
// Coefficients of P, highest degree first (Horner order).
constant float kErfcP[10] = {
    0.17087277f,  -0.82215223f, 1.48851587f, -1.13520398f, 0.27886807f,
    -0.18628806f, 0.09678418f,  0.37409196f, 1.00002368f,  -1.26551223f,
};

inline float relu(float v) {
  // Not fmax(v, 0): that would turn NaN into 0, and torch's relu keeps NaN.
  return v < 0.0f ? 0.0f : v;
}

// gelu(v) = v Phi(v), Phi(v) = erfc(-v / sqrt 2) / 2. With E = erfc(|v| / sqrt 2) / 2,
// Phi = E for v < 0 and 1 - E otherwise: the negative tail, where gelu is tiny,
// keeps its relative accuracy (1 + erf(v / sqrt 2) would cancel to nothing).
inline float gelu_erf(float v) {
  const float z = fabs(v) * 0.70710678118654752f;
  const float t = 1.0f / fma(0.5f, z, 1.0f);
  float p = kErfcP[0];
  for (int i = 1; i < 10; ++i) {
    p = fma(p, t, kErfcP[i]);
  }
  // The exponent -z^2 + p = -v^2 / 2 + p reaches about -90 before exp underflows;
  // rounding it to float would cost up to ~4e-6 relative error in the result.
  // Keep it as s + lo instead: v^2's rounding error exactly by FMA, the addition's
  // by a two-sum, and exp(s + lo) = exp(s) (1 + lo).
  const float x2 = v * v;
  const float x2lo = fma(v, v, -x2);
  const float a = -0.5f * x2;
  const float s = a + p;
  const float bb = s - a;
  float lo = ((a - (s - bb)) + (p - bb)) - 0.5f * x2lo;
  // v = +-inf: v^2 overflows and lo is inf - inf; exp(s) is 0 there anyway.
  lo = isfinite(lo) ? lo : 0.0f;
  const float es = precise::exp(s);
  const float half_erfc = 0.5f * t * fma(es, lo, es);
  // -inf gives -0, the limit (the formula meets -inf * 0 = NaN).
  return isinf(v) && v < 0.0f ? -0.0f : v * (v < 0.0f ? half_erfc : 1.0f - half_erfc);
}

// x sigmoid(a), as x / (1 + e) for a >= 0 and x e / (1 + e) for a < 0 with
// e = exp(-|a|) <= 1: exp never overflows, so results that are tiny but still
// representable (silu(-95), gelu_tanh(-10.1)) come out right rather than as -0.
// a = -inf gives -0 for x = -inf: the limit of silu and gelu_tanh (ptkit's semantics
// on every backend, docs/using.md; the formula meets -inf * 0 = NaN); a NaN propagates.
inline float mul_sigmoid(float x, float a) {
  const float e = precise::exp(-fabs(a));
  return isinf(x) && x < 0.0f ? -0.0f : x * (a < 0.0f ? e : 1.0f) / (1.0f + e);
}

// 0.5 v (1 + tanh(u)) = v sigmoid(2u), u = sqrt(2 / pi) (v + 0.044715 v^3): the same
// function without the cancellation of 1 + tanh(u) for negative v, and with one
// exp instead of a tanh. 1.5957691216057308 = 2 sqrt(2 / pi).
inline float gelu_tanh(float v) {
  return mul_sigmoid(v, 1.5957691216057308f * fma(0.044715f, v * v * v, v));
}

inline float silu(float v) {
  return mul_sigmoid(v, v);
}

inline float activate(float v, long activation) {
  switch (activation) {
    case kActRelu:
      return relu(v);
    case kActGelu:
      return gelu_erf(v);
    case kActGeluTanh:
      return gelu_tanh(v);
    case kActSilu:
      return silu(v);
    default:  // kActNone; the binding never passes anything else
      return v;
  }
}

}  // namespace ptkit

// rms_norm -------------------------------------------------------------------
//
// y = x * rsqrt(mean(x^2) + eps) * weight over each row of `cols` elements.
// One threadgroup per row (grid: rows * G threads in groups of G, G a multiple of
// 32, at most 1024): a row is reduced by the threads that then normalise it, so x
// is read from device memory twice, with the second pass mostly from cache, and no
// second launch or scratch buffer is needed. Each thread strides over the row
// (neighbouring threads read neighbouring elements: coalesced), the simdgroups
// reduce with simd_sum, and one float per simdgroup goes through threadgroup
// memory. Each thread's share of the squares is summed with Kahan's compensation (the
// library is compiled without fast math: .metallib with -fno-fast-math, the source by
// torch.mps.compile_shader), so the sum stays within a few fp32 roundings for any row
// length. A row whose fp32 squares overflow (all values finite, |x| above ~1.8e19) is
// summed again scaled by its largest |x|, so it normalises as in float64 instead of to
// 0 (as the CPU kernel and the reference).
template <typename T>
kernel void rms_norm(
    device const T* x [[buffer(0)]],
    device const T* weight [[buffer(1)]],
    device T* y [[buffer(2)]],
    constant long& cols [[buffer(3)]],
    constant float& eps [[buffer(4)]],
    uint row [[threadgroup_position_in_grid]],
    uint tid [[thread_position_in_threadgroup]],
    uint group_threads [[threads_per_threadgroup]],
    uint simd_group [[simdgroup_index_in_threadgroup]],
    uint lane [[thread_index_in_simdgroup]],
    uint simd_groups [[simdgroups_per_threadgroup]]) {
  // 64-bit row offset: rows * cols may exceed 2^32 even when the grid does not.
  device const T* xr = x + long(row) * cols;
  device T* yr = y + long(row) * cols;

  float sum_sq = 0.0f;
  float carry = 0.0f;  // Kahan's compensation
  for (long i = tid; i < cols; i += group_threads) {
    const float v = float(xr[i]);
    const float term = v * v - carry;
    const float next = sum_sq + term;
    carry = (next - sum_sq) - term;
    sum_sq = next;
  }

  // At most 1024 / 32 = 32 simdgroups per threadgroup; two buffers, so that the
  // rescue's reductions never overwrite partials another simdgroup still reads.
  threadgroup float partial[2][32];
  sum_sq = simd_sum(sum_sq);
  if (lane == 0) {
    partial[0][simd_group] = sum_sq;
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  // Every simdgroup sums the partials itself: no second barrier and broadcast.
  float total = lane < simd_groups ? partial[0][lane] : 0.0f;
  total = simd_sum(total);

  if (isinf(total)) {  // the same in every thread: the threadgroup takes this branch or not
    float largest = 0.0f;
    for (long i = tid; i < cols; i += group_threads) {
      largest = max(largest, fabs(float(xr[i])));
    }
    largest = simd_max(largest);
    if (lane == 0) {
      partial[1][simd_group] = largest;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    largest = simd_max(lane < simd_groups ? partial[1][lane] : 0.0f);
    if (isfinite(largest)) {
      float scaled = 0.0f;
      for (long i = tid; i < cols; i += group_threads) {
        const float v = float(xr[i]) / largest;  // <= 1: no overflow
        scaled = fma(v, v, scaled);
      }
      scaled = simd_sum(scaled);
      if (lane == 0) {
        partial[0][simd_group] = scaled;  // every thread read partial[0] before the last barrier
      }
      threadgroup_barrier(mem_flags::mem_threadgroup);
      const float sum = simd_sum(lane < simd_groups ? partial[0][lane] : 0.0f);
      const float inv = precise::rsqrt(sum / float(cols) + (eps / largest) / largest);
      for (long i = tid; i < cols; i += group_threads) {
        yr[i] = static_cast<T>((float(xr[i]) / largest) * inv * float(weight[i]));
      }
      return;
    }
  }

  // Same operation order as the reference: (x * inv) * weight.
  const float inv = precise::rsqrt(total / float(cols) + eps);
  for (long i = tid; i < cols; i += group_threads) {
    yr[i] = static_cast<T>(float(xr[i]) * inv * float(weight[i]));
  }
}

// silu_and_mul ---------------------------------------------------------------
//
// y[r, c] = silu(x[r, c]) * x[r, d + c] for x of shape [rows, 2d], y [rows, d].
// One thread per output element (grid: rows * d threads, exactly: the kernel has
// no bound check because dispatchThreads launches no thread past the grid).
template <typename T>
kernel void silu_and_mul(
    device const T* x [[buffer(0)]],
    device T* y [[buffer(1)]],
    constant long& d [[buffer(2)]],
    uint gid [[thread_position_in_grid]]) {
  // 32-bit division: the grid, hence rows * d, is below 2^32 (the binding checks),
  // and 64-bit division is a long software sequence on the GPU. The input offset
  // row * 2d can pass 2^32, so it is formed in 64 bits.
  const uint dd = uint(d);
  const uint row = gid / dd;
  const uint c = gid - row * dd;
  device const T* xr = x + long(row) * (2 * d);
  const float gate = float(xr[c]);
  const float up = float(xr[d + c]);
  y[gid] = static_cast<T>(ptkit::silu(gate) * up);
}

// gemv -----------------------------------------------------------------------
//
// y[r, col] = act(sum_i x[r, i] w[col, i] + bias[col]) for x [m, k], w [n, k],
// y [m, n], m <= kGemvMaxRows: the decode case, where the weight is read once and
// the GEMM's tiling would only waste the machine. One simdgroup per output column
// (grid: n * 32 threads, in threadgroups of a multiple of 32 so that simdgroups are
// aligned with the grid): its lanes stride over k -- 32 consecutive elements of
// the weight row per step, coalesced -- and keep one fp32 accumulator per row of x,
// so w is read exactly once for all m rows. simd_sum reduces, lane 0 adds the
// bias, applies the activation and stores.
//
// Without a bias the binding passes another tensor in the bias slot (a buffer must
// be bound) and has_bias = 0; it is never read then.
template <typename T>
kernel void gemv(
    device const T* x [[buffer(0)]],
    device const T* w [[buffer(1)]],
    device const T* bias [[buffer(2)]],
    device T* y [[buffer(3)]],
    constant long& m [[buffer(4)]],
    constant long& k [[buffer(5)]],
    constant long& n [[buffer(6)]],
    constant long& has_bias [[buffer(7)]],
    constant long& activation [[buffer(8)]],
    uint gid [[thread_position_in_grid]],
    uint lane [[thread_index_in_simdgroup]]) {
  const long col = long(gid / ptkit::kSimdWidth);
  // Uniform across the simdgroup, so returning does not break simd_sum below.
  if (col >= n) {
    return;
  }
  device const T* wc = w + col * k;

  // Fixed trip counts with an `r < m` guard (uniform: m is a kernel argument), so
  // the compiler unrolls and keeps acc[] in registers instead of stack memory.
  float acc[ptkit::kGemvMaxRows];
  for (int r = 0; r < ptkit::kGemvMaxRows; ++r) {
    acc[r] = 0.0f;
  }
  for (long i = lane; i < k; i += ptkit::kSimdWidth) {
    const float wv = float(wc[i]);
    for (int r = 0; r < ptkit::kGemvMaxRows; ++r) {
      if (r < m) {
        acc[r] = fma(float(x[r * k + i]), wv, acc[r]);
      }
    }
  }

  const float b = has_bias != 0 ? float(bias[col]) : 0.0f;
  for (int r = 0; r < ptkit::kGemvMaxRows; ++r) {
    if (r < m) {
      const float v = simd_sum(acc[r]);
      if (lane == 0) {
        y[r * n + col] = static_cast<T>(ptkit::activate(v + b, activation));
      }
    }
  }
}

// bias_activation --------------------------------------------------------------
//
// y = act(y + bias), in place, for y [rows, n]: the epilogue of fused_linear when
// more than kGemvMaxRows rows go through the library GEMM, which has no fused
// epilogue. One thread per element of y (grid: rows * n threads, exactly).
// has_bias = 0: the bias slot holds some other tensor and is not read.
template <typename T>
kernel void bias_activation(
    device T* y [[buffer(0)]],
    device const T* bias [[buffer(1)]],
    constant long& n [[buffer(2)]],
    constant long& has_bias [[buffer(3)]],
    constant long& activation [[buffer(4)]],
    uint gid [[thread_position_in_grid]]) {
  float v = float(y[gid]);
  if (has_bias != 0) {
    // 32-bit modulo: the grid is below 2^32 (see silu_and_mul).
    v += float(bias[gid % uint(n)]);
  }
  y[gid] = static_cast<T>(ptkit::activate(v, activation));
}

// Instantiations ---------------------------------------------------------------
//
// Host names are ptkit_<kernel>_<float|half|bfloat>, the binding's DTYPE_SUFFIX.
// Written out in full (no macro) so that the unit test can read every exported
// signature from this file as the Metal compiler sees it.

template [[host_name("ptkit_rms_norm_float")]] kernel void rms_norm<float>(
    device const float* x [[buffer(0)]],
    device const float* weight [[buffer(1)]],
    device float* y [[buffer(2)]],
    constant long& cols [[buffer(3)]],
    constant float& eps [[buffer(4)]],
    uint row [[threadgroup_position_in_grid]],
    uint tid [[thread_position_in_threadgroup]],
    uint group_threads [[threads_per_threadgroup]],
    uint simd_group [[simdgroup_index_in_threadgroup]],
    uint lane [[thread_index_in_simdgroup]],
    uint simd_groups [[simdgroups_per_threadgroup]]);

template [[host_name("ptkit_rms_norm_half")]] kernel void rms_norm<half>(
    device const half* x [[buffer(0)]],
    device const half* weight [[buffer(1)]],
    device half* y [[buffer(2)]],
    constant long& cols [[buffer(3)]],
    constant float& eps [[buffer(4)]],
    uint row [[threadgroup_position_in_grid]],
    uint tid [[thread_position_in_threadgroup]],
    uint group_threads [[threads_per_threadgroup]],
    uint simd_group [[simdgroup_index_in_threadgroup]],
    uint lane [[thread_index_in_simdgroup]],
    uint simd_groups [[simdgroups_per_threadgroup]]);

template [[host_name("ptkit_rms_norm_bfloat")]] kernel void rms_norm<bfloat>(
    device const bfloat* x [[buffer(0)]],
    device const bfloat* weight [[buffer(1)]],
    device bfloat* y [[buffer(2)]],
    constant long& cols [[buffer(3)]],
    constant float& eps [[buffer(4)]],
    uint row [[threadgroup_position_in_grid]],
    uint tid [[thread_position_in_threadgroup]],
    uint group_threads [[threads_per_threadgroup]],
    uint simd_group [[simdgroup_index_in_threadgroup]],
    uint lane [[thread_index_in_simdgroup]],
    uint simd_groups [[simdgroups_per_threadgroup]]);

template [[host_name("ptkit_silu_and_mul_float")]] kernel void silu_and_mul<float>(
    device const float* x [[buffer(0)]],
    device float* y [[buffer(1)]],
    constant long& d [[buffer(2)]],
    uint gid [[thread_position_in_grid]]);

template [[host_name("ptkit_silu_and_mul_half")]] kernel void silu_and_mul<half>(
    device const half* x [[buffer(0)]],
    device half* y [[buffer(1)]],
    constant long& d [[buffer(2)]],
    uint gid [[thread_position_in_grid]]);

template [[host_name("ptkit_silu_and_mul_bfloat")]] kernel void silu_and_mul<bfloat>(
    device const bfloat* x [[buffer(0)]],
    device bfloat* y [[buffer(1)]],
    constant long& d [[buffer(2)]],
    uint gid [[thread_position_in_grid]]);

template [[host_name("ptkit_gemv_float")]] kernel void gemv<float>(
    device const float* x [[buffer(0)]],
    device const float* w [[buffer(1)]],
    device const float* bias [[buffer(2)]],
    device float* y [[buffer(3)]],
    constant long& m [[buffer(4)]],
    constant long& k [[buffer(5)]],
    constant long& n [[buffer(6)]],
    constant long& has_bias [[buffer(7)]],
    constant long& activation [[buffer(8)]],
    uint gid [[thread_position_in_grid]],
    uint lane [[thread_index_in_simdgroup]]);

template [[host_name("ptkit_gemv_half")]] kernel void gemv<half>(
    device const half* x [[buffer(0)]],
    device const half* w [[buffer(1)]],
    device const half* bias [[buffer(2)]],
    device half* y [[buffer(3)]],
    constant long& m [[buffer(4)]],
    constant long& k [[buffer(5)]],
    constant long& n [[buffer(6)]],
    constant long& has_bias [[buffer(7)]],
    constant long& activation [[buffer(8)]],
    uint gid [[thread_position_in_grid]],
    uint lane [[thread_index_in_simdgroup]]);

template [[host_name("ptkit_gemv_bfloat")]] kernel void gemv<bfloat>(
    device const bfloat* x [[buffer(0)]],
    device const bfloat* w [[buffer(1)]],
    device const bfloat* bias [[buffer(2)]],
    device bfloat* y [[buffer(3)]],
    constant long& m [[buffer(4)]],
    constant long& k [[buffer(5)]],
    constant long& n [[buffer(6)]],
    constant long& has_bias [[buffer(7)]],
    constant long& activation [[buffer(8)]],
    uint gid [[thread_position_in_grid]],
    uint lane [[thread_index_in_simdgroup]]);

template [[host_name("ptkit_bias_activation_float")]] kernel void bias_activation<float>(
    device float* y [[buffer(0)]],
    device const float* bias [[buffer(1)]],
    constant long& n [[buffer(2)]],
    constant long& has_bias [[buffer(3)]],
    constant long& activation [[buffer(4)]],
    uint gid [[thread_position_in_grid]]);

template [[host_name("ptkit_bias_activation_half")]] kernel void bias_activation<half>(
    device half* y [[buffer(0)]],
    device const half* bias [[buffer(1)]],
    constant long& n [[buffer(2)]],
    constant long& has_bias [[buffer(3)]],
    constant long& activation [[buffer(4)]],
    uint gid [[thread_position_in_grid]]);

template [[host_name("ptkit_bias_activation_bfloat")]] kernel void bias_activation<bfloat>(
    device bfloat* y [[buffer(0)]],
    device const bfloat* bias [[buffer(1)]],
    constant long& n [[buffer(2)]],
    constant long& has_bias [[buffer(3)]],
    constant long& activation [[buffer(4)]],
    uint gid [[thread_position_in_grid]]);
