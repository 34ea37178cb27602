// attention_chunk.h — one work item of decode_attention: one query against one chunk of one (sequence, head)'s
// cache, the softmax over the chunk kept unnormalised (its maximum and sum beside the weighted values) so chunks
// merge exactly. One implementation per vector path, each in its own file; nothing here needs torch.
#pragma once

#include <cstdint>

#include "cpu/element_type.h"

namespace gpt::kernels {

struct AttentionChunk {
    ElementType type;   // the cache's: f32, bf16, f16, or s8 (positions as kv_row_q8.h lays them out)
    const float *q;     // (D,) the query in fp32, already multiplied by the scale
    const void *k, *v;  // position `begin` of this (sequence, head)'s cache, D contiguous elements a position
    int64_t k_stride;   // elements from one position to the next in k
    int64_t v_stride;   // and in v
    int64_t positions;  // the chunk's positions, 1 to KV_CHUNK, every one seen by the query
    int64_t d;          // head size
    float *scores;      // scratch of `positions` floats
    // Results: acc (D,) = Σ exp(s_j − max) · v_j over the chunk's positions j, sum = Σ exp(s_j − max).
    float *acc;
    float *max;
    float *sum;
};

void attend_chunk_scalar(const AttentionChunk &chunk);  // the reference
void attend_chunk_avx2(const AttentionChunk &chunk);    // AVX2 + FMA + F16C
void attend_chunk_avx512(const AttentionChunk &chunk);  // AVX-512 F + BW

}  // namespace gpt::kernels
