// linear_tile_scalar.cpp — the reference path: one element at a time, torch's own dtype conversions, the sum along
// k (and the bias) in double so that the vector paths are compared with something more exact than themselves.
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <algorithm>

#include "cpu/linear_tile.h"
#include "cpu/scalar_elements.h"

namespace gpt::kernels {

namespace {

void store(ElementType type, void *out, int64_t i, float value) {
    switch (type) {
        case ElementType::f32: static_cast<float *>(out)[i] = value; return;
        case ElementType::bf16: static_cast<c10::BFloat16 *>(out)[i] = c10::BFloat16(value); return;
        case ElementType::f16: static_cast<c10::Half *>(out)[i] = c10::Half(value); return;
        case ElementType::s8:
        case ElementType::u4: return;  // never an output: the linear stores its activations' dtype
    }
}

// Weight (j, l) of packed bf16 panels (LinearTile::panels).
float panel_element(const LinearTile &t, int64_t j, int64_t l) {
    const int64_t panel = j / PANEL_ROWS * PANEL_ROWS * t.k, within = j % PANEL_ROWS;
    const bool alone = t.k % 2 == 1 && l == t.k - 1;  // an odd k's last input
    const int64_t at = alone ? panel + PANEL_ROWS * l + within : panel + 2 * PANEL_ROWS * (l / 2) + 2 * within + l % 2;
    return element<c10::BFloat16>(t.w, at);
}

void multiply_panels(const LinearTile &t) {
    for (int64_t i = 0; i < t.m; ++i)
        for (int64_t j = 0; j < t.n; ++j) {
            double sum = 0.0;
            for (int64_t l = 0; l < t.k; ++l)
                sum += static_cast<double>(t.x[i * t.x_stride + l]) * static_cast<double>(panel_element(t, j, l));
            if (t.bias) sum += static_cast<double>(t.bias[j]);
            store(t.out_type, t.out, i * t.out_stride + j, static_cast<float>(sum));
        }
}

template <class T>
void multiply(const LinearTile &t) {
    const auto *w = static_cast<const char *>(t.w);
    for (int64_t i = 0; i < t.m; ++i)
        for (int64_t j = 0; j < t.n; ++j) {
            double sum = 0.0;
            for (int64_t l = 0; l < t.k; ++l)
                sum += static_cast<double>(t.x[i * t.x_stride + l]) * element<T>(w + j * t.w_stride * sizeof(T), l);
            if (t.scale) sum *= static_cast<double>(t.scale[j]);
            if (t.bias) sum += static_cast<double>(t.bias[j]);
            store(t.out_type, t.out, i * t.out_stride + j, static_cast<float>(sum));
        }
}

float element_of(ElementType type, const void *base, int64_t i) {
    switch (type) {
        case ElementType::bf16: return element<c10::BFloat16>(base, i);
        case ElementType::f16: return element<c10::Half>(base, i);
        default: return element<float>(base, i);  // scales are float, bfloat16 or half (linear.cpp checks)
    }
}

// The q of row j and input l of a u4 block: as stored ("blocks64"), or packed in u4 panels (LinearTile::panels).
int u4_element(const LinearTile &t, int64_t j, int64_t l) {
    const auto *block = static_cast<const uint8_t *>(t.w);
    if (t.panels) {
        const uint8_t byte = block[j / PANEL_ROWS * PANEL_ROWS * t.k / 2 + l / 8 * 64 + j % PANEL_ROWS * 4 + l % 4];
        return l % 8 < 4 ? byte & 15 : byte >> 4;
    }
    const uint8_t byte = block[l * (U4_BLOCK_ROWS / 2) + j % (U4_BLOCK_ROWS / 2)];
    return j < U4_BLOCK_ROWS / 2 ? byte & 15 : byte >> 4;
}

// int4 weights times the quantized activations, one product at a time: each block's Σ qx · (q − 8) in integers,
// scaled by the block's activation scale, each group's sum by the row's scale, plus its zero times the group's Σ x.
void multiply_u4(const LinearTile &t) {
    const int64_t blocks = t.k / Q8_BLOCK, groups = t.k / t.group;
    for (int64_t i = 0; i < t.m; ++i)
        for (int64_t j = 0; j < t.n; ++j) {
            double sum = 0.0;
            for (int64_t g = 0; g < groups; ++g) {
                double group_sum = 0.0;
                for (int64_t b = g * t.group / Q8_BLOCK; b < (g + 1) * t.group / Q8_BLOCK; ++b) {
                    int64_t products = 0;
                    for (int64_t l = b * Q8_BLOCK; l < (b + 1) * Q8_BLOCK; ++l)
                        products += static_cast<int64_t>(t.qx[i * t.k + l]) * (u4_element(t, j, l) - U4_ZERO);
                    group_sum += static_cast<double>(t.qx_scale[i * blocks + b]) * static_cast<double>(products);
                }
                const int64_t pair = g * t.scale_zero_stride + 2 * j;
                sum += static_cast<double>(element_of(t.scale_zero_type, t.scale_zero, pair)) * group_sum +
                       static_cast<double>(element_of(t.scale_zero_type, t.scale_zero, pair + 1)) *
                           static_cast<double>(t.x_sum[i * groups + g]);
            }
            if (t.bias) sum += static_cast<double>(t.bias[j]);
            store(t.out_type, t.out, i * t.out_stride + j, static_cast<float>(sum));
        }
}

// Weight (j, l) of int8 weights packed in q8 panels (LinearTile::panels with s8): stored plus 128 in a whole panel,
// as stored past the last.
int64_t q8_panel_element(const LinearTile &t, int64_t j, int64_t l) {
    if (j >= t.n / PANEL_ROWS * PANEL_ROWS) return static_cast<const int8_t *>(t.w)[j * t.k + l];
    const int64_t at = j / PANEL_ROWS * PANEL_ROWS * t.k + l / 4 * 64 + j % PANEL_ROWS * 4 + l % 4;
    return static_cast<int64_t>(static_cast<const uint8_t *>(t.w)[at]) - 128;
}

// int8 rows times the quantized activations (linear_int8_q8, and in q8 panels linear_int8_q8_panels), one product at
// a time: each block's Σ qx · w in integers, scaled by the block's activation scale, the row's sum by the row's scale.
void multiply_s8_q8(const LinearTile &t) {
    const auto *w = static_cast<const int8_t *>(t.w);
    const auto weight = [&](int64_t j, int64_t l) {
        return t.panels ? q8_panel_element(t, j, l) : static_cast<int64_t>(w[j * t.w_stride + l]);
    };
    const int64_t blocks = q8_blocks(t.k);
    for (int64_t i = 0; i < t.m; ++i)
        for (int64_t j = 0; j < t.n; ++j) {
            double sum = 0.0;
            for (int64_t b = 0; b < blocks; ++b) {
                int64_t products = 0;
                for (int64_t l = b * Q8_BLOCK; l < std::min((b + 1) * Q8_BLOCK, t.k); ++l)
                    products += static_cast<int64_t>(t.qx[i * t.k + l]) * weight(j, l);
                sum += static_cast<double>(t.qx_scale[i * blocks + b]) * static_cast<double>(products);
            }
            if (t.scale) sum *= static_cast<double>(t.scale[j]);
            if (t.bias) sum += static_cast<double>(t.bias[j]);
            store(t.out_type, t.out, i * t.out_stride + j, static_cast<float>(sum));
        }
}

}  // namespace

void linear_tile_scalar(const LinearTile &tile) {
    if (tile.panels && tile.type == ElementType::bf16) return multiply_panels(tile);
    switch (tile.type) {
        case ElementType::f32: return multiply<float>(tile);
        case ElementType::bf16: return multiply<c10::BFloat16>(tile);
        case ElementType::f16: return multiply<c10::Half>(tile);
        case ElementType::s8: return tile.qx ? multiply_s8_q8(tile) : multiply<int8_t>(tile);
        case ElementType::u4: return multiply_u4(tile);
    }
}

}  // namespace gpt::kernels
