// The bf16 decode GEMV on the AMX tile unit (the amx-bf16 level), in the kernel sources'
// per-ISA namespace; it exists only where the level's flags enable the tiles.
//
// C^T = W X^T a tile at a time: A is 16 weight rows x 32 k, loaded straight from W
// (its rows are the outputs), B is the x rows' 32 k as bf16 pairs (x^T, packed once per
// call), C is 16 outputs x m rows in fp32. A tile product costs the same for every m <= 16,
// and the weights stream from memory once: the unit's 1024 products a cycle leave the
// GEMV bound by memory bandwidth at every m.
#pragma once

#include <cstdint>

#include "ptkit/cpu/kernels.h"
#include "ptkit/cpu/simd.h"

#if defined(PTKIT_SIMD_AMX_BF16)
namespace ptkit::cpu::PTKIT_CPU_ISA::amx {

// Computes y's columns [n_begin, e) for the whole 32-column blocks of [n_begin, n_end)
// where the tiles pay (bf16 x and w, k >= 32, m >= kMinRows) and returns e, the first
// column left to the caller (n_begin: none done). The tile state must be granted
// (cpu_supports("amx-bf16") asked for it).
int64_t gemv_bf16(const LinearArgs& a, int64_t n_begin, int64_t n_end);

}  // namespace ptkit::cpu::PTKIT_CPU_ISA::amx
#endif
