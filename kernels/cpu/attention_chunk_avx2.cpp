// attention_chunk_avx2.cpp — the AVX2 path (with FMA and F16C): 8 floats a register.
#include "cpu/attention_chunk.h"
#include "cpu/kv_row_q8.h"
#include "cpu/vec_avx2.h"

namespace gpt::kernels {

#include "cpu/attention_chunk_vector.inc"

void attend_chunk_avx2(const AttentionChunk &chunk) { attend_chunk(chunk); }

}  // namespace gpt::kernels
