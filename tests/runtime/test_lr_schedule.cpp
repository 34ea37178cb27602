// The learning-rate schedule against nanoGPT's get_lr() values.
#include <catch2/catch.hpp>

#include <cmath>

#include "test_support.h"
#include "train/lr_schedule.h"

TEST_CASE("warm-up, cosine decay and floor follow nanoGPT", "[trainer]") {
    gpt_trainer_params p = test::default_trainer_params();
    p.learning_rate = 1.0f;
    p.min_lr = 0.1f;
    p.warmup_iters = 4;
    p.lr_decay_iters = 14;
    CHECK(gpt::learning_rate_at(0, p) == Approx(1.0 / 5));
    CHECK(gpt::learning_rate_at(3, p) == Approx(4.0 / 5));
    CHECK(gpt::learning_rate_at(4, p) == Approx(1.0));
    CHECK(gpt::learning_rate_at(9, p) == Approx(0.1 + 0.5 * (1 + std::cos(M_PI * 0.5)) * 0.9));
    CHECK(gpt::learning_rate_at(14, p) == Approx(0.1));
    CHECK(gpt::learning_rate_at(1000, p) == Approx(0.1));
    p.decay_lr = false;
    CHECK(gpt::learning_rate_at(1000, p) == Approx(1.0));
}
