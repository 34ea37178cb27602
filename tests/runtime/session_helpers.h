// session_helpers.h — what the session tests share: a deterministic token stream, a sequence's position, and the
// largest difference between two rows of logits.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "gpt_runtime.h"

namespace test {

// A deterministic token stream, different for each seed.
inline std::vector<gpt_token> token_stream(int32_t seed, int32_t n, int32_t vocab) {
    std::vector<gpt_token> out(static_cast<size_t>(n));
    for (int32_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = (seed * 31 + i * 7 + 3) % vocab;
    return out;
}

inline int32_t position_of(gpt_session *session, int32_t seq) {
    int32_t position = -1;
    REQUIRE(gpt_session_get_position_seq(session, seq, &position) == GPT_OK);
    return position;
}

inline float max_abs_diff(const float *a, const float *b, int32_t n) {
    float worst = 0.0f;
    for (int32_t i = 0; i < n; ++i) worst = std::max(worst, std::abs(a[i] - b[i]));
    return worst;
}

}  // namespace test
