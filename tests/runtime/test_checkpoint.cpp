// Checkpoints: resume equals uninterrupted training bitwise, writes are atomic
// even under SIGKILL, and a failed step or a bad file changes nothing.
#include <ATen/ATen.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <fstream>
#include <random>
#include <thread>
#include <vector>

#include "exec/model.h"
#include "test_support.h"

extern char **environ;

namespace {

struct Trainer {
    gpt_trainer *handle = nullptr;
    explicit Trainer(gpt_model *model) {
        gpt_trainer_params p = test::default_trainer_params();
        p.learning_rate = 1e-2f;
        p.warmup_iters = 2;
        p.lr_decay_iters = 20;
        REQUIRE(gpt_trainer_create(model, &p, &handle) == GPT_OK);
    }
    ~Trainer() { gpt_trainer_free(handle); }
};

// Deterministic batches for step `it`.
void batch(int it, std::vector<gpt_token> *x, std::vector<gpt_token> *y) {
    std::mt19937 rng(static_cast<unsigned>(it));
    x->resize(2 * 3 * 16);
    y->resize(x->size());
    for (size_t i = 0; i < x->size(); ++i) {
        (*x)[i] = static_cast<gpt_token>(rng() % 90);
        (*y)[i] = static_cast<gpt_token>(rng() % 90);
    }
}

std::vector<float> run_steps(gpt_trainer *trainer, int from, int to) {
    std::vector<float> losses;
    std::vector<gpt_token> x, y;
    for (int it = from; it < to; ++it) {
        batch(it, &x, &y);
        float loss = 0.0f;
        REQUIRE(gpt_trainer_step(trainer, x.data(), y.data(), 3, 16, 2, &loss) == GPT_OK);
        losses.push_back(loss);
    }
    return losses;
}

std::string read_all(const std::filesystem::path &p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

TEST_CASE("save, load and continue gives the uninterrupted run's losses bitwise", "[checkpoint]") {
    test::ScratchArtifact scratch(test::artifact("train"));
    const std::string path = (scratch.dir().parent_path() / "ckpt.safetensors").string();

    // One thread each: with several, the BLAS may split a product differently when the machine is
    // busy (MKL adjusts its thread count to the load), and bitwise equality then depends on the load.
    test::Model straight(test::artifact("train"), 1, 1);
    REQUIRE(straight.status == GPT_OK);
    Trainer a(straight.handle);
    run_steps(a.handle, 0, 3);
    REQUIRE(gpt_trainer_save(a.handle, path.c_str()) == GPT_OK);
    const auto expected = run_steps(a.handle, 3, 6);

    test::Model resumed(test::artifact("train"), 1, 1);
    REQUIRE(resumed.status == GPT_OK);
    Trainer b(resumed.handle);
    REQUIRE(gpt_trainer_load(b.handle, path.c_str()) == GPT_OK);
    gpt_trainer_state state;
    REQUIRE(gpt_trainer_get_state(b.handle, &state, sizeof state) == GPT_OK);
    CHECK(state.iteration == 3);
    const auto actual = run_steps(b.handle, 3, 6);
    CHECK(actual == expected);  // bitwise: same kernels, same state, same order
    for (const auto &name : straight.handle->impl->manifest().training->param_names)
        CHECK(at::equal(straight.handle->impl->weight(name), resumed.handle->impl->weight(name)));
}

TEST_CASE("a failed step and a bad checkpoint change nothing", "[checkpoint]") {
    test::ScratchArtifact scratch(test::artifact("train"));
    const auto path = scratch.dir().parent_path() / "ckpt.safetensors";
    test::Model model(test::artifact("train"));
    REQUIRE(model.status == GPT_OK);
    Trainer trainer(model.handle);
    run_steps(trainer.handle, 0, 2);
    REQUIRE(gpt_trainer_save(trainer.handle, path.c_str()) == GPT_OK);
    const std::string saved = read_all(path);

    std::vector<gpt_token> x(32, 4), y(32, -1);  // every target ignored: NaN loss
    float loss = 0.0f;
    CHECK(gpt_trainer_step(trainer.handle, x.data(), y.data(), 2, 16, 1, &loss) == GPT_ERR_NON_FINITE);
    CHECK(read_all(path) == saved);
    CHECK(gpt_trainer_load(trainer.handle, path.c_str()) == GPT_OK);

    // A truncated copy is refused and the trainer keeps its state.
    const auto truncated = scratch.dir().parent_path() / "truncated.safetensors";
    std::ofstream(truncated, std::ios::binary) << saved.substr(0, saved.size() / 2);
    const at::Tensor before = model.handle->impl->weight("lm_head.weight").clone();
    CHECK(gpt_trainer_load(trainer.handle, truncated.c_str()) == GPT_ERR_ARTIFACT_INVALID);
    CHECK(at::equal(before, model.handle->impl->weight("lm_head.weight")));
    CHECK(gpt_trainer_load(trainer.handle, "/nonexistent/ckpt") == GPT_ERR_INVALID_ARGUMENT);
}

TEST_CASE("SIGKILL during checkpoint writes always leaves a loadable checkpoint", "[checkpoint]") {
    test::ScratchArtifact scratch(test::artifact("train"));
    const auto dir = scratch.dir().parent_path();
    const std::string path = (dir / "ckpt.safetensors").string();
    // Built beside this test program (tests/CMakeLists.txt).
    const std::string writer_path =
        (std::filesystem::read_symlink("/proc/self/exe").parent_path() / "checkpoint_writer").string();
    const char *writer = writer_path.c_str();
    REQUIRE(std::filesystem::exists(writer_path));

    test::Model model(test::artifact("train"));
    REQUIRE(model.status == GPT_OK);
    Trainer reader(model.handle);
    std::mt19937 rng(5);
    int64_t last_iteration = 0;
    const int rounds = 30;
    for (int round = 0; round < rounds; ++round) {
        int out[2];
        REQUIRE(pipe(out) == 0);
        posix_spawn_file_actions_t actions;
        posix_spawn_file_actions_init(&actions);
        posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
        posix_spawn_file_actions_addclose(&actions, out[0]);
        const std::string artifact = test::artifact("train").string();
        char *argv[] = {const_cast<char *>(writer), const_cast<char *>(artifact.c_str()),
                        const_cast<char *>(path.c_str()), nullptr};
        pid_t pid = 0;
        REQUIRE(posix_spawn(&pid, writer, &actions, nullptr, argv, environ) == 0);
        posix_spawn_file_actions_destroy(&actions);
        close(out[1]);
        char ready[6] = {};
        REQUIRE(read(out[0], ready, 6) == 6);  // "ready\n": the model is loaded, saves begin
        // Let 1..4 saves complete (however slow this machine is), then kill at a random
        // point of the next step + save.
        const int saves = 1 + static_cast<int>(rng() % 4);
        for (int seen = 0; seen < saves;) {
            char c = 0;
            REQUIRE(read(out[0], &c, 1) == 1);
            seen += c == '\n';
        }
        std::this_thread::sleep_for(std::chrono::microseconds(rng() % 3000));
        REQUIRE(kill(pid, SIGKILL) == 0);
        int status = 0;
        REQUIRE(waitpid(pid, &status, 0) == pid);
        REQUIRE(WIFSIGNALED(status));
        close(out[0]);

        INFO("round " << round);
        REQUIRE(gpt_trainer_load(reader.handle, path.c_str()) == GPT_OK);
        gpt_trainer_state state;
        REQUIRE(gpt_trainer_get_state(reader.handle, &state, sizeof state) == GPT_OK);
        CHECK(state.iteration >= saves);  // every completed save is there, or a later one
        last_iteration = std::max(last_iteration, state.iteration);
    }
    CHECK(last_iteration > 1);  // the writer really was saving when killed
}

TEST_CASE("a nanoGPT ckpt.pt with AdamW state resumes in the runtime as it would in nanoGPT", "[checkpoint]") {
    const auto root = test::artifact("train").parent_path().parent_path();
    const auto ref = test::read_safetensors(root / "reference_train.safetensors");
    test::Model model(test::artifact("train"));
    REQUIRE(model.status == GPT_OK);
    const gpt_trainer_params p = test::reference_trainer_params();
    gpt_trainer *trainer = nullptr;
    REQUIRE(gpt_trainer_create(model.handle, &p, &trainer) == GPT_OK);
    // imported_ckpt.safetensors = `python -m gpt_aot import-ckpt nanogpt_ckpt.pt` (saved after 2 steps)
    REQUIRE(gpt_trainer_load(trainer, (root / "imported_ckpt.safetensors").c_str()) == GPT_OK);
    const at::Tensor x = ref.at("x"), y = ref.at("y");
    for (int64_t it = 2; it < x.size(0); ++it) {
        const at::Tensor xi = x[it].contiguous(), yi = y[it].contiguous();
        float loss = 0.0f;
        REQUIRE(gpt_trainer_step(trainer, xi.data_ptr<int32_t>(), yi.data_ptr<int32_t>(),
                                 static_cast<int32_t>(x.size(2)), static_cast<int32_t>(x.size(3)),
                                 static_cast<int32_t>(x.size(1)), &loss) == GPT_OK);
        CHECK(loss == Approx(ref.at("losses")[it].item<double>()).epsilon(1e-5));
    }
    for (const auto &[key, expected] : ref)
        if (key.rfind("final.", 0) == 0)
            CHECK((model.handle->impl->weight(key.substr(6)) - expected).abs().max().item<double>() < 2e-5);
    gpt_trainer_free(trainer);
}
