// Many threads on one model: every generation equal to the sequential run,
// sessions created and freed concurrently (the last one freeing the model),
// errors kept per thread, the log callback swapped while threads log. These are
// also the tests the ThreadSanitizer build runs (scripts/sanitize.sh thread).
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "test_support.h"

TEST_CASE("16 threads with their own sessions give the sequential tokens", "[threads]") {
    constexpr size_t kThreads = 16, kRounds = 8;  // 128 concurrent generations against 16 sequential ones
    test::Model model(test::artifact("flash"), /*num_runners=*/4);
    REQUIRE(model.status == GPT_OK);
    std::vector<std::vector<gpt_token>> prompts, sequential;
    for (size_t i = 0; i < kThreads; ++i) {
        prompts.push_back({static_cast<gpt_token>(1 + 4 * i), static_cast<gpt_token>(2 + 3 * i)});
        gpt_status status = GPT_ERR_INTERNAL;
        sequential.push_back(test::try_generate(model.handle, prompts[i], 100 + i, 24, &status));
        REQUIRE(status == GPT_OK);
    }

    std::vector<std::vector<std::vector<gpt_token>>> parallel(kThreads);
    std::vector<gpt_status> statuses(kThreads * kRounds, GPT_ERR_INTERNAL);
    std::vector<std::thread> threads;
    for (size_t i = 0; i < kThreads; ++i)
        threads.emplace_back([&, i] {
            for (size_t r = 0; r < kRounds; ++r)  // repeated so the threads overlap for real
                parallel[i].push_back(
                    test::try_generate(model.handle, prompts[i], 100 + i, 24, &statuses[i * kRounds + r]));
        });
    for (auto &t : threads) t.join();
    size_t ok = 0, equal = 0;
    for (gpt_status s : statuses) ok += s == GPT_OK;
    for (size_t i = 0; i < kThreads; ++i)
        for (const auto &run : parallel[i]) equal += run == sequential[i];
    CHECK(ok == kThreads * kRounds);
    CHECK(equal == kThreads * kRounds);
}

TEST_CASE("sessions created and destroyed from 16 threads at once; the model lives until the last of them",
          "[threads]") {
    constexpr int kThreads = 16, kCycles = 50;  // 800 create/prefill/free cycles
    test::Model model(test::artifact("flash"), /*num_runners=*/4);
    REQUIRE(model.status == GPT_OK);
    const std::vector<gpt_token> prompt = {40, 69, 2};
    std::vector<float> expected(static_cast<size_t>(model.info.vocab_size));
    {
        test::Session s(model.handle);
        REQUIRE(gpt_session_prefill(s.handle, prompt.data(), 3, expected.data()) == GPT_OK);
    }

    // Each thread cycles, then keeps one last session; once all hold theirs, the handle is freed and the
    // threads use and free their sessions at once: the model goes with whichever session is freed last.
    std::atomic<int> failures{0}, mismatches{0}, holding{0};
    std::atomic<bool> handle_freed{false};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
        threads.emplace_back([&] {
            std::vector<float> logits(expected.size());
            const auto prefill_matches = [&](gpt_session *session) {
                if (gpt_session_prefill(session, prompt.data(), 3, logits.data()) != GPT_OK) ++failures;
                for (size_t i = 0; i < logits.size(); ++i)  // parallel kernels may sum in another order
                    if (std::abs(logits[i] - expected[i]) > 1e-5f) {
                        ++mismatches;
                        break;
                    }
            };
            for (int c = 0; c < kCycles; ++c) {
                gpt_session *session = nullptr;
                if (gpt_session_create(model.handle, &session) != GPT_OK) {
                    ++failures;
                    continue;
                }
                prefill_matches(session);
                if (gpt_session_free(session) != GPT_OK) ++failures;
            }
            gpt_session *last = nullptr;
            if (gpt_session_create(model.handle, &last) != GPT_OK) ++failures;
            ++holding;
            while (!handle_freed) std::this_thread::yield();
            if (last != nullptr) prefill_matches(last);
            if (gpt_session_free(last) != GPT_OK) ++failures;
        });
    while (holding < kThreads) std::this_thread::yield();
    CHECK(gpt_model_free(model.handle) == GPT_OK);  // while 16 sessions live
    model.handle = nullptr;
    handle_freed = true;
    for (auto &t : threads) t.join();
    CHECK(failures == 0);
    CHECK(mismatches == 0);
}

namespace {

// Counts the lines of the test threads' failing calls that reach it.
struct CountingSink {
    std::atomic<int> lines{0};
};

void count_line(gpt_log_level, const char *message, void *user_data) {
    if (std::strstr(message, "gpt_model_get_info: model and out_info must not be NULL") != nullptr)
        ++static_cast<CountingSink *>(user_data)->lines;
}

}  // namespace

TEST_CASE("the log callback is swapped while 8 threads log: each line reaches one sink, a replaced one no more",
          "[threads][logging]") {
    constexpr int kThreads = 8, kLines = 4000, kSinks = 200;
    const char *level = std::getenv("GPT_LOG");
    const std::string saved_level = level != nullptr ? level : "";
    setenv("GPT_LOG", "debug", 1);  // each failed call logs a line at debug level
    std::vector<CountingSink> sinks(kSinks);
    std::vector<int> lines_when_replaced(kSinks, -1);
    gpt_log_set_callback(count_line, &sinks[0]);

    std::atomic<int> running{kThreads};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
        threads.emplace_back([&] {
            for (int i = 0; i < kLines; ++i) gpt_model_get_info(nullptr, nullptr, 0);
            --running;
        });
    int current = 0;
    while (running > 0 && current + 1 < kSinks) {
        gpt_log_set_callback(count_line, &sinks[static_cast<size_t>(current + 1)]);
        // Once the swap has returned, no thread is in the old callback and none will call it again.
        lines_when_replaced[static_cast<size_t>(current)] = sinks[static_cast<size_t>(current)].lines;
        ++current;
        std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    for (auto &t : threads) t.join();
    if (saved_level.empty()) {
        unsetenv("GPT_LOG");
    } else {
        setenv("GPT_LOG", saved_level.c_str(), 1);
    }
    gpt_log_set_callback(nullptr, nullptr);

    int total = 0, sinks_used = 0;
    for (int i = 0; i < kSinks; ++i) {
        const int lines = sinks[static_cast<size_t>(i)].lines;
        total += lines;
        sinks_used += lines > 0 ? 1 : 0;
        if (i < current) CHECK(lines == lines_when_replaced[static_cast<size_t>(i)]);
    }
    CHECK(total == kThreads * kLines);  // none lost, none twice
    CHECK(sinks_used >= 2);             // the swaps did happen while the threads logged
}

TEST_CASE("each thread reads its own last error while 16 threads fail at once", "[threads]") {
    constexpr int kThreads = 16, kCalls = 200;
    test::Model model(test::artifact("flash"));
    REQUIRE(model.status == GPT_OK);
    const int32_t vocab = model.info.vocab_size;
    std::atomic<int> wrong_status{0}, foreign_message{0}, stale_message{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
        threads.emplace_back([&, t] {
            gpt_session *session = nullptr;  // no Catch2 assertions on worker threads
            if (gpt_session_create(model.handle, &session) != GPT_OK) {
                ++wrong_status;
                return;
            }
            std::vector<float> logits(static_cast<size_t>(vocab));
            for (int c = 0; c < kCalls; ++c) {
                // Out-of-range ids unique to this thread and call: the message names the id.
                const gpt_token bad = vocab + t * kCalls + c;
                const std::string own = "token id " + std::to_string(bad) + " ";
                if (gpt_session_prefill(session, &bad, 1, logits.data()) != GPT_ERR_OUT_OF_RANGE) ++wrong_status;
                if (std::string(gpt_runtime_last_error()).find(own) == std::string::npos) ++foreign_message;
                int32_t pos = -1;
                if (gpt_session_get_position(session, &pos) != GPT_OK || pos != 0) ++wrong_status;
                // A successful call does not clear the message, and other threads' failures never replace it.
                if (std::string(gpt_runtime_last_error()).find(own) == std::string::npos) ++stale_message;
            }
            gpt_session_free(session);
        });
    for (auto &t : threads) t.join();
    CHECK(wrong_status == 0);
    CHECK(foreign_message == 0);
    CHECK(stale_message == 0);
}
