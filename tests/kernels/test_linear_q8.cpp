// The int8 linear with quantized activations (kernels/cpu/linear.h's linear_int8_q8: int8 rows times x rounded to
// int8 in blocks of 32, multiplied in integers) on every vector path this CPU runs: against the exact product on the
// dequantised rows within the activations' rounding, and against the scalar reference, which rounds x alike.
#include <ATen/ATen.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "cpu/isa.h"
#include "cpu/linear.h"
#include "cpu/linear_tile.h"
#include "linear_checks.h"

using gpt::kernels::Isa;

using linear_checks::error;
using linear_checks::reference;
using linear_checks::tolerance;

TEST_CASE("the q8 int8 linear is the dequantised linear within its activations' rounding, every path its reference") {
    at::manual_seed(12);
    // m: one row (its own loop: 1 to 5 blocks of 32, so whole steps of its chains and a tail), pairs of rows and a
    // remainder, a batch of 16, an extend of 33; n: blocks of 4 weight rows and remainders 1..3, more than one tile;
    // k: one block to GPT-2's widths, and no multiple of 32 (a last, shorter block; one shorter than a block alone).
    const std::vector<linear_checks::Shape> shapes = {{1, 1, 32},  {1, 5, 96},    {1, 67, 128},   {1, 9, 160},
                                                      {2, 4, 64},  {3, 70, 96},   {5, 131, 128},  {16, 66, 768},
                                                      {33, 7, 64}, {1, 300, 768}, {2, 300, 3072}, {1, 9, 48},
                                                      {3, 70, 77}, {1, 67, 1031}, {2, 5, 7}};
    linear_checks::for_each_case(
        shapes, [](Isa isa, at::ScalarType xtype, const linear_checks::Shape &s, bool with_bias) {
            at::Tensor x = at::randn({s.m, s.k});
            if (s.k >= 64) x.slice(1, 32, 64).zero_();  // a block of zeros: scale 0, every q 0
            x = x.to(xtype);
            const at::Tensor w = at::randint(-127, 128, {s.n, s.k}).to(at::kChar);
            // Scales as quantize.py's (absmax / 127 of rows of about unit-norm weights), in x's dtype.
            const at::Tensor scale = (at::rand({s.n}) / (127.0 * std::sqrt(static_cast<double>(s.k)))).to(xtype);
            const std::optional<at::Tensor> bias =
                with_bias ? std::optional<at::Tensor>(at::randn({s.n}).to(xtype)) : std::nullopt;
            const at::Tensor got = gpt::kernels::linear_int8_q8(x, w, scale, bias, isa);
            REQUIRE(got.scalar_type() == xtype);
            REQUIRE(got.sizes() == at::IntArrayRef({s.m, s.n}));
            // Against the exact product: x rounded to int8 in blocks of 32 moves each input by at most half its
            // block's step (max |x| / 127 / 2), so each output by at most Σ that · |w|.
            const at::Tensor dequantised = w.to(at::kDouble) * scale.to(at::kDouble).unsqueeze(1);
            const at::Tensor x64 = x.to(at::kFloat).to(at::kDouble);
            const int64_t padded = (s.k + 31) / 32 * 32;
            const at::Tensor blocks = at::constant_pad_nd(x64, {0, padded - s.k}).view({s.m, -1, 32});
            const at::Tensor half_step = (blocks.abs().amax(-1) / 254.0).repeat_interleave(32, 1).slice(1, 0, s.k);
            const at::Tensor bound = at::matmul(half_step, dequantised.abs().t());
            const at::Tensor want = reference(x, dequantised, bias);
            const at::Tensor slack = want.abs().clamp_min(1.0) * tolerance(s.k, xtype);
            CHECK(((got.to(at::kDouble) - want).abs() - bound - slack).max().item<double>() <= 0.0);
            // The rounding is real: the weight-only kernel, on the same values, lies within its own tolerance.
            const at::Tensor exact = gpt::kernels::linear_int8(x, w, scale, bias, isa);
            CHECK(error(exact, want) < tolerance(s.k, xtype));
            // Against the scalar path, which rounds x alike and sums the same integer products.
            const at::Tensor scalar = gpt::kernels::linear_int8_q8(x, w, scale, bias, Isa::scalar);
            CHECK(error(got, scalar.to(at::kDouble)) < tolerance(s.k, xtype));
        });
}

TEST_CASE("the q8 int8 linear's rounding is its activations' alone: x on its blocks' int8 grid is exact") {
    // x whose every block is already q · s for int8 q (max |q| = 127): the rounding changes nothing, so the
    // integer products give the dequantised linear up to the order of fp32 sums.
    at::manual_seed(13);
    const int64_t m = 3, n = 70, k = 256;
    const at::Tensor q = at::randint(-126, 127, {m, k}).to(at::kFloat);
    q.select(1, 0).fill_(127.0);  // each row's first block reaches ±127
    for (int64_t b = 1; b < k / 32; ++b) q.select(1, b * 32).fill_(-127.0);
    const at::Tensor steps = at::rand({m, k / 32}) + 0.5;
    const at::Tensor x = q * steps.repeat_interleave(32, 1);
    const at::Tensor w = at::randint(-127, 128, {n, k}).to(at::kChar);
    const at::Tensor scale = at::rand({n}) / 2000.0;
    const at::Tensor want = reference(x, w.to(at::kDouble) * scale.to(at::kDouble).unsqueeze(1), std::nullopt);
    for (const Isa isa : paths_here()) {
        CAPTURE(gpt::kernels::isa_name(isa));
        CHECK(error(gpt::kernels::linear_int8_q8(x, w, scale, std::nullopt, isa), want) < 1e-5);
    }
}

TEST_CASE("the q8 int8 linear refuses what it cannot multiply, naming why") {
    const at::Tensor x = at::randn({2, 64}), q = at::randint(-127, 128, {4, 64}).to(at::kChar), scale = at::rand({4});
    const Isa isa = Isa::scalar;
    CHECK_THROWS_WITH(gpt::kernels::linear_int8_q8(x, q.to(at::kFloat), scale, std::nullopt, isa),
                      Catch::Contains("gpt_kernels::linear_int8_q8: weight must be int8, not Float"));
    CHECK_THROWS_WITH(gpt::kernels::linear_int8_q8(x, q, at::rand({5}), std::nullopt, isa),
                      Catch::Contains("scale must be (N,)"));
    CHECK_THROWS_WITH(gpt::kernels::linear_int8_q8(at::randn({2, 32}), q, scale, std::nullopt, isa),
                      Catch::Contains("not weight's K 64"));
}

TEST_CASE("every path rounds the activations to int8 blocks bit for bit as the scalar one, each within half a step") {
    // The q8 and int4 linears read x rounded once a call (kernels/cpu/linear_q8_activations.cpp): the vector paths
    // 32 values a block, the scalar one a value at a time; the tiles of every path must read the same values.
    at::manual_seed(14);
    // k: whole blocks (GPT-2's widths), a last shorter block, a row shorter than a block; groups of 32, 64 and k.
    for (const int64_t k : {32, 96, 768, 3072, 77, 7}) {
        at::Tensor x = at::randn({3, k}) * at::rand({3, 1}) * 8.0;
        if (k >= 64) x.slice(1, 32, 64).zero_();  // a block of zeros: scale 0, every q 0
        x.select(0, 2).mul_(1e-30);               // tiny values: the scale's reciprocal is large, but finite
        const at::Tensor x32 = x.contiguous();
        for (const int64_t group : {int64_t{32}, int64_t{64}, k}) {
            if (k % group != 0) continue;
            CAPTURE(k, group);
            gpt::kernels::Q8Activations scalar, vector;
            gpt::kernels::quantize_activations(x32.data_ptr<float>(), 3, k, group, scalar, Isa::scalar);
            // Each q within half a step of x / s, |q| ≤ 127, Σ q and Σ x per group as stated.
            const int64_t blocks = gpt::kernels::q8_blocks(k);
            for (int64_t i = 0; i < 3; ++i)
                for (int64_t b = 0; b < blocks; ++b) {
                    const float s = scalar.scale[static_cast<size_t>(i * blocks + b)];
                    int32_t sum = 0;
                    for (int64_t j = b * 32; j < std::min(k, b * 32 + 32); ++j) {
                        const int8_t q = scalar.q[static_cast<size_t>(i * k + j)];
                        sum += q;
                        CHECK(std::abs(static_cast<int>(q)) <= 127);
                        CHECK(std::abs(x[i][j].item<float>() - q * s) <= s * 0.5f * (1.0f + 1e-5f));
                    }
                    CHECK(sum == scalar.q_sum[static_cast<size_t>(i * blocks + b)]);
                }
            const at::Tensor group_sums = x.to(at::kDouble).view({3, k / group, group}).sum(-1);
            for (int64_t i = 0; i < 3; ++i)
                for (int64_t g = 0; g < k / group; ++g)
                    CHECK(std::abs(scalar.group_sum[static_cast<size_t>(i * (k / group) + g)] -
                                   group_sums[i][g].item<double>()) <= 1e-5 * x[i].abs().sum().item<double>());
            for (const Isa isa : paths_here()) {
                CAPTURE(gpt::kernels::isa_name(isa));
                gpt::kernels::quantize_activations(x32.data_ptr<float>(), 3, k, group, vector, isa);
                CHECK(vector.q == scalar.q);
                CHECK(vector.scale == scalar.scale);
                CHECK(vector.q_sum == scalar.q_sum);
                CHECK(vector.group_sum == scalar.group_sum);
            }
        }
    }
}

TEST_CASE(
    "the q8 int8 linear on weights in q8 panels is the rows' form, on every path, and its packing is refused "
    "where it cannot pack") {
    at::manual_seed(15);
    // m: one row, the VNNI blocks of 8 rows and every remainder (1..7), the AVX2 blocks of 2; n: one panel to several
    // tiles of 64 rows and a last tile of 16, 32 or 48, and rows past the last whole panel (fewer than a panel, a
    // tile's last, GPT-2's head's 50257 % 16 = 1); k: one block to GPT-2's widths.
    const std::vector<linear_checks::Shape> shapes = {
        {1, 16, 32},    {2, 32, 64},   {3, 48, 96}, {7, 80, 128}, {8, 64, 768},  {9, 144, 256}, {16, 16, 3072},
        {17, 208, 160}, {1, 784, 768}, {3, 5, 64},  {8, 71, 96},  {1, 129, 768}, {10, 33, 32}};
    linear_checks::for_each_case(
        shapes, [](Isa isa, at::ScalarType xtype, const linear_checks::Shape &s, bool with_bias) {
            at::Tensor x = at::randn({s.m, s.k});
            if (s.k >= 64) x.slice(1, 32, 64).zero_();  // a block of zeros: scale 0, every q 0
            x = x.to(xtype);
            at::Tensor w = at::randint(-127, 128, {s.n, s.k}).to(at::kChar);
            w.select(0, 0).fill_(127);  // the largest and smallest weights a row: the unsigned bytes' ends (255, 1)
            w.select(0, s.n - 1).fill_(-127);
            const at::Tensor scale = (at::rand({s.n}) / (127.0 * std::sqrt(static_cast<double>(s.k)))).to(xtype);
            const std::optional<at::Tensor> bias =
                with_bias ? std::optional<at::Tensor>(at::randn({s.n}).to(xtype)) : std::nullopt;
            const at::Tensor panels = gpt::kernels::pack_linear_q8_panels(w);
            REQUIRE(panels.scalar_type() == at::kByte);
            REQUIRE(panels.sizes() == w.sizes());
            const at::Tensor got = gpt::kernels::linear_int8_q8_panels(x, panels, scale, bias, isa);
            REQUIRE(got.scalar_type() == xtype);
            REQUIRE(got.sizes() == at::IntArrayRef({s.m, s.n}));
            // The same integer products as the rows' form, only the order of the fp32 sums apart.
            const at::Tensor rows = gpt::kernels::linear_int8_q8(x, w, scale, bias, Isa::scalar);
            CHECK(error(got, rows.to(at::kDouble)) < tolerance(s.k, xtype));
            // The scalar reference reads the panels' bytes: exactly the rows' scalar result (the same integers, the
            // same float64 sums).
            const at::Tensor scalar = gpt::kernels::linear_int8_q8_panels(x, panels, scale, bias, Isa::scalar);
            CHECK(at::equal(scalar, rows));
        });
    const at::Tensor q = at::randint(-127, 128, {32, 64}).to(at::kChar);
    CHECK_THROWS_WITH(gpt::kernels::pack_linear_q8_panels(q.narrow(1, 0, 48)),
                      Catch::Contains("with K a positive multiple of 32"));
    CHECK_THROWS_WITH(gpt::kernels::linear_int8_q8_panels(at::randn({1, 48}), q.narrow(1, 0, 48).view(at::kByte),
                                                          at::rand({32}), std::nullopt, Isa::scalar),
                      Catch::Contains("K a multiple of 32"));
    CHECK_THROWS_WITH(gpt::kernels::pack_linear_q8_panels(q.to(at::kFloat)),
                      Catch::Contains("pack_linear_q8_panels: weight must be int8, not Float"));
    CHECK_THROWS_WITH(
        gpt::kernels::linear_int8_q8_panels(at::randn({1, 64}), q, at::rand({32}), std::nullopt, Isa::scalar),
        Catch::Contains("weight must be uint8 q8 panels, not Char"));
}
