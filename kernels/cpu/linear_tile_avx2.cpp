// linear_tile_avx2.cpp — the AVX2 path (with FMA and F16C): 8 floats a register.
#include <vector>

#include "cpu/linear_tile.h"
#include "cpu/vec_avx2.h"

namespace gpt::kernels {

#include "cpu/linear_tile_vector.inc"

void linear_tile_avx2(const LinearTile &tile) { linear_tile(tile, tile.type); }

}  // namespace gpt::kernels
