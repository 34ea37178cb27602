// The linear over bf16 weights packed in panels (kernels/cpu/linear.h: pack_linear_panels, linear_panels) on every
// path this CPU runs: its packing against the layout it documents, its product against PyTorch's linear in float64
// on the unpacked weights and against the row kernel on the same weights, and its refusals.
#include <ATen/ATen.h>
#include <catch2/catch.hpp>

#include <cmath>
#include <optional>
#include <vector>

#include "cpu/isa.h"
#include "cpu/linear.h"
#include "linear_checks.h"

using gpt::kernels::Isa;

TEST_CASE("panel packing puts each pair of inputs' weights of an output side by side, an odd k's last input after") {
    for (const int64_t k : {5, 6}) {
        const int64_t n = 32;                                                               // two panels
        const at::Tensor w = at::arange(n * k, at::kFloat).view({n, k}).to(at::kBFloat16);  // exact: < 256
        const at::Tensor packed = gpt::kernels::pack_linear_panels(w);
        REQUIRE(packed.sizes() == w.sizes());
        REQUIRE(packed.scalar_type() == at::kBFloat16);
        const at::Tensor flat = packed.reshape({-1}).to(at::kFloat);
        for (int64_t j = 0; j < n; ++j)
            for (int64_t l = 0; l < k; ++l) {
                const int64_t panel = j / 16 * 16 * k, within = j % 16;
                const int64_t at =
                    k % 2 == 1 && l == k - 1 ? panel + 16 * l + within : panel + 32 * (l / 2) + 2 * within + l % 2;
                CAPTURE(k, j, l);
                CHECK(flat[at].item<float>() == static_cast<float>(j * k + l));
            }
    }
}

TEST_CASE("the panel linear equals PyTorch's linear and the row kernel on every path, rows and edges") {
    at::manual_seed(12);
    // m: one row (its own loop: k of whole unrolled steps and a tail), the FMA form's 4-row blocks and remainders 1..3,
    // the bf16 form's 8-row blocks and remainders 1..7, a batch of 16, an extend of 33; n: one panel, a tile of 64,
    // more than a tile with a partial last tile; k: 1, odd, even but no multiple of 4 pairs, long.
    const std::vector<linear_checks::Shape> shapes = {
        {1, 16, 1},  {1, 16, 8},   {1, 80, 203}, {2, 16, 3},    {3, 64, 64},   {4, 64, 77},  {5, 144, 7},
        {6, 32, 10}, {7, 80, 768}, {8, 48, 22},  {12, 64, 129}, {16, 208, 96}, {33, 96, 33}, {1, 320, 768}};
    linear_checks::for_each_case(
        shapes, [](Isa isa, at::ScalarType xtype, const linear_checks::Shape &s, bool with_bias) {
            const at::Tensor x = at::randn({s.m, s.k}).to(xtype);
            const at::Tensor w = (at::randn({s.n, s.k}) / std::sqrt(static_cast<double>(s.k))).to(at::kBFloat16);
            const std::optional<at::Tensor> bias =
                with_bias ? std::optional<at::Tensor>(at::randn({s.n}).to(xtype)) : std::nullopt;
            const at::Tensor got = gpt::kernels::linear_panels(x, gpt::kernels::pack_linear_panels(w), bias, isa);
            REQUIRE(got.scalar_type() == xtype);
            REQUIRE(got.sizes() == at::IntArrayRef({s.m, s.n}));
            const double tolerance = linear_checks::tolerance(s.k, xtype);
            CHECK(linear_checks::error(got, linear_checks::reference(x, w, bias)) < tolerance);
            // The row kernel's sums run in another order: both within the tolerance of the exact product.
            CHECK(linear_checks::error(got, gpt::kernels::linear(x, w, bias, isa)) < 2 * tolerance);
        });
}

TEST_CASE("the panel linear keeps x's leading sizes and refuses what it cannot multiply, naming why") {
    const at::Tensor w = at::randn({32, 8}).to(at::kBFloat16);
    const at::Tensor packed = gpt::kernels::pack_linear_panels(w);
    const at::Tensor x = at::randn({2, 3, 8});
    REQUIRE(gpt::kernels::linear_panels(x, packed, std::nullopt, Isa::scalar).sizes() == at::IntArrayRef({2, 3, 32}));
    CHECK_THROWS_WITH(gpt::kernels::pack_linear_panels(w.to(at::kFloat)),
                      Catch::Contains("gpt_kernels::pack_linear_panels: weight must be bfloat16, not Float"));
    CHECK_THROWS_WITH(gpt::kernels::pack_linear_panels(at::randn({24, 8}).to(at::kBFloat16)),
                      Catch::Contains("N a positive multiple of 16"));
    CHECK_THROWS_WITH(gpt::kernels::linear_panels(x, packed.to(at::kHalf), std::nullopt, Isa::scalar),
                      Catch::Contains("weight must be bfloat16 panels, not Half"));
    CHECK_THROWS_WITH(gpt::kernels::linear_panels(x, packed.narrow(0, 0, 24), std::nullopt, Isa::scalar),
                      Catch::Contains("N a multiple of 16"));
    CHECK_THROWS_WITH(gpt::kernels::linear_panels(at::randn({2, 9}), packed, std::nullopt, Isa::scalar),
                      Catch::Contains("not weight's K 8"));
}
