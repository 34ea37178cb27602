// decode_attention.h — the decode step's attention: each sequence's new key and value written into its KV cache,
// then its one query attended over the cache positions it sees, each read once, in fp32 whatever the cache's dtype.
#pragma once

#include <ATen/core/Tensor.h>

#include "cpu/isa.h"

namespace gpt::kernels {

// q, k, v (B, H, 1, D): the new token's projections; k_cache, v_cache (B, H, S, D), written in place; pos (B,)
// int64, each in [0, S): row b's key and value go to position pos[b], and its query sees positions 0..pos[b].
// One dtype for q, k, v (float, bfloat16 or half); the caches in it, D contiguous elements a position, or int8,
// (B, H, S, D + 4), each position D values and their scale (kv_row_q8.h), where the new key and value are rounded
// as they are written. Returns (B, H, 1, D)
// in q's dtype: softmax(q·kᵀ·scale) · v over the positions seen, as scaled_dot_product_attention computes it
// with the mask `position <= pos[b]`. Throws std::invalid_argument for other shapes, dtypes or positions.
//
// The write is part of the kernel so that a compiled graph hands it the cache itself: a kernel reading a cache
// the graph had written would receive a copy of the whole cache, every layer, every step.
//
// Work splits into (sequence, head, chunk of KV_CHUNK positions) items over the calling thread's OpenMP threads,
// each with its own softmax maximum and sum, merged per (sequence, head): a long cache keeps every thread busy
// even when B × H is small, and positions past pos[b] are never touched.
at::Tensor decode_attention(const at::Tensor &q, const at::Tensor &k, const at::Tensor &v, at::Tensor &k_cache,
                            at::Tensor &v_cache, const at::Tensor &pos, double scale, Isa isa);

// The same for new tokens of any sequences, several of one sequence included (a prompt's piece beside other
// sequences' decode steps, in one call): q, k, v (N, H, 1, D), one token a row; k_cache, v_cache (R, H, S, D), a
// row per sequence; seq (N,) int64 in [0, R): token n's cache row, pos (N,) its position there. Every token's key
// and value are written before any query attends, so each sees its sequence's positions 0..pos[n], those its
// earlier tokens in this call wrote included. Two tokens at one (row, position) are refused.
at::Tensor decode_attention_rows(const at::Tensor &q, const at::Tensor &k, const at::Tensor &v, at::Tensor &k_cache,
                                 at::Tensor &v_cache, const at::Tensor &pos, const at::Tensor &seq, double scale,
                                 Isa isa);

// The same on active_isa(): the `gpt_kernels::decode_attention` operator's CPU kernel.
at::Tensor decode_attention_cpu(const at::Tensor &q, const at::Tensor &k, const at::Tensor &v, at::Tensor &k_cache,
                                at::Tensor &v_cache, const at::Tensor &pos, double scale);

// Its shape function for export and compile (fake and meta tensors, symbolic sizes): (B, H, 1, D) like q.
at::Tensor decode_attention_meta(const at::Tensor &q, const at::Tensor &k, const at::Tensor &v, at::Tensor &k_cache,
                                 at::Tensor &v_cache, const at::Tensor &pos, double scale);

// `gpt_kernels::decode_attention_rows`: its CPU kernel and its shape function, (N, H, 1, D) like q.
at::Tensor decode_attention_rows_cpu(const at::Tensor &q, const at::Tensor &k, const at::Tensor &v, at::Tensor &k_cache,
                                     at::Tensor &v_cache, const at::Tensor &pos, const at::Tensor &seq, double scale);
at::Tensor decode_attention_rows_meta(const at::Tensor &q, const at::Tensor &k, const at::Tensor &v,
                                      at::Tensor &k_cache, at::Tensor &v_cache, const at::Tensor &pos,
                                      const at::Tensor &seq, double scale);

constexpr int64_t KV_CHUNK = 256;

}  // namespace gpt::kernels
