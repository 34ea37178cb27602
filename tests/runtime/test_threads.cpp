// A model's num_threads decides how many threads its compiled graphs run on,
// for that model's calls only. Observed from outside the graphs: the CPU time
// that each of the process's threads (/proc/self/task) spends while one thread
// calls the model. OpenMP's workers of a parallel region spin and compute, so
// a run on 2 threads shows a second busy thread; a run on 1 thread shows none.
#include <ATen/Parallel.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "test_support.h"

namespace {

// utime + stime, in clock ticks, of every thread of this process.
std::map<long, long> thread_cpu_ticks() {
    std::map<long, long> ticks;
    for (const auto &entry : std::filesystem::directory_iterator("/proc/self/task")) {
        std::ifstream stat(entry.path() / "stat");
        std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
        const size_t paren = text.rfind(')');  // the name may hold spaces; the fields follow the last ')'
        if (paren == std::string::npos) continue;
        std::istringstream fields(text.substr(paren + 2));
        std::string field;
        long utime = 0, stime = 0;
        for (int i = 3; fields >> field; ++i) {  // field 3 is the state; utime is 14, stime 15
            if (i == 14) utime = std::stol(field);
            if (i == 15) stime = std::stol(field);
        }
        ticks[std::stol(entry.path().filename().string())] = utime + stime;
    }
    return ticks;
}

// Threads other than this one that used at least 50 ms of CPU while this one ran
// `model`'s three inference graphs over and over (a batched prefill,
// single-sequence decode steps (decode_one) and batched decode steps) for
// `window`, or until one such thread is seen: on a loaded machine a helper may
// take far longer than its share of a second to get 50 ms of a core.
int busy_helper_threads(gpt_model *model, std::chrono::seconds window) {
    constexpr int kSeq = 8, kPrompt = 12, kSteps = 8;
    test::Session session(model, kSeq);
    const std::vector<gpt_token> prompt(kPrompt, 1);
    const std::vector<const gpt_token *> prompts(kSeq, prompt.data());
    const std::vector<int32_t> lengths(kSeq, kPrompt);
    std::vector<gpt_token> first_only(kSeq, GPT_TOKEN_NONE), all(kSeq, 2);
    first_only[0] = 2;
    std::vector<float> logits(kSeq * 128);
    const long self = syscall(SYS_gettid);
    const long min_ticks = sysconf(_SC_CLK_TCK) / 20;
    const auto before = thread_cpu_ticks();
    auto busy_now = [&] {
        int busy = 0;
        for (const auto &[tid, ticks] : thread_cpu_ticks()) {
            const auto it = before.find(tid);
            if (tid != self && ticks - (it == before.end() ? 0 : it->second) >= min_ticks) ++busy;
        }
        return busy;
    };
    const auto end = std::chrono::steady_clock::now() + window;
    int busy = 0;
    while (busy == 0 && std::chrono::steady_clock::now() < end) {
        REQUIRE(gpt_session_prefill_batch(session.handle, prompts.data(), lengths.data(), logits.data()) == GPT_OK);
        for (int i = 0; i < kSteps; ++i)
            REQUIRE(gpt_session_decode_batch(session.handle, first_only.data(), logits.data()) == GPT_OK);
        for (int i = 0; i < kSteps; ++i)
            REQUIRE(gpt_session_decode_batch(session.handle, all.data(), logits.data()) == GPT_OK);
        busy = busy_now();
    }
    return busy;
}

// A helper thread that computes shows up within this, however loaded the machine; one that does not
// is looked for over this.
constexpr std::chrono::seconds kUntilBusy{60};
constexpr std::chrono::seconds kQuiet{1};

}  // namespace

TEST_CASE("a model loaded with 1 thread runs its graphs on the calling thread alone", "[threads]") {
    test::Model model(test::artifact("flash"), 1, /*num_threads=*/1);
    REQUIRE(model.status == GPT_OK);
    REQUIRE(model.info.vocab_size <= 128);
    CHECK(busy_helper_threads(model.handle, kQuiet) == 0);
}

TEST_CASE("a model loaded with 2 threads runs its graphs on two", "[threads]") {
    test::Model model(test::artifact("flash"), 1, /*num_threads=*/2);
    REQUIRE(model.status == GPT_OK);
    CHECK(busy_helper_threads(model.handle, kUntilBusy) >= 1);
}

TEST_CASE("models with different thread counts share a process without retuning each other", "[threads]") {
    const int before = at::get_num_threads();
    test::Model two(test::artifact("flash"), 1, /*num_threads=*/2);
    test::Model one(test::artifact("flash"), 1, /*num_threads=*/1);  // loaded second: it must not retune `two`
    REQUIRE((two.status == GPT_OK && one.status == GPT_OK));
    CHECK(busy_helper_threads(two.handle, kUntilBusy) >= 1);
    // `two`'s workers spin a bounded number of rounds (libgomp's spin count) before they sleep: a few ms of CPU
    // at most, counted in `one`'s window only if still going, which this pause makes unlikely.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    CHECK(busy_helper_threads(one.handle, kQuiet) == 0);
    CHECK(at::get_num_threads() == before);  // the caller's own setting is back after every call
}
