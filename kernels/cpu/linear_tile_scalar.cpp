// linear_tile_scalar.cpp — the reference path: one element at a time, torch's own dtype conversions, the sum along
// k (and the bias) in double so that the vector paths are compared with something more exact than themselves.
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include "cpu/linear_tile.h"
#include "cpu/scalar_elements.h"

namespace gpt::kernels {

namespace {

void store(ElementType type, void *out, int64_t i, float value) {
    switch (type) {
        case ElementType::f32: static_cast<float *>(out)[i] = value; return;
        case ElementType::bf16: static_cast<c10::BFloat16 *>(out)[i] = c10::BFloat16(value); return;
        case ElementType::f16: static_cast<c10::Half *>(out)[i] = c10::Half(value); return;
        case ElementType::s8: return;  // never an output: the linear stores its activations' dtype
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

}  // namespace

void linear_tile_scalar(const LinearTile &tile) {
    switch (tile.type) {
        case ElementType::f32: return multiply<float>(tile);
        case ElementType::bf16: return multiply<c10::BFloat16>(tile);
        case ElementType::f16: return multiply<c10::Half>(tile);
        case ElementType::s8: return multiply<int8_t>(tile);
    }
}

}  // namespace gpt::kernels
