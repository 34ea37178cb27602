// Sequences as caches of their tokens: extend (with and without the artifact's extend graph), truncate, copy,
// the abort callback between extend's pieces, and the statuses of bad arguments.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include "session_helpers.h"
#include "test_support.h"

namespace {

constexpr float kTolerance = 1e-4f;  // compiled fp32 kernels differ from one another by reduction order only

float max_abs_diff(const std::vector<float> &a, const std::vector<float> &b) {
    float worst = 0.0f;
    for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]));
    return worst;
}

// The logits after prefilling `tokens` whole, in a fresh single-sequence session.
std::vector<float> prefilled(gpt_model *model, const std::vector<gpt_token> &tokens, int32_t vocab) {
    test::Session alone(model);
    std::vector<float> logits(static_cast<size_t>(vocab));
    REQUIRE(gpt_session_prefill(alone.handle, tokens.data(), static_cast<int32_t>(tokens.size()), logits.data()) ==
            GPT_OK);
    return logits;
}

std::vector<gpt_token> concat(std::vector<gpt_token> a, const std::vector<gpt_token> &b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

// Checks extend on `model`: a prefix prefilled, the rest extended in two calls, equals the whole prefilled.
void check_extend_equals_prefill(gpt_model *model, int32_t vocab) {
    const auto tokens = test::token_stream(5, 20, vocab);
    test::Session batch(model, 3);
    std::vector<float> logits(static_cast<size_t>(vocab));
    REQUIRE(gpt_session_prefill_seq(batch.handle, 0, tokens.data(), 4, logits.data()) == GPT_OK);
    REQUIRE(gpt_session_prefill_seq(batch.handle, 2, tokens.data(), 6, logits.data()) == GPT_OK);
    REQUIRE(gpt_session_extend_seq(batch.handle, 2, tokens.data() + 6, 9, nullptr) == GPT_OK);
    REQUIRE(gpt_session_extend_seq(batch.handle, 2, tokens.data() + 15, 5, logits.data()) == GPT_OK);
    CHECK(test::position_of(batch.handle, 2) == 20);
    CHECK(test::position_of(batch.handle, 0) == 4);  // the others untouched
    CHECK(test::position_of(batch.handle, 1) == 0);
    CHECK(max_abs_diff(logits, prefilled(model, tokens, vocab)) < kTolerance);
    // Decoding after an extend continues the same sequence.
    std::vector<float> rows(static_cast<size_t>(3 * vocab));
    const gpt_token step[] = {GPT_TOKEN_NONE, GPT_TOKEN_NONE, 9};
    REQUIRE(gpt_session_decode_batch(batch.handle, step, rows.data()) == GPT_OK);
    const std::vector<float> row2(rows.begin() + 2 * vocab, rows.end());
    CHECK(max_abs_diff(row2, prefilled(model, concat(tokens, {9}), vocab)) < kTolerance);
}

}  // namespace

TEST_CASE("extend appends tokens to a sequence as if it had been prefilled whole", "[inference][sequences]") {
    test::Model model(test::artifact("flash"));
    REQUIRE(model.status == GPT_OK);
    CHECK(model.info.extend_graph);
    check_extend_equals_prefill(model.handle, model.info.vocab_size);

    SECTION("at position 0 it is a prefill") {
        const auto tokens = test::token_stream(2, 7, model.info.vocab_size);
        test::Session session(model.handle);
        std::vector<float> logits(static_cast<size_t>(model.info.vocab_size));
        REQUIRE(gpt_session_extend_seq(session.handle, 0, tokens.data(), 7, logits.data()) == GPT_OK);
        CHECK(test::position_of(session.handle, 0) == 7);
        CHECK(max_abs_diff(logits, prefilled(model.handle, tokens, model.info.vocab_size)) < kTolerance);
    }
}

TEST_CASE("an artifact compiled without the extend graph loads and extends by decode steps", "[inference][sequences]") {
    const test::ScratchArtifact art(test::artifact("flash"));
    nlohmann::json manifest = art.manifest();
    REQUIRE(manifest["graphs"].contains("extend"));  // the fixture has it: take it away
    manifest["files"].erase(manifest["graphs"]["extend"]["file"].get<std::string>());
    manifest["graphs"].erase("extend");
    art.write_manifest(manifest);
    test::Model model(art.dir());
    REQUIRE(model.status == GPT_OK);
    CHECK_FALSE(model.info.extend_graph);
    check_extend_equals_prefill(model.handle, model.info.vocab_size);
}

TEST_CASE("truncate keeps a prefix that extend continues with other tokens", "[inference][sequences]") {
    test::Model model(test::artifact("flash"));
    REQUIRE(model.status == GPT_OK);
    const int32_t vocab = model.info.vocab_size;
    const auto first = test::token_stream(3, 16, vocab), other = test::token_stream(8, 6, vocab);
    test::Session session(model.handle);
    std::vector<float> logits(static_cast<size_t>(vocab));
    REQUIRE(gpt_session_prefill(session.handle, first.data(), 16, logits.data()) == GPT_OK);
    REQUIRE(gpt_session_truncate_seq(session.handle, 0, 10) == GPT_OK);
    CHECK(test::position_of(session.handle, 0) == 10);
    REQUIRE(gpt_session_extend_seq(session.handle, 0, other.data(), 6, logits.data()) == GPT_OK);
    const std::vector<gpt_token> expected(first.begin(), first.begin() + 10);
    CHECK(max_abs_diff(logits, prefilled(model.handle, concat(expected, other), vocab)) < kTolerance);
}

TEST_CASE("copy gives another sequence a prefix of one, which stays as it was", "[inference][sequences]") {
    test::Model model(test::artifact("flash"));
    REQUIRE(model.status == GPT_OK);
    const int32_t vocab = model.info.vocab_size;
    const auto shared = test::token_stream(4, 14, vocab), suffix = test::token_stream(6, 5, vocab);
    test::Session batch(model.handle, 3);
    std::vector<float> logits(static_cast<size_t>(vocab));
    REQUIRE(gpt_session_prefill_seq(batch.handle, 0, shared.data(), 14, logits.data()) == GPT_OK);
    const auto unrelated = test::token_stream(9, 20, vocab);  // the destination held something else, longer
    REQUIRE(gpt_session_prefill_seq(batch.handle, 2, unrelated.data(), 20, logits.data()) == GPT_OK);
    REQUIRE(gpt_session_copy_seq(batch.handle, 0, 2, 9) == GPT_OK);
    CHECK(test::position_of(batch.handle, 2) == 9);
    CHECK(test::position_of(batch.handle, 0) == 14);
    REQUIRE(gpt_session_extend_seq(batch.handle, 2, suffix.data(), 5, logits.data()) == GPT_OK);
    const std::vector<gpt_token> prefix(shared.begin(), shared.begin() + 9);
    CHECK(max_abs_diff(logits, prefilled(model.handle, concat(prefix, suffix), vocab)) < kTolerance);
    // The source goes on as if nothing had been copied.
    REQUIRE(gpt_session_extend_seq(batch.handle, 0, suffix.data(), 2, logits.data()) == GPT_OK);
    CHECK(max_abs_diff(logits, prefilled(model.handle, concat(shared, {suffix[0], suffix[1]}), vocab)) < kTolerance);
}

TEST_CASE("bad sequence calls return their status and change nothing", "[inference][sequences][bad_calls]") {
    test::Model model(test::artifact("flash"));
    REQUIRE(model.status == GPT_OK);
    const int32_t vocab = model.info.vocab_size, block = model.info.block_size;
    const auto tokens = test::token_stream(1, block + 1, vocab);
    test::Session batch(model.handle, 2);
    std::vector<float> logits(static_cast<size_t>(vocab));
    REQUIRE(gpt_session_prefill_seq(batch.handle, 0, tokens.data(), 8, logits.data()) == GPT_OK);

    CHECK(gpt_session_extend_seq(nullptr, 0, tokens.data(), 1, nullptr) == GPT_ERR_INVALID_ARGUMENT);
    CHECK(gpt_session_extend_seq(batch.handle, 0, nullptr, 1, nullptr) == GPT_ERR_INVALID_ARGUMENT);
    CHECK(gpt_session_extend_seq(batch.handle, 2, tokens.data(), 1, nullptr) == GPT_ERR_OUT_OF_RANGE);
    CHECK(gpt_session_extend_seq(batch.handle, -1, tokens.data(), 1, nullptr) == GPT_ERR_OUT_OF_RANGE);
    CHECK(gpt_session_extend_seq(batch.handle, 0, tokens.data(), 0, nullptr) == GPT_ERR_INVALID_ARGUMENT);
    CHECK(gpt_session_extend_seq(batch.handle, 0, tokens.data(), block - 7, nullptr) == GPT_ERR_OUT_OF_RANGE);
    CHECK(test::error_mentions("exceed the context"));
    const gpt_token bad[] = {1, vocab};
    CHECK(gpt_session_extend_seq(batch.handle, 0, bad, 2, nullptr) == GPT_ERR_OUT_OF_RANGE);

    CHECK(gpt_session_truncate_seq(nullptr, 0, 0) == GPT_ERR_INVALID_ARGUMENT);
    CHECK(gpt_session_truncate_seq(batch.handle, 0, 9) == GPT_ERR_OUT_OF_RANGE);  // more than it holds
    CHECK(gpt_session_truncate_seq(batch.handle, 0, -1) == GPT_ERR_OUT_OF_RANGE);
    CHECK(gpt_session_truncate_seq(batch.handle, 5, 0) == GPT_ERR_OUT_OF_RANGE);

    CHECK(gpt_session_copy_seq(nullptr, 0, 1, 1) == GPT_ERR_INVALID_ARGUMENT);
    CHECK(gpt_session_copy_seq(batch.handle, 0, 0, 4) == GPT_ERR_INVALID_ARGUMENT);  // same src and dst
    CHECK(gpt_session_copy_seq(batch.handle, 0, 1, 9) == GPT_ERR_OUT_OF_RANGE);      // more than src holds
    CHECK(gpt_session_copy_seq(batch.handle, 0, 1, -1) == GPT_ERR_OUT_OF_RANGE);
    CHECK(gpt_session_copy_seq(batch.handle, 0, 2, 4) == GPT_ERR_OUT_OF_RANGE);
    CHECK(gpt_session_copy_seq(batch.handle, 3, 1, 0) == GPT_ERR_OUT_OF_RANGE);
    CHECK(gpt_session_set_abort_callback(nullptr, nullptr, nullptr) == GPT_ERR_INVALID_ARGUMENT);

    CHECK(test::position_of(batch.handle, 0) == 8);
    CHECK(test::position_of(batch.handle, 1) == 0);
    // Nothing was written: sequence 0 goes on as a sequence of its 8 tokens.
    REQUIRE(gpt_session_extend_seq(batch.handle, 0, tokens.data() + 8, 1, logits.data()) == GPT_OK);
    const std::vector<gpt_token> nine(tokens.begin(), tokens.begin() + 9);
    CHECK(max_abs_diff(logits, prefilled(model.handle, nine, vocab)) < kTolerance);
}

namespace {

struct AbortAfter {
    int calls = 0;
    int allowed = 0;  // pieces let through before it stops
};

bool abort_after(void *user_data) {
    auto *state = static_cast<AbortAfter *>(user_data);
    return state->calls++ >= state->allowed;
}

}  // namespace

TEST_CASE("the abort callback stops a long extend between pieces, which the sequence keeps", "[inference][sequences]") {
    test::Model model(test::long_context_artifact());
    REQUIRE(model.status == GPT_OK);
    const int32_t vocab = model.info.vocab_size, piece = GPT_EXTEND_PIECE_TOKENS;
    REQUIRE(model.info.block_size > 3 * piece);
    const auto tokens = test::token_stream(7, 3 * piece, vocab);
    test::Session session(model.handle);
    std::vector<float> logits(static_cast<size_t>(vocab), std::nanf(""));

    AbortAfter state;
    REQUIRE(gpt_session_set_abort_callback(session.handle, abort_after, &state) == GPT_OK);
    CHECK(gpt_session_extend_seq(session.handle, 0, tokens.data(), 3 * piece, logits.data()) == GPT_ERR_ABORTED);
    CHECK(test::position_of(session.handle, 0) == 0);  // asked before the first piece
    CHECK(std::isnan(logits[0]));                      // nothing written on failure

    state = AbortAfter{0, 1};
    CHECK(gpt_session_extend_seq(session.handle, 0, tokens.data(), 3 * piece, logits.data()) == GPT_ERR_ABORTED);
    CHECK(state.calls == 2);
    CHECK(test::position_of(session.handle, 0) == piece);  // the first piece ran and stays
    CHECK(std::isnan(logits[0]));

    REQUIRE(gpt_session_set_abort_callback(session.handle, nullptr, nullptr) == GPT_OK);
    REQUIRE(gpt_session_extend_seq(session.handle, 0, tokens.data() + piece, 2 * piece, logits.data()) == GPT_OK);
    CHECK(test::position_of(session.handle, 0) == 3 * piece);
    CHECK(max_abs_diff(logits, prefilled(model.handle, tokens, vocab)) < kTolerance);
}
