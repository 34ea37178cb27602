// Artifacts with an int8 KV cache (tiny-kv-int8: the tiny model in bf16, compile --kv-dtype int8): the session's
// cache is int8, each position its values and their scale; the artifact matches its golden vector; a batched
// session's sequences, a copied prefix and an appended piece give what each sequence's own session gives; a
// manifest whose cache the runtime cannot honour is refused, naming why. The compiled graphs against eager PyTorch:
// tests/aot/test_kv_int8.py.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "exec/model.h"
#include "session_helpers.h"
#include "test_support.h"

namespace {

// Both bf16 (logits below 1): a batched step and a single one sum their linears in another order, and a key
// computed a bit apart may round to the next int8 level.
constexpr float kTolerance = 2e-2f;

std::vector<float> alone(gpt_model *model, const std::vector<gpt_token> &tokens, int32_t vocab) {
    test::Session session(model);
    std::vector<float> logits(static_cast<size_t>(vocab));
    REQUIRE(gpt_session_prefill(session.handle, tokens.data(), static_cast<int32_t>(tokens.size()), logits.data()) ==
            GPT_OK);
    return logits;
}

}  // namespace

TEST_CASE("an int8 KV cache: int8 positions of head_dim + 4 bytes, the info says so, the golden vector matches",
          "[kv_int8]") {
    test::Model model(test::artifact("kv-int8"));
    REQUIRE(model.status == GPT_OK);
    CHECK(std::string(model.info.kv_cache) == "int8");
    const gpt::Model &impl = *model.handle->impl;
    const at::Tensor kv = impl.new_kv_cache(3);
    CHECK(kv.scalar_type() == at::kChar);
    const gpt::ModelConfig &c = impl.config();
    CHECK(kv.sizes() == at::IntArrayRef({c.n_layer, 2, 3, c.n_head, c.block_size + 1, c.head_dim() + 4}));
    const double err = test::golden_error(model.handle);
    CHECK(err >= 0);
    CHECK(err <= impl.manifest().golden_atol);
    // A float cache is in the model's dtype, and says so.
    test::Model bf16(test::artifact("bf16-panels"));
    REQUIRE(bf16.status == GPT_OK);
    CHECK(std::string(bf16.info.kv_cache) == "bfloat16");
    CHECK(bf16.handle->impl->new_kv_cache(1).scalar_type() == at::kBFloat16);
}

TEST_CASE("an int8 KV cache: batched steps, a copied prefix and an appended piece equal each sequence alone",
          "[kv_int8]") {
    test::Model model(test::artifact("kv-int8"));
    REQUIRE(model.status == GPT_OK);
    const int32_t vocab = model.info.vocab_size;
    const std::vector<int32_t> prompt_len = {9, 3, 14};
    std::vector<std::vector<gpt_token>> seqs;
    for (int32_t s = 0; s < 3; ++s) seqs.push_back(test::token_stream(20 + s, prompt_len[s] + 6, vocab));
    test::Session batch(model.handle, 3);
    std::vector<float> logits(static_cast<size_t>(3 * vocab));
    for (int32_t s = 0; s < 3; ++s)
        REQUIRE(gpt_session_prefill_seq(batch.handle, s, seqs[s].data(), prompt_len[s], logits.data()) == GPT_OK);
    for (int32_t i = 0; i < 6; ++i) {
        std::vector<gpt_token> tokens;
        for (int32_t s = 0; s < 3; ++s) tokens.push_back(seqs[s][prompt_len[s] + i]);
        REQUIRE(gpt_session_decode_batch(batch.handle, tokens.data(), logits.data()) == GPT_OK);
    }
    for (int32_t s = 0; s < 3; ++s) {
        CAPTURE(s);
        CHECK(test::max_abs_diff(logits.data() + s * vocab, alone(model.handle, seqs[s], vocab).data(), vocab) <
              kTolerance);
    }
    // Sequence 2's first 7 positions copied over sequence 1's, then 4 tokens appended after them.
    REQUIRE(gpt_session_copy_seq(batch.handle, 2, 1, 7) == GPT_OK);
    const std::vector<gpt_token> piece = test::token_stream(40, 4, vocab);
    REQUIRE(gpt_session_extend_seq(batch.handle, 1, piece.data(), 4, logits.data()) == GPT_OK);
    std::vector<gpt_token> expected(seqs[2].begin(), seqs[2].begin() + 7);
    expected.insert(expected.end(), piece.begin(), piece.end());
    CHECK(test::max_abs_diff(logits.data(), alone(model.handle, expected, vocab).data(), vocab) < kTolerance);
}

TEST_CASE("a manifest's int8 KV cache the runtime cannot honour is refused, naming why", "[kv_int8][artifact]") {
    test::ScratchArtifact art(test::artifact("kv-int8"));
    const nlohmann::json original = art.manifest();
    REQUIRE(original.at("format_version") == 16);
    const std::vector<std::pair<void (*)(nlohmann::json &), std::string>> edits = {
        {[](nlohmann::json &m) { m["format_version"] = 15; }, "'kv_cache' needs format version 16"},
        {[](nlohmann::json &m) { m["kv_cache"]["dtype"] = "int4"; }, "'kv_cache.dtype' must be 'int8'"},
        {[](nlohmann::json &m) { m["kv_cache"]["position_bytes"] = 16; }, "must be head_dim + 4"},
        {[](nlohmann::json &m) { m.erase("kernels"); }, "needs the kernel library's attention"},
    };
    for (const auto &[edit, message] : edits) {
        CAPTURE(message);
        nlohmann::json manifest = original;
        edit(manifest);
        art.write_manifest(manifest);
        gpt_model *model = nullptr;
        CHECK(gpt_model_load(art.dir().c_str(), nullptr, &model) == GPT_ERR_ARTIFACT_INVALID);
        CHECK(model == nullptr);
        CHECK(test::error_mentions(message));
    }
}
