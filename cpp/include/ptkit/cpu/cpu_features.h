// What this CPU (and its operating system) can run, read from the hardware itself.
//
// x86: cpuid and xgetbv (an AVX or AVX-512 register file the OS does not save on a
// context switch is unusable, whatever cpuid says). AArch64: every CPU has AdvSIMD;
// the optional extensions come from getauxval on Linux and sysctl on macOS. No compiler
// builtin: __builtin_cpu_supports is GCC's and Clang's only, and zig's build of it
// always answers 0 (the kernels of every level above the baseline would never run).
#pragma once

namespace ptkit::cpu {

struct CpuFeatures {
  // x86-64 microarchitecture levels (the psABI's: v2 SSE4.2/POPCNT, v3 AVX2/FMA/F16C/
  // BMI2, v4 AVX-512 F/BW/CD/DQ/VL), each with the OS state it needs.
  bool x86_64_v2 = false;
  bool x86_64_v3 = false;
  bool x86_64_v4 = false;
  bool avx512_bf16 = false;  // vdpbf16ps (and x86-64-v4)
  bool avx512_fp16 = false;
  bool amx_bf16 = false;  // the tile unit, with its state enabled by the OS (XCR0)
  // AArch64: AdvSIMD is the baseline; these are its optional extensions.
  bool neon = false;
  bool asimd_dotprod = false;
  bool arm_bf16 = false;
};

// Detected once, on first use.
const CpuFeatures& cpu_features();

// Whether this CPU runs the kernels compiled for `isa` (a level name of
// ptkit.platforms: "default", "x86-64-v3", "amx-bf16", …); an unknown name: false.
// Where the CPU has the level but the operating system refuses what it needs (Linux
// grants the AMX tile state only on request), false with the reason in *refusal.
bool cpu_supports(const char* isa, const char** refusal = nullptr);

}  // namespace ptkit::cpu
