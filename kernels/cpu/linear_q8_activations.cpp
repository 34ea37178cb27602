// linear_q8_activations.cpp — the activations of an int4 linear or an int8 one with integer products quantized to int8
// blocks (linear_tile.h), once a call for every tile: one element at a time on the scalar path, 32 a block with AVX2
// on the vector ones, bit for bit alike.
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "cpu/linear_tile.h"

namespace gpt::kernels {

namespace {

// Round to the nearest integer, ties to even (what AVX's conversion does in the default rounding mode), by adding and
// taking away 1.5 · 2^23: exact for |v| < 2^22, and no library call (std::nearbyint is one an element without SSE4.1,
// the baseline this file compiles for).
inline float round_to_even(float v) {
    constexpr float MAGIC = 12582912.0f;  // 1.5 · 2^23
    return (v + MAGIC) - MAGIC;
}

// A group's Σ from 8 lanes, each the in-order sum of the values j ≡ l (mod 8): lane l + 4 added to lane l, then l + 2,
// then 1. Float sums depend on their order, and every path must read the same sums: the vector path fills the lanes
// a register at a time and ends here.
float sum_lanes(float (&lanes)[8], const float *values, int64_t from, int64_t size) {
    for (int64_t j = from; j < size; ++j) lanes[j % 8] += values[j];
    for (int64_t half = 4; half >= 1; half /= 2)
        for (int64_t l = 0; l < half; ++l) lanes[l] += lanes[l + half];
    return lanes[0];
}

// One block of at most Q8_BLOCK values rounded to int8 by its largest magnitude: its scale and its q's sum.
void quantize_block(const float *values, int64_t size, int8_t *q, float &scale, int32_t &q_sum) {
    float largest = 0.0f;
    for (int64_t j = 0; j < size; ++j) largest = std::max(largest, std::fabs(values[j]));
    const float inverse = largest > 0.0f ? 127.0f / largest : 0.0f;
    int32_t sum = 0;
    for (int64_t j = 0; j < size; ++j) {
        q[j] = static_cast<int8_t>(std::clamp(round_to_even(values[j] * inverse), -127.0f, 127.0f));
        sum += q[j];
    }
    scale = largest / 127.0f;
    q_sum = sum;
}

#define GPT_QUANTIZE_TARGET __attribute__((target("avx2")))

// The largest of 8 lanes' floats, and the Σ of 8 lanes' int32, across the register.
GPT_QUANTIZE_TARGET inline float lanes_max(__m256 v) {
    __m128 four = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    four = _mm_max_ps(four, _mm_movehl_ps(four, four));
    return _mm_cvtss_f32(_mm_max_ss(four, _mm_movehdup_ps(four)));
}
GPT_QUANTIZE_TARGET inline int32_t lanes_sum(__m256i v) {
    __m128i four = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    four = _mm_add_epi32(four, _mm_unpackhi_epi64(four, four));
    return _mm_cvtsi128_si32(_mm_add_epi32(four, _mm_shuffle_epi32(four, 1)));
}

// quantize_block for a whole block: the same largest magnitude (a maximum is exact in any order), the same product
// and rounding (the conversion rounds to even), the same clamp; the q's packed to int8 in order.
GPT_QUANTIZE_TARGET void quantize_block_avx2(const float *values, int8_t *q, float &scale, int32_t &q_sum) {
    static_assert(Q8_BLOCK == 32, "four registers of 8 floats a block");
    const __m256 sign = _mm256_set1_ps(-0.0f);
    // Four named loads, not a loop filling an array: GCC took that loop for a 128-byte copy, did it in 16-byte moves
    // through the stack (its generic tuning's widest) and reloaded the registers from there, each reload waiting on
    // a failed store forward: 70 % of this function's time, ~3 % of a GPT-2 int4 batch-1 step on the calling thread.
    const __m256 v[4] = {_mm256_loadu_ps(values), _mm256_loadu_ps(values + 8), _mm256_loadu_ps(values + 16),
                         _mm256_loadu_ps(values + 24)};
    const __m256 largest_in_lanes =
        _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, v[0]), _mm256_andnot_ps(sign, v[1])),
                      _mm256_max_ps(_mm256_andnot_ps(sign, v[2]), _mm256_andnot_ps(sign, v[3])));
    const float largest = lanes_max(largest_in_lanes);
    const __m256 inverse = _mm256_set1_ps(largest > 0.0f ? 127.0f / largest : 0.0f);
    const __m256 low = _mm256_set1_ps(-127.0f), high = _mm256_set1_ps(127.0f);
    __m256i whole[4], sum = _mm256_setzero_si256();
    for (int64_t a = 0; a < 4; ++a) {
        const __m256 clamped = _mm256_min_ps(_mm256_max_ps(_mm256_mul_ps(v[a], inverse), low), high);
        whole[a] = _mm256_cvtps_epi32(clamped);
        sum = _mm256_add_epi32(sum, whole[a]);
    }
    // packs interleave 128-bit halves: (0 1 | 2 3) of 32-bit lanes become bytes in order 0 2 1 3 per 4-lane piece
    const __m256i bytes =
        _mm256_packs_epi16(_mm256_packs_epi32(whole[0], whole[1]), _mm256_packs_epi32(whole[2], whole[3]));
    const __m256i in_order = _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i *>(q), in_order);
    scale = largest / 127.0f;
    q_sum = lanes_sum(sum);
}

template <typename T>
void grow(std::vector<T> &buffer, int64_t size) {
    if (buffer.size() < static_cast<size_t>(size)) buffer.resize(static_cast<size_t>(size));
}

GPT_QUANTIZE_TARGET float group_sum_avx2(const float *values, int64_t size) {
    __m256 in_lanes = _mm256_setzero_ps();
    int64_t j = 0;
    for (; j + 8 <= size; j += 8) in_lanes = _mm256_add_ps(in_lanes, _mm256_loadu_ps(values + j));
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, in_lanes);
    return sum_lanes(lanes, values, j, size);
}

}  // namespace

void quantize_activations(const float *x, int64_t m, int64_t k, int64_t group, Q8Activations &out, Isa isa) {
    const int64_t blocks = q8_blocks(k), groups = k / group;
    const bool vector = isa != Isa::scalar;  // the AVX-512 path runs the AVX2 code, as its int4 and q8 tiles do
    // Grown only: a buffer reused by calls of alternating sizes would be zero-filled again at each larger one.
    grow(out.q, m * k);
    grow(out.scale, m * blocks);
    grow(out.q_sum, m * blocks);
    grow(out.group_sum, m * groups);
    for (int64_t i = 0; i < m; ++i) {
        const float *row = x + i * k;
        for (int64_t b = 0; b < blocks; ++b) {
            const auto at = static_cast<size_t>(i * blocks + b);
            const int64_t size = std::min(Q8_BLOCK, k - b * Q8_BLOCK);
            int8_t *q = out.q.data() + i * k + b * Q8_BLOCK;
            if (vector && size == Q8_BLOCK)
                quantize_block_avx2(row + b * Q8_BLOCK, q, out.scale[at], out.q_sum[at]);
            else
                quantize_block(row + b * Q8_BLOCK, size, q, out.scale[at], out.q_sum[at]);
        }
        for (int64_t g = 0; g < groups; ++g) {
            const float *values = row + g * group;
            float lanes[8] = {};
            out.group_sum[static_cast<size_t>(i * groups + g)] =
                vector ? group_sum_avx2(values, group) : sum_lanes(lanes, values, 0, group);
        }
    }
}

}  // namespace gpt::kernels
