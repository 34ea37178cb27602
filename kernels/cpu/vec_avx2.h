// vec_avx2.h — the AVX2 path's vector operations (with FMA and F16C): 8 floats a register.
// Included by each kernel's file for this path, before its vector implementation (.inc): GPT_TARGET (the function
// attribute that enables the path's instructions) and `Vec`, its vector operations of `Vec::width` floats, both with
// internal linkage so that no function compiled for one path can be chosen by the linker for another.
#pragma once

#include <immintrin.h>
#include <cstdint>

#define GPT_TARGET __attribute__((target("avx2,fma,f16c")))

namespace gpt::kernels {

namespace {

struct Vec {
    using reg = __m256;
    static constexpr int64_t width = 8;
    GPT_TARGET static reg zero() { return _mm256_setzero_ps(); }
    GPT_TARGET static reg set1(float x) { return _mm256_set1_ps(x); }
    GPT_TARGET static reg load(const float *p) { return _mm256_loadu_ps(p); }
    GPT_TARGET static reg load_bf16(const uint16_t *p) {
        const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p)));
        return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
    }
    GPT_TARGET static reg load_f16(const uint16_t *p) {
        return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p)));
    }
    GPT_TARGET static reg load_s8(const int8_t *p) {
        return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i *>(p))));
    }
    // The 32 int4 values of 16 bytes as floats, U4_REGS registers: the bytes' low four bits in byte order, then
    // their high four bits.
    static constexpr int64_t U4_REGS = 4;
    GPT_TARGET static void widen_u4(const uint8_t *p, reg *out) {
        const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i *>(p)), nibble = _mm_set1_epi8(15);
        const __m128i low = _mm_and_si128(bytes, nibble), high = _mm_and_si128(_mm_srli_epi16(bytes, 4), nibble);
        out[0] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(low));
        out[1] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_unpackhi_epi64(low, low)));
        out[2] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(high));
        out[3] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_unpackhi_epi64(high, high)));
    }
    GPT_TARGET static void store(float *p, reg x) { _mm256_storeu_ps(p, x); }
    GPT_TARGET static reg add(reg a, reg b) { return _mm256_add_ps(a, b); }
    GPT_TARGET static reg sub(reg a, reg b) { return _mm256_sub_ps(a, b); }
    GPT_TARGET static reg mul(reg a, reg b) { return _mm256_mul_ps(a, b); }
    GPT_TARGET static reg fma(reg a, reg b, reg c) { return _mm256_fmadd_ps(a, b, c); }
    GPT_TARGET static reg min(reg a, reg b) { return _mm256_min_ps(a, b); }
    GPT_TARGET static reg max(reg a, reg b) { return _mm256_max_ps(a, b); }
    GPT_TARGET static reg floor(reg x) { return _mm256_floor_ps(x); }
    // 2^n for integral n in float's exponent range.
    GPT_TARGET static reg pow2(reg n) {
        const __m256i e = _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127));
        return _mm256_castsi256_ps(_mm256_slli_epi32(e, 23));
    }
    GPT_TARGET static float sum(reg x) {
        __m128 s = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
        s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        s = _mm_add_ss(s, _mm_movehdup_ps(s));
        return _mm_cvtss_f32(s);
    }
};

}  // namespace

}  // namespace gpt::kernels
