// Data-parallel training on c10d/Gloo with real processes on 127.0.0.1: two ranks
// equal one rank with the doubled batch, a dead or hung peer turns into
// GPT_ERR_PEER_FAILED within the timeout, and checkpoints move between world sizes.
#include <ATen/TensorOperators.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "dataset.h"
#include "test_support.h"
#include "train/collectives.h"

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr int kSteps = 4;
// Two runs whose fp32 sums differ only in order. Losses and gradient norms agree
// to ~1e-7; AdamW divides each update by sqrt(v), so ulp-sized differences on
// near-zero gradients move weights by up to ~1e-5 within 4 steps at lr 1e-2
// (measured 8e-6). The gradient norm (before clipping) is what catches a
// gradient that is summed instead of averaged: Adam itself is scale-invariant.
constexpr double kLossTolerance = 1e-5;
constexpr double kNormRelTolerance = 1e-5;
constexpr double kWeightTolerance = 5e-5;

// A free TCP port on 127.0.0.1 (the kernel picks it; the socket is closed again).
int free_port() {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd >= 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(bind(fd, reinterpret_cast<sockaddr *>(&addr), sizeof addr) == 0);
    socklen_t len = sizeof addr;
    REQUIRE(getsockname(fd, reinterpret_cast<sockaddr *>(&addr), &len) == 0);
    close(fd);
    return ntohs(addr.sin_port);
}

// One dist_rank process (built beside this test program) with its stdout piped
// back. Every wait is bounded; the destructor kills and reaps a process still running.
class Rank {
public:
    // bad_step >= -1 is dist_rank's BAD_STEP (-1: none, but refused steps are retried).
    Rank(int world, int rank, int port, int timeout_ms, int steps, const std::string &ckpt_prefix,
         const std::string &resume, int bad_step = -2) {
        const std::string exe = (std::filesystem::read_symlink("/proc/self/exe").parent_path() / "dist_rank").string();
        REQUIRE(std::filesystem::exists(exe));
        std::vector<std::string> args = {exe,
                                         test::artifact("math").string(),
                                         std::to_string(world),
                                         std::to_string(rank),
                                         std::to_string(port),
                                         std::to_string(timeout_ms),
                                         std::to_string(steps),
                                         ckpt_prefix,
                                         resume};
        if (bad_step >= -1) args.push_back(std::to_string(bad_step));
        pid_ = test::spawn_with_stdout(args, &fd_);
        REQUIRE(pid_ > 0);
    }
    ~Rank() {
        if (pid_ > 0) {
            kill(pid_, SIGKILL);
            waitpid(pid_, nullptr, 0);
        }
        if (fd_ >= 0) close(fd_);
    }
    Rank(const Rank &) = delete;
    Rank &operator=(const Rank &) = delete;

    pid_t pid() const { return pid_; }
    const std::string &output() const { return output_; }

    // Reads stdout until it contains `text` or `deadline` passes; true if it appeared.
    bool read_until(const std::string &text, Clock::time_point deadline) {
        while (output_.find(text) == std::string::npos) {
            const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now()).count();
            if (left <= 0 || !read_some(static_cast<int>(left))) return false;
        }
        return true;
    }
    // Waits for the exit (reading stdout meanwhile); true when it exited before `deadline`.
    bool wait_exit(Clock::time_point deadline, int *exit_code) {
        while (Clock::now() < deadline) {
            int status = 0;
            if (waitpid(pid_, &status, WNOHANG) == pid_) {
                pid_ = -1;
                while (read_some(100)) {
                }
                *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
                return true;
            }
            read_some(50);
        }
        return false;
    }
    // Column `column` (0 = loss, 1 = gradient norm) of the "loss <it> <loss> <norm>" lines, in order.
    std::vector<double> steps(int column = 0) const {
        std::vector<double> values;
        std::istringstream in(output_);
        std::string word;
        while (in >> word)
            if (word == "loss") {
                long it = 0;
                double loss = 0.0, norm = 0.0;
                in >> it >> loss >> norm;
                values.push_back(column == 0 ? loss : norm);
            }
        return values;
    }

private:
    bool read_some(int timeout_ms) {
        pollfd p{fd_, POLLIN, 0};
        if (poll(&p, 1, timeout_ms) <= 0) return false;
        char buf[4096];
        const ssize_t n = read(fd_, buf, sizeof buf);
        if (n <= 0) return false;
        output_.append(buf, static_cast<size_t>(n));
        return true;
    }

    pid_t pid_ = -1;
    int fd_ = -1;
    std::string output_;
};

// Runs `ranks` to completion (60 s bound) and requires each to succeed.
void finish(std::vector<Rank *> ranks) {
    const auto deadline = Clock::now() + std::chrono::seconds(60);
    for (Rank *r : ranks) {
        int code = -1;
        INFO(r->output());
        REQUIRE(r->wait_exit(deadline, &code));
        REQUIRE(code == 0);
        REQUIRE(r->output().find("status GPT_OK") != std::string::npos);
    }
}

double max_weight_difference(const std::string &a, const std::string &b) {
    const auto ta = test::read_safetensors(a), tb = test::read_safetensors(b);
    double worst = 0.0;
    int params = 0;
    for (const auto &[key, value] : ta)
        if (key.rfind("param.", 0) == 0) {
            REQUIRE(tb.count(key) == 1);
            worst = std::max(worst, (value - tb.at(key)).abs().max().item<double>());
            ++params;
        }
    REQUIRE(params > 0);
    return worst;
}

}  // namespace

TEST_CASE("2 ranks x batch b train like 1 rank x batch 2b, and their checkpoint resumes on 1 rank", "[distributed]") {
    test::ScratchArtifact scratch(test::artifact("math"));
    const std::string one = (scratch.dir().parent_path() / "one").string();
    const std::string two = (scratch.dir().parent_path() / "two").string();
    const int timeout_ms = 30000;

    Rank alone(1, 0, 1, timeout_ms, kSteps, one, "-");
    finish({&alone});
    const int port = free_port();
    Rank r0(2, 0, port, timeout_ms, kSteps, two, "-"), r1(2, 1, port, timeout_ms, kSteps, "-", "-");
    finish({&r0, &r1});

    const auto expected = alone.steps();
    REQUIRE(expected.size() == kSteps);
    REQUIRE(r0.steps().size() == kSteps);
    CHECK(r0.steps() == r1.steps());            // every rank reports the same all-reduced loss
    CHECK(expected.back() < expected.front());  // it is training
    for (int it = 0; it < kSteps; ++it) {
        INFO("step " << it);
        CHECK(r0.steps()[it] == Approx(expected[it]).margin(kLossTolerance));
        CHECK(r0.steps(1)[it] == Approx(alone.steps(1)[it]).epsilon(kNormRelTolerance));
    }
    CHECK(max_weight_difference(one + "." + std::to_string(kSteps), two + "." + std::to_string(kSteps)) <
          kWeightTolerance);

    SECTION("a 2-rank checkpoint resumes on 1 rank with the same next loss") {
        Rank resumed(1, 0, 1, timeout_ms, kSteps, "-", two + "." + std::to_string(kSteps - 1));
        finish({&resumed});
        REQUIRE(resumed.steps().size() == 1);
        CHECK(resumed.steps()[0] == Approx(r0.steps()[kSteps - 1]).margin(kLossTolerance));
        CHECK(resumed.steps()[0] == Approx(expected[kSteps - 1]).margin(kLossTolerance));
    }
}

TEST_CASE("a rank that dies or hangs makes its peer fail with GPT_ERR_PEER_FAILED within the timeout",
          "[distributed]") {
    const int timeout_ms = 5000;
    const auto margin = std::chrono::seconds(5);
    const bool hang = GENERATE(false, true);
    INFO((hang ? "peer stopped (SIGSTOP)" : "peer killed (SIGKILL)"));
    const int port = free_port();
    Rank r0(2, 0, port, timeout_ms, 0, "-", "-"), r1(2, 1, port, timeout_ms, 0, "-", "-");
    const auto start = Clock::now() + std::chrono::seconds(60);
    REQUIRE(r0.read_until("loss 2 ", start));  // both are training
    REQUIRE(r1.read_until("loss 2 ", start));

    REQUIRE(kill(r1.pid(), hang ? SIGSTOP : SIGKILL) == 0);
    const auto failed_at = Clock::now();
    int code = -1;
    REQUIRE(r0.wait_exit(failed_at + milliseconds(timeout_ms) + margin, &code));
    const double seconds = std::chrono::duration<double>(Clock::now() - failed_at).count();
    INFO(r0.output());
    CHECK(code == 1);
    CHECK(r0.output().find("status GPT_ERR_PEER_FAILED") != std::string::npos);
    WARN("peer " << (hang ? "hung" : "died") << ": rank 0 failed after " << seconds << " s (timeout "
                 << timeout_ms / 1000.0 << " s)");
    if (hang) CHECK(seconds > 0.5 * timeout_ms / 1000.0);  // it waited for the timeout, not for a reset
}

TEST_CASE("a rank refusing its batch fails that step on every rank at once with its status, and the job goes on",
          "[distributed]") {
    // Rank 1 puts an out-of-range token into step 1's second micro-batch. Every rank must return
    // GPT_ERR_OUT_OF_RANGE from that step well before the timeout (not GPT_ERR_PEER_FAILED after it),
    // nothing may change, and the retried step and those after it equal a run without the bad token.
    const int timeout_ms = 60000;
    const int bad_step = 1;
    int port = free_port();
    Rank clean0(2, 0, port, timeout_ms, kSteps, "-", "-"), clean1(2, 1, port, timeout_ms, kSteps, "-", "-");
    finish({&clean0, &clean1});
    port = free_port();
    Rank r0(2, 0, port, timeout_ms, kSteps, "-", "-", -1), r1(2, 1, port, timeout_ms, kSteps, "-", "-", bad_step);
    finish({&r0, &r1});
    for (Rank *r : {&r0, &r1}) {
        INFO(r->output());
        const size_t at = r->output().find("refused ");
        REQUIRE(at != std::string::npos);
        std::istringstream line(r->output().substr(at + 8));
        long it = -1, ms = -1;
        std::string status;
        line >> it >> status >> ms;
        CHECK(it == bad_step);
        CHECK(status == "GPT_ERR_OUT_OF_RANGE");
        CHECK(ms >= 0);
        CHECK(ms < 10000);
        WARN("rank refused the step in " << ms << " ms (timeout " << timeout_ms / 1000 << " s)");
        REQUIRE(r->steps().size() == kSteps);
        for (int i = 0; i < kSteps; ++i) CHECK(r->steps()[i] == Approx(clean0.steps()[i]).margin(kLossTolerance));
    }
    CHECK(r0.steps() == r1.steps());
}

TEST_CASE("a rank alone at the rendezvous fails with GPT_ERR_PEER_FAILED after the timeout", "[distributed]") {
    test::Model model(test::artifact("math"));
    REQUIRE(model.status == GPT_OK);
    gpt_dist_params dist;
    gpt_dist_default_params(&dist, sizeof dist);
    dist.world_size = 2;
    dist.master_port = free_port();
    dist.timeout_ms = 1500;
    gpt_trainer *trainer = nullptr;
    const auto start = Clock::now();
    CHECK(gpt_trainer_create_distributed(model.handle, nullptr, &dist, &trainer) == GPT_ERR_PEER_FAILED);
    CHECK(trainer == nullptr);
    CHECK(std::chrono::duration<double>(Clock::now() - start).count() < 1.5 + 5.0);
    CHECK(std::string(gpt_runtime_last_error()).find("rendezvous") != std::string::npos);
    CHECK(gpt_model_free(model.handle) == GPT_OK);  // nothing left holding the model
    model.handle = nullptr;
}

TEST_CASE("bad distributed parameters are refused before any rendezvous", "[distributed]") {
    test::Model model(test::artifact("math"));
    REQUIRE(model.status == GPT_OK);
    gpt_trainer *trainer = nullptr;
    auto create = [&](void (*edit)(gpt_dist_params *)) {
        gpt_dist_params dist;
        gpt_dist_default_params(&dist, sizeof dist);
        edit(&dist);
        return gpt_trainer_create_distributed(model.handle, nullptr, &dist, &trainer);
    };
    CHECK(create([](gpt_dist_params *d) { d->world_size = 0; }) == GPT_ERR_INVALID_ARGUMENT);
    CHECK(create([](gpt_dist_params *d) { d->rank = 1; }) == GPT_ERR_INVALID_ARGUMENT);
    CHECK(create([](gpt_dist_params *d) { d->rank = -1; }) == GPT_ERR_INVALID_ARGUMENT);
    CHECK(create([](gpt_dist_params *d) { d->master_addr = nullptr; }) == GPT_ERR_INVALID_ARGUMENT);
    CHECK(create([](gpt_dist_params *d) { d->master_port = 70000; }) == GPT_ERR_INVALID_ARGUMENT);
    CHECK(create([](gpt_dist_params *d) { d->timeout_ms = 0; }) == GPT_ERR_INVALID_ARGUMENT);
    CHECK(create([](gpt_dist_params *d) { d->bucket_mb = 0; }) == GPT_ERR_INVALID_ARGUMENT);
    CHECK(trainer == nullptr);
    CHECK(gpt_trainer_create_distributed(model.handle, nullptr, nullptr, &trainer) == GPT_ERR_INVALID_ARGUMENT);
}

TEST_CASE("distributed parameters come from the launcher's environment", "[distributed]") {
    setenv("WORLD_SIZE", "4", 1);
    setenv("RANK", "3", 1);
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    setenv("MASTER_PORT", "29876", 1);
    gpt_dist_params dist;
    gpt_dist_default_params(&dist, sizeof dist);
    CHECK(gpt_dist_params_from_env(&dist) == GPT_OK);
    CHECK(dist.world_size == 4);
    CHECK(dist.rank == 3);
    CHECK(std::string(dist.master_addr) == "127.0.0.1");
    CHECK(dist.master_port == 29876);
    setenv("RANK", "three", 1);
    CHECK(gpt_dist_params_from_env(&dist) == GPT_ERR_INVALID_ARGUMENT);
    CHECK(dist.rank == 3);  // untouched on failure
    for (const char *name : {"WORLD_SIZE", "RANK", "MASTER_ADDR", "MASTER_PORT"}) unsetenv(name);
}

TEST_CASE("the master address read from the environment outlives the variable", "[distributed]") {
    // putenv puts this buffer itself in the environment: getenv then points into it, as into any
    // environment storage that a later change may reuse or free.
    static char entry[] = "MASTER_ADDR=10.1.2.3";
    REQUIRE(putenv(entry) == 0);
    gpt_dist_params dist;
    gpt_dist_default_params(&dist, sizeof dist);
    REQUIRE(gpt_dist_params_from_env(&dist) == GPT_OK);
    const char *first = dist.master_addr;
    REQUIRE(setenv("MASTER_ADDR", "192.168.0.1", 1) == 0);   // the environment lets go of the buffer...
    std::fill(std::begin(entry), std::end(entry) - 1, 'x');  // ...which its owner then reuses
    CHECK(std::string(first) == "10.1.2.3");
    REQUIRE(gpt_dist_params_from_env(&dist) == GPT_OK);
    CHECK(std::string(dist.master_addr) == "192.168.0.1");
    const char *second = dist.master_addr;
    unsetenv("MASTER_ADDR");
    CHECK(std::string(first) == "10.1.2.3");
    CHECK(std::string(second) == "192.168.0.1");
    // Each distinct value is kept once: reading the same value again gives the same copy.
    REQUIRE(setenv("MASTER_ADDR", "10.1.2.3", 1) == 0);
    REQUIRE(gpt_dist_params_from_env(&dist) == GPT_OK);
    CHECK(dist.master_addr == first);
    unsetenv("MASTER_ADDR");
}

TEST_CASE("rank shards of gpt train's batches are disjoint and together make the 1-rank batch", "[distributed]") {
    const auto corpus = test::artifact("math").parent_path().parent_path() / "corpus" / "train.bin";
    const int seq = 16, rows = 3, world = 4;
    const cli::TokenFile data(corpus.string(), seq);
    std::vector<gpt_token> whole_x, whole_y;
    std::mt19937_64 alone(7);
    for (int step = 0; step < 2; ++step) data.sample(alone, rows * world, seq, &whole_x, &whole_y);

    std::vector<std::vector<gpt_token>> xs(world), ys(world);
    for (int rank = 0; rank < world; ++rank) {
        std::mt19937_64 rng(7);  // every rank seeds the same stream
        for (int step = 0; step < 2; ++step) data.sample(rng, rows, seq, &xs[rank], &ys[rank], rank, world);
        REQUIRE(xs[rank].size() == static_cast<size_t>(2 * rows * seq));
    }
    const size_t shard = static_cast<size_t>(rows) * seq;
    for (int step = 0; step < 2; ++step)
        for (int rank = 0; rank < world; ++rank) {
            INFO("step " << step << ", rank " << rank);
            const auto from = whole_x.begin() + static_cast<std::ptrdiff_t>((step * world + rank) * shard);
            CHECK(std::equal(from, from + static_cast<std::ptrdiff_t>(shard),
                             xs[rank].begin() + static_cast<std::ptrdiff_t>(step * shard)));
        }
    CHECK(xs[0] != xs[1]);
}

TEST_CASE("world size 1 through c10d trains exactly like the plain trainer", "[distributed]") {
    test::Model plain_model(test::artifact("math")), dist_model(test::artifact("math"));
    REQUIRE(plain_model.status == GPT_OK);
    REQUIRE(dist_model.status == GPT_OK);
    gpt_trainer_params params = test::default_trainer_params();
    params.learning_rate = 1e-2f;
    params.warmup_iters = 2;
    params.lr_decay_iters = 20;
    gpt_dist_params dist;
    gpt_dist_default_params(&dist, sizeof dist);
    dist.master_port = free_port();
    dist.timeout_ms = 30000;
    gpt_trainer *plain = nullptr, *alone = nullptr;
    REQUIRE(gpt_trainer_create(plain_model.handle, &params, &plain) == GPT_OK);
    REQUIRE(gpt_trainer_create_distributed(dist_model.handle, &params, &dist, &alone) == GPT_OK);
    std::mt19937 rng(3);
    std::vector<gpt_token> x(2 * 4 * 16), y(x.size());
    for (int it = 0; it < 3; ++it) {
        for (size_t i = 0; i < x.size(); ++i) {
            x[i] = static_cast<gpt_token>(rng() % 90);
            y[i] = static_cast<gpt_token>(rng() % 90);
        }
        float a = 0.0f, b = 0.0f;
        REQUIRE(gpt_trainer_step(plain, x.data(), y.data(), 4, 16, 2, &a) == GPT_OK);
        REQUIRE(gpt_trainer_step(alone, x.data(), y.data(), 4, 16, 2, &b) == GPT_OK);
        CHECK(a == b);  // the sum over one rank is the identity: bitwise equal
    }
    gpt_trainer_free(plain);
    gpt_trainer_free(alone);
}

TEST_CASE("a busy master port is refused with GPT_ERR_INVALID_ARGUMENT", "[distributed]") {
    test::Model model(test::artifact("math"));
    REQUIRE(model.status == GPT_OK);
    const int port = free_port();
    const int busy = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    REQUIRE(bind(busy, reinterpret_cast<sockaddr *>(&addr), sizeof addr) == 0);
    REQUIRE(listen(busy, 1) == 0);
    gpt_dist_params dist;
    gpt_dist_default_params(&dist, sizeof dist);
    dist.master_port = port;
    dist.timeout_ms = 2000;
    gpt_trainer *trainer = nullptr;
    CHECK(gpt_trainer_create_distributed(model.handle, nullptr, &dist, &trainer) == GPT_ERR_INVALID_ARGUMENT);
    CHECK(std::string(gpt_runtime_last_error()).find("MASTER_PORT") != std::string::npos);
    close(busy);
}

TEST_CASE("an NCCL group is made with torch's error handling that fails the call, not the process", "[distributed]") {
    for (const char *name :
         {"TORCH_NCCL_BLOCKING_WAIT", "TORCH_NCCL_ASYNC_ERROR_HANDLING", "TORCH_NCCL_ENABLE_MONITORING"})
        ::unsetenv(name);
    ::setenv("TORCH_NCCL_ENABLE_MONITORING", "1", 1);  // an operator's own choice stays
    gpt::use_nccl_error_handling();
    CHECK(std::string(std::getenv("TORCH_NCCL_BLOCKING_WAIT")) == "1");
    CHECK(std::string(std::getenv("TORCH_NCCL_ASYNC_ERROR_HANDLING")) == "2");  // CleanUpOnly
    CHECK(std::string(std::getenv("TORCH_NCCL_ENABLE_MONITORING")) == "1");
    ::unsetenv("TORCH_NCCL_ENABLE_MONITORING");
}
