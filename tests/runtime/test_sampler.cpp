// Sampling: greedy, top-k, top-p, determinism, and frequencies that follow the softmax.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "base/error.h"
#include "exec/sampler.h"

TEST_CASE("temperature 0 is the argmax, first index on ties", "[sampler]") {
    gpt::Sampler s(0.0f, 0, 1.0f, 1);
    const float logits[] = {0.1f, 2.0f, -1.0f, 2.0f};
    CHECK(s.sample(logits, 4) == 1);
}

TEST_CASE("top_k = 1 and a tiny top_p both reduce to the argmax", "[sampler]") {
    const float logits[] = {0.5f, 0.1f, 0.9f, 0.3f};
    gpt::Sampler k1(1.0f, 1, 1.0f, 9);
    gpt::Sampler p0(1.0f, 0, 1e-6f, 9);
    for (int i = 0; i < 50; ++i) {
        CHECK(k1.sample(logits, 4) == 2);
        CHECK(p0.sample(logits, 4) == 2);
    }
}

TEST_CASE("top_k never samples outside the k largest", "[sampler]") {
    const float logits[] = {3.0f, 2.9f, -5.0f, 2.8f, -5.0f};
    gpt::Sampler s(1.0f, 3, 1.0f, 4);
    for (int i = 0; i < 500; ++i) {
        const gpt_token t = s.sample(logits, 5);
        CHECK((t == 0 || t == 1 || t == 3));
    }
}

TEST_CASE("top_p keeps the smallest set holding that much probability", "[sampler]") {
    // probabilities ~ {0.5, 0.3, 0.2}: top_p 0.7 keeps the first two only.
    const float logits[] = {std::log(0.5f), std::log(0.3f), std::log(0.2f)};
    gpt::Sampler s(1.0f, 0, 0.7f, 5);
    int counts[3] = {0, 0, 0};
    for (int i = 0; i < 4000; ++i) ++counts[s.sample(logits, 3)];
    CHECK(counts[2] == 0);
    CHECK(counts[0] / 4000.0 == Approx(0.625).margin(0.03));  // 0.5 / 0.8 after renormalising
}

TEST_CASE("frequencies follow softmax(logits / temperature)", "[sampler]") {
    const float logits[] = {1.0f, 0.0f, -1.0f, 0.5f};
    const float temperature = 0.7f;
    double z = 0.0, p[4];
    for (int i = 0; i < 4; ++i) z += (p[i] = std::exp(logits[i] / temperature));
    gpt::Sampler s(temperature, 0, 1.0f, 11);
    const int n = 20000;
    int counts[4] = {0, 0, 0, 0};
    for (int i = 0; i < n; ++i) ++counts[s.sample(logits, 4)];
    for (int i = 0; i < 4; ++i) CHECK(counts[i] / double(n) == Approx(p[i] / z).margin(0.015));
}

TEST_CASE("the same seed draws the same sequence", "[sampler]") {
    const float logits[] = {0.2f, 0.1f, 0.3f, 0.25f, 0.15f};
    gpt::Sampler a(1.0f, 0, 1.0f, 77), b(1.0f, 0, 1.0f, 77), c(1.0f, 0, 1.0f, 78);
    std::vector<gpt_token> sa, sb, sc;
    for (int i = 0; i < 64; ++i) {
        sa.push_back(a.sample(logits, 5));
        sb.push_back(b.sample(logits, 5));
        sc.push_back(c.sample(logits, 5));
    }
    CHECK(sa == sb);
    CHECK(sa != sc);
}

TEST_CASE("a tiny temperature is the argmax, not an overflow", "[sampler]") {
    // 1e-40 is a denormal float: logits / temperature alone would be +-inf.
    const float logits[] = {0.1f, 2.0f, -1.0f, 1.5f};
    for (const float temperature : {1e-40f, 1e-30f, 1e-6f}) {
        gpt::Sampler s(temperature, 0, 1.0f, 3);
        for (int i = 0; i < 20; ++i) CHECK(s.sample(logits, 4) == 1);
    }
}

TEST_CASE("a logit of -inf rules its token out, and NaN, +inf or no token left is NON_FINITE", "[sampler]") {
    const float masked[] = {-INFINITY, 0.0f, -INFINITY, 0.0f};
    gpt::Sampler s(1.0f, 0, 1.0f, 8);
    for (int i = 0; i < 200; ++i) {
        const gpt_token t = s.sample(masked, 4);
        CHECK((t == 1 || t == 3));
    }
    const auto status_of = [](const std::vector<float> &logits, float temperature) {
        gpt::Sampler sampler(temperature, 0, 1.0f, 8);
        try {
            sampler.sample(logits.data(), static_cast<int32_t>(logits.size()));
            return GPT_OK;
        } catch (const gpt::Error &e) {
            return e.status();
        }
    };
    for (const float temperature : {0.0f, 1.0f}) {
        CHECK(status_of({0.5f, NAN, 0.1f}, temperature) == GPT_ERR_NON_FINITE);
        CHECK(status_of({0.5f, INFINITY, 0.1f}, temperature) == GPT_ERR_NON_FINITE);
        CHECK(status_of({-INFINITY, -INFINITY}, temperature) == GPT_ERR_NON_FINITE);
        CHECK(status_of({-INFINITY, -3.0f}, temperature) == GPT_OK);
    }
}

TEST_CASE("check_logits finds the first largest and the first NaN or +inf at every position of rows of any length",
          "[sampler]") {
    // Its lanes cover 16 tokens a step: rows shorter and longer than a step, and every position within and after.
    for (int32_t n = 1; n <= 50; ++n)
        for (int32_t at = 0; at < n; ++at) {
            std::vector<float> row(static_cast<size_t>(n));
            for (int32_t i = 0; i < n; ++i) row[static_cast<size_t>(i)] = static_cast<float>((i * 7) % 5) - 9.0f;
            row[static_cast<size_t>(at)] = 3.0f;
            CHECK(gpt::check_logits(row.data(), n) == at);
            row[static_cast<size_t>(n - 1)] = 3.0f;  // a tie: the first
            CHECK(gpt::check_logits(row.data(), n) == at);
            for (const float bad : {NAN, INFINITY}) {
                std::vector<float> broken = row;
                broken[static_cast<size_t>(at)] = bad;
                if (at + 1 < n) broken[static_cast<size_t>(n - 1)] = NAN;  // a later one: the message names the first
                try {
                    gpt::check_logits(broken.data(), n);
                    FAIL("a row with NaN or +inf was accepted");
                } catch (const gpt::Error &e) {
                    CHECK(e.status() == GPT_ERR_NON_FINITE);
                    CHECK(std::string(e.what()).find("at token " + std::to_string(at) + ";") != std::string::npos);
                }
            }
            std::vector<float> ruled_out(static_cast<size_t>(n), -INFINITY);
            ruled_out[static_cast<size_t>(at)] = -1e30f;
            CHECK(gpt::check_logits(ruled_out.data(), n) == at);
        }
}

TEST_CASE("sample_rows refuses a row of non-finite logits alone and leaves its sampler's stream", "[sampler]") {
    const float logits[] = {0.2f, 0.1f, 0.3f, NAN, 0.1f, 0.2f, 0.5f, 0.4f, 0.3f};
    gpt::Sampler a(1.0f, 0, 1.0f, 5), b(1.0f, 0, 1.0f, 6), c(1.0f, 0, 1.0f, 7);
    gpt::Sampler fresh_b(1.0f, 0, 1.0f, 6), fresh_c(1.0f, 0, 1.0f, 7);
    gpt::Sampler *rows[] = {&a, &b, &c};
    const gpt::SampledRows sampled = gpt::sample_rows(rows, 3, logits, 3);
    CHECK(sampled.refused == std::vector<int32_t>{1});
    CHECK(sampled.tokens[1] == GPT_TOKEN_NONE);
    CHECK(sampled.tokens[2] == fresh_c.sample(logits + 6, 3));
    CHECK(b.sample(logits + 6, 3) == fresh_b.sample(logits + 6, 3));  // b did not draw
}

TEST_CASE("tokens ruled out (-inf: ids without text) are never listed among the most likely", "[sampler]") {
    // What a model's logits look like at its ids without text (vocabulary padding, gaps in the ids).
    const float logits[] = {0.5f, -INFINITY, 2.0f, -INFINITY, -1.0f, -INFINITY};
    gpt_token_logprob out[1 + 5];
    gpt::log_probabilities(logits, 6, 2, 5, out);
    const double log_z = std::log(std::exp(0.5) + std::exp(2.0) + std::exp(-1.0));
    CHECK(out[0].token == 2);
    CHECK(out[0].logprob == Approx(2.0 - log_z));
    const gpt_token listed[] = {2, 0, 4, GPT_TOKEN_NONE, GPT_TOKEN_NONE};
    for (int i = 0; i < 5; ++i) {
        INFO("entry " << i);
        CHECK(out[1 + i].token == listed[i]);
        if (listed[i] == GPT_TOKEN_NONE) CHECK(out[1 + i].logprob == -INFINITY);
    }
    CHECK(out[2].logprob == Approx(0.5 - log_z));
}
