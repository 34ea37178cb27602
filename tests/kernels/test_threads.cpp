// for_each_item (kernels/cpu/threads.h): every item once, whatever the counts of items and threads, each thread
// starting on its own contiguous share.
#include <ATen/Parallel.h>
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "cpu/threads.h"

TEST_CASE("for_each_item visits every item exactly once for any count of items and threads") {
    REQUIRE(gpt::kernels::threaded());
    const int saved = at::get_num_threads();
    for (const int threads : {1, 2, 3, 5})
        for (const int64_t n : {0, 1, 2, 3, 7, 64, 1001}) {
            at::set_num_threads(threads);
            const auto visits = std::make_unique<std::atomic<int>[]>(static_cast<size_t>(n) + 1);
            gpt::kernels::for_each_item(n, [&](int64_t i) { visits[static_cast<size_t>(i)].fetch_add(1); });
            CAPTURE(threads, n);
            int64_t wrong = 0;
            for (int64_t i = 0; i < n; ++i) wrong += visits[static_cast<size_t>(i)].load() != 1 ? 1 : 0;
            CHECK(wrong == 0);
        }
    at::set_num_threads(saved);
}

TEST_CASE("for_each_item's threads each begin at the front of their own share") {
    const int saved = at::get_num_threads();
    at::set_num_threads(4);
    const int64_t n = 400;  // shares of 100
    std::vector<int64_t> first(4, -1);
    std::atomic<int> started{0};
    gpt::kernels::for_each_item(n, [&](int64_t i) {
        const auto thread = static_cast<size_t>(at::get_thread_num());
        if (first[thread] >= 0) return;
        first[thread] = i;  // each slot written by its own thread alone
        // No thread goes on to take another's items before every thread has claimed its first (or 2 s passed: a
        // team smaller than asked), so what each claimed first does not depend on when it was scheduled.
        started.fetch_add(1);
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
        while (started.load() < 4 && std::chrono::steady_clock::now() < until) std::this_thread::yield();
    });
    at::set_num_threads(saved);
    CHECK(started.load() >= 1);
    for (size_t t = 0; t < first.size(); ++t)
        if (first[t] >= 0) CHECK(first[t] == static_cast<int64_t>(t) * 100);
}
