// linear_tile_avx512_bf16.cpp — the avx512_vnni path with AVX512-BF16: its code, the panel tile's products of bf16
// activations in `vdpbf16ps` (linear_panel_tile.inc).
#include <vector>

#include "cpu/linear_tile.h"

#define GPT_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx512bf16,avx2,fma,f16c")))
#define GPT_VNNI 1
#define GPT_BF16 1
#include "cpu/vec_avx512.h"

namespace gpt::kernels {

#include "cpu/linear_tile_vector.inc"

void linear_tile_avx512_bf16(const LinearTile &tile) { linear_tile(tile, tile.type); }

}  // namespace gpt::kernels
