// The bf16 decode GEMV's launch shapes on the GPU at hand: every shape the tensor-core
// kernel can take (features per block 8 * NT, k tiles per warp step U, warps per block)
// for m = 1, 4 and 16 rows of x against K = N = 8192 weights, beside the shape the
// launcher's model picks, the CUDA-core kernel, the device's copy bandwidth and how fast
// it reads the same 128 MiB in three patterns (the whole buffer in address order; rows
// in 64-byte and in 512-byte pieces per instruction, as GEMV kernels do). No torch: it
// includes cuda/kernels/kernels.cu itself, so it times the very kernels the wheel ships.
//
//   make gemv-shapes                  # builds build/cuda_gemv_shapes (sm_90) with the cu13 nvcc
//   build/cuda_gemv_shapes            # on the GPU machine (scripts/device-check runs it)
//
// Times are per launch in a CUDA graph of back-to-back launches (the best of five
// replays), the launches rotating over copies of w that together exceed four times the
// L2 cache, so that each reads its weights from memory. GB/s counts the weight bytes (x
// and y are < 0.1 %); the read patterns' rows have m = 0.
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

// Microseconds per launch of launch(i, stream), i = 0, 1, …: the best of five replays of
// a graph of kLaunches launches, after three eager warm-up launches.
template <class F>
double time_launches(F&& launch) {
  cudaStream_t stream;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  for (int i = 0; i < 3; ++i) launch(i, stream);
  check(cudaStreamSynchronize(stream), "the warm-up launches");
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
  for (int i = 0; i < kLaunches; ++i) launch(i, stream);
  check(cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture");
  check(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
  cudaEvent_t start, end;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&end), "cudaEventCreate");
  float best = 0.0f;
  for (int rep = 0; rep < 6; ++rep) {  // the first replay uploads the graph
    check(cudaEventRecord(start, stream), "cudaEventRecord");
    check(cudaGraphLaunch(exec, stream), "cudaGraphLaunch");
    check(cudaEventRecord(end, stream), "cudaEventRecord");
    check(cudaEventSynchronize(end), "the timed launches");
    float ms = 0.0f;
    check(cudaEventElapsedTime(&ms, start, end), "cudaEventElapsedTime");
    if (rep > 0 && (best == 0.0f || ms < best)) best = ms;
  }
  check(cudaGetLastError(), "a launch");
  cudaEventDestroy(start);
  cudaEventDestroy(end);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
  return best * 1e3 / kLaunches;
}

__global__ void copy_kernel(const uint4* __restrict__ src, uint4* __restrict__ dst, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    dst[i] = src[i];
  }
}

// Reads n 16-byte words in address order (grid-stride, four loads in flight per thread).
__global__ void read_flat_kernel(const uint4* __restrict__ p, int64_t n, unsigned* sink) {
  unsigned acc = 0;
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += 4 * stride) {
    uint4 v[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) v[j] = i + j * stride < n ? __ldg(p + i + j * stride) : make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int j = 0; j < 4; ++j) acc ^= v[j].x ^ v[j].y ^ v[j].z ^ v[j].w;
  }
  if (acc == 0x9e3779b9u) *sink = acc;  // keeps the loads
}

// Reads rows of row_words 16-byte words, L lanes per row (32 / L rows per block, one
// instruction reading 16 * L contiguous bytes of each), four loads in flight per lane.
template <int L>
__global__ void read_rows_kernel(const uint4* __restrict__ p, int64_t row_words, unsigned* sink) {
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const uint4* row = p + (int64_t{blockIdx.x} * (32 / L) + lane / L) * row_words + lane % L;
  unsigned acc = 0;
  for (int64_t s = int64_t{warp} * 4 * L; s < row_words; s += int64_t{blockDim.x >> 5} * 4 * L) {
    uint4 v[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) v[u] = __ldg(row + s + u * L);
#pragma unroll
    for (int u = 0; u < 4; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  if (acc == 0x9e3779b9u) *sink = acc;
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
    const double us = time_launches([&](int i, cudaStream_t stream) {
      fn<<<static_cast<unsigned>(blocks), kWarpSize * warps, smem, stream>>>(b.x, b.weights(i), nullptr, b.y, m, kK,
                                                                            kN, Activation::none);
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
  sweep<2, 2, kHi>(b, m);
  sweep<2, 4, kHi>(b, m);
  sweep<1, 4, kHi>(b, m);
}

void run(const Buffers& b, const DeviceInfo& dev, int m) {
  const LinearArgs first{b.x, b.w[0], nullptr, b.y, m, kK, kN, Activation::none, DType::bf16};
  GemvChoice c;
  check(m > 8 ? choose_tensor_core_gemv<bf16, true>(first, dev, &c) : choose_tensor_core_gemv<bf16, false>(first, dev, &c),
        "choose_tensor_core_gemv");
  char shape[128];
  std::snprintf(shape, sizeof shape, "**launcher's choice**: mma NT=%d U=%lld, %lld blocks x %d warps",
                c.rows_per_block / 8, static_cast<long long>(c.k_per_step / 32), static_cast<long long>(c.blocks),
                c.warps);
  row(shape, m, time_launches([&](int i, cudaStream_t stream) {
        const LinearArgs a{b.x, b.weights(i), nullptr, b.y, m, kK, kN, Activation::none, DType::bf16};
        check(launch_gemv(a, stream), "launch_gemv");
      }));
  row("CUDA cores (its own shape)", m, time_launches([&](int i, cudaStream_t stream) {
        const LinearArgs a{b.x, b.weights(i), nullptr, b.y, m, kK, kN, Activation::none, DType::bf16};
        check(gemv_cuda_cores<bf16, true>(a, dev, stream), "gemv_cuda_cores");
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

  // Copy bandwidth, counting bytes read and written, of a plain copy kernel (in a graph a
  // cudaMemcpyAsync is a memcpy node, which the copy engines serve, slower).
  const size_t bytes = size_t{1} << 30;
  void *src = nullptr, *dst = nullptr;
  check(cudaMalloc(&src, bytes), "cudaMalloc");
  check(cudaMalloc(&dst, bytes), "cudaMalloc");
  check(cudaMemset(src, 1, bytes), "cudaMemset");
  const double kernel_us = time_launches([&](int, cudaStream_t stream) {
    copy_kernel<<<prop.multiProcessorCount * 4, 512, 0, stream>>>(
        static_cast<const uint4*>(src), static_cast<uint4*>(dst), static_cast<int64_t>(bytes / sizeof(uint4)));
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
  std::printf("copy bandwidth (read + write, 1 GiB, a copy kernel): %.0f GB/s\n\n", 2.0 * bytes / kernel_us / 1e3);
  std::printf("| shape | m | us | GB/s |\n|---|---:|---:|---:|\n");
  unsigned* sink = nullptr;
  check(cudaMalloc(&sink, sizeof(unsigned)), "cudaMalloc");
  const int64_t words = static_cast<int64_t>(kWeightBytes) / 16;
  row("read in address order", 0, time_launches([&](int i, cudaStream_t stream) {
        read_flat_kernel<<<prop.multiProcessorCount * 4, 512, 0, stream>>>(
            reinterpret_cast<const uint4*>(b.weights(i)), words, sink);
      }));
  row("read rows, 64 bytes per row and instruction", 0, time_launches([&](int i, cudaStream_t stream) {
        read_rows_kernel<4><<<kN / 8, 32 * 4, 0, stream>>>(reinterpret_cast<const uint4*>(b.weights(i)), kK / 8, sink);
      }));
  row("read rows, 512 bytes per row and instruction", 0, time_launches([&](int i, cudaStream_t stream) {
        read_rows_kernel<32><<<kN, 32 * 8, 0, stream>>>(reinterpret_cast<const uint4*>(b.weights(i)), kK / 8, sink);
      }));
  for (int m : {1, 4, 16}) run(b, dev, m);
  return 0;
}
