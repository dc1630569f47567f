// The bf16 decode GEMV's launch shapes on the GPU at hand: every shape the tensor-core
// kernel can take (features per block 8 * NT, k tiles per warp step U, warps per block)
// for m = 1, 4 and 16 rows of x against K = N = 8192 weights, beside the shape the
// launcher's model picks, the CUDA-core kernel, and the device's copy bandwidth. No torch:
// it includes cuda/kernels/kernels.cu itself, so it times the very kernels the wheel ships.
//
//   make gemv-shapes                  # builds build/cuda_gemv_shapes (sm_90) with the cu13 nvcc
//   build/cuda_gemv_shapes            # on the GPU machine (scripts/device-check runs it)
//
// Times are the mean of back-to-back launches between two CUDA events, the launches
// rotating over copies of w that together exceed four times the L2 cache, so that each
// reads its weights from memory. GB/s counts the weight bytes (x and y are < 0.1 %).
#include "../cuda/kernels/kernels.cu"

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace ptkit::cuda {
namespace {

using bf16 = __nv_bfloat16;
constexpr int64_t kK = 8192;
constexpr int64_t kN = 8192;
constexpr int kLaunches = 60;
constexpr double kWeightBytes = double(kN) * kK * sizeof(bf16);

void check(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return;
  std::fprintf(stderr, "cuda_gemv_shapes: %s failed: %s\n", what, cudaGetErrorString(err));
  std::exit(2);
}

// Microseconds per launch of launch(i), i = 0, 1, … (after three warm-up launches).
template <class F>
double time_launches(F&& launch) {
  for (int i = 0; i < 3; ++i) launch(i);
  cudaEvent_t start, end;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&end), "cudaEventCreate");
  check(cudaEventRecord(start), "cudaEventRecord");
  for (int i = 0; i < kLaunches; ++i) launch(i);
  check(cudaEventRecord(end), "cudaEventRecord");
  check(cudaEventSynchronize(end), "the timed launches");
  float ms = 0.0f;
  check(cudaEventElapsedTime(&ms, start, end), "cudaEventElapsedTime");
  check(cudaGetLastError(), "a launch");
  cudaEventDestroy(start);
  cudaEventDestroy(end);
  return ms * 1e3 / kLaunches;
}

__global__ void copy_kernel(const uint4* __restrict__ src, uint4* __restrict__ dst, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    dst[i] = src[i];
  }
}

struct Buffers {
  int copies = 0;
  bf16* w[16] = {};
  bf16* x = nullptr;
  bf16* y = nullptr;
  const bf16* weights(int i) const { return w[i % copies]; }
};

void row(const char* shape, int m, double us) {
  std::printf("| %s | %d | %.1f | %.0f |\n", shape, m, us, kWeightBytes / us / 1e3);
}

template <int NT, int U, bool kHi>
void sweep(const Buffers& b, int m) {
  constexpr int kRows = kHi ? 16 : 8;
  const auto fn = &gemv_mma_kernel<bf16, NT, U, kHi>;
  cudaFuncAttributes attr{};
  check(cudaFuncGetAttributes(&attr, fn), "cudaFuncGetAttributes");
  const int64_t blocks = (kN + 8 * NT - 1) / (8 * NT);
  for (int warps = 1; warps <= kMmaMaxThreads<NT> / kWarpSize; warps *= 2) {
    const size_t smem = size_t{kRows} * (8 * NT + 8) * sizeof(float) * warps;
    int per_sm = 0;
    check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fn, kWarpSize * warps, smem), "occupancy");
    const double us = time_launches([&](int i) {
      fn<<<static_cast<unsigned>(blocks), kWarpSize * warps, smem>>>(b.x, b.weights(i), nullptr, b.y, m, kK, kN,
                                                                     Activation::none);
    });
    char shape[128];
    std::snprintf(shape, sizeof shape, "mma NT=%d U=%d, %lld blocks x %d warps (%d regs, %d blocks/SM)", NT, U,
                  static_cast<long long>(blocks), warps, attr.numRegs, per_sm);
    row(shape, m, us);
  }
}

template <bool kHi>
void sweep_all(const Buffers& b, int m) {
  sweep<8, 1, kHi>(b, m);
  sweep<8, 2, kHi>(b, m);
  sweep<4, 1, kHi>(b, m);
  sweep<4, 2, kHi>(b, m);
  sweep<4, 4, kHi>(b, m);
  sweep<2, 2, kHi>(b, m);
  sweep<2, 4, kHi>(b, m);
  sweep<1, 4, kHi>(b, m);
  sweep<1, 8, kHi>(b, m);
}

template <bool kHi>
GemvChoice model_choice(const LinearArgs& a, const DeviceInfo& dev) {
  const GemvCandidate cands[] = {mma_candidate<bf16, 8, kHi>(), mma_candidate<bf16, 4, kHi>(),
                                 mma_candidate<bf16, 2, kHi>(), mma_candidate<bf16, 1, kHi>()};
  GemvChoice c;
  check(choose_gemv(cands, 4, a, dev, &c), "choose_gemv");
  return c;
}

void run(const Buffers& b, const DeviceInfo& dev, int m) {
  const LinearArgs first{b.x, b.w[0], nullptr, b.y, m, kK, kN, Activation::none, DType::bf16};
  const GemvChoice c = m > 8 ? model_choice<true>(first, dev) : model_choice<false>(first, dev);
  char shape[128];
  const int u[] = {kMmaU<8>, kMmaU<4>, kMmaU<2>, kMmaU<1>};  // the candidates' order
  std::snprintf(shape, sizeof shape, "**launcher's choice**: mma NT=%d U=%d, %lld blocks x %d warps", 8 >> c.index,
                u[c.index], static_cast<long long>(c.blocks), c.warps);
  row(shape, m, time_launches([&](int i) {
        const LinearArgs a{b.x, b.weights(i), nullptr, b.y, m, kK, kN, Activation::none, DType::bf16};
        check(launch_gemv(a, cudaStream_t{}), "launch_gemv");
      }));
  row("CUDA cores (its own shape)", m, time_launches([&](int i) {
        const LinearArgs a{b.x, b.weights(i), nullptr, b.y, m, kK, kN, Activation::none, DType::bf16};
        check(gemv_cuda_cores<bf16, true>(a, dev, cudaStream_t{}), "gemv_cuda_cores");
      }));
  if (m > 8) {
    sweep_all<true>(b, m);
  } else {
    sweep_all<false>(b, m);
  }
}

}  // namespace
}  // namespace ptkit::cuda

int main() {
  using namespace ptkit::cuda;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::fprintf(stderr, "cuda_gemv_shapes: no CUDA device visible: run it on a GPU machine\n");
    return 2;
  }
  DeviceInfo dev;
  check(current_device(&dev), "current_device");
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, dev.id), "cudaGetDeviceProperties");

  // Copy bandwidth, counting bytes read and written: cudaMemcpyAsync and a plain copy kernel.
  const size_t bytes = size_t{1} << 30;
  void *src = nullptr, *dst = nullptr;
  check(cudaMalloc(&src, bytes), "cudaMalloc");
  check(cudaMalloc(&dst, bytes), "cudaMalloc");
  check(cudaMemset(src, 1, bytes), "cudaMemset");
  const double memcpy_us =
      time_launches([&](int) { check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice), "cudaMemcpyAsync"); });
  const double kernel_us = time_launches([&](int) {
    copy_kernel<<<prop.multiProcessorCount * 4, 512>>>(static_cast<const uint4*>(src), static_cast<uint4*>(dst),
                                                       static_cast<int64_t>(bytes / sizeof(uint4)));
  });
  check(cudaFree(src), "cudaFree");
  check(cudaFree(dst), "cudaFree");

  Buffers b;
  const double l2 = prop.l2CacheSize;
  b.copies = static_cast<int>(std::min(16.0, std::max(1.0, std::ceil(4.0 * l2 / kWeightBytes))));
  for (int i = 0; i < b.copies; ++i) {
    check(cudaMalloc(&b.w[i], static_cast<size_t>(kWeightBytes)), "cudaMalloc");
    check(cudaMemset(b.w[i], 0x3c, static_cast<size_t>(kWeightBytes)), "cudaMemset");
  }
  check(cudaMalloc(&b.x, 16 * kK * sizeof(bf16)), "cudaMalloc");
  check(cudaMemset(b.x, 0x3c, 16 * kK * sizeof(bf16)), "cudaMemset");
  check(cudaMalloc(&b.y, 16 * kN * sizeof(bf16)), "cudaMalloc");

  std::printf("# bf16 decode GEMV launch shapes: %s, %d SMs, %.0f MB L2, K = N = %lld, %d copies of w\n\n", prop.name,
              prop.multiProcessorCount, l2 / 1e6, static_cast<long long>(kK), b.copies);
  std::printf("copy bandwidth (read + write, 1 GiB): cudaMemcpyAsync %.0f GB/s, copy kernel %.0f GB/s\n\n",
              2.0 * bytes / memcpy_us / 1e3, 2.0 * bytes / kernel_us / 1e3);
  std::printf("| shape | m | us | GB/s |\n|---|---:|---:|---:|\n");
  for (int m : {1, 4, 16}) run(b, dev, m);
  return 0;
}
