// linear_tile.h — one work item of the linear kernel: rows of activations (fp32) times a tile of weight rows,
// accumulated in fp32, plus the bias, stored in the output's type. One implementation per vector path, each in its
// own file; nothing here needs torch.
#pragma once

#include <cstdint>
#include <vector>

#include "cpu/element_type.h"
#include "cpu/isa.h"

namespace gpt::kernels {

struct LinearTile {
    ElementType type;  // the weight's elements (the activations are fp32); s8 weights come with `scale`
    const float *x;    // (m, k) activations, row i at x + i * x_stride, k contiguous
    int64_t x_stride;
    // The same activations as bf16 where they are bf16 values exactly (the call's x is bf16), else null: what the
    // avx512_bf16 path's panel tile multiplies (its dot products take bf16 pairs)
    const uint16_t *x_bf16;
    // (n, k) weight rows, row j at w + j * w_stride elements, k contiguous; u4: one block of U4_BLOCK_ROWS rows (its
    // first n stored), the byte of input i and row j < 32 at w + i * 32 + j holding row j's q in its low four bits and
    // row j + 32's in its high four (aot/gpt_aot/model/linear.py's "blocks64")
    const void *w;
    int64_t w_stride;
    // bf16 weights packed in panels (pack_linear_panels): output rows [16p, 16p + 16) of the tile as panel p, at
    // w + 16p · k elements, a vector of 32 for each pair of inputs: output j's weights of inputs 2l and 2l + 1 side by
    // side at 32l + 2j and 32l + 2j + 1 (where k is odd, the last input's 16 after them, output j's at 16(k − 1) + j).
    // n is a multiple of PANEL_ROWS. s8 weights packed in q8 panels (pack_linear_q8_panels, with `qx`): panel p at
    // w + 16p · k bytes, a 64-byte vector for each four inputs: output j's weights of inputs 4l..4l + 3, each plus 128
    // (an unsigned byte), at 64l + 4j..4j + 3; the rows past the last whole panel as stored, row j at w + j · k; k is a
    // multiple of Q8_BLOCK. u4 weights packed in u4 panels (pack_linear_int4_panels): the block's panel p at
    // w + 8p · k bytes, a 64-byte vector for each eight inputs: output j's q of inputs 8l + i (i < 4) in the low four
    // bits of byte 64l + 4j + i, of 8l + 4 + i in its high four.
    bool panels;
    int64_t m, n, k;
    const float *scale;  // (n,) this tile's rows' scales (s8 weights), or null: 1
    // u4 weights: a weight is (q − 8) · scale + zero, with a (scale, zero) pair of scale_zero_type for each group of
    // `group` inputs and row, group g's pairs for the block's rows at scale_zero + g * scale_zero_stride elements
    const void *scale_zero;
    ElementType scale_zero_type;
    int64_t scale_zero_stride, group;
    // u4 weights, and s8 weights with `qx` set (linear_int8_q8), multiply x quantized (Q8Activations): row i's int8
    // values at qx + i * k, each block of Q8_BLOCK inputs' scale and Σ qx at qx_scale and qx_sum + i * q8_blocks(k),
    // each group's exact Σ x at x_sum + i * (k / group) (u4)
    const int8_t *qx;
    const float *qx_scale;
    const int32_t *qx_sum;
    const float *x_sum;
    const float *bias;  // (n,) this tile's, or null: 0
    ElementType out_type;
    // (m, n) of out_type: out[i * out_stride + j] = (Σ_k x[i][k] · w[j][k]) · scale[j] + bias[j], rounded once
    void *out;
    int64_t out_stride;
};

constexpr int64_t PANEL_ROWS = 16;     // the outputs of one panel of packed bf16 weights
constexpr int64_t U4_BLOCK_ROWS = 64;  // the rows of one u4 block: a u4 tile's
constexpr int64_t U4_ZERO = 8;         // the q that stands for the zero
constexpr int64_t Q8_BLOCK = 32;       // the inputs that share one activation scale (llama.cpp's Q8_0 block)

// The activations a u4 or q8 tile multiplies, quantized once a call: each block of Q8_BLOCK inputs of a row (the last
// one shorter where k is no multiple) as int8 values q = round(x / s), s = max |x| / 127 (0 for a block of zeros:
// q = 0), with the block's Σ q; and each group's exact Σ x, which the zeros multiply. What every path reads, so that
// all quantize alike.
struct Q8Activations {
    std::vector<int8_t> q;
    std::vector<float> scale;
    std::vector<int32_t> q_sum;
    std::vector<float> group_sum;
};
constexpr int64_t q8_blocks(int64_t k) { return (k + Q8_BLOCK - 1) / Q8_BLOCK; }  // a row's blocks, the last partial
// `isa` the path the tiles take: the vector paths quantize 32 values at a time, bit for bit as the scalar one. `out`'s
// vectors are grown to the call's sizes, never shrunk (one Q8Activations serves a thread's calls): past those sizes
// they hold an earlier call's values.
void quantize_activations(const float *x, int64_t m, int64_t k, int64_t group, Q8Activations &out, Isa isa);

void linear_tile_scalar(const LinearTile &tile);       // the reference
void linear_tile_avx2(const LinearTile &tile);         // AVX2 + FMA + F16C
void linear_tile_avx512(const LinearTile &tile);       // AVX-512 F + BW
void linear_tile_avx512_vnni(const LinearTile &tile);  // and VL + VNNI: the q8 and u4 tiles' dot products
void linear_tile_avx512_bf16(const LinearTile &tile);  // and BF16: the panel tile's dot products

}  // namespace gpt::kernels
