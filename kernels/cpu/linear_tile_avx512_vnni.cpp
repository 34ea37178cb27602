// linear_tile_avx512_vnni.cpp — the AVX-512 path with VL and VNNI: the avx512 path's code, the int8 and int4 tiles'
// integer dot products in one `vpdpbusd` each (linear_q8_tile.inc, linear_u4_tile.inc).
#include <vector>

#include "cpu/linear_tile.h"

#define GPT_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))
#define GPT_VNNI 1
#include "cpu/vec_avx512.h"

namespace gpt::kernels {

#include "cpu/linear_tile_vector.inc"

void linear_tile_avx512_vnni(const LinearTile &tile) { linear_tile(tile, tile.type); }

}  // namespace gpt::kernels
