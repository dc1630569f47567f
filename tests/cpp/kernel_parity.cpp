// Runs every CPU kernel of two builds of cpp/kernels/cpu_kernels.cpp in one program and
// compares their outputs bit for bit: `reference` (PTKIT_CPU_ISA=reference, built with
// the GCC/Clang vector extensions) and `portable` (PTKIT_SIMD_PORTABLE: the lane-array
// path MSVC compiles). Inputs: fixed pseudo-random values of a moderate range with about
// one in ten a random bit pattern (NaN, infinities, subnormals, huge), every dtype, row
// lengths around the vector widths, every activation, with and without bias; rms_norm and
// silu_and_mul also with streaming stores (stream_output), into 32-byte aligned outputs,
// and the GEMV with its weights asked for ahead (prefetch_weights) where n is over a tile.
//
// Prints one line per kernel and dtype (cases, differing outputs, largest difference)
// and exits 1 when any output differs by more than `max_ulps` (argv[1], default 0).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ptkit/cpu/kernels.h"

namespace ptkit::cpu::reference {
extern const KernelTable table;
}
namespace ptkit::cpu::portable {
extern const KernelTable table;
}

using ptkit::Activation;
using ptkit::DType;
using ptkit::cpu::KernelTable;
using ptkit::cpu::LinearArgs;
using ptkit::cpu::RmsNormArgs;
using ptkit::cpu::SiluAndMulArgs;

namespace {

uint64_t state = 0x9e3779b97f4a7c15ull;
uint32_t next_u32() {
  state = state * 6364136223846793005ull + 1442695040888963407ull;
  return static_cast<uint32_t>(state >> 32);
}

float moderate() { return (static_cast<float>(next_u32() % 2000001) / 250000.0f) - 4.0f; }

// One element's storage bits (fp32: 4 bytes, fp16/bf16: 2).
void fill(std::vector<uint8_t>& out, DType t, size_t count) {
  const size_t size = t == DType::f32 ? 4 : 2;
  out.assign(count * size, 0);
  for (size_t i = 0; i < count; ++i) {
    const bool wild = next_u32() % 10 == 0;
    uint32_t bits;
    const float v = moderate();
    std::memcpy(&bits, &v, 4);
    if (t == DType::f32) {
      if (wild) bits = next_u32();
      std::memcpy(&out[i * 4], &bits, 4);
    } else {
      uint16_t h;
      if (wild) {
        h = static_cast<uint16_t>(next_u32());
      } else if (t == DType::bf16) {
        h = static_cast<uint16_t>(bits >> 16);
      } else {  // fp16 in [2^-3, 2^3), either sign
        h = static_cast<uint16_t>(((next_u32() & 1u) << 15) | ((12u + next_u32() % 6u) << 10) | (next_u32() & 0x3ffu));
      }
      std::memcpy(&out[i * 2], &h, 2);
    }
  }
}

float as_float(const uint8_t* p, DType t) {
  uint32_t bits = 0;
  if (t == DType::f32) {
    std::memcpy(&bits, p, 4);
  } else {
    uint16_t h;
    std::memcpy(&h, p, 2);
    if (t == DType::bf16) {
      bits = static_cast<uint32_t>(h) << 16;
    } else {  // exact widening, for the report only
      const uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
      float f = exp == 0 ? std::ldexp(static_cast<float>(man), -24)
                         : exp == 31 ? (man ? NAN : INFINITY)
                                     : std::ldexp(static_cast<float>(man | 0x400u), static_cast<int>(exp) - 25);
      std::memcpy(&bits, &f, 4);
      bits |= sign;
    }
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Distance in units in the last place of the element type (0: the same bits; NaN vs
// NaN of any payload counts as equal, NaN vs a number as infinitely far).
double ulps(const uint8_t* a, const uint8_t* b, DType t) {
  const size_t size = t == DType::f32 ? 4 : 2;
  if (std::memcmp(a, b, size) == 0) return 0;
  const float x = as_float(a, t), y = as_float(b, t);
  if (std::isnan(x) && std::isnan(y)) return 0;
  if (std::isnan(x) || std::isnan(y) || std::isinf(x) || std::isinf(y)) return INFINITY;
  auto ordered = [&](const uint8_t* p) -> int64_t {
    if (size == 4) {
      int32_t i;
      std::memcpy(&i, p, 4);
      return i < 0 ? -(static_cast<int64_t>(i) & 0x7fffffff) : i;
    }
    int16_t i;
    std::memcpy(&i, p, 2);
    return i < 0 ? -(static_cast<int64_t>(i) & 0x7fff) : i;
  };
  return std::fabs(static_cast<double>(ordered(a) - ordered(b)));
}

struct Tally {
  int cases = 0;
  long outputs = 0, differing = 0;
  double worst = 0;
  void compare(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b, DType t) {
    ++cases;
    const size_t size = t == DType::f32 ? 4 : 2;
    for (size_t i = 0; i < a.size(); i += size) {
      ++outputs;
      const double d = ulps(&a[i], &b[i], t);
      if (d > 0) ++differing;
      if (d > worst) worst = d;
    }
  }
};

// An output buffer that starts 32-byte aligned, so that the kernels may take their
// streaming-store path on it.
struct Output {
  std::vector<uint8_t> storage;
  size_t offset, size;
  explicit Output(size_t bytes) : storage(bytes + 32, 0), size(bytes) {
    offset = (32 - reinterpret_cast<uintptr_t>(storage.data()) % 32) % 32;
  }
  uint8_t* data() { return storage.data() + offset; }
  std::vector<uint8_t> bytes() const { return {storage.begin() + offset, storage.begin() + offset + size}; }
};

const char* name(DType t) { return t == DType::f32 ? "float32" : t == DType::f16 ? "float16" : "bfloat16"; }

bool report(const char* kernel, DType t, const Tally& tally, double max_ulps) {
  std::printf("%s %s: %d cases, %ld outputs, %ld differ, max %g ulp\n", kernel, name(t), tally.cases,
              tally.outputs, tally.differing, tally.worst);
  return tally.worst <= max_ulps;
}

}  // namespace

int main(int argc, char** argv) {
  const double max_ulps = argc > 1 ? std::atof(argv[1]) : 0.0;
  const KernelTable* builds[2] = {&ptkit::cpu::reference::table, &ptkit::cpu::portable::table};
  bool ok = true;
  for (DType t : {DType::f32, DType::f16, DType::bf16}) {
    const size_t size = t == DType::f32 ? 4 : 2;
    Tally rms, silu, gemv, epilogue;
    // y[build][stream]: each compared with the reference build's plain stores.
    for (int64_t cols : {1, 7, 8, 9, 15, 16, 17, 33, 64, 100, 257}) {
      const int64_t rows = 3;
      std::vector<uint8_t> x, w, y[2][2];
      fill(x, t, rows * cols);
      fill(w, t, cols);
      for (int b = 0; b < 2; ++b) {
        for (bool stream : {false, true}) {
          Output out(rows * cols * size);
          const RmsNormArgs a{x.data(), w.data(), out.data(), cols, cols, cols, 1e-6f, t, stream};
          builds[b]->rms_norm(a, 0, rows);
          y[b][stream] = out.bytes();
        }
      }
      rms.compare(y[0][0], y[1][0], t);
      rms.compare(y[0][0], y[0][1], t);
      rms.compare(y[0][0], y[1][1], t);
    }
    for (int64_t d : {1, 7, 8, 9, 16, 17, 40, 129}) {
      const int64_t rows = 2;
      std::vector<uint8_t> x, y[2][2];
      fill(x, t, rows * 2 * d);
      for (int b = 0; b < 2; ++b) {
        for (bool stream : {false, true}) {
          Output out(rows * d * size);
          const SiluAndMulArgs a{x.data(), out.data(), d, 2 * d, d, t, stream};
          for (int64_t r = 0; r < rows; ++r) builds[b]->silu_and_mul(a, r, 0, d);
          y[b][stream] = out.bytes();
        }
      }
      silu.compare(y[0][0], y[1][0], t);
      silu.compare(y[0][0], y[0][1], t);
      silu.compare(y[0][0], y[1][1], t);
    }
    for (int act = 0; act <= 4; ++act) {
      for (int64_t m : {1, 2, 3, 7, 16}) {
        for (int64_t k : {1, 8, 13, 64, 130}) {
          for (int64_t n : {1, 5, 8, 17}) {
            for (bool with_bias : {false, true}) {
              std::vector<uint8_t> x, w, bias, y[2], z[2];
              fill(x, t, m * k);
              fill(w, t, n * k);
              fill(bias, t, n);
              fill(z[0], t, m * n);
              z[1] = z[0];
              for (int b = 0; b < 2; ++b) {
                y[b].assign(m * n * size, 0);
                LinearArgs a{x.data(), w.data(), with_bias ? bias.data() : nullptr, y[b].data(), m, k, n, k, k, n,
                             static_cast<Activation>(act), t, /*prefetch_weights=*/n > 8};
                builds[b]->gemv(a, 0, n);
                a.y = z[b].data();  // the large-m path's epilogue, on y already computed
                builds[b]->bias_activation(a, 0, m);
              }
              gemv.compare(y[0], y[1], t);
              epilogue.compare(z[0], z[1], t);
            }
          }
        }
      }
    }
    ok &= report("rms_norm", t, rms, max_ulps);
    ok &= report("silu_and_mul", t, silu, max_ulps);
    ok &= report("gemv", t, gemv, max_ulps);
    ok &= report("bias_activation", t, epilogue, max_ulps);
  }
  std::printf("%s\n", ok ? "parity: ok" : "parity: DIFFERENT");
  return ok ? 0 : 1;
}
