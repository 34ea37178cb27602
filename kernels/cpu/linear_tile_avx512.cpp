// linear_tile_avx512.cpp — the AVX-512 path (F and BW, with FMA and F16C): 16 floats a register.
#include <vector>

#include "cpu/linear_tile.h"
#include "cpu/vec_avx512.h"

namespace gpt::kernels {

#include "cpu/linear_tile_vector.inc"

void linear_tile_avx512(const LinearTile &tile) { linear_tile(tile, tile.type); }

}  // namespace gpt::kernels
