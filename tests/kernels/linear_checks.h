// linear_checks.h — what the linear kernels' tests share: the float64 reference, the tolerance of fp32 sums
// rounded to x's dtype, the error measure, and the loop over every path × activation dtype × shape × bias.
#pragma once

#include <ATen/ATen.h>
#include <catch2/catch.hpp>

#include <optional>
#include <vector>

#include "cpu/isa.h"
#include "paths_here.h"

namespace linear_checks {

struct Shape {
    int64_t m, n, k;
};

// What the kernel computes, in float64: x as it reads it (fp32) times the weight's values.
inline at::Tensor reference(const at::Tensor &x, const at::Tensor &w, const std::optional<at::Tensor> &bias) {
    const at::Tensor b = bias ? bias->to(at::kDouble) : at::Tensor();
    return at::linear(x.to(at::kFloat).to(at::kDouble), w.to(at::kDouble), b);
}

// fp32 sums over k terms of size about |x|·|w| ≈ 1 drift by about k·2⁻²⁴ each; the result is then rounded to
// x's dtype (bf16: 8 bits of mantissa, half: 11).
inline double tolerance(int64_t k, at::ScalarType out) {
    const double sums = 1e-6 * static_cast<double>(k);
    if (out == at::kBFloat16) return sums + 1.6e-2;
    if (out == at::kHalf) return sums + 2e-3;
    return sums + 1e-6;
}

// The largest error relative to max(1, |reference|).
inline double error(const at::Tensor &got, const at::Tensor &want) {
    const at::Tensor g = got.to(at::kDouble);
    return ((g - want.to(at::kDouble)).abs() / want.to(at::kDouble).abs().clamp_min(1.0)).max().item<double>();
}

// check(isa, x's dtype, shape, with bias) for every path this CPU runs, x float/bf16/half, each shape, ± bias.
template <class Check>
void for_each_case(const std::vector<Shape> &shapes, Check check) {
    for (const gpt::kernels::Isa isa : paths_here())
        for (const at::ScalarType xtype : {at::kFloat, at::kBFloat16, at::kHalf})
            for (const Shape &s : shapes)
                for (const bool with_bias : {false, true}) {
                    CAPTURE(gpt::kernels::isa_name(isa), c10::toString(xtype), s.m, s.n, s.k, with_bias);
                    check(isa, xtype, s, with_bias);
                }
}

}  // namespace linear_checks
