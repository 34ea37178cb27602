// The decode attention kernel (kernels/cpu/decode_attention.h) on every vector path this CPU runs, against its
// scalar reference and against PyTorch's scaled_dot_product_attention with the mask the model would pass.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <catch2/catch.hpp>

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "cpu/decode_attention.h"
#include "cpu/isa.h"
#include "paths_here.h"

using gpt::kernels::Isa;

namespace {

struct Case {
    int64_t batch, heads, positions, head_size;
};

// What the kernel computes, in float64 from PyTorch's own attention: the new key and value written at each
// row's position, then SDPA over positions 0..pos[b] (a boolean mask), in the inputs' values made float64.
at::Tensor reference(const at::Tensor &q, const at::Tensor &k, const at::Tensor &v, at::Tensor k_cache,
                     at::Tensor v_cache, const at::Tensor &pos) {
    const int64_t B = q.size(0), S = k_cache.size(2);
    k_cache = k_cache.to(at::kDouble);
    v_cache = v_cache.to(at::kDouble);
    for (int64_t b = 0; b < B; ++b) {
        const int64_t p = pos[b].item<int64_t>();
        k_cache[b].select(1, p).copy_(k[b].select(1, 0));
        v_cache[b].select(1, p).copy_(v[b].select(1, 0));
    }
    const at::Tensor visible = at::arange(S).view({1, S}).le(pos.view({-1, 1})).view({B, 1, 1, S});
    return at::scaled_dot_product_attention(q.to(at::kDouble), k_cache, v_cache, visible);
}

// Caches as the runtime holds them: views of the first S of S + 1 positions, so rows are strided.
at::Tensor cache(const Case &c, at::ScalarType dtype) {
    return at::randn({c.batch, c.heads, c.positions + 1, c.head_size}).to(dtype).narrow(2, 0, c.positions);
}

double tolerance(at::ScalarType dtype) {
    // Inputs are exact in every dtype (the reference reads the same rounded values); what differs is the
    // accumulation in fp32 against float64 and the result's rounding to the dtype: half an ulp near 1.
    switch (dtype) {
        case at::kFloat: return 1e-5;
        case at::kHalf: return 2e-3;
        default: return 1.6e-2;  // bf16: 8 bits of mantissa
    }
}

}  // namespace

TEST_CASE("decode attention equals SDPA with the decode mask on every path, dtype and shape", "[kernels]") {
    at::manual_seed(3);
    // Head sizes off the vector widths (20, 72, 3) and GPT-2's (64); spans of one position, around a chunk's
    // end (KV_CHUNK = 256) and several chunks; 1 to 16 rows.
    const std::vector<Case> cases = {{1, 2, 1, 64},   {3, 4, 5, 20},  {2, 3, 255, 64}, {2, 2, 256, 72},
                                     {4, 2, 257, 64}, {16, 2, 40, 3}, {2, 12, 700, 64}};
    for (Isa isa : paths_here()) {
        for (at::ScalarType dtype : {at::kFloat, at::kBFloat16, at::kHalf}) {
            for (const Case &c : cases) {
                INFO(gpt::kernels::isa_name(isa) << " " << c10::toString(dtype) << " B=" << c.batch << " H=" << c.heads
                                                 << " S=" << c.positions << " D=" << c.head_size);
                const at::Tensor q = at::randn({c.batch, c.heads, 1, c.head_size}).to(dtype);
                const at::Tensor k = at::randn_like(q), v = at::randn_like(q);
                at::Tensor k_cache = cache(c, dtype), v_cache = cache(c, dtype);
                // Row 0 sees only position 0, the last row all positions, the others anywhere between.
                at::Tensor pos = at::randint(c.positions, {c.batch}, at::kLong);
                pos[0] = 0;
                pos[c.batch - 1] = c.positions - 1;
                const at::Tensor expected = reference(q, k, v, k_cache.clone(), v_cache.clone(), pos);
                const at::Tensor before_k = k_cache.clone();
                const double scale = 1.0 / std::sqrt(static_cast<double>(c.head_size));
                const at::Tensor out = gpt::kernels::decode_attention(q, k, v, k_cache, v_cache, pos, scale, isa);
                CHECK(out.scalar_type() == dtype);
                CHECK(out.sizes() == q.sizes());
                const double err = (out.to(at::kDouble) - expected).abs().max().item<double>();
                CHECK(err <= tolerance(dtype));
                // The new key went to each row's position; every other position is as it was.
                for (int64_t b = 0; b < c.batch; ++b) {
                    const int64_t p = pos[b].item<int64_t>();
                    CHECK(at::equal(k_cache[b].select(1, p), k[b].select(1, 0)));
                    before_k[b].select(1, p).copy_(k[b].select(1, 0));
                }
                CHECK(at::equal(k_cache, before_k));
            }
        }
    }
}

TEST_CASE("every vector path gives the scalar reference's result within rounding", "[kernels]") {
    at::manual_seed(4);
    const Case c{3, 4, 600, 64};
    const at::Tensor pos = at::tensor(std::vector<int64_t>{599, 300, 17});
    for (at::ScalarType dtype : {at::kFloat, at::kBFloat16, at::kHalf}) {
        const at::Tensor q = at::randn({c.batch, c.heads, 1, c.head_size}).to(dtype);
        const at::Tensor k = at::randn_like(q), v = at::randn_like(q);
        const at::Tensor k_cache = cache(c, dtype), v_cache = cache(c, dtype);
        auto run = [&](Isa isa) {
            at::Tensor kc = k_cache.clone(), vc = v_cache.clone();
            return gpt::kernels::decode_attention(q, k, v, kc, vc, pos, 0.125, isa).to(at::kDouble);
        };
        const at::Tensor scalar = run(Isa::scalar);
        for (Isa isa : paths_here()) {
            INFO(gpt::kernels::isa_name(isa) << " " << c10::toString(dtype));
            // fp32 sums in another order; in bf16 and half, at most the result's last bit.
            const double bound = dtype == at::kFloat ? 2e-6 : dtype == at::kHalf ? 1e-3 : 8e-3;
            CHECK((run(isa) - scalar).abs().max().item<double>() <= bound);
        }
    }
}

TEST_CASE("the chunks' split over threads gives the one-thread result", "[kernels]") {
    at::manual_seed(5);
    // Few merges run on the calling thread; 8 rows of 12 heads over 4 chunks are split over the threads too.
    for (const Case &c : {Case{2, 3, 900, 64}, Case{8, 12, 1024, 64}}) {
        INFO("B=" << c.batch << " H=" << c.heads << " S=" << c.positions);
        const at::Tensor q = at::randn({c.batch, c.heads, 1, c.head_size});
        const at::Tensor k = at::randn_like(q), v = at::randn_like(q);
        const at::Tensor k_cache = cache(c, at::kFloat), v_cache = cache(c, at::kFloat);
        const at::Tensor pos = at::randint(c.positions, {c.batch}, at::kLong).index_put_({0}, c.positions - 1);
        const Isa isa = gpt::kernels::active_isa();
        auto run = [&](int threads) {
            at::set_num_threads(threads);
            at::Tensor kc = k_cache.clone(), vc = v_cache.clone();
            return gpt::kernels::decode_attention(q, k, v, kc, vc, pos, 0.125, isa);
        };
        const at::Tensor one = run(1);
        CHECK(at::equal(run(4), one));  // each item is one thread's, each merge the same whatever the split
    }
    at::set_num_threads(1);
}

TEST_CASE("q, k and v whose D elements are strided give what their contiguous copies give", "[kernels]") {
    at::manual_seed(6);
    const Case c{3, 4, 300, 20};
    const at::Tensor pos = at::tensor(std::vector<int64_t>{299, 0, 141});
    for (at::ScalarType dtype : {at::kFloat, at::kBFloat16, at::kHalf}) {
        // Every other element of a row twice as wide: D elements two apart.
        auto strided = [&] { return at::randn({c.batch, c.heads, 1, 2 * c.head_size}).to(dtype).slice(3, 0, {}, 2); };
        const at::Tensor q = strided(), k = strided(), v = strided();
        REQUIRE(q.stride(3) == 2);
        const at::Tensor k_cache = cache(c, dtype), v_cache = cache(c, dtype);
        for (Isa isa : paths_here()) {
            INFO(gpt::kernels::isa_name(isa) << " " << c10::toString(dtype));
            at::Tensor kc = k_cache.clone(), vc = v_cache.clone();
            at::Tensor kc_plain = k_cache.clone(), vc_plain = v_cache.clone();
            const at::Tensor out = gpt::kernels::decode_attention(q, k, v, kc, vc, pos, 0.2, isa);
            const at::Tensor plain = gpt::kernels::decode_attention(q.contiguous(), k.contiguous(), v.contiguous(),
                                                                    kc_plain, vc_plain, pos, 0.2, isa);
            CHECK(at::equal(out, plain));
            CHECK(at::equal(kc, kc_plain));
            CHECK(at::equal(vc, vc_plain));
        }
    }
}

TEST_CASE("tokens of several sequences in one call give what one call per token gives", "[kernels]") {
    // Row 1 takes a prompt's piece of 5 tokens at positions 130..134, rows 0 and 2 a decode step each, in one
    // call, ordered as a server mixes them. Each token alone, in order, on its own row's cache: the same outputs
    // and caches, bit for bit (the piece's tokens see their earlier ones, written in the same call).
    at::manual_seed(7);
    const Case c{3, 4, 300, 24};
    const std::vector<int64_t> seq = {0, 1, 1, 1, 1, 1, 2}, pos = {299, 130, 131, 132, 133, 134, 3};
    const auto n = static_cast<int64_t>(seq.size());
    const double scale = 1.0 / std::sqrt(static_cast<double>(c.head_size));  // the reference's (SDPA's default)
    for (at::ScalarType dtype : {at::kFloat, at::kBFloat16, at::kHalf}) {
        const at::Tensor q = at::randn({n, c.heads, 1, c.head_size}).to(dtype);
        const at::Tensor k = at::randn({n, c.heads, 1, c.head_size}).to(dtype);
        const at::Tensor v = at::randn({n, c.heads, 1, c.head_size}).to(dtype);
        const at::Tensor k_cache = cache(c, dtype), v_cache = cache(c, dtype);
        for (Isa isa : paths_here()) {
            INFO(gpt::kernels::isa_name(isa) << " " << c10::toString(dtype));
            at::Tensor kc = k_cache.clone(), vc = v_cache.clone();
            const at::Tensor mixed =
                gpt::kernels::decode_attention_rows(q, k, v, kc, vc, at::tensor(pos), at::tensor(seq), scale, isa);
            at::Tensor kc_one = k_cache.clone(), vc_one = v_cache.clone();
            for (int64_t t = 0; t < n; ++t) {
                const int64_t row = seq[static_cast<size_t>(t)];
                at::Tensor k_row = kc_one.narrow(0, row, 1), v_row = vc_one.narrow(0, row, 1);
                const at::Tensor one = gpt::kernels::decode_attention(
                    q.narrow(0, t, 1), k.narrow(0, t, 1), v.narrow(0, t, 1), k_row, v_row,
                    at::tensor(std::vector<int64_t>{pos[static_cast<size_t>(t)]}), scale, isa);
                CHECK(at::equal(mixed.narrow(0, t, 1), one));
            }
            CHECK(at::equal(kc, kc_one));
            CHECK(at::equal(vc, vc_one));
            // And the piece's last token against PyTorch's attention over its row's positions 0..134.
            const at::Tensor expected =
                reference(q.narrow(0, 5, 1), k.narrow(0, 5, 1), v.narrow(0, 5, 1), kc.narrow(0, 1, 1),
                          vc.narrow(0, 1, 1), at::tensor(std::vector<int64_t>{134}));
            const double err = (mixed.narrow(0, 5, 1).to(at::kDouble) - expected).abs().max().item<double>();
            CHECK(err <= tolerance(dtype));
        }
    }
}

namespace {

// An int8 cache's positions as the kernel's header lays them out (kernels/cpu/kv_row_q8.h), computed here by torch:
// each row's values times 127 / its largest magnitude, rounded to nearest even, then that scale's four bytes.
at::Tensor quantized_rows(const at::Tensor &x) {
    const at::Tensor values = x.to(at::kFloat);
    const at::Tensor scale = values.abs().amax(-1, true) / 127.0f;
    const at::Tensor inverse = at::where(scale > 0, scale.reciprocal(), at::zeros_like(scale));
    const at::Tensor rounded = (values * inverse).round().to(at::kChar);
    return at::cat({rounded, scale.contiguous().view(at::kChar)}, -1);
}

// Their values, each row's int8 values times its scale, in float64.
at::Tensor dequantized_rows(const at::Tensor &rows) {
    const int64_t d = rows.size(-1) - 4;
    const at::Tensor scale = rows.narrow(-1, d, 4).contiguous().view(at::kFloat);
    return rows.narrow(-1, 0, d).to(at::kDouble) * scale.to(at::kDouble);
}

// An int8 cache as the runtime holds one: a view of the first S of S + 1 positions.
at::Tensor q8_cache(const Case &c) {
    return quantized_rows(at::randn({c.batch, c.heads, c.positions + 1, c.head_size})).narrow(2, 0, c.positions);
}

}  // namespace

TEST_CASE("int8 caches: SDPA over their values, each new key and value written as the reference rounds it",
          "[kernels]") {
    at::manual_seed(8);
    const std::vector<Case> cases = {{1, 2, 1, 64}, {3, 4, 5, 20}, {2, 2, 257, 64}, {16, 2, 40, 3}, {2, 12, 700, 64}};
    for (Isa isa : paths_here()) {
        for (at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
            for (const Case &c : cases) {
                INFO(gpt::kernels::isa_name(isa) << " " << c10::toString(dtype) << " B=" << c.batch << " H=" << c.heads
                                                 << " S=" << c.positions << " D=" << c.head_size);
                const at::Tensor q = at::randn({c.batch, c.heads, 1, c.head_size}).to(dtype);
                const at::Tensor k = at::randn_like(q), v = at::randn_like(q);
                at::Tensor k_cache = q8_cache(c), v_cache = q8_cache(c);
                at::Tensor pos = at::randint(c.positions, {c.batch}, at::kLong);
                pos[c.batch - 1] = c.positions - 1;
                // The caches as the kernel must leave them: each row's new key and value rounded at its position.
                at::Tensor k_expected = k_cache.clone(), v_expected = v_cache.clone();
                for (int64_t b = 0; b < c.batch; ++b) {
                    const int64_t p = pos[b].item<int64_t>();
                    k_expected[b].select(1, p).copy_(quantized_rows(k[b].select(1, 0)));
                    v_expected[b].select(1, p).copy_(quantized_rows(v[b].select(1, 0)));
                }
                const at::Tensor visible =
                    at::arange(c.positions).view({1, c.positions}).le(pos.view({-1, 1})).view({c.batch, 1, 1, -1});
                const at::Tensor expected = at::scaled_dot_product_attention(
                    q.to(at::kDouble), dequantized_rows(k_expected), dequantized_rows(v_expected), visible);
                const double scale = 1.0 / std::sqrt(static_cast<double>(c.head_size));
                const at::Tensor out = gpt::kernels::decode_attention(q, k, v, k_cache, v_cache, pos, scale, isa);
                CHECK(out.scalar_type() == dtype);
                CHECK(at::equal(k_cache, k_expected));
                CHECK(at::equal(v_cache, v_expected));
                CHECK((out.to(at::kDouble) - expected).abs().max().item<double>() <=
                      (dtype == at::kFloat ? 2e-5 : tolerance(dtype)));
            }
        }
    }
}

TEST_CASE("an int8 cache's attention stays within its rounding of a float cache's", "[kernels]") {
    // The same keys and values held in fp32 and in int8: the outputs differ by what rounding each position to
    // 255 levels of its own largest magnitude moves them: at most half a level, 0.016 here, where row 3 sees only
    // its new value (whose largest magnitude is near 4).
    at::manual_seed(9);
    const Case c{4, 12, 1024, 64};
    const at::Tensor q = at::randn({c.batch, c.heads, 1, c.head_size}), k = at::randn_like(q), v = at::randn_like(q);
    const at::Tensor keys = at::randn({c.batch, c.heads, c.positions + 1, c.head_size}), values = at::randn_like(keys);
    const at::Tensor pos = at::tensor(std::vector<int64_t>{1023, 511, 64, 0});
    at::Tensor k_float = keys.narrow(2, 0, c.positions), v_float = values.narrow(2, 0, c.positions);
    at::Tensor k_int8 = quantized_rows(keys).narrow(2, 0, c.positions);
    at::Tensor v_int8 = quantized_rows(values).narrow(2, 0, c.positions);
    const Isa isa = gpt::kernels::active_isa();
    const at::Tensor exact = gpt::kernels::decode_attention(q, k, v, k_float, v_float, pos, 0.125, isa);
    const at::Tensor rounded = gpt::kernels::decode_attention(q, k, v, k_int8, v_int8, pos, 0.125, isa);
    const double err = (rounded - exact).abs().max().item<double>();
    CAPTURE(err);
    CHECK(err > 0.0);
    CHECK(err <= 0.02);
    // A position of zeros keeps scale 0 and reads back as zeros.
    const at::Tensor zeros = quantized_rows(at::zeros({1, 1, 1, 8}));
    CHECK(at::equal(zeros, at::zeros({1, 1, 1, 12}, at::kChar)));
}

TEST_CASE("decode attention refuses what it cannot compute, naming it", "[kernels]") {
    const Case c{2, 2, 8, 16};
    const at::Tensor q = at::randn({c.batch, c.heads, 1, c.head_size});
    at::Tensor k_cache = cache(c, at::kFloat), v_cache = cache(c, at::kFloat);
    auto call = [&](const at::Tensor &qq, const at::Tensor &pos) {
        return gpt::kernels::decode_attention(qq, qq, qq, k_cache, v_cache, pos, 0.25, Isa::scalar);
    };
    const at::Tensor pos = at::tensor(std::vector<int64_t>{1, 7});
    CHECK_THROWS_WITH(call(q, at::tensor(std::vector<int64_t>{1, 8})),
                      Catch::Contains("pos[1] = 8 is outside the cache's 8 positions"));
    CHECK_THROWS_WITH(call(q, at::tensor(std::vector<int64_t>{-1, 0})), Catch::Contains("pos[0] = -1"));
    CHECK_THROWS_WITH(call(q.to(at::kBFloat16), pos), Catch::Contains("the caches must be in q's dtype, or both int8"));
    CHECK_THROWS_WITH(call(q.expand({2, 2, 3, 16}), pos), Catch::Contains("one new token a row"));
    CHECK_THROWS_WITH(call(q.to(at::kDouble), pos), Catch::Contains("the caches must be in q's dtype, or both int8"));
    CHECK_THROWS_WITH(gpt::kernels::decode_attention(q, q.to(at::kHalf), q, k_cache, v_cache, pos, 0.25, Isa::scalar),
                      Catch::Contains("q, k and v must share a dtype"));
    // An int8 cache holds each position's scale after its D values: D + 4 bytes a position, no other width.
    at::Tensor k8 = at::zeros({c.batch, c.heads, c.positions, c.head_size}, at::kChar), v8 = at::zeros_like(k8);
    CHECK_THROWS_WITH(gpt::kernels::decode_attention(q, q, q, k8, v8, pos, 0.25, Isa::scalar),
                      Catch::Contains("int8 caches must be (rows, H, S, D + 4)"));
    at::Tensor k8_wide = at::zeros({c.batch, c.heads, c.positions, c.head_size + 4}, at::kChar);
    CHECK_THROWS_WITH(gpt::kernels::decode_attention(q, q, q, k8_wide, v_cache, pos, 0.25, Isa::scalar),
                      Catch::Contains("the caches must be in q's dtype, or both int8"));
    at::Tensor k64 = k_cache.to(at::kDouble), v64 = v_cache.to(at::kDouble);
    const at::Tensor q64 = q.to(at::kDouble);
    CHECK_THROWS_WITH(gpt::kernels::decode_attention(q64, q64, q64, k64, v64, pos, 0.25, Isa::scalar),
                      Catch::Contains("is not float, bfloat16 or half"));
    CHECK_THROWS_WITH(call(q, at::tensor(std::vector<int32_t>{1, 2})), Catch::Contains("pos must be (B,) int64"));
    // Tokens mapped to cache rows: each to a row there is, no two to one position of a row.
    const at::Tensor q3 = at::randn({3, c.heads, 1, c.head_size});
    auto rows = [&](std::vector<int64_t> seq, std::vector<int64_t> at) {
        return gpt::kernels::decode_attention_rows(q3, q3, q3, k_cache, v_cache, at::tensor(at), at::tensor(seq), 0.25,
                                                   Isa::scalar);
    };
    CHECK_THROWS_WITH(rows({0, 2, 1}, {1, 2, 3}), Catch::Contains("seq[1] = 2 is not one of the caches' 2 rows"));
    CHECK_THROWS_WITH(rows({1, 0, 1}, {4, 4, 4}), Catch::Contains("two tokens go to position 4 of cache row 1"));
    CHECK_NOTHROW(rows({1, 0, 1}, {4, 4, 5}));
    CHECK_THROWS_WITH(call(q.narrow(0, 0, 1), pos.narrow(0, 0, 1)), Catch::Contains("the caches must have q's B rows"));
    CHECK_THROWS_WITH(gpt::kernels::parse_isa("avx3", "GPT_KERNELS_ISA"),
                      Catch::Contains("GPT_KERNELS_ISA=avx3 names no path"));
    CHECK(gpt::kernels::parse_isa("avx2", "use_path") == Isa::avx2);
}

TEST_CASE("a compile's override of the kernels' path holds until cleared, and only a path this CPU runs") {
    const Isa chosen = gpt::kernels::active_isa();
    for (Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512, Isa::avx512_vnni, Isa::avx512_bf16}) {
        CAPTURE(gpt::kernels::isa_name(isa));
        if (!gpt::kernels::cpu_runs(isa)) {
            CHECK_THROWS_WITH(gpt::kernels::override_isa(isa), Catch::Contains("this CPU cannot run"));
            CHECK(gpt::kernels::active_isa() == chosen);
            continue;
        }
        gpt::kernels::override_isa(isa);
        CHECK(gpt::kernels::active_isa() == isa);
        gpt::kernels::override_isa(std::nullopt);
        CHECK(gpt::kernels::active_isa() == chosen);
    }
}
