// The bf16 decode GEMV on the AMX tile unit (gemv_amx.h). Compiled once per ISA level
// like every kernel source; empty below amx-bf16.
#include "ptkit/cpu/gemv_amx.h"

#if defined(PTKIT_SIMD_AMX_BF16)
#include <algorithm>
#include <cstring>
#include <vector>

#include "ptkit/cpu/elements.h"

namespace ptkit::cpu::PTKIT_CPU_ISA::amx {
namespace {

using namespace elements;
using simd::f32x8;

constexpr int kTileRows = 16;    // weight rows (outputs) of an A tile; k pairs of a B tile
constexpr int64_t kTileK = 32;   // bf16 k elements a tile product takes
constexpr int64_t kBlockN = 32;  // outputs per pass: two C tiles
// Below this many x rows the avx512-bf16 dot products are faster (memory-bound both).
// Measured on a Xeon with AMX (2 cores, 4096 x 4096 bf16 weights): the tiles take
// ~0.85 ms at every m; the dot products 0.68 ms at m = 1, 0.77 at 3, 0.88 at 4, 2.9 at 16.
constexpr int64_t kMinRows = 4;

// tmm0, tmm1: C (16 outputs x m fp32); tmm2: B (16 k pairs x m); tmm3, tmm4: A (16
// weight rows x 32 bf16). Palette 1; unused tiles stay 0 x 0.
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

void configure_tiles(int64_t m) {
  TileConfig config;
  const auto m_bytes = static_cast<uint16_t>(m * 4);
  for (int t = 0; t < 5; ++t) {
    config.rows[t] = kTileRows;
    config.colsb[t] = t < 3 ? m_bytes : 64;
  }
  _tile_loadconfig(&config);
}

// x^T as B tiles: block b, row r, column j holds x[j][32 b + 2 r] (low half) and
// x[j][32 b + 2 r + 1] (high half), rows 64 bytes apart. Reused across calls on a thread.
const uint32_t* pack_b(const LinearArgs& a, int64_t blocks) {
  thread_local std::vector<uint32_t> buf;
  buf.assign(static_cast<size_t>(blocks * kTileRows * 16), 0);
  for (int64_t j = 0; j < a.m; ++j) {
    const auto* row = static_cast<const uint16_t*>(a.x) + j * a.x_row_stride;
    for (int64_t b = 0; b < blocks; ++b) {
      uint32_t pairs[kTileRows];
      std::memcpy(pairs, row + b * kTileK, sizeof pairs);
      for (int r = 0; r < kTileRows; ++r) buf[static_cast<size_t>((b * kTileRows + r) * 16 + j)] = pairs[r];
    }
  }
  return buf.data();
}

}  // namespace

int64_t gemv_bf16(const LinearArgs& a, int64_t n_begin, int64_t n_end) {
  const int64_t m = a.m;
  const int64_t blocks = a.k / kTileK;
  if (m < kMinRows || m > kTileRows || blocks == 0 || n_end - n_begin < kBlockN) return n_begin;
  const int64_t kv = blocks * kTileK;
  const int64_t ws = a.w_row_stride;
  const auto* w = static_cast<const uint16_t*>(a.w);
  const auto* x = static_cast<const uint16_t*>(a.x);
  const auto* bias = static_cast<const uint16_t*>(a.bias);
  auto* y = static_cast<uint16_t*>(a.y);
  const uint32_t* b_tiles = pack_b(a, blocks);
  configure_tiles(m);

  alignas(64) float c[kBlockN][16];  // C^T: output, x row
  int64_t n0 = n_begin;
  for (; n0 + kBlockN <= n_end; n0 += kBlockN) {
    const uint16_t* w0 = w + n0 * ws;
    const uint16_t* w1 = w0 + kTileRows * ws;
    _tile_zero(0);
    _tile_zero(1);
    for (int64_t b = 0; b < blocks; ++b) {
      _tile_loadd(2, b_tiles + b * kTileRows * 16, 64);
      _tile_loadd(3, w0 + b * kTileK, ws * 2);
      _tile_loadd(4, w1 + b * kTileK, ws * 2);
      _tile_dpbf16ps(0, 3, 2);
      _tile_dpbf16ps(1, 4, 2);
    }
    _tile_stored(0, c[0], 64);
    _tile_stored(1, c[kTileRows], 64);

    // Per x row: the k tail, then bias + activation on 8 outputs at once.
    for (int64_t j = 0; j < m; ++j) {
      for (int64_t g = 0; g < kBlockN; g += kWidth) {
        float sums[kWidth];
        for (int i = 0; i < kWidth; ++i) {
          const uint16_t* wr = w + (n0 + g + i) * ws;
          float s = 0.0f;
          for (int64_t kk = kv; kk < a.k; ++kk) s += BF16::load1(x + j * a.x_row_stride + kk) * BF16::load1(wr + kk);
          sums[i] = c[g + i][j] + s;
        }
        const uint16_t* bias_g = bias ? bias + n0 + g : nullptr;
        uint16_t* out = y + j * a.y_row_stride + n0 + g;
        dispatch_activation(a.activation, [&](auto act) {
          finish8<BF16, decltype(act)::value>(simd::load_f32(sums), bias_g, out, kWidth);
        });
      }
    }
  }
  _tile_release();  // no tile state left to save on this thread's context switches
  return n0;
}

}  // namespace ptkit::cpu::PTKIT_CPU_ISA::amx
#endif
