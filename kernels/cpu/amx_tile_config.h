// LDTILECFG's 64-byte operand (palette 1): each AMX tile register's rows and bytes per row.
// Shared by the AMX GEMM (matmul_bf16_amx.cpp) and characterize's peak probe
// (characterize/compute_peak.cpp). Internal to the CPU backend and its probes.
#pragma once

#include <cstdint>

namespace ssd {

struct alignas(64) AmxTileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
  void set(int tile, int tile_rows, int bytes_per_row) {
    rows[tile] = uint8_t(tile_rows);
    colsb[tile] = uint16_t(bytes_per_row);
  }
};

}  // namespace ssd
