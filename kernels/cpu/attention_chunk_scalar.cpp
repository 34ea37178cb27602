// attention_chunk_scalar.cpp — the reference path: one element at a time, torch's own dtype conversions.
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "cpu/attention_chunk.h"
#include "cpu/kv_row_q8.h"
#include "cpu/scalar_elements.h"

namespace gpt::kernels {

namespace {

// An int8 cache's position is its values times its scale (kv_row_q8.h); a float one's is its values.
template <class T>
float row_scale(const char *row, int64_t d) {
    if constexpr (std::is_same_v<T, int8_t>) return kv_q8_scale(row, d);
    return 1.0f;
}

template <class T>
void attend(const AttentionChunk &c) {
    const auto *k = static_cast<const char *>(c.k);
    const auto *v = static_cast<const char *>(c.v);
    float max = -std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < c.positions; ++j) {
        const char *row = k + j * c.k_stride * static_cast<int64_t>(sizeof(T));
        float s = 0.0f;
        for (int64_t i = 0; i < c.d; ++i) s += c.q[i] * element<T>(row, i);
        c.scores[j] = s * row_scale<T>(row, c.d);
        max = std::fmax(max, c.scores[j]);
    }
    float sum = 0.0f;
    std::memset(c.acc, 0, sizeof(float) * static_cast<size_t>(c.d));
    for (int64_t j = 0; j < c.positions; ++j) {
        const char *row = v + j * c.v_stride * static_cast<int64_t>(sizeof(T));
        const float p = std::exp(c.scores[j] - max);
        sum += p;
        const float weight = p * row_scale<T>(row, c.d);
        for (int64_t i = 0; i < c.d; ++i) c.acc[i] += weight * element<T>(row, i);
    }
    *c.max = max;
    *c.sum = sum;
}

}  // namespace

void attend_chunk_scalar(const AttentionChunk &chunk) {
    switch (chunk.type) {
        case ElementType::f32: return attend<float>(chunk);
        case ElementType::bf16: return attend<c10::BFloat16>(chunk);
        case ElementType::f16: return attend<c10::Half>(chunk);
        case ElementType::s8: return attend<int8_t>(chunk);
        case ElementType::u4: return;  // never a cache's
    }
}

}  // namespace gpt::kernels
