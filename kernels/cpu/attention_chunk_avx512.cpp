// attention_chunk_avx512.cpp — the AVX-512 path (F and BW, with FMA and F16C): 16 floats a register.
#include "cpu/attention_chunk.h"
#include "cpu/kv_row_q8.h"
#include "cpu/vec_avx512.h"

namespace gpt::kernels {

#include "cpu/attention_chunk_vector.inc"

void attend_chunk_avx512(const AttentionChunk &chunk) { attend_chunk(chunk); }

}  // namespace gpt::kernels
