// CPU feature detection from the hardware (cpu_features.h says why no compiler builtin).
#include "ptkit/cpu/cpu_features.h"

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#if defined(_M_X64) || defined(__x86_64__) || defined(_M_IX86) || defined(__i386__)
#define PTKIT_CPU_X86 1
#if defined(_MSC_VER) && !defined(__clang__)
#include <intrin.h>
#else
#include <cpuid.h>
#endif
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#elif defined(_WIN32)
#include <windows.h>
#endif
#elif defined(__aarch64__) || defined(_M_ARM64)
#define PTKIT_CPU_ARM64 1
#if defined(__linux__)
#include <sys/auxv.h>
#elif defined(__APPLE__)
#include <sys/sysctl.h>
#endif
#endif

namespace ptkit::cpu {

namespace {

#if defined(PTKIT_CPU_X86)
struct Regs {
  uint32_t eax = 0, ebx = 0, ecx = 0, edx = 0;
};

Regs cpuid(uint32_t leaf, uint32_t subleaf) {
  Regs r;
#if defined(_MSC_VER) && !defined(__clang__)
  int out[4];
  __cpuidex(out, static_cast<int>(leaf), static_cast<int>(subleaf));
  r.eax = static_cast<uint32_t>(out[0]);
  r.ebx = static_cast<uint32_t>(out[1]);
  r.ecx = static_cast<uint32_t>(out[2]);
  r.edx = static_cast<uint32_t>(out[3]);
#else
  __cpuid_count(leaf, subleaf, r.eax, r.ebx, r.ecx, r.edx);
#endif
  return r;
}

// XCR0: which register state the OS saves (so may be used); only valid with OSXSAVE.
uint64_t xgetbv0() {
#if defined(_MSC_VER) && !defined(__clang__)
  return _xgetbv(0);
#else
  uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<uint64_t>(hi) << 32) | lo;
#endif
}

bool bit(uint32_t reg, int n) { return ((reg >> n) & 1u) != 0; }

CpuFeatures detect() {
  CpuFeatures f;
  const uint32_t max_leaf = cpuid(0, 0).eax;
  const uint32_t max_extended = cpuid(0x80000000u, 0).eax;
  if (max_leaf < 1) return f;
  const Regs l1 = cpuid(1, 0);
  const Regs l7 = max_leaf >= 7 ? cpuid(7, 0) : Regs{};
  const Regs l7_1 = max_leaf >= 7 && l7.eax >= 1 ? cpuid(7, 1) : Regs{};
  const Regs e1 = max_extended >= 0x80000001u ? cpuid(0x80000001u, 0) : Regs{};

  const bool osxsave = bit(l1.ecx, 27);
  const uint64_t xcr0 = osxsave ? xgetbv0() : 0;
  const bool os_ymm = (xcr0 & 0x6) == 0x6;     // SSE and AVX state
  const bool os_zmm = (xcr0 & 0xe6) == 0xe6;   // and opmask, ZMM0-15 upper, ZMM16-31
  const bool os_tile = (xcr0 & 0x60000) == 0x60000;  // XTILECFG and XTILEDATA

  f.x86_64_v2 = bit(l1.ecx, 0) /* SSE3 */ && bit(l1.ecx, 9) /* SSSE3 */ &&
                bit(l1.ecx, 13) /* CX16 */ && bit(l1.ecx, 19) /* SSE4.1 */ &&
                bit(l1.ecx, 20) /* SSE4.2 */ && bit(l1.ecx, 23) /* POPCNT */ &&
                bit(e1.ecx, 0) /* LAHF-SAHF */;
  f.x86_64_v3 = f.x86_64_v2 && os_ymm && bit(l1.ecx, 28) /* AVX */ && bit(l1.ecx, 12) /* FMA */ &&
                bit(l1.ecx, 29) /* F16C */ && bit(l1.ecx, 22) /* MOVBE */ &&
                bit(l1.ecx, 26) /* XSAVE */ && bit(l7.ebx, 5) /* AVX2 */ &&
                bit(l7.ebx, 3) /* BMI1 */ && bit(l7.ebx, 8) /* BMI2 */ &&
                bit(e1.ecx, 5) /* LZCNT */;
  f.x86_64_v4 = f.x86_64_v3 && os_zmm && bit(l7.ebx, 16) /* AVX512F */ &&
                bit(l7.ebx, 17) /* DQ */ && bit(l7.ebx, 28) /* CD */ &&
                bit(l7.ebx, 30) /* BW */ && bit(l7.ebx, 31) /* VL */;
  f.avx512_bf16 = f.x86_64_v4 && bit(l7_1.eax, 5);
  f.avx512_fp16 = f.x86_64_v4 && bit(l7.edx, 23);
  // Linux hands out the tile state only on request (arch_prctl): the kernels that use
  // AMX ask, and fall back when refused; this says what the CPU and the OS offer.
  f.amx_bf16 = os_tile && bit(l7.edx, 22) /* AMX-BF16 */ && bit(l7.edx, 24) /* AMX-TILE */;
  return f;
}

// Linux gives a process the AMX tile state (8 KiB more to save on every context switch
// and signal) only when it asks, once, for all its threads (Documentation/arch/x86/xstate.rst).
// The empty string: granted; otherwise why not.
std::string request_tile_state() {
#if defined(__linux__)
  constexpr long kArchReqXcompPerm = 0x1023;
  constexpr long kXfeatureXtiledata = 18;
  if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0) return "";
  const int error = errno;
  std::string why = std::string("Linux refused the AMX tile state (arch_prctl(ARCH_REQ_XCOMP_PERM): ") +
                    std::strerror(error) + ")";
  if (error == ENOSPC) {
    why += ": a signal stack of this process (sigaltstack) is smaller than the tile state needs;"
           " give it at least sysconf(_SC_MINSIGSTKSZ) plus 8 KiB";
  } else if (error == EINVAL) {
    why += ": the kernel predates AMX support (Linux 5.16)";
  }
  return why;
#elif defined(_WIN32)
  // Windows enables XSAVE features for every process and says which (Wine on Linux, which
  // never asks Linux for the tile state, does not list it).
  constexpr DWORD64 kTileState = (DWORD64{1} << 17) | (DWORD64{1} << 18);
  if ((GetEnabledXStateFeatures() & kTileState) == kTileState) return "";
  return "Windows does not enable the AMX tile state (GetEnabledXStateFeatures)";
#else
  return "";
#endif
}

// Asked once, on first need.
const std::string& tile_state_refusal() {
  static const std::string refusal = request_tile_state();
  return refusal;
}
#elif defined(PTKIT_CPU_ARM64)
CpuFeatures detect() {
  CpuFeatures f;
  f.neon = true;  // AdvSIMD: part of every AArch64 CPU
#if defined(__linux__)
  // The kernel's HWCAP bits (asm/hwcap.h): ASIMDDP bit 20 of AT_HWCAP, BF16 bit 14 of
  // AT_HWCAP2; spelled here so that old headers need not have them.
  const unsigned long hwcap = getauxval(AT_HWCAP);
  const unsigned long hwcap2 = getauxval(AT_HWCAP2);
  f.asimd_dotprod = (hwcap & (1ul << 20)) != 0;
  f.arm_bf16 = (hwcap2 & (1ul << 14)) != 0;
#elif defined(__APPLE__)
  auto has = [](const char* name) {
    int value = 0;
    size_t size = sizeof value;
    return sysctlbyname(name, &value, &size, nullptr, 0) == 0 && value != 0;
  };
  f.asimd_dotprod = has("hw.optional.arm.FEAT_DotProd");
  f.arm_bf16 = has("hw.optional.arm.FEAT_BF16");
#endif
  return f;
}
#else
CpuFeatures detect() { return CpuFeatures{}; }
#endif

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures detected = detect();
  return detected;
}

bool cpu_supports(const char* isa, const char** refusal) {
  const CpuFeatures& f = cpu_features();
  if (std::strcmp(isa, "default") == 0) return true;
  if (std::strcmp(isa, "x86-64-v2") == 0) return f.x86_64_v2;
  if (std::strcmp(isa, "x86-64-v3") == 0) return f.x86_64_v3;
  if (std::strcmp(isa, "x86-64-v4") == 0) return f.x86_64_v4;
  if (std::strcmp(isa, "avx512-bf16") == 0) return f.avx512_bf16;
  if (std::strcmp(isa, "neon-bf16") == 0) return f.neon && f.arm_bf16;
#if defined(PTKIT_CPU_X86)
  if (std::strcmp(isa, "amx-bf16") == 0) {
    if (!f.avx512_bf16 || !f.amx_bf16) return false;
    const std::string& refused = tile_state_refusal();
    if (refused.empty()) return true;
    if (refusal != nullptr) *refusal = refused.c_str();
    return false;
  }
#endif
  return false;
}

}  // namespace ptkit::cpu
