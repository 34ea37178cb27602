// linear_q8_activations.cpp — the activations of an int4 linear or an int8 one with integer products quantized to int8
// blocks (linear_tile.h), once a call for every tile and path.
#include <algorithm>
#include <cmath>

#include "cpu/linear_tile.h"

namespace gpt::kernels {

void quantize_activations(const float *x, int64_t m, int64_t k, int64_t group, Q8Activations &out) {
    const int64_t blocks = q8_blocks(k), groups = k / group;
    out.q.resize(static_cast<size_t>(m * k));
    out.scale.resize(static_cast<size_t>(m * blocks));
    out.q_sum.resize(static_cast<size_t>(m * blocks));
    out.group_sum.resize(static_cast<size_t>(m * groups));
    for (int64_t i = 0; i < m; ++i) {
        const float *row = x + i * k;
        for (int64_t b = 0; b < blocks; ++b) {
            const float *values = row + b * Q8_BLOCK;
            const int64_t size = std::min(Q8_BLOCK, k - b * Q8_BLOCK);
            float largest = 0.0f;
            for (int64_t j = 0; j < size; ++j) largest = std::max(largest, std::fabs(values[j]));
            const float inverse = largest > 0.0f ? 127.0f / largest : 0.0f;
            int8_t *q = out.q.data() + i * k + b * Q8_BLOCK;
            int32_t sum = 0;
            for (int64_t j = 0; j < size; ++j) {
                q[j] = static_cast<int8_t>(std::clamp(std::nearbyint(values[j] * inverse), -127.0f, 127.0f));
                sum += q[j];
            }
            out.scale[static_cast<size_t>(i * blocks + b)] = largest / 127.0f;
            out.q_sum[static_cast<size_t>(i * blocks + b)] = sum;
        }
        for (int64_t g = 0; g < groups; ++g) {
            float sum = 0.0f;
            for (int64_t j = g * group; j < (g + 1) * group; ++j) sum += row[j];
            out.group_sum[static_cast<size_t>(i * groups + g)] = sum;
        }
    }
}

}  // namespace gpt::kernels
