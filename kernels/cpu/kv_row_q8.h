// kv_row_q8.h — one position of an int8 KV cache: a head's D values rounded to int8 against the position's own
// scale (its largest magnitude / 127), then that scale as fp32, D + 4 bytes in all. Half a bf16 cache's bytes at
// GPT-2's head size (68 against 128), which every decode step reads whole; a scale per position and head keeps an
// outlier of one token from coarsening every other's values. Nothing here needs torch.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace gpt::kernels {

// Bytes after a position's D values: its scale.
constexpr int64_t KV_Q8_SCALE_BYTES = sizeof(float);

// The scale of the position whose D values start at `row`.
inline float kv_q8_scale(const void *row, int64_t d) {
    float scale;
    std::memcpy(&scale, static_cast<const char *>(row) + d, sizeof(scale));
    return scale;
}

// x's D values stored at `row` as int8 with their scale, rounded to nearest even. A row of zeros gets scale 0; a row
// holding a value that is not finite gets a NaN scale, which every score and output it enters then carries, as a
// float cache would carry the value.
inline void store_kv_q8_row(const float *x, int64_t d, void *row) {
    float largest = 0.0f;
    bool finite = true;
    for (int64_t i = 0; i < d; ++i) {
        finite = finite && std::isfinite(x[i]);
        largest = std::fmax(largest, std::fabs(x[i]));
    }
    const float scale = finite ? largest / 127.0f : std::nanf("");
    const float inverse = scale > 0.0f ? 1.0f / scale : 0.0f;
    auto *values = static_cast<int8_t *>(row);
    for (int64_t i = 0; i < d; ++i) values[i] = finite ? static_cast<int8_t>(std::nearbyint(x[i] * inverse)) : 0;
    std::memcpy(static_cast<char *>(row) + d, &scale, sizeof(scale));
}

}  // namespace gpt::kernels
