// Samplers, log-probabilities and stop strings through the public C API: a batch of
// rows drawn in one call equals each row drawn alone, log-probabilities are the
// log-softmax of the logits, a row that cannot be sampled changes no sampler, stop
// strings end the text before them however the tokens split it, and generation
// honours them and reports each token's log-probability.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "test_support.h"
#include "text/stop_strings.h"

namespace {

gpt_sampler *make_sampler(float temperature, int32_t top_k, float top_p, uint64_t seed) {
    gpt_sampler_params p;
    REQUIRE(gpt_sampler_default_params(&p, sizeof p) == GPT_OK);
    p.temperature = temperature;
    p.top_k = top_k;
    p.top_p = top_p;
    p.seed = seed;
    gpt_sampler *s = nullptr;
    REQUIRE(gpt_sampler_create(&p, &s) == GPT_OK);
    return s;
}

std::vector<float> random_logits(std::mt19937_64 &rng, int rows, int vocab) {
    std::normal_distribution<float> normal(0.0f, 3.0f);
    std::vector<float> logits(static_cast<size_t>(rows) * static_cast<size_t>(vocab));
    for (float &x : logits) x = normal(rng);
    return logits;
}

// log-softmax in double: the reference for the runtime's log-probabilities.
std::vector<double> log_softmax(const float *logits, int vocab) {
    double max = -INFINITY, sum = 0.0;
    for (int i = 0; i < vocab; ++i) max = std::max(max, static_cast<double>(logits[i]));
    for (int i = 0; i < vocab; ++i) sum += std::exp(logits[i] - max);
    std::vector<double> out(static_cast<size_t>(vocab));
    for (int i = 0; i < vocab; ++i) out[static_cast<size_t>(i)] = logits[i] - max - std::log(sum);
    return out;
}

std::vector<gpt_token> tokenize(gpt_model *model, const std::string &text) {
    std::vector<gpt_token> ids(512);
    int32_t n = 0;
    REQUIRE(gpt_model_tokenize(model, text.c_str(), ids.data(), 512, &n) == GPT_OK);
    ids.resize(static_cast<size_t>(n));
    return ids;
}

// Pushes every token; returns the text given out (and flushed at the end when `flush`).
std::string stream_text(gpt_detokenizer *d, const std::vector<gpt_token> &tokens, bool flush) {
    std::string out;
    char text[256];
    size_t size = 0;
    for (gpt_token t : tokens) {
        REQUIRE(gpt_detokenizer_push(d, t, text, sizeof text, &size) == GPT_OK);
        out.append(text, size - 1);
    }
    if (flush) {
        REQUIRE(gpt_detokenizer_flush(d, text, sizeof text, &size) == GPT_OK);
        out.append(text, size - 1);
    }
    return out;
}

}  // namespace

TEST_CASE("a batch of rows drawn in one call equals each row drawn by its sampler alone", "[sampling]") {
    const int rows = 6, vocab = 50257;  // GPT-2's vocabulary: the sampler never sorts all of it
    std::mt19937_64 rng(1);
    const std::vector<float> logits = random_logits(rng, rows, vocab);
    const struct {
        float temperature;
        int32_t top_k;
        float top_p;
    } settings[rows] = {{1.0f, 0, 1.0f}, {0.7f, 40, 1.0f}, {1.0f, 0, 0.9f},
                        {0.0f, 0, 1.0f}, {1.3f, 50, 0.5f}, {1.0f, 1, 1.0f}};
    std::vector<gpt_sampler *> batch, alone;
    for (int i = 0; i < rows; ++i) {
        batch.push_back(make_sampler(settings[i].temperature, settings[i].top_k, settings[i].top_p, 100 + i));
        alone.push_back(make_sampler(settings[i].temperature, settings[i].top_k, settings[i].top_p, 100 + i));
    }
    for (int step = 0; step < 20; ++step) {
        std::vector<gpt_token> together(rows);
        REQUIRE(gpt_sampler_sample_batch(batch.data(), rows, logits.data(), vocab, together.data(), 0, nullptr) ==
                GPT_OK);
        for (int i = 0; i < rows; ++i) {
            gpt_token one = 0;
            REQUIRE(gpt_sampler_sample_batch(&alone[i], 1, logits.data() + i * vocab, vocab, &one, 0, nullptr) ==
                    GPT_OK);
            CHECK(together[i] == one);
        }
    }
    // Greedy is the argmax; top_k 1 too.
    for (int i : {3, 5}) {
        gpt_token t = 0;
        REQUIRE(gpt_sampler_sample_batch(&alone[i], 1, logits.data() + i * vocab, vocab, &t, 0, nullptr) == GPT_OK);
        CHECK(t == std::max_element(logits.begin() + i * vocab, logits.begin() + (i + 1) * vocab) -
                       (logits.begin() + i * vocab));
    }
    for (int i = 0; i < rows; ++i) CHECK(gpt_sampler_free(batch[i]) == GPT_OK);
    for (int i = 0; i < rows; ++i) CHECK(gpt_sampler_free(alone[i]) == GPT_OK);
    CHECK(gpt_sampler_free(nullptr) == GPT_OK);
}

TEST_CASE("log-probabilities are the log-softmax of the logits, before temperature", "[sampling]") {
    const int rows = 3, vocab = 1000, n_top = 5;
    std::mt19937_64 rng(2);
    const std::vector<float> logits = random_logits(rng, rows, vocab);
    gpt_sampler *hot = make_sampler(2.0f, 0, 1.0f, 7), *hot2 = make_sampler(2.0f, 0, 1.0f, 8);
    std::vector<gpt_sampler *> samplers = {hot, nullptr, hot2};  // row 1 sits out
    std::vector<gpt_token> tokens(rows, 0);
    std::vector<gpt_token_logprob> lp(rows * (1 + n_top));
    REQUIRE(gpt_sampler_sample_batch(samplers.data(), rows, logits.data(), vocab, tokens.data(), n_top, lp.data()) ==
            GPT_OK);
    CHECK(tokens[1] == GPT_TOKEN_NONE);
    for (int row : {0, 2}) {
        const auto reference = log_softmax(logits.data() + row * vocab, vocab);
        const gpt_token_logprob *entry = lp.data() + row * (1 + n_top);
        CHECK(entry[0].token == tokens[static_cast<size_t>(row)]);
        CHECK(entry[0].logprob == Approx(reference[static_cast<size_t>(entry[0].token)]).margin(1e-5));
        std::vector<int> order(vocab);
        for (int i = 0; i < vocab; ++i) order[static_cast<size_t>(i)] = i;
        std::sort(order.begin(), order.end(), [&](int a, int b) { return reference[a] > reference[b]; });
        for (int k = 0; k < n_top; ++k) {
            CHECK(entry[1 + k].token == order[static_cast<size_t>(k)]);
            CHECK(entry[1 + k].logprob == Approx(reference[static_cast<size_t>(order[k])]).margin(1e-5));
        }
    }
    CHECK(gpt_sampler_sample_batch(samplers.data(), rows, logits.data(), vocab, tokens.data(), GPT_MAX_TOP_LOGPROBS + 1,
                                   lp.data()) == GPT_ERR_INVALID_ARGUMENT);
    gpt_sampler_free(hot);
    gpt_sampler_free(hot2);
}

TEST_CASE("a row that cannot be sampled refuses the call and advances no sampler", "[sampling]") {
    const int vocab = 64;
    std::mt19937_64 rng(3);
    std::vector<float> logits = random_logits(rng, 2, vocab);
    logits[vocab + 5] = NAN;
    gpt_sampler *a = make_sampler(1.0f, 0, 1.0f, 9), *b = make_sampler(1.0f, 0, 1.0f, 9);
    gpt_sampler *fresh = make_sampler(1.0f, 0, 1.0f, 9);
    std::vector<gpt_sampler *> both = {a, b};
    std::vector<gpt_token> tokens(2, 0);
    CHECK(gpt_sampler_sample_batch(both.data(), 2, logits.data(), vocab, tokens.data(), 0, nullptr) ==
          GPT_ERR_NON_FINITE);
    CHECK(test::error_mentions("row 1"));
    gpt_token after = 0, expected = 0;
    REQUIRE(gpt_sampler_sample_batch(&a, 1, logits.data(), vocab, &after, 0, nullptr) == GPT_OK);
    REQUIRE(gpt_sampler_sample_batch(&fresh, 1, logits.data(), vocab, &expected, 0, nullptr) == GPT_OK);
    CHECK(after == expected);  // a's stream is where a fresh sampler's is: the refused call drew nothing
    gpt_sampler_params bad;
    REQUIRE(gpt_sampler_default_params(&bad, sizeof bad) == GPT_OK);
    bad.top_p = 0.0f;
    gpt_sampler *none = nullptr;
    CHECK(gpt_sampler_create(&bad, &none) == GPT_ERR_INVALID_ARGUMENT);
    CHECK(none == nullptr);
    for (gpt_sampler *s : {a, b, fresh}) gpt_sampler_free(s);
}

namespace {

gpt_sampler *make_adjusting_sampler(float temperature, int32_t top_k, uint64_t seed,
                                    const std::vector<gpt_logit_bias> &bias, float presence, float frequency) {
    gpt_sampler_params p;
    REQUIRE(gpt_sampler_default_params(&p, sizeof p) == GPT_OK);
    p.temperature = temperature;
    p.top_k = top_k;
    p.seed = seed;
    p.logit_bias = bias.data();
    p.n_logit_bias = static_cast<int32_t>(bias.size());
    p.presence_penalty = presence;
    p.frequency_penalty = frequency;
    gpt_sampler *s = nullptr;
    REQUIRE(gpt_sampler_create(&p, &s) == GPT_OK);
    return s;
}

}  // namespace

TEST_CASE("logit bias and penalties: the rule samples logits adjusted as OpenAI's completions define", "[sampling]") {
    // Against a sampler without them (same settings and seed) fed logits adjusted here: OpenAI's
    // logit[j] + bias[j] - (c[j] * frequency_penalty + (c[j] > 0) * presence_penalty), c[j] the times
    // this sampler has drawn j.
    const int vocab = 40;
    std::mt19937_64 rng(12);
    const struct {
        float temperature, presence, frequency;
        int32_t top_k;
    } settings[] = {{0.0f, 0.7f, 0.4f, 0}, {0.9f, 1.5f, 0.0f, 0}, {1.2f, 0.0f, 2.0f, 5}, {0.0f, -1.0f, 0.0f, 0}};
    const std::vector<gpt_logit_bias> bias = {{3, 100.0f}, {7, -100.0f}, {11, 2.5f}};
    for (const auto &set : settings) {
        INFO("temperature " << set.temperature << " presence " << set.presence << " frequency " << set.frequency);
        gpt_sampler *adjusting =
            make_adjusting_sampler(set.temperature, set.top_k, 5, bias, set.presence, set.frequency);
        gpt_sampler *plain = make_sampler(set.temperature, set.top_k, 1.0f, 5);
        std::vector<int> drawn(vocab, 0);
        std::vector<gpt_token> tokens;
        for (int step = 0; step < 30; ++step) {
            std::vector<float> logits = random_logits(rng, 1, vocab);
            logits[19] = -INFINITY;  // a token ruled out stays out whatever is added
            std::vector<float> reference = logits;
            for (int j = 0; j < vocab; ++j) {
                float add = 0.0f;
                for (const gpt_logit_bias &b : bias)
                    if (b.token == j) add = b.bias;
                if (drawn[static_cast<size_t>(j)] > 0)
                    add -= static_cast<float>(drawn[static_cast<size_t>(j)]) * set.frequency + set.presence;
                reference[static_cast<size_t>(j)] += add;
            }
            gpt_token got = 0, expected = 0;
            REQUIRE(gpt_sampler_sample_batch(&adjusting, 1, logits.data(), vocab, &got, 0, nullptr) == GPT_OK);
            REQUIRE(gpt_sampler_sample_batch(&plain, 1, reference.data(), vocab, &expected, 0, nullptr) == GPT_OK);
            CHECK(got == expected);
            CHECK(got != 19);
            ++drawn[static_cast<size_t>(got)];
            tokens.push_back(got);
        }
        // Token 3's +100 wins every draw until the penalties take it back (greedy with a presence penalty of 0.7
        // and a frequency penalty of 0.4: after about 250 draws); -100 never comes.
        if (set.temperature == 0.0f && set.presence > 0.0f) CHECK(std::count(tokens.begin(), tokens.end(), 3) == 30);
        CHECK(std::count(tokens.begin(), tokens.end(), 7) == 0);
        gpt_sampler_free(adjusting);
        gpt_sampler_free(plain);
    }
}

TEST_CASE("a logit bias outside the vocabulary refuses the call before anything is drawn", "[sampling]") {
    const int vocab = 16;
    std::mt19937_64 rng(13);
    const std::vector<float> logits = random_logits(rng, 2, vocab);
    gpt_sampler *inside = make_adjusting_sampler(1.0f, 0, 3, {{2, 1.0f}}, 0.5f, 0.5f);
    gpt_sampler *outside = make_adjusting_sampler(1.0f, 0, 3, {{16, 1.0f}}, 0.0f, 0.0f);
    gpt_sampler *fresh = make_adjusting_sampler(1.0f, 0, 3, {{2, 1.0f}}, 0.5f, 0.5f);
    std::vector<gpt_sampler *> both = {inside, outside};
    std::vector<gpt_token> tokens(2, 0);
    CHECK(gpt_sampler_sample_batch(both.data(), 2, logits.data(), vocab, tokens.data(), 0, nullptr) ==
          GPT_ERR_OUT_OF_RANGE);
    CHECK(test::error_mentions("token 16"));
    // inside drew nothing and counted nothing: it goes on as a fresh sampler, step after step.
    for (int step = 0; step < 5; ++step) {
        gpt_token after = 0, expected = 0;
        REQUIRE(gpt_sampler_sample_batch(&inside, 1, logits.data(), vocab, &after, 0, nullptr) == GPT_OK);
        REQUIRE(gpt_sampler_sample_batch(&fresh, 1, logits.data(), vocab, &expected, 0, nullptr) == GPT_OK);
        CHECK(after == expected);
    }
    // With a vocabulary that holds token 16 it samples.
    std::vector<float> wider(17, 0.0f);
    gpt_token t = 0;
    CHECK(gpt_sampler_sample_batch(&outside, 1, wider.data(), 17, &t, 0, nullptr) == GPT_OK);
    for (gpt_sampler *s : {inside, outside, fresh}) gpt_sampler_free(s);
}

TEST_CASE("a row its bias makes non-finite, or one sampler in two rows, refuses the call before any draw",
          "[sampling]") {
    const int vocab = 8;
    std::vector<float> logits(2 * vocab, 0.0f);
    logits[0] = 3e38f;  // finite, and so is the bias: their sum is not
    gpt_sampler *overflowing = make_adjusting_sampler(1.0f, 0, 1, {{0, 3e38f}}, 0.0f, 0.0f);
    gpt_sampler *other = make_sampler(1.0f, 0, 1.0f, 2), *fresh = make_sampler(1.0f, 0, 1.0f, 2);
    std::vector<gpt_sampler *> rows = {other, overflowing};
    std::vector<gpt_token> tokens(2, 0);
    // other's row comes first: it must not have drawn when the second row is refused.
    std::vector<float> swapped(logits.begin() + vocab, logits.end());
    swapped.insert(swapped.end(), logits.begin(), logits.begin() + vocab);
    CHECK(gpt_sampler_sample_batch(rows.data(), 2, swapped.data(), vocab, tokens.data(), 0, nullptr) ==
          GPT_ERR_NON_FINITE);
    CHECK(test::error_mentions("row 1"));
    gpt_token after = 0, expected = 0;
    REQUIRE(gpt_sampler_sample_batch(&other, 1, swapped.data(), vocab, &after, 0, nullptr) == GPT_OK);
    REQUIRE(gpt_sampler_sample_batch(&fresh, 1, swapped.data(), vocab, &expected, 0, nullptr) == GPT_OK);
    CHECK(after == expected);
    std::vector<gpt_sampler *> twice = {other, other};
    CHECK(gpt_sampler_sample_batch(twice.data(), 2, swapped.data(), vocab, tokens.data(), 0, nullptr) ==
          GPT_ERR_INVALID_ARGUMENT);
    CHECK(test::error_mentions("each row needs its own"));
    for (gpt_sampler *s : {overflowing, other, fresh}) gpt_sampler_free(s);
}

TEST_CASE("a sampler's bias and penalties are checked when it is made", "[sampling]") {
    const gpt_logit_bias twice[] = {{4, 1.0f}, {4, 2.0f}};
    const gpt_logit_bias negative[] = {{-1, 1.0f}};
    const gpt_logit_bias not_finite[] = {{1, NAN}};
    const gpt_logit_bias infinite[] = {{1, -INFINITY}};
    struct Case {
        const gpt_logit_bias *bias;
        int32_t n;
        float presence, frequency;
        const char *mentions;
    } cases[] = {{twice, 2, 0, 0, "token 4 twice"},
                 {negative, 1, 0, 0, "token id >= 0"},
                 {not_finite, 1, 0, 0, "finite value"},
                 {infinite, 1, 0, 0, "finite value"},
                 {nullptr, 1, 0, 0, "n_logit_bias"},
                 {twice, -1, 0, 0, "n_logit_bias"},
                 {nullptr, 0, INFINITY, 0, "penalties must be finite"},
                 {nullptr, 0, 0, NAN, "penalties must be finite"}};
    for (const Case &c : cases) {
        INFO(c.mentions);
        gpt_sampler_params p;
        REQUIRE(gpt_sampler_default_params(&p, sizeof p) == GPT_OK);
        CHECK(p.logit_bias == nullptr);
        CHECK(p.n_logit_bias == 0);
        CHECK(p.presence_penalty == 0.0f);
        CHECK(p.frequency_penalty == 0.0f);
        p.logit_bias = c.bias;
        p.n_logit_bias = c.n;
        p.presence_penalty = c.presence;
        p.frequency_penalty = c.frequency;
        gpt_sampler *s = nullptr;
        CHECK(gpt_sampler_create(&p, &s) == GPT_ERR_INVALID_ARGUMENT);
        CHECK(s == nullptr);
        CHECK(test::error_mentions(c.mentions));
    }
}

TEST_CASE("stop strings end the text before them, however the pieces split it", "[sampling]") {
    const std::string text = "And God said, Let there be light: and there was light.";
    // Every way of cutting the text into two or three pieces gives the same text.
    for (size_t cut1 = 0; cut1 <= text.size(); cut1 += 3)
        for (size_t cut2 = cut1; cut2 <= text.size(); cut2 += 5) {
            gpt::StopStrings stop({"light", "there be", "was l"});
            std::string out = stop.push(text.substr(0, cut1));
            out += stop.push(text.substr(cut1, cut2 - cut1));
            out += stop.push(text.substr(cut2));
            out += stop.flush();
            INFO("cuts " << cut1 << " " << cut2);
            CHECK(out == "And God said, Let ");
            CHECK(stop.stopped() == 1);
        }
    gpt::StopStrings held({"world"});
    CHECK(held.push("hello wor") == "hello ");  // "wor" may be the start of "world"
    CHECK(held.push("k") == "work");            // it was not
    CHECK(held.push(" wo") == " ");
    CHECK(held.flush() == "wo");  // the end of the text: what was held is text after all
    CHECK(held.stopped() == -1);
    for (const auto &bad : std::vector<std::vector<std::string>>{
             {""}, {std::string(256, 'a')}, {"\xff"}, std::vector<std::string>(GPT_MAX_STOP_STRINGS + 1, "x")}) {
        try {
            gpt::StopStrings refused(bad);
            FAIL("accepted");
        } catch (const gpt::Error &e) {
            CHECK(e.status() == GPT_ERR_INVALID_ARGUMENT);
        }
    }
}

TEST_CASE("the detokenizer's stop strings cut a BPE stream, and flush starts a new text", "[sampling]") {
    test::Model model(test::artifact("bpe"));
    REQUIRE(model.status == GPT_OK);
    const std::string text = "In the beginning God created the heaven and the earth.";
    const std::vector<gpt_token> ids = tokenize(model.handle, text);
    gpt_detokenizer *d = nullptr;
    REQUIRE(gpt_detokenizer_create(model.handle, &d) == GPT_OK);
    const char *stops[] = {"the earth", "God cr"};
    REQUIRE(gpt_detokenizer_set_stop_strings(d, stops, 2) == GPT_OK);
    CHECK(stream_text(d, ids, false) == "In the beginning ");
    int32_t which = -2;
    REQUIRE(gpt_detokenizer_stopped(d, &which) == GPT_OK);
    CHECK(which == 1);
    // After the stop nothing more comes out; flush starts a new text with the same strings.
    CHECK(stream_text(d, ids, true).empty());
    const std::vector<gpt_token> tail = tokenize(model.handle, "created the heaven and the ear");
    CHECK(stream_text(d, tail, true) == "created the heaven and the ear");  // "the ear" was held, then flushed
    REQUIRE(gpt_detokenizer_stopped(d, &which) == GPT_OK);
    CHECK(which == -1);
    const char *empty[] = {""};
    CHECK(gpt_detokenizer_set_stop_strings(d, empty, 1) == GPT_ERR_INVALID_ARGUMENT);
    CHECK(gpt_detokenizer_set_stop_strings(d, nullptr, 1) == GPT_ERR_INVALID_ARGUMENT);
    gpt_detokenizer_free(d);
}

TEST_CASE("generation stops at a stop string and reports each token's log-probability", "[sampling]") {
    test::Model model(test::artifact("bpe"));
    REQUIRE(model.status == GPT_OK);
    const std::vector<gpt_token> prompt = tokenize(model.handle, "In the beginning");
    const int n = 24;
    auto generate = [&](const char *const *stops, int32_t n_stops, std::vector<float> *logprobs) {
        test::Session session(model.handle);
        gpt_generate_params p = test::default_generate_params();
        p.max_new_tokens = n;
        p.seed = 21;
        p.stop_at_eos = false;
        p.stop_strings = stops;
        p.n_stop_strings = n_stops;
        if (logprobs) logprobs->assign(n, NAN);
        p.token_logprobs = logprobs ? logprobs->data() : nullptr;
        std::vector<gpt_token> out(n);
        int32_t count = 0;
        REQUIRE(gpt_session_generate(session.handle, prompt.data(), static_cast<int32_t>(prompt.size()), &p, out.data(),
                                     n, &count) == GPT_OK);
        out.resize(static_cast<size_t>(count));
        return out;
    };
    std::vector<float> logprobs;
    const std::vector<gpt_token> free = generate(nullptr, 0, &logprobs);
    REQUIRE(free.size() == static_cast<size_t>(n));

    // Replay through the low-level calls: each reported log-probability is the log-softmax of its logits.
    test::Session session(model.handle);
    const int vocab = model.info.vocab_size;
    std::vector<float> logits(static_cast<size_t>(vocab));
    REQUIRE(gpt_session_prefill(session.handle, prompt.data(), static_cast<int32_t>(prompt.size()), logits.data()) ==
            GPT_OK);
    for (size_t i = 0; i < free.size(); ++i) {
        CHECK(logprobs[i] == Approx(log_softmax(logits.data(), vocab)[static_cast<size_t>(free[i])]).margin(1e-5));
        if (prompt.size() + i + 1 >= static_cast<size_t>(model.info.block_size)) break;  // the context slides after
        REQUIRE(gpt_session_decode(session.handle, free[i], logits.data()) == GPT_OK);
    }

    // A stop string taken from the middle of the free text: generation ends at the token completing it.
    std::vector<char> bytes(1024);
    size_t size = 0;
    REQUIRE(gpt_model_detokenize(model.handle, free.data(), n, bytes.data(), bytes.size(), &size) == GPT_OK);
    const std::string free_text(bytes.data(), size - 1);
    // Three ASCII bytes from the middle (the tokens' bytes need not all be UTF-8).
    size_t at = free_text.size() / 2;
    const auto ascii = [&](size_t i) { return static_cast<unsigned char>(free_text[i]) < 0x80; };
    while (at + 3 < free_text.size() && !(ascii(at) && ascii(at + 1) && ascii(at + 2))) ++at;
    REQUIRE(at + 3 < free_text.size());
    const std::string stop = free_text.substr(at, 3);
    const char *stops[] = {stop.c_str()};
    const std::vector<gpt_token> stopped = generate(stops, 1, nullptr);
    REQUIRE(stopped.size() < free.size());
    CHECK(std::equal(stopped.begin(), stopped.end(), free.begin()));
    auto text_of = [&](size_t tokens) {
        REQUIRE(gpt_model_detokenize(model.handle, free.data(), static_cast<int32_t>(tokens), bytes.data(),
                                     bytes.size(), &size) == GPT_OK);
        return std::string(bytes.data(), size - 1);
    };
    CHECK(text_of(stopped.size()).find(stop) != std::string::npos);      // the last token completed it
    CHECK(text_of(stopped.size() - 1).find(stop) == std::string::npos);  // and not one before
}
