// attention_chunk_scalar.cpp — the reference path: one element at a time, torch's own dtype conversions.
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "cpu/attention_chunk.h"
#include "cpu/scalar_elements.h"

namespace gpt::kernels {

namespace {

template <class T>
void attend(const AttentionChunk &c) {
    const auto *k = static_cast<const char *>(c.k);
    const auto *v = static_cast<const char *>(c.v);
    float max = -std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < c.positions; ++j) {
        float s = 0.0f;
        for (int64_t i = 0; i < c.d; ++i) s += c.q[i] * element<T>(k + j * c.k_stride * sizeof(T), i);
        c.scores[j] = s;
        max = std::fmax(max, s);
    }
    float sum = 0.0f;
    std::memset(c.acc, 0, sizeof(float) * static_cast<size_t>(c.d));
    for (int64_t j = 0; j < c.positions; ++j) {
        const float p = std::exp(c.scores[j] - max);
        sum += p;
        for (int64_t i = 0; i < c.d; ++i) c.acc[i] += p * element<T>(v + j * c.v_stride * sizeof(T), i);
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
        case ElementType::s8:
        case ElementType::u4: return;  // never a cache's: element_type() refuses integer tensors
    }
}

}  // namespace gpt::kernels
