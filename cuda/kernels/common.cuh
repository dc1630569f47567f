// Device primitives that kernels.cu builds on: the CUDA headers it needs and the
// few operations written in inline PTX. Everything here compiles for every target
// of the build (sm_90 … sm_120, compute_120); PTX that needs a newer architecture
// than the oldest one nvcc accepts is guarded by __CUDA_ARCH__, with a fallback.
#pragma once

#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

namespace ptkit::cuda::detail {

// 16 bytes of data that is read exactly once (GEMV weights): not allocated in L1,
// so that it does not evict what is reused there, and with a hint to L2 to fetch
// the whole 256-byte block around it from DRAM.
__device__ __forceinline__ uint4 ld_stream_v4(const void* p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p));
  return v;
#else
  return __ldg(static_cast<const uint4*>(p));
#endif
}

// Tensor-core MMA d = a * b + d, shape m16n8k16, fp32 accumulators, a row-major
// 16 x 16, b column-major 16 x 8 (k contiguous), both 16-bit (PTX ISA, "Matrix
// Fragments for mma.m16n8k16 with floating point type"):
//   a0 = A[g][2t, 2t+1]      a1 = A[g + 8][2t, 2t+1]
//   a2 = A[g][2t+8, 2t+9]    a3 = A[g + 8][2t+8, 2t+9]
//   b0 = B[2t, 2t+1][g]      b1 = B[2t+8, 2t+9][g]
//   d0, d1 = D[g][2t, 2t+1]  d2, d3 = D[g + 8][2t, 2t+1]
// with g = lane / 4, t = lane % 4, the lower index in the lower 16 bits. All 32
// lanes of the warp must execute it together. sm_80 and later; kernels that use
// it are only launched on such devices (the host side checks), and every target
// of this build is one.
template <bool kBf16>
__device__ __forceinline__ void mma_m16n8k16(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                             uint32_t a3, uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (kBf16) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  } else {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  }
#else
  (void)d, (void)a0, (void)a1, (void)a2, (void)a3, (void)b0, (void)b1;
  __trap();
#endif
}

// The block's dynamic shared memory (the launch's `smem` bytes), 16-byte aligned.
template <class T>
__device__ __forceinline__ T* dynamic_smem() {
  extern __shared__ __align__(16) unsigned char ptkit_dynamic_smem[];
  return reinterpret_cast<T*>(ptkit_dynamic_smem);
}

}  // namespace ptkit::cuda::detail
