// linear_tile.h — one work item of the linear kernel: rows of activations (fp32) times a tile of weight rows,
// accumulated in fp32, plus the bias, stored in the output's type. One implementation per vector path, each in its
// own file; nothing here needs torch.
#pragma once

#include <cstdint>

#include "cpu/element_type.h"

namespace gpt::kernels {

struct LinearTile {
    ElementType type;  // the weight's elements (the activations are fp32); s8 weights come with `scale`
    const float *x;    // (m, k) activations, row i at x + i * x_stride, k contiguous
    int64_t x_stride;
    const void *w;  // (n, k) weight rows, row j at w + j * w_stride elements, k contiguous
    int64_t w_stride;
    int64_t m, n, k;
    const float *scale;  // (n,) this tile's rows' scales (s8 weights), or null: 1
    const float *bias;   // (n,) this tile's, or null: 0
    ElementType out_type;
    // (m, n) of out_type: out[i * out_stride + j] = (Σ_k x[i][k] · w[j][k]) · scale[j] + bias[j], rounded once
    void *out;
    int64_t out_stride;
};

void linear_tile_scalar(const LinearTile &tile);  // the reference
void linear_tile_avx2(const LinearTile &tile);    // AVX2 + FMA + F16C
void linear_tile_avx512(const LinearTile &tile);  // AVX-512 F + BW

}  // namespace gpt::kernels
