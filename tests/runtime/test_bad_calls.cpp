// Bad arguments through the C ABI: a status and a message, outputs untouched.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "test_support.h"

namespace {

using test::error_mentions;

}  // namespace

TEST_CASE("NULL pointers are invalid arguments", "[abi]") {
    gpt_model *model = nullptr;
    CHECK(gpt_model_load(nullptr, nullptr, &model) == GPT_ERR_INVALID_ARGUMENT);
    CHECK(gpt_model_load(test::artifact().c_str(), nullptr, nullptr) == GPT_ERR_INVALID_ARGUMENT);
    CHECK(gpt_model_get_info(nullptr, nullptr, sizeof(gpt_model_info)) == GPT_ERR_INVALID_ARGUMENT);
    CHECK(gpt_model_verify(nullptr, nullptr) == GPT_ERR_INVALID_ARGUMENT);
    CHECK(gpt_session_create(nullptr, nullptr) == GPT_ERR_INVALID_ARGUMENT);
    CHECK(gpt_session_prefill(nullptr, nullptr, 1, nullptr) == GPT_ERR_INVALID_ARGUMENT);
    CHECK(gpt_session_decode(nullptr, 0, nullptr) == GPT_ERR_INVALID_ARGUMENT);
    CHECK(gpt_session_generate(nullptr, nullptr, 0, nullptr, nullptr, 0, nullptr) == GPT_ERR_INVALID_ARGUMENT);
    CHECK(gpt_model_tokenize(nullptr, "x", nullptr, 0, nullptr) == GPT_ERR_INVALID_ARGUMENT);
    CHECK(error_mentions("NULL"));
    CHECK(gpt_model_free(nullptr) == GPT_OK);
    gpt_session_free(nullptr);
}

TEST_CASE("out-of-range tokens, empty and too-long prompts, n = 0", "[abi]") {
    test::Model model(test::artifact());
    REQUIRE(model.status == GPT_OK);
    const gpt_model_info &info = model.info;
    test::Session session(model.handle);
    std::vector<float> logits(static_cast<size_t>(info.vocab_size), -1.0f);

    const gpt_token too_big[] = {1, info.vocab_size};
    CHECK(gpt_session_prefill(session.handle, too_big, 2, logits.data()) == GPT_ERR_OUT_OF_RANGE);
    CHECK(error_mentions(std::to_string(info.vocab_size)));
    const gpt_token negative[] = {-1};
    CHECK(gpt_session_prefill(session.handle, negative, 1, logits.data()) == GPT_ERR_OUT_OF_RANGE);
    CHECK(logits[0] == -1.0f);  // untouched

    const gpt_token one[] = {5};
    CHECK(gpt_session_prefill(session.handle, one, 0, logits.data()) == GPT_ERR_INVALID_ARGUMENT);
    std::vector<gpt_token> long_prompt(static_cast<size_t>(info.block_size) + 1, 3);
    CHECK(gpt_session_prefill(session.handle, long_prompt.data(), static_cast<int32_t>(long_prompt.size()),
                              logits.data()) == GPT_ERR_OUT_OF_RANGE);
    CHECK(error_mentions("exceeds the context"));

    CHECK(gpt_session_decode(session.handle, 5, logits.data()) == GPT_ERR_INVALID_ARGUMENT);  // nothing prefilled
    REQUIRE(gpt_session_prefill(session.handle, one, 1, logits.data()) == GPT_OK);
    CHECK(gpt_session_decode(session.handle, info.vocab_size + 3, logits.data()) == GPT_ERR_OUT_OF_RANGE);

    gpt_generate_params p = test::default_generate_params();
    std::vector<gpt_token> out(64);
    int32_t count = 0;
    p.max_new_tokens = 0;
    CHECK(gpt_session_generate(session.handle, one, 1, &p, out.data(), 64, &count) == GPT_ERR_INVALID_ARGUMENT);
    p.max_new_tokens = 8;
    CHECK(gpt_session_generate(session.handle, one, 0, &p, out.data(), 64, &count) == GPT_ERR_INVALID_ARGUMENT);
    CHECK(gpt_session_generate(session.handle, one, 1, &p, out.data(), 4, &count) == GPT_ERR_BUFFER_TOO_SMALL);
    p.top_p = 0.0f;
    CHECK(gpt_session_generate(session.handle, one, 1, &p, out.data(), 64, &count) == GPT_ERR_INVALID_ARGUMENT);
}

TEST_CASE("decoding past the context is refused", "[abi]") {
    test::Model model(test::artifact());
    REQUIRE(model.status == GPT_OK);
    const gpt_model_info &info = model.info;
    test::Session session(model.handle);
    std::vector<float> logits(static_cast<size_t>(info.vocab_size));
    std::vector<gpt_token> full(static_cast<size_t>(info.block_size), 7);
    REQUIRE(gpt_session_prefill(session.handle, full.data(), info.block_size, logits.data()) == GPT_OK);
    CHECK(gpt_session_decode(session.handle, 7, logits.data()) == GPT_ERR_OUT_OF_RANGE);
    CHECK(error_mentions("full"));
    REQUIRE(gpt_session_reset(session.handle) == GPT_OK);
    int32_t pos = -1;
    REQUIRE(gpt_session_get_position(session.handle, &pos) == GPT_OK);
    CHECK(pos == 0);
}

TEST_CASE("gpt_model_free releases the handle; a session keeps the model working until it is freed", "[abi]") {
    const std::vector<gpt_token> prompt = {40, 69, 2};
    const gpt_token next = 11;
    std::vector<float> expected_prefill, expected_decode;
    {  // from a model of its own, freed before the log is captured
        test::Model fresh(test::artifact());
        REQUIRE(fresh.status == GPT_OK);
        expected_prefill.resize(static_cast<size_t>(fresh.info.vocab_size));
        expected_decode.resize(expected_prefill.size());
        test::Session s(fresh.handle);
        REQUIRE(gpt_session_prefill(s.handle, prompt.data(), 3, expected_prefill.data()) == GPT_OK);
        REQUIRE(gpt_session_decode(s.handle, next, expected_decode.data()) == GPT_OK);
    }
    test::LogCapture log;  // the model logs "freeing model <name>" (debug) when it is freed
    gpt_model *model = nullptr;
    REQUIRE(gpt_model_load(test::artifact().c_str(), nullptr, &model) == GPT_OK);
    gpt_model_info info;
    REQUIRE(gpt_model_get_info(model, &info, sizeof info) == GPT_OK);
    const std::string freed = "freeing model " + std::string(info.name);
    gpt_session *session = nullptr;
    REQUIRE(gpt_session_create(model, &session) == GPT_OK);
    CHECK(gpt_model_free(model) == GPT_OK);
    CHECK_FALSE(log.saw(freed));

    std::vector<float> logits(expected_prefill.size());
    const auto max_abs_diff = [&](const std::vector<float> &expected) {
        float worst = 0.0f;
        for (size_t i = 0; i < logits.size(); ++i) worst = std::max(worst, std::abs(logits[i] - expected[i]));
        return worst;
    };
    REQUIRE(gpt_session_prefill(session, prompt.data(), 3, logits.data()) == GPT_OK);
    CHECK(max_abs_diff(expected_prefill) < 1e-5f);
    REQUIRE(gpt_session_decode(session, next, logits.data()) == GPT_OK);
    CHECK(max_abs_diff(expected_decode) < 1e-5f);
    CHECK_FALSE(log.saw(freed));
    CHECK(gpt_session_free(session) == GPT_OK);
    CHECK(log.saw(freed));
}

TEST_CASE("tokenizer round trip and errors through the ABI", "[abi]") {
    test::Model model(test::artifact());
    REQUIRE(model.status == GPT_OK);
    int32_t n = 0;
    CHECK(gpt_model_tokenize(model.handle, "Hello, world", nullptr, 0, &n) == GPT_ERR_BUFFER_TOO_SMALL);
    CHECK(n == 12);
    std::vector<gpt_token> ids(static_cast<size_t>(n));
    REQUIRE(gpt_model_tokenize(model.handle, "Hello, world", ids.data(), n, &n) == GPT_OK);
    size_t size = 0;
    CHECK(gpt_model_detokenize(model.handle, ids.data(), n, nullptr, 0, &size) == GPT_ERR_BUFFER_TOO_SMALL);
    CHECK(size == 13);
    std::vector<char> text(size);
    REQUIRE(gpt_model_detokenize(model.handle, ids.data(), n, text.data(), size, &size) == GPT_OK);
    CHECK(std::string(text.data()) == "Hello, world");
    CHECK(gpt_model_tokenize(model.handle, "caf\xc3\xa9", ids.data(), n, &n) == GPT_ERR_INVALID_ARGUMENT);
    CHECK(error_mentions("not in the model's vocabulary"));
}

TEST_CASE("version and status strings", "[abi]") {
    CHECK(gpt_runtime_abi_version() == GPT_RUNTIME_ABI_VERSION);
    CHECK(std::string(gpt_runtime_version()).find("torch 2.") != std::string::npos);
    CHECK(std::string(gpt_status_to_string(GPT_ERR_ARTIFACT_HASH)) == "GPT_ERR_ARTIFACT_HASH");
    CHECK(std::string(gpt_status_to_string(static_cast<gpt_status>(12345))) == "GPT_ERR_UNKNOWN");
}
