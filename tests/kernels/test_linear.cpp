// The linear kernels (kernels/cpu/linear.h: float weights, int8 rows and int4 groups) on every vector path this CPU
// runs, against PyTorch's linear in float64 on the same values, for the shapes of a decode step, an extend and a
// prefill and the edges of its blocks.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <catch2/catch.hpp>

#include <cmath>
#include <optional>
#include <stdexcept>
#include <vector>

#include "cpu/isa.h"
#include "cpu/linear.h"
#include "cpu/threads.h"
#include "linear_checks.h"
#include "paths_here.h"

using gpt::kernels::Isa;

using linear_checks::error;
using linear_checks::reference;
using linear_checks::tolerance;

TEST_CASE("the linear kernel equals PyTorch's linear on every path, dtype and block edge") {
    at::manual_seed(7);
    const std::vector<at::ScalarType> dtypes = {at::kFloat, at::kBFloat16, at::kHalf};
    struct Shape {
        int64_t m, n, k;
    };
    // m: 1 row (decode), the 3-row blocks and their remainders, a batch of 16, an extend of 33; n: one block of 4
    // columns, remainders 1..3, more than one tile of 64; k: shorter than a vector, not a multiple of 8 or 16.
    // m = 1 (its own loop, ONE_ROW_CHAINS vectors at a time): k of whole unrolled steps, one more vector, a tail.
    const std::vector<Shape> shapes = {{1, 1, 1},    {1, 5, 7},     {2, 4, 8},    {3, 64, 64}, {4, 67, 77},
                                       {5, 130, 16}, {16, 131, 96}, {33, 70, 33}, {7, 2, 768}, {1, 300, 768},
                                       {1, 9, 136},  {1, 3, 203},   {1, 70, 1031}};
    for (const Isa isa : paths_here())
        for (const at::ScalarType wtype : dtypes)
            for (const at::ScalarType xtype : dtypes)
                for (const Shape &s : shapes)
                    for (const bool with_bias : {false, true}) {
                        CAPTURE(gpt::kernels::isa_name(isa), c10::toString(wtype), c10::toString(xtype), s.m, s.n, s.k,
                                with_bias);
                        const at::Tensor x = at::randn({s.m, s.k}).to(xtype);
                        const at::Tensor w = (at::randn({s.n, s.k}) / std::sqrt(static_cast<double>(s.k))).to(wtype);
                        const std::optional<at::Tensor> bias =
                            with_bias ? std::optional<at::Tensor>(at::randn({s.n}).to(wtype)) : std::nullopt;
                        const at::Tensor got = gpt::kernels::linear(x, w, bias, isa);
                        REQUIRE(got.scalar_type() == xtype);
                        REQUIRE(got.sizes() == at::IntArrayRef({s.m, s.n}));
                        CHECK(error(got, reference(x, w, bias)) < tolerance(s.k, xtype));
                    }
}

TEST_CASE("the int8 linear equals PyTorch's linear on the dequantised rows on every path and dtype") {
    at::manual_seed(10);
    // As above: one row's loop (whole unrolled steps, one more vector, a tail), the blocks and their edges.
    const std::vector<linear_checks::Shape> shapes = {{1, 1, 1},     {1, 5, 7},    {3, 64, 64}, {4, 67, 77},
                                                      {16, 131, 96}, {33, 70, 33}, {1, 9, 136}, {1, 3, 203},
                                                      {1, 70, 1031}, {2, 300, 768}};
    linear_checks::for_each_case(
        shapes, [](Isa isa, at::ScalarType xtype, const linear_checks::Shape &s, bool with_bias) {
            const at::Tensor x = at::randn({s.m, s.k}).to(xtype);
            const at::Tensor w = at::randint(-127, 128, {s.n, s.k}).to(at::kChar);
            // Scales as quantize.py's (absmax / 127 of rows of about unit-norm weights), in x's dtype.
            const at::Tensor scale = (at::rand({s.n}) / (127.0 * std::sqrt(static_cast<double>(s.k)))).to(xtype);
            const std::optional<at::Tensor> bias =
                with_bias ? std::optional<at::Tensor>(at::randn({s.n}).to(xtype)) : std::nullopt;
            const at::Tensor got = gpt::kernels::linear_int8(x, w, scale, bias, isa);
            REQUIRE(got.scalar_type() == xtype);
            REQUIRE(got.sizes() == at::IntArrayRef({s.m, s.n}));
            const at::Tensor dequantised = w.to(at::kDouble) * scale.to(at::kDouble).unsqueeze(1);
            CHECK(error(got, reference(x, dequantised, bias)) < tolerance(s.k, xtype));
        });
}

// (rows padded to 64, k) int4 values as the "blocks64" bytes linear_int4 reads (aot/gpt_aot/model/linear.py's
// to_int4_blocks): per block of 64 rows, the byte of input i and row j < 32 holds row j's q low, row j + 32's high.
at::Tensor to_blocks64(const at::Tensor &q) {
    const int64_t rows = q.size(0), k = q.size(1);
    const at::Tensor halves = q.view({-1, 2, 32, k});
    const at::Tensor bytes = at::bitwise_or(halves.select(1, 0), halves.select(1, 1).mul(16)).to(at::kByte);
    return bytes.transpose(1, 2).contiguous().view({rows, k / 2});
}

// (groups, rows padded to 64, 2) (scale, zero) pairs as the block-by-block run linear_int4 reads (linear.py's
// to_int4_pair_blocks): (blocks, groups, 64, 2).
at::Tensor to_pair_blocks(const at::Tensor &by_group) {
    const int64_t groups = by_group.size(0), rows = by_group.size(1);
    return by_group.view({groups, rows / 64, 64, 2}).transpose(0, 1).contiguous();
}

TEST_CASE(
    "the int4 linear, as stored and in u4 panels, is the dequantised linear within its activations' rounding, every "
    "path its reference") {
    at::manual_seed(11);
    const std::vector<at::ScalarType> dtypes = {at::kFloat, at::kBFloat16, at::kHalf};
    struct Shape {
        int64_t m, n, k, groups;
    };
    // m: one row (both nibbles a pass; the panels: a block's four panels at once where the block has more than three,
    // else panel by panel), pairs of rows and a remainder (the panels: blocks of 8 rows and 1..7, of 2 and 1); n: part
    // of one block, whole blocks, a last block partly filled (a panel partly, and panels of padding rows); groups of
    // 32 (one activation block), 64 and 256 inputs.
    const std::vector<Shape> shapes = {{1, 1, 32, 1},    {1, 64, 64, 2},  {2, 70, 96, 3},     {3, 130, 128, 2},
                                       {5, 64, 256, 1},  {33, 65, 64, 1}, {16, 100, 768, 24}, {1, 300, 768, 24},
                                       {7, 129, 192, 3}, {1, 120, 256, 4}};
    for (const Isa isa : paths_here())
        for (const at::ScalarType xtype : dtypes)
            for (const Shape &s : shapes)
                for (const bool with_bias : {false, true}) {
                    CAPTURE(gpt::kernels::isa_name(isa), c10::toString(xtype), s.m, s.n, s.k, s.groups, with_bias);
                    const int64_t padded = (s.n + 63) / 64 * 64, group = s.k / s.groups;
                    const at::Tensor x = at::randn({s.m, s.k}).to(xtype);
                    const at::Tensor q = at::randint(0, 16, {padded, s.k}).to(at::kByte);
                    // Scales as quantize.py's (a group's range over 15 levels, weights of about unit-norm rows) and
                    // zeros about the weights' size, in x's dtype.
                    const double size = 1.0 / std::sqrt(static_cast<double>(s.k));
                    const at::Tensor scale_zero =
                        at::stack({at::rand({s.groups, padded}) * (size / 7.5), at::randn({s.groups, padded}) * size},
                                  -1)
                            .to(xtype);
                    const std::optional<at::Tensor> bias =
                        with_bias ? std::optional<at::Tensor>(at::randn({s.n}).to(xtype)) : std::nullopt;
                    const at::Tensor blocks = to_blocks64(q);
                    const at::Tensor got =
                        gpt::kernels::linear_int4(x, blocks, to_pair_blocks(scale_zero), s.n, bias, isa);
                    REQUIRE(got.scalar_type() == xtype);
                    REQUIRE(got.sizes() == at::IntArrayRef({s.m, s.n}));
                    // Against the exact product: x rounded to int8 in blocks of 32 moves each input by at most half
                    // its block's step (max |x| / 127 / 2), so each output by at most Σ that · |w|.
                    const at::Tensor pairs = scale_zero.to(at::kDouble).repeat_interleave(group, 0);  // (k, rows, 2)
                    const at::Tensor w =
                        ((q.to(at::kDouble) - 8.0) * pairs.select(2, 0).t() + pairs.select(2, 1).t()).slice(0, 0, s.n);
                    const at::Tensor x64 = x.to(at::kFloat).to(at::kDouble);
                    const at::Tensor half_step =
                        (x64.view({s.m, -1, 32}).abs().amax(-1) / 254.0).repeat_interleave(32, 1);
                    const at::Tensor bound = at::matmul(half_step, w.abs().t());
                    const at::Tensor want = reference(x, w, bias);
                    const at::Tensor slack = want.abs().clamp_min(1.0) * tolerance(s.k, xtype);
                    CHECK(((got.to(at::kDouble) - want).abs() - bound - slack).max().item<double>() <= 0.0);
                    // Against the scalar path, which rounds x alike and sums the same integer products.
                    const at::Tensor scalar =
                        gpt::kernels::linear_int4(x, blocks, to_pair_blocks(scale_zero), s.n, bias, Isa::scalar);
                    CHECK(error(got, scalar.to(at::kDouble)) < tolerance(s.k, xtype));
                    // In u4 panels: the same integer products, only the order of the float sums apart; the scalar
                    // path reads the panels' bytes and gives exactly its result on the stored layout.
                    const at::Tensor panels = gpt::kernels::pack_linear_int4_panels(blocks);
                    REQUIRE(panels.sizes() == blocks.sizes());
                    REQUIRE(panels.scalar_type() == at::kByte);
                    const at::Tensor in_panels =
                        gpt::kernels::linear_int4_panels(x, panels, to_pair_blocks(scale_zero), s.n, bias, isa);
                    REQUIRE(in_panels.sizes() == got.sizes());
                    CHECK(error(in_panels, scalar.to(at::kDouble)) < tolerance(s.k, xtype));
                    CHECK(at::equal(
                        gpt::kernels::linear_int4_panels(x, panels, to_pair_blocks(scale_zero), s.n, bias, Isa::scalar),
                        scalar));
                }
}

TEST_CASE("the int4 linear's integer sums hold the largest products a block can have") {
    // Every q 15 (7 after the zero) or 0 (−8) and every input rounded to ±127: each block's products are the largest
    // the vector paths keep in 16-bit lanes before widening them (a wrapped sum would be off by 2^16 products).
    // Σ x · w = k · x · (q − 8) · scale with zeros of 0, within the rounding of x's scale (1 / 127).
    const int64_t n = 64, k = 256;
    for (const Isa isa : paths_here())
        for (const int q_value : {15, 0})
            for (const float x_value : {1.0F, -1.0F}) {
                CAPTURE(gpt::kernels::isa_name(isa), q_value, x_value);
                const at::Tensor x = at::full({1, k}, x_value);
                const at::Tensor q = at::full({n, k}, q_value, at::kByte);
                const at::Tensor scale_zero = at::stack({at::full({1, n}, 0.5F), at::zeros({1, n})}, -1);
                const at::Tensor got =
                    gpt::kernels::linear_int4(x, to_blocks64(q), to_pair_blocks(scale_zero), n, std::nullopt, isa);
                const float want = static_cast<float>(k) * x_value * static_cast<float>(q_value - 8) * 0.5F;
                CHECK(at::allclose(got, at::full({1, n}, want), 1e-5, 0.0));
                const at::Tensor panels = gpt::kernels::pack_linear_int4_panels(to_blocks64(q));
                CHECK(at::allclose(
                    gpt::kernels::linear_int4_panels(x, panels, to_pair_blocks(scale_zero), n, std::nullopt, isa),
                    at::full({1, n}, want), 1e-5, 0.0));
            }
}

TEST_CASE("the linear kernel keeps x's leading sizes and reads weight rows with a stride") {
    at::manual_seed(8);
    const at::Tensor x = at::randn({2, 3, 40});
    const at::Tensor wide = at::randn({24, 50});
    const at::Tensor w = wide.narrow(1, 5, 40);  // rows 50 apart, each of 40 contiguous elements
    for (const Isa isa : paths_here()) {
        CAPTURE(gpt::kernels::isa_name(isa));
        const at::Tensor got = gpt::kernels::linear(x, w, std::nullopt, isa);
        REQUIRE(got.sizes() == at::IntArrayRef({2, 3, 24}));
        CHECK(error(got, reference(x, w, std::nullopt)) < tolerance(40, at::kFloat));
    }
}

TEST_CASE("the linear kernel's tiles run on torch's threads and give the same bits as on one") {
    REQUIRE(gpt::kernels::threaded());  // else at::parallel_for runs every tile on the calling thread
    at::manual_seed(9);
    const int saved = at::get_num_threads();
    for (const int64_t m : {1, 5}) {
        const at::Tensor x = at::randn({m, 96}), w = at::randn({64 * 9 + 5, 96}).to(at::kBFloat16);
        at::set_num_threads(1);
        const at::Tensor alone = gpt::kernels::linear(x, w, std::nullopt, gpt::kernels::active_isa());
        at::set_num_threads(3);
        const at::Tensor shared = gpt::kernels::linear(x, w, std::nullopt, gpt::kernels::active_isa());
        CAPTURE(m);
        CHECK(at::equal(alone, shared));
    }
    at::set_num_threads(saved);
}

TEST_CASE("the linear kernel refuses what it cannot multiply, naming why") {
    const at::Tensor x = at::randn({2, 8}), w = at::randn({4, 8});
    const Isa isa = Isa::scalar;
    CHECK_THROWS_WITH(gpt::kernels::linear(at::randn({2, 9}), w, std::nullopt, isa),
                      Catch::Contains("not weight's K 8"));
    CHECK_THROWS_WITH(gpt::kernels::linear(x, at::randn({8, 4}).t(), std::nullopt, isa),
                      Catch::Contains("rows must be contiguous"));
    CHECK_THROWS_WITH(gpt::kernels::linear(x, w.to(at::kInt), std::nullopt, isa),
                      Catch::Contains("is not float, bfloat16 or half"));
    CHECK_THROWS_WITH(gpt::kernels::linear(x, w, at::randn({3}), isa), Catch::Contains("bias must be (N,)"));
    for (const Isa path :
         {Isa::avx2, Isa::avx512, Isa::avx512_vnni, Isa::avx512_bf16})  // a path this CPU lacks is refused, not run
        if (!gpt::kernels::cpu_runs(path))
            CHECK_THROWS_WITH(gpt::kernels::linear(x, w, std::nullopt, path),
                              Catch::Contains(std::string("cannot run the ") + gpt::kernels::isa_name(path)));
    const at::Tensor q = w.to(at::kChar), scale = at::rand({4});
    CHECK_THROWS_WITH(gpt::kernels::linear(x, q, std::nullopt, isa), Catch::Contains("is not float, bfloat16 or half"));
    CHECK_THROWS_WITH(gpt::kernels::linear_int8(x, w, scale, std::nullopt, isa),
                      Catch::Contains("gpt_kernels::linear_int8: weight must be int8, not Float"));
    CHECK_THROWS_WITH(gpt::kernels::linear_int8(x, q, at::rand({5}), std::nullopt, isa),
                      Catch::Contains("scale must be (N,)"));
    CHECK_THROWS_WITH(gpt::kernels::linear_int8(x, q, scale.to(at::kInt), std::nullopt, isa),
                      Catch::Contains("is not float, bfloat16 or half"));
    const at::Tensor x64 = at::randn({2, 64}), blocks = at::zeros({64, 32}, at::kByte), pairs = at::rand({1, 2, 64, 2});
    REQUIRE(gpt::kernels::linear_int4(x64, blocks, pairs, 4, std::nullopt, isa).sizes() == at::IntArrayRef({2, 4}));
    CHECK_THROWS_WITH(gpt::kernels::linear_int4(x64, blocks.to(at::kChar), pairs, 4, std::nullopt, isa),
                      Catch::Contains("gpt_kernels::linear_int4: weight must be uint8, not Char"));
    CHECK_THROWS_WITH(gpt::kernels::linear_int4(x64, at::zeros({60, 32}, at::kByte), pairs, 4, std::nullopt, isa),
                      Catch::Contains("rows padded to a multiple of 64"));
    CHECK_THROWS_WITH(gpt::kernels::linear_int4(x64, blocks, pairs, 0, std::nullopt, isa),
                      Catch::Contains("rows 0 do not fill"));
    CHECK_THROWS_WITH(gpt::kernels::linear_int4(x, blocks, pairs, 4, std::nullopt, isa),
                      Catch::Contains("not weight's K 64"));
    CHECK_THROWS_WITH(gpt::kernels::linear_int4(x64, blocks, at::rand({2, 64, 2}), 4, std::nullopt, isa),
                      Catch::Contains("scale_zero must be contiguous (weight's blocks of 64 rows, groups, 64, 2)"));
    CHECK_THROWS_WITH(gpt::kernels::linear_int4(x64, blocks, at::rand({2, 2, 64, 2}), 4, std::nullopt, isa),
                      Catch::Contains("scale_zero must be contiguous (weight's blocks of 64 rows, groups, 64, 2)"));
    CHECK_THROWS_WITH(
        gpt::kernels::linear_int4(x64, blocks, at::rand({1, 2, 64, 2}).transpose(0, 1), 4, std::nullopt, isa),
        Catch::Contains("scale_zero must be contiguous"));
    CHECK_THROWS_WITH(gpt::kernels::linear_int4(x64, blocks, at::rand({1, 4, 64, 2}), 4, std::nullopt, isa),
                      Catch::Contains("4 groups do not divide K 64 into multiples of 32"));
    CHECK_THROWS_WITH(gpt::kernels::linear_int4(x64, blocks, pairs.to(at::kInt), 4, std::nullopt, isa),
                      Catch::Contains("is not float, bfloat16 or half"));
}
