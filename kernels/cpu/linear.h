// linear.h — gpt_kernels::linear, a linear layer on the CPU for the few to a few hundred rows of a decode step, an
// extend or a prefill, over float, bfloat16 or half weights: each weight element widened to fp32 in registers and
// multiplied by several activation rows at once, accumulated in fp32 — where torch's own bf16 GEMM on a CPU without
// AVX512-BF16 takes one dot product at a time.
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>

#include "cpu/isa.h"

namespace gpt::kernels {

// x (..., K) float, bfloat16 or half; weight (N, K) float, bfloat16 or half, K contiguous in each row; bias
// (N,) or none. Returns x · weightᵀ + bias (..., N) in x's dtype, accumulated in fp32 (x is read as fp32).
// Throws std::invalid_argument for other shapes or dtypes, or an ISA this CPU cannot run.
//
// Work splits into tiles of LINEAR_TILE_ROWS weight rows over the calling thread's OpenMP threads: each tile's
// weights are read from memory once for every activation row, which stays in cache (the rows are few, or the
// tile is).
at::Tensor linear(const at::Tensor &x, const at::Tensor &weight, const std::optional<at::Tensor> &bias, Isa isa);

// The same on active_isa(): the `gpt_kernels::linear` operator's CPU kernel.
at::Tensor linear_cpu(const at::Tensor &x, const at::Tensor &weight, const std::optional<at::Tensor> &bias);

// Its shape function for export and compile (fake and meta tensors, symbolic sizes): (..., N) in x's dtype.
at::Tensor linear_meta(const at::Tensor &x, const at::Tensor &weight, const std::optional<at::Tensor> &bias);

// The same over int8 weight rows (N, K) with their scales (N,) (float, bfloat16 or half): x · (weight · scale)ᵀ +
// bias, each int8 widened to fp32 in registers and the row's sum scaled once (a weight-only int8 linear: the
// weights' bytes halve against bf16, and a decode step is a walk over them).
at::Tensor linear_int8(const at::Tensor &x, const at::Tensor &weight, const at::Tensor &scale,
                       const std::optional<at::Tensor> &bias, Isa isa);
at::Tensor linear_int8_cpu(const at::Tensor &x, const at::Tensor &weight, const at::Tensor &scale,
                           const std::optional<at::Tensor> &bias);
at::Tensor linear_int8_meta(const at::Tensor &x, const at::Tensor &weight, const at::Tensor &scale,
                            const std::optional<at::Tensor> &bias);

// The same over int8 weight rows times x quantized to int8 in blocks of 32 inputs (one scale each, as linear_int4's),
// multiplied in integers: llama.cpp's Q8_0 × Q8_0 dot products, a block's 32 products in three instructions where
// widening the weights to fp32 takes twelve (a last block shorter than 32 one product at a time). Its results are the
// dequantised model's up to the activations' rounding (half a step of each block, times |w|), not only to the order of
// sums.
at::Tensor linear_int8_q8(const at::Tensor &x, const at::Tensor &weight, const at::Tensor &scale,
                          const std::optional<at::Tensor> &bias, Isa isa);
at::Tensor linear_int8_q8_cpu(const at::Tensor &x, const at::Tensor &weight, const at::Tensor &scale,
                              const std::optional<at::Tensor> &bias);

// The same over int4 weights in blocks of 64 rows (aot/gpt_aot/model/linear.py's "blocks64": (rows padded to a
// multiple of 64, K / 2) bytes, the byte of input k and row j of a block holding row j's q in its low four bits
// and row j + 32's in its high four), each weight (q − 8) · scale + zero with one (scale, zero) per group of
// K / groups inputs and row: scale_zero (blocks, groups, 64, 2) — each block's pairs in one run, group by group
// (linear.py's to_int4_pair_blocks) — float, bfloat16 or half. `rows` (N) of the padded
// rows are the output's; groups are multiples of 32 inputs. x is quantized to int8 in blocks of 32 inputs (one scale
// each: llama.cpp's Q8_0 activations) and multiplied by the weights' q in integers; the zeros multiply the exact
// sums of x. No weight is dequantised, in memory or in registers.
at::Tensor linear_int4(const at::Tensor &x, const at::Tensor &weight, const at::Tensor &scale_zero, int64_t rows,
                       const std::optional<at::Tensor> &bias, Isa isa);
at::Tensor linear_int4_cpu(const at::Tensor &x, const at::Tensor &weight, const at::Tensor &scale_zero, int64_t rows,
                           const std::optional<at::Tensor> &bias);
at::Tensor linear_int4_meta(const at::Tensor &x, const at::Tensor &weight, const at::Tensor &scale_zero, int64_t rows,
                            const std::optional<at::Tensor> &bias);

// bf16 weights packed in panels of 16 output rows (pack_linear_panels, once, where the weights are loaded), for the
// outer-product form: each input's weights of a panel are one load, widened to two registers of outputs with a shift
// and a mask, which every activation row's broadcast input multiplies; the packed weight has the stored one's shape,
// dtype and bytes. linear_panels: x · weightᵀ + bias as `linear`, weight the packing of (N, K) bf16 weights with N a
// multiple of 16.
at::Tensor pack_linear_panels(const at::Tensor &weight);
at::Tensor linear_panels(const at::Tensor &x, const at::Tensor &weight, const std::optional<at::Tensor> &bias, Isa isa);
at::Tensor linear_panels_cpu(const at::Tensor &x, const at::Tensor &weight, const std::optional<at::Tensor> &bias);

// int8 weights packed in q8 panels of 16 output rows (pack_linear_q8_panels, once, where the weights are loaded), for
// the outer-product form of linear_int8_q8: four inputs' weights of a panel are one 64-byte vector, which each row's
// four quantized inputs, broadcast, multiply (with VNNI, one `vpdpbusd` for 64 products), a block's 8 steps summed in
// integers before its scale. The packed weight is (N, K) uint8, each w + 128 (VNNI multiplies an unsigned byte by a
// signed one), and the rows past the last whole panel (N no multiple of 16: GPT-2's 50257-row head) as stored, read
// as linear_int8_q8 reads them. linear_int8_q8_panels: linear_int8_q8's result, weight the packing of (N, K) int8
// weights with K a multiple of 32.
at::Tensor pack_linear_q8_panels(const at::Tensor &weight);
at::Tensor linear_int8_q8_panels(const at::Tensor &x, const at::Tensor &weight, const at::Tensor &scale,
                                 const std::optional<at::Tensor> &bias, Isa isa);
at::Tensor linear_int8_q8_panels_cpu(const at::Tensor &x, const at::Tensor &weight, const at::Tensor &scale,
                                     const std::optional<at::Tensor> &bias);

// int4 "blocks64" weights packed in u4 panels of 16 output rows (pack_linear_int4_panels, once, where the weights are
// loaded), for the outer-product form of linear_int4: a panel's eight inputs' q of 16 outputs are one 64-byte vector
// (output j's in lane j, inputs 0..3 in the low four bits of its bytes, 4..7 in the high), which a mask and a shift
// split into two vectors of four inputs, each multiplied by a row's four broadcast int8 inputs (with VNNI, one
// `vpdpbusd` for 64 products). The packed weight has the stored one's shape and bytes, reordered; the (scale, zero)
// pairs are read as stored. linear_int4_panels: linear_int4's result, weight the packing of its weight, K a multiple
// of 32.
at::Tensor pack_linear_int4_panels(const at::Tensor &weight);
at::Tensor linear_int4_panels(const at::Tensor &x, const at::Tensor &weight, const at::Tensor &scale_zero, int64_t rows,
                              const std::optional<at::Tensor> &bias, Isa isa);
at::Tensor linear_int4_panels_cpu(const at::Tensor &x, const at::Tensor &weight, const at::Tensor &scale_zero,
                                  int64_t rows, const std::optional<at::Tensor> &bias);

constexpr int64_t LINEAR_TILE_ROWS = 64;  // a u4 block (U4_BLOCK_ROWS) is one tile

}  // namespace gpt::kernels
