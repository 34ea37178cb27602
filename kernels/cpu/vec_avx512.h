// vec_avx512.h — the AVX-512 path's vector operations (F and BW, with FMA and F16C): 16 floats a register.
// Included by each kernel's file for this path, before its vector implementation (.inc): GPT_TARGET (the function
// attribute that enables the path's instructions) and `Vec`, its vector operations of `Vec::width` floats, both with
// internal linkage so that no function compiled for one path can be chosen by the linker for another.
#pragma once

#include <immintrin.h>
#include <cstdint>

// GCC 12's avx512fintrin.h starts _mm512_cvtph_ps and _mm512_reduce_add_ps's halving from `__Y = __Y;` (an
// undefined register by design), which its own -W(maybe-)uninitialized then reports wherever they are inlined.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

// The avx512_vnni and avx512_bf16 paths' files define their own GPT_TARGET (and GPT_VNNI, GPT_BF16) first: the same
// vector operations.
#ifndef GPT_TARGET
#define GPT_TARGET __attribute__((target("avx512f,avx512bw,avx2,fma,f16c")))
#endif

namespace gpt::kernels {

namespace {

struct Vec {
    using reg = __m512;
    static constexpr int64_t width = 16;
    GPT_TARGET static reg zero() { return _mm512_setzero_ps(); }
    GPT_TARGET static reg set1(float x) { return _mm512_set1_ps(x); }
    GPT_TARGET static reg load(const float *p) { return _mm512_loadu_ps(p); }
    GPT_TARGET static reg load_bf16(const uint16_t *p) {
        const __m512i wide = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(p)));
        return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
    }
    GPT_TARGET static reg load_f16(const uint16_t *p) {
        return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(p)));
    }
    GPT_TARGET static reg load_s8(const int8_t *p) {
        return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p))));
    }
    // The 32 int4 values of 16 bytes as floats (vec_avx2.h).
    static constexpr int64_t U4_REGS = 2;
    GPT_TARGET static void widen_u4(const uint8_t *p, reg *out) {
        const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i *>(p)), nibble = _mm_set1_epi8(15);
        out[0] = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_and_si128(bytes, nibble)));
        out[1] = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_and_si128(_mm_srli_epi16(bytes, 4), nibble)));
    }
    GPT_TARGET static void store(float *p, reg x) { _mm512_storeu_ps(p, x); }
    GPT_TARGET static reg add(reg a, reg b) { return _mm512_add_ps(a, b); }
    GPT_TARGET static reg sub(reg a, reg b) { return _mm512_sub_ps(a, b); }
    GPT_TARGET static reg mul(reg a, reg b) { return _mm512_mul_ps(a, b); }
    GPT_TARGET static reg fma(reg a, reg b, reg c) { return _mm512_fmadd_ps(a, b, c); }
    GPT_TARGET static reg min(reg a, reg b) { return _mm512_min_ps(a, b); }
    GPT_TARGET static reg max(reg a, reg b) { return _mm512_max_ps(a, b); }
    GPT_TARGET static reg floor(reg x) { return _mm512_roundscale_ps(x, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC); }
    GPT_TARGET static reg pow2(reg n) {
        const __m512i e = _mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127));
        return _mm512_castsi512_ps(_mm512_slli_epi32(e, 23));
    }
    GPT_TARGET static float sum(reg x) { return _mm512_reduce_add_ps(x); }
};

}  // namespace

}  // namespace gpt::kernels
