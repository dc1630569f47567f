// SYCL kernels behind ptkit's XPU ops (Intel GPUs): the launchers of
// ptkit/gpu/launchers.h, for the shared op layer (gpu/ops.cpp, built with
// -DPTKIT_GPU_XPU). Compiled by icpx -fsycl (cmake/ptkit-xpu.cmake), never by the host
// compiler, and torch-free: the op layer passes raw USM pointers and torch's queue.
//
// Every kernel loads fp32 / fp16 / bf16, computes in fp32 and rounds once, on the
// store. Loads and stores are 16 bytes wide (4 x fp32 or 8 x 16-bit) where the
// pointers are 16-byte aligned and the row length is a multiple of the vector
// width, so that no vector straddles two rows; otherwise a scalar path runs. Index
// arithmetic is 64-bit wherever a product of sizes can exceed 2^31; the number of
// work-groups is capped (kMaxGroups) and kernels loop over what the range does not
// cover, so that no size reaches the backend's 32-bit group-count limits.
//
// Launchers only enqueue: torch's XPU queues are in-order, so a kernel runs after the
// torch kernels enqueued before it and before those enqueued after it; nothing here
// waits. Errors raised while submitting (sycl::exception: a kernel not built for the
// device, an nd_range the device rejects …) come back as a LaunchError; errors during
// execution reach torch's queue like those of its own kernels.
#include <sycl/sycl.hpp>
#include <sycl/ext/oneapi/bfloat16.hpp>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <limits>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "ptkit/gpu/launchers.h"

namespace ptkit::gpu {

// Kernel functors live in a named namespace, not an anonymous one: their types are the
// kernels' names, which DPC++'s integration header must be able to spell.
namespace xpu_kernels {

using bf16 = sycl::ext::oneapi::bfloat16;

// Work-groups per launch, at most: ample to fill the largest Intel GPU many times
// over, and far below the 32-bit group counts Level Zero accepts per dimension.
constexpr int64_t kMaxGroups = int64_t{1} << 16;

// ---------------------------------------------------------------------------
// Element access: NV consecutive elements converted to / from fp32. NV == 16 /
// sizeof(T) is one 16-byte access (the address must be 16-byte aligned), NV == 1 a
// scalar one.

template <class T, int NV>
struct alignas(sizeof(T) * NV) Pack {
  T v[NV];
};

template <class T>
constexpr int kVec = 16 / static_cast<int>(sizeof(T));

template <class T, int NV>
inline void load_f(const T* p, float (&f)[NV]) {
  const Pack<T, NV> pack = *reinterpret_cast<const Pack<T, NV>*>(p);
#pragma unroll
  for (int e = 0; e < NV; ++e) f[e] = static_cast<float>(pack.v[e]);
}

// Rounds each value once: float -> sycl::half and float -> bfloat16 both round to
// nearest even.
template <class T, int NV>
inline void store_f(T* p, const float (&f)[NV]) {
  Pack<T, NV> pack;
#pragma unroll
  for (int e = 0; e < NV; ++e) pack.v[e] = static_cast<T>(f[e]);
  *reinterpret_cast<Pack<T, NV>*>(p) = pack;
}

// ---------------------------------------------------------------------------
// Activations, in fp32. The activation is a kernel argument: the branch is uniform
// over the launch and the kernels are memory-bound, so one kernel per activation
// would buy nothing but binary size (every kernel is built for each AOT device).
// The formulas are those of the CUDA tree, so both backends round alike.

// silu, gelu and gelu_tanh take their limits at +-inf (+inf, -0), where the formulas
// meet -inf * 0 = NaN: ptkit's semantics on every backend (docs/using.md).
inline float minus_zero_at_minus_infinity(float v, float y) {
  return v == -std::numeric_limits<float>::infinity() ? -0.0f : y;
}

inline float silu(float v) {
  return minus_zero_at_minus_infinity(v, v / (1.0f + sycl::exp(-v)));
}

inline float activate(float v, Activation a) {
  switch (a) {
    case Activation::relu:
      return v < 0.0f ? 0.0f : v;  // NaN stays NaN, as torch
    case Activation::gelu:
      // x Phi(x) = x erfc(-x / sqrt 2) / 2, the erf form of GELU; erfc rather than
      // 1 + erf(x / sqrt 2): no cancellation for negative x.
      return minus_zero_at_minus_infinity(v, 0.5f * v * sycl::erfc(-0.70710678118654752f * v));
    case Activation::gelu_tanh: {
      // 0.5 x (1 + tanh(u)) = x / (1 + e^(-2u)), u = sqrt(2/pi) (x + 0.044715 x^3).
      const float two_u = 1.5957691216057308f * sycl::fma(0.044715f * v, v * v, v);
      return minus_zero_at_minus_infinity(v, v / (1.0f + sycl::exp(-two_u)));
    }
    case Activation::silu:
      return silu(v);
    default:
      return v;
  }
}

// ---------------------------------------------------------------------------
// rms_norm: one work-group per row (work-groups stride over rows past kMaxGroups).
// Each work-item sums the squares of its packs (with Kahan's compensation: a few fp32
// roundings whatever the row length), sycl::reduce_over_group gives every work-item
// the row's sum, then a second pass over the row (from cache) scales and stores. A
// row whose fp32 squares overflow (all values finite, |x| above ~1.8e19) is summed
// again scaled by its largest |x|, so it normalises as in float64 instead of to 0 (as
// the CPU kernel and the reference).

struct CompensatedSum {
  float sum = 0.0f;
  float c = 0.0f;
  void add(float v) {
    const float y = v - c;
    const float t = sum + y;
    // Once the sum overflows it stays inf, as a plain sum does (inf - inf would make c,
    // then the sum, NaN, and hide the overflow from the rescue that looks for inf).
    c = sycl::isinf(t) ? 0.0f : (t - sum) - y;
    sum = t;
  }
};

template <class T, int NV>
struct RmsNormKernel {
  const T* x;
  const T* weight;
  T* y;
  int64_t rows;
  int64_t cols;
  float inv_cols;
  float eps;

  void operator()(sycl::nd_item<1> it) const {
    const sycl::group<1> group = it.get_group();
    const int64_t packs = cols / NV;
    const int64_t lid = static_cast<int64_t>(it.get_local_id(0));
    const int64_t threads = static_cast<int64_t>(it.get_local_range(0));
    const int64_t group_stride = static_cast<int64_t>(it.get_group_range(0));
    // r is the same for the whole work-group, so every work-item reaches the
    // reduction (a group algorithm must be met by all of them).
    for (int64_t r = static_cast<int64_t>(it.get_group(0)); r < rows; r += group_stride) {
      const T* xr = x + r * cols;  // 64-bit: rows * cols can exceed 2^31
      CompensatedSum acc;
      for (int64_t p = lid; p < packs; p += threads) {
        float f[NV];
        load_f<T, NV>(xr + p * NV, f);
#pragma unroll
        for (int e = 0; e < NV; ++e) acc.add(f[e] * f[e]);
      }
      const float total = sycl::reduce_over_group(group, acc.sum, sycl::plus<float>());
      // rsqrt(mean + eps), the mean as sum x^2 (1 / cols), as torch's mean; m = 1
      // unless the squares overflowed (total is the same in every work-item, so the
      // whole group meets the reductions below or none does).
      float m = 1.0f;
      float inv = sycl::rsqrt(sycl::fma(total, inv_cols, eps));
      if (sycl::isinf(total)) {
        float local_max = 0.0f;
        for (int64_t p = lid; p < packs; p += threads) {
          float f[NV];
          load_f<T, NV>(xr + p * NV, f);
#pragma unroll
          for (int e = 0; e < NV; ++e) local_max = sycl::fmax(local_max, sycl::fabs(f[e]));
        }
        const float largest = sycl::reduce_over_group(group, local_max, sycl::maximum<float>());
        if (sycl::isfinite(largest)) {
          float scaled = 0.0f;
          for (int64_t p = lid; p < packs; p += threads) {
            float f[NV];
            load_f<T, NV>(xr + p * NV, f);
#pragma unroll
            for (int e = 0; e < NV; ++e) {
              const float v = f[e] / largest;  // <= 1: no overflow
              scaled = sycl::fma(v, v, scaled);
            }
          }
          const float sum = sycl::reduce_over_group(group, scaled, sycl::plus<float>());
          m = largest;
          inv = sycl::rsqrt(sycl::fma(sum, inv_cols, (eps / m) / m));
        }
      }
      T* yr = y + r * cols;
      for (int64_t p = lid; p < packs; p += threads) {
        float f[NV], g[NV];
        load_f<T, NV>(xr + p * NV, f);
        load_f<T, NV>(weight + p * NV, g);
        if (m != 1.0f) {  // rescued (m >= ~1e15 then): 1 / m could be subnormal, so divide
#pragma unroll
          for (int e = 0; e < NV; ++e) f[e] = (f[e] / m) * inv * g[e];
        } else {
#pragma unroll
          for (int e = 0; e < NV; ++e) f[e] = f[e] * inv * g[e];
        }
        store_f<T, NV>(yr + p * NV, f);
      }
    }
  }
};

// ---------------------------------------------------------------------------
// Element-wise kernels over [rows, packs] (NV elements a pack): a 2-D nd_range,
// dimension 1 (the fastest-varying one, so neighbouring work-items touch neighbouring
// packs) along the packs, dimension 0 along the rows; both stride past the range.

// y[r, c] = silu(x[r, c]) * x[r, d + c]. exp and division are the accurate ones for
// every dtype: the kernel is memory-bound.
template <class T, int NV>
struct SiluAndMulKernel {
  const T* x;
  T* y;
  int64_t rows;
  int64_t d;

  void operator()(sycl::nd_item<2> it) const {
    const int64_t packs = d / NV;
    const int64_t pack_stride = static_cast<int64_t>(it.get_global_range(1));
    const int64_t row_stride = static_cast<int64_t>(it.get_global_range(0));
    for (int64_t p = static_cast<int64_t>(it.get_global_id(1)); p < packs; p += pack_stride) {
      const int64_t c = p * NV;
      for (int64_t r = static_cast<int64_t>(it.get_global_id(0)); r < rows; r += row_stride) {
        const T* xr = x + r * 2 * d + c;
        float g[NV], u[NV];
        load_f<T, NV>(xr, g);
        load_f<T, NV>(xr + d, u);
#pragma unroll
        for (int e = 0; e < NV; ++e) g[e] = silu(g[e]) * u[e];
        store_f<T, NV>(y + r * d + c, g);
      }
    }
  }
};

// y = act(y + bias) in place; bias may be null. Each work-item loads its bias pack
// once and reuses it for every row it visits.
template <class T, int NV>
struct BiasActivationKernel {
  T* y;
  const T* bias;
  int64_t rows;
  int64_t n;
  Activation act;

  void operator()(sycl::nd_item<2> it) const {
    const int64_t packs = n / NV;
    const int64_t pack_stride = static_cast<int64_t>(it.get_global_range(1));
    const int64_t row_stride = static_cast<int64_t>(it.get_global_range(0));
    for (int64_t p = static_cast<int64_t>(it.get_global_id(1)); p < packs; p += pack_stride) {
      const int64_t c = p * NV;
      float b[NV];
      if (bias != nullptr) {
        load_f<T, NV>(bias + c, b);
      } else {
#pragma unroll
        for (int e = 0; e < NV; ++e) b[e] = 0.0f;
      }
      for (int64_t r = static_cast<int64_t>(it.get_global_id(0)); r < rows; r += row_stride) {
        float f[NV];
        load_f<T, NV>(y + r * n + c, f);
#pragma unroll
        for (int e = 0; e < NV; ++e) f[e] = activate(f[e] + b[e], act);
        store_f<T, NV>(y + r * n + c, f);
      }
    }
  }
};

// ---------------------------------------------------------------------------
// GEMV for decode shapes (m <= kGemvMaxRows): y[r, col] = act(x[r] . w[col] + bias[col]).
//
// One sub-group per output column (sub-groups stride over columns past the range):
// its lanes stride over k, NV elements a lane, so that together they read the w row
// in contiguous runs of 16 lanes x 16 bytes; each lane keeps MB fp32 accumulators,
// one per row of x (x is small and re-read from cache). sycl::reduce_over_group on
// the sub-group then gives every lane each row's dot product; lane r adds the bias,
// applies the activation, rounds once and stores row r. The GEMV streams w once:
// it is bandwidth-bound.
//
// The sub-group size is fixed at 16 ([[sycl::reqd_sub_group_size]]): every Intel GPU
// the recipe targets supports it (Xe-HPC, Xe2), lane r can hold row r (MB <= 16), and
// the work-group's sub-group count is a compile-time constant. A device without
// sub-groups of 16 (possible only through the JIT fallback) rejects the kernel at
// submission — but not every SYCL runtime does: one (AdaptiveCpp on a CPU device,
// sub-groups of 1) ignored the attribute and the kernel wrote every 8th column with
// 1/16 of the sum. So gemv_runs_on asks the device for its sub-group sizes first, and
// the op layer takes the library GEMM path on a device without 16.

constexpr int kSubGroup = 16;
constexpr int kGemvSubGroups = 8;  // per work-group: 128 work-items
static_assert(kGemvMaxRows <= kSubGroup, "lane r stores row r of the GEMV output");

template <class T, int MB, int NV>
struct GemvKernel {
  static_assert(MB <= kSubGroup, "lane r stores row r");
  const T* x;
  const T* w;
  const T* bias;
  T* y;
  int m;  // <= MB
  int64_t k;
  int64_t n;
  Activation act;

  [[sycl::reqd_sub_group_size(kSubGroup)]] void operator()(sycl::nd_item<1> it) const {
    const sycl::sub_group sg = it.get_sub_group();
    const int lane = static_cast<int>(sg.get_local_linear_id());
    const int64_t first = static_cast<int64_t>(it.get_group(0)) * kGemvSubGroups +
                          static_cast<int64_t>(sg.get_group_linear_id());
    const int64_t stride = static_cast<int64_t>(it.get_group_range(0)) * kGemvSubGroups;
    const int64_t packs = k / NV;
    // col is the same for every lane of the sub-group, so all of them reach the
    // reductions below.
    for (int64_t col = first; col < n; col += stride) {
      const T* wr = w + col * k;  // 64-bit: n * k can exceed 2^31
      float acc[MB];
#pragma unroll
      for (int r = 0; r < MB; ++r) acc[r] = 0.0f;
#pragma unroll 2
      for (int64_t p = lane; p < packs; p += kSubGroup) {
        float wf[NV];
        load_f<T, NV>(wr + p * NV, wf);
#pragma unroll
        for (int r = 0; r < MB; ++r) {
          if (r < m) {
            float xf[NV];
            load_f<T, NV>(x + r * k + p * NV, xf);
#pragma unroll
            for (int e = 0; e < NV; ++e) acc[r] = sycl::fma(xf[e], wf[e], acc[r]);
          }
        }
      }
      // Rows r < m only (m is uniform, so the branch is too). Each lane keeps the sum
      // of its own row: a select, not a register array indexed by the lane id.
      float dot = 0.0f;
#pragma unroll
      for (int r = 0; r < MB; ++r) {
        if (r < m) {
          const float sum = sycl::reduce_over_group(sg, acc[r], sycl::plus<float>());
          if (lane == r) dot = sum;
        }
      }
      if (lane < m) {
        const float b = bias != nullptr ? static_cast<float>(bias[col]) : 0.0f;
        y[static_cast<int64_t>(lane) * n + col] = static_cast<T>(activate(dot + b, act));
      }
    }
  }
};

}  // namespace xpu_kernels

namespace {

namespace xk = xpu_kernels;

// ---------------------------------------------------------------------------
// Errors. A launcher never throws: sycl::exception and any other exception from
// submission become a LaunchError whose strings live in thread-local storage, valid
// until the next launch on this thread (the contract in launchers.h).

thread_local std::string t_error_name;
thread_local std::string t_error_message;

LaunchError stored_error(const char* name, const char* message) noexcept {
  try {
    t_error_name = name;
    t_error_message = message;
    return {t_error_name.c_str(), t_error_message.c_str()};
  } catch (...) {  // out of memory while copying the message: report without it
    return {"std::bad_alloc", "out of host memory while reporting a SYCL launch error"};
  }
}

LaunchError invalid_argument(const char* message) noexcept {
  return {"ptkit::invalid_argument", message};  // static strings
}

const char* errc_name(sycl::errc code) noexcept {
  switch (code) {
    case sycl::errc::success: return "sycl::errc::success";
    case sycl::errc::runtime: return "sycl::errc::runtime";
    case sycl::errc::kernel: return "sycl::errc::kernel";
    case sycl::errc::accessor: return "sycl::errc::accessor";
    case sycl::errc::nd_range: return "sycl::errc::nd_range";
    case sycl::errc::event: return "sycl::errc::event";
    case sycl::errc::kernel_argument: return "sycl::errc::kernel_argument";
    case sycl::errc::build: return "sycl::errc::build";
    case sycl::errc::invalid: return "sycl::errc::invalid";
    case sycl::errc::memory_allocation: return "sycl::errc::memory_allocation";
    case sycl::errc::platform: return "sycl::errc::platform";
    case sycl::errc::profiling: return "sycl::errc::profiling";
    case sycl::errc::feature_not_supported: return "sycl::errc::feature_not_supported";
    case sycl::errc::kernel_not_supported: return "sycl::errc::kernel_not_supported";
    case sycl::errc::backend_mismatch: return "sycl::errc::backend_mismatch";
    default: return "sycl::exception";
  }
}

LaunchError sycl_error(const sycl::exception& e) noexcept {
  const std::error_code& code = e.code();
  const char* name = code.category() == sycl::sycl_category() ? errc_name(static_cast<sycl::errc>(code.value()))
                                                               : "sycl::exception (backend error)";
  return stored_error(name, e.what());
}

// Runs `submit` (which enqueues one kernel), turning exceptions into a LaunchError.
template <class F>
LaunchError guarded(F&& submit) noexcept {
  try {
    std::forward<F>(submit)();
    return {};
  } catch (const sycl::exception& e) {
    return sycl_error(e);
  } catch (const std::exception& e) {
    return stored_error("std::exception", e.what());
  } catch (...) {
    return {"unknown exception", "a non-standard exception was thrown while submitting a SYCL kernel"};
  }
}

// ---------------------------------------------------------------------------
// Launch shapes.

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

int64_t clamp64(int64_t v, int64_t lo, int64_t hi) { return std::min(std::max(v, lo), hi); }

// Smallest power of two >= v, within [lo, hi].
int64_t pow2_at_least(int64_t v, int64_t lo, int64_t hi) {
  int64_t p = lo;
  while (p < v && p < hi) p *= 2;
  return p;
}

bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

constexpr int64_t kElementwiseThreads = 256;  // every Intel GPU allows 256 per work-group
constexpr int64_t kRmsMaxThreads = 256;
constexpr int64_t kRmsMinThreads = 32;  // a whole sub-group or two, whatever size the compiler picks

// [rows, packs] covered by work-groups of (by, bx) work-items, bx along the packs.
sycl::nd_range<2> elementwise_range(int64_t rows, int64_t packs) {
  const int64_t bx = pow2_at_least(packs, 1, kElementwiseThreads);
  const int64_t by = kElementwiseThreads / bx;
  const int64_t gx = clamp64(ceil_div(packs, bx), 1, xk::kMaxGroups);
  const int64_t gy = clamp64(ceil_div(rows, by), 1, std::max<int64_t>(1, xk::kMaxGroups / gx));
  return {sycl::range<2>(static_cast<size_t>(gy * by), static_cast<size_t>(gx * bx)),
          sycl::range<2>(static_cast<size_t>(by), static_cast<size_t>(bx))};
}

sycl::queue& queue_of(Stream stream) { return *static_cast<sycl::queue*>(stream); }

bool valid_dtype(DType t) { return t == DType::f32 || t == DType::f16 || t == DType::bf16; }

bool valid_activation(Activation a) {
  return a == Activation::none || a == Activation::relu || a == Activation::gelu ||
         a == Activation::gelu_tanh || a == Activation::silu;
}

// f(T{}) with T the element type of `t` (valid_dtype(t) checked before).
template <class F>
void with_dtype(DType t, F&& f) {
  switch (t) {
    case DType::f32:
      f(float{});
      break;
    case DType::f16:
      f(sycl::half{});
      break;
    case DType::bf16:
      f(xk::bf16{});
      break;
  }
}

// rms_norm ---------------------------------------------------------------------

template <class T, int NV>
void submit_rms_norm(sycl::queue& q, const RmsNormArgs& a) {
  const int64_t packs = a.cols / NV;
  const int64_t threads = pow2_at_least(packs, kRmsMinThreads, kRmsMaxThreads);
  const int64_t groups = clamp64(a.rows, 1, xk::kMaxGroups);
  const xk::RmsNormKernel<T, NV> kernel{static_cast<const T*>(a.x), static_cast<const T*>(a.weight),
                                        static_cast<T*>(a.y),        a.rows,
                                        a.cols,                      1.0f / static_cast<float>(a.cols),
                                        a.eps};
  q.submit([&](sycl::handler& h) {
    h.parallel_for(sycl::nd_range<1>(static_cast<size_t>(groups * threads), static_cast<size_t>(threads)),
                   kernel);
  });
}

template <class T>
void rms_norm_dispatch(sycl::queue& q, const RmsNormArgs& a) {
  constexpr int kV = xk::kVec<T>;
  if (aligned16(a.x) && aligned16(a.weight) && aligned16(a.y) && a.cols % kV == 0) {
    submit_rms_norm<T, kV>(q, a);
  } else {
    submit_rms_norm<T, 1>(q, a);
  }
}

// silu_and_mul -------------------------------------------------------------------

template <class T, int NV>
void submit_silu_and_mul(sycl::queue& q, const SiluAndMulArgs& a) {
  const xk::SiluAndMulKernel<T, NV> kernel{static_cast<const T*>(a.x), static_cast<T*>(a.y), a.rows, a.d};
  const sycl::nd_range<2> range = elementwise_range(a.rows, a.d / NV);
  q.submit([&](sycl::handler& h) { h.parallel_for(range, kernel); });
}

template <class T>
void silu_and_mul_dispatch(sycl::queue& q, const SiluAndMulArgs& a) {
  constexpr int kV = xk::kVec<T>;
  // x rows (2d), the up half (offset d) and y rows (d) stay 16-byte aligned iff d % kV == 0.
  if (aligned16(a.x) && aligned16(a.y) && a.d % kV == 0) {
    submit_silu_and_mul<T, kV>(q, a);
  } else {
    submit_silu_and_mul<T, 1>(q, a);
  }
}

// bias_activation -------------------------------------------------------------------

template <class T, int NV>
void submit_bias_activation(sycl::queue& q, const LinearArgs& a) {
  const xk::BiasActivationKernel<T, NV> kernel{static_cast<T*>(a.y), static_cast<const T*>(a.bias), a.m, a.n,
                                               a.activation};
  const sycl::nd_range<2> range = elementwise_range(a.m, a.n / NV);
  q.submit([&](sycl::handler& h) { h.parallel_for(range, kernel); });
}

template <class T>
void bias_activation_dispatch(sycl::queue& q, const LinearArgs& a) {
  constexpr int kV = xk::kVec<T>;
  if (aligned16(a.y) && (a.bias == nullptr || aligned16(a.bias)) && a.n % kV == 0) {
    submit_bias_activation<T, kV>(q, a);
  } else {
    submit_bias_activation<T, 1>(q, a);
  }
}

// gemv ----------------------------------------------------------------------------

template <class T, int MB, int NV>
void submit_gemv(sycl::queue& q, const LinearArgs& a) {
  constexpr int64_t threads = int64_t{xk::kSubGroup} * xk::kGemvSubGroups;
  const int64_t groups = clamp64(ceil_div(a.n, xk::kGemvSubGroups), 1, xk::kMaxGroups);
  const xk::GemvKernel<T, MB, NV> kernel{static_cast<const T*>(a.x),    static_cast<const T*>(a.w),
                                         static_cast<const T*>(a.bias), static_cast<T*>(a.y),
                                         static_cast<int>(a.m),         a.k,
                                         a.n,                           a.activation};
  q.submit([&](sycl::handler& h) {
    h.parallel_for(sycl::nd_range<1>(static_cast<size_t>(groups * threads), static_cast<size_t>(threads)),
                   kernel);
  });
}

// MB: accumulators per lane, the smallest instantiated bound >= m (fewer registers
// for the common m = 1).
template <class T, int NV>
void gemv_rows(sycl::queue& q, const LinearArgs& a) {
  if (a.m <= 1) return submit_gemv<T, 1, NV>(q, a);
  if (a.m <= 2) return submit_gemv<T, 2, NV>(q, a);
  if (a.m <= 4) return submit_gemv<T, 4, NV>(q, a);
  if (a.m <= 8) return submit_gemv<T, 8, NV>(q, a);
  return submit_gemv<T, 16, NV>(q, a);
}

template <class T>
void gemv_dispatch(sycl::queue& q, const LinearArgs& a) {
  constexpr int kV = xk::kVec<T>;
  // Rows of x and w stay 16-byte aligned iff k % kV == 0.
  if (aligned16(a.x) && aligned16(a.w) && a.k % kV == 0) {
    gemv_rows<T, kV>(q, a);
  } else {
    gemv_rows<T, 1>(q, a);
  }
}

}  // namespace

// ---------------------------------------------------------------------------
// The launchers of ptkit/gpu/launchers.h. Invalid arguments (which the op layer never
// passes) are reported, not asserted; empty outputs enqueue nothing.

LaunchError launch_rms_norm(const RmsNormArgs& args, Stream stream) {
  if (stream == nullptr) return invalid_argument("launch_rms_norm: no SYCL queue");
  if (!valid_dtype(args.dtype) || args.rows < 0 || args.cols < 0) {
    return invalid_argument("launch_rms_norm: invalid dtype or negative size");
  }
  if (args.rows == 0 || args.cols == 0) return {};
  return guarded([&] {
    with_dtype(args.dtype, [&](auto tag) { rms_norm_dispatch<decltype(tag)>(queue_of(stream), args); });
  });
}

LaunchError launch_silu_and_mul(const SiluAndMulArgs& args, Stream stream) {
  if (stream == nullptr) return invalid_argument("launch_silu_and_mul: no SYCL queue");
  if (!valid_dtype(args.dtype) || args.rows < 0 || args.d < 0) {
    return invalid_argument("launch_silu_and_mul: invalid dtype or negative size");
  }
  if (args.rows == 0 || args.d == 0) return {};
  return guarded([&] {
    with_dtype(args.dtype, [&](auto tag) { silu_and_mul_dispatch<decltype(tag)>(queue_of(stream), args); });
  });
}

bool gemv_runs_on(Stream stream) {
  if (stream == nullptr) return false;
  try {
    const std::vector<size_t> sizes =
        queue_of(stream).get_device().get_info<sycl::info::device::sub_group_sizes>();
    return std::find(sizes.begin(), sizes.end(), static_cast<size_t>(xk::kSubGroup)) != sizes.end();
  } catch (const std::exception&) {
    return false;  // a device that cannot say: the portable path
  }
}

LaunchError launch_gemv(const LinearArgs& args, Stream stream) {
  if (stream == nullptr) return invalid_argument("launch_gemv: no SYCL queue");
  if (!valid_dtype(args.dtype) || !valid_activation(args.activation)) {
    return invalid_argument("launch_gemv: invalid dtype or activation");
  }
  if (args.m < 0 || args.m > kGemvMaxRows || args.k < 0 || args.n < 0) {
    return invalid_argument("launch_gemv: m must be in [0, 16] (kGemvMaxRows) and k, n >= 0");
  }
  if (args.m == 0 || args.n == 0) return {};  // k == 0 still writes act(bias)
  if (!gemv_runs_on(stream)) {
    return invalid_argument("launch_gemv: the device has no sub-groups of 16, which the GEMV kernel needs "
                            "(the op layer takes the library GEMM path there: ptkit::gpu::gemv_runs_on)");
  }
  return guarded([&] {
    with_dtype(args.dtype, [&](auto tag) { gemv_dispatch<decltype(tag)>(queue_of(stream), args); });
  });
}

LaunchError launch_bias_activation(const LinearArgs& args, Stream stream) {
  if (stream == nullptr) return invalid_argument("launch_bias_activation: no SYCL queue");
  if (!valid_dtype(args.dtype) || !valid_activation(args.activation) || args.m < 0 || args.n < 0) {
    return invalid_argument("launch_bias_activation: invalid dtype, activation or size");
  }
  if (args.m == 0 || args.n == 0) return {};
  if (args.bias == nullptr && args.activation == Activation::none) return {};  // identity
  return guarded([&] {
    with_dtype(args.dtype,
               [&](auto tag) { bias_activation_dispatch<decltype(tag)>(queue_of(stream), args); });
  });
}

}  // namespace ptkit::gpu
