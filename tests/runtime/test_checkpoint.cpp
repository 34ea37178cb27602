// Checkpoints: resume equals uninterrupted training bitwise, dropout masks
// included; each trainer draws its masks from generators of its own; writes are
// atomic even under SIGKILL; a failed step or a bad file changes nothing.
#include <ATen/Context.h>
#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/rand.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <functional>
#include <random>
#include <thread>
#include <vector>

#include "exec/model.h"
#include "exec/safetensors.h"
#include "formats/files.h"
#include "test_support.h"
#include "train/trainer_rng.h"

namespace {

struct Trainer {
    gpt_trainer *handle = nullptr;
    explicit Trainer(gpt_model *model, uint64_t seed = 1337) {
        gpt_trainer_params p = test::default_trainer_params();
        p.learning_rate = 1e-2f;
        p.warmup_iters = 2;
        p.lr_decay_iters = 20;
        p.seed = seed;
        REQUIRE(gpt_trainer_create(model, &p, &handle) == GPT_OK);
    }
    ~Trainer() { gpt_trainer_free(handle); }
};

// tiny-bpe trains with dropout (tests/fixtures/build_artifacts.py: DROPOUT), so its steps draw masks.
std::filesystem::path dropout_artifact() {
    const auto dir = test::artifact("bpe");
    std::ifstream in(dir / "manifest.json");
    REQUIRE(nlohmann::json::parse(in)["model"].value("dropout", 0.0) > 0.0);  // else the checks below prove nothing
    return dir;
}

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

// Rewrites the checkpoint at `path` with `edit` applied to its tensors (metadata kept).
void edit_checkpoint(const std::filesystem::path &path,
                     const std::function<void(std::map<std::string, at::Tensor> &)> &edit) {
    const std::string bytes = read_all(path);
    std::map<std::string, std::string> metadata;
    auto tensors = gpt::parse_safetensors(reinterpret_cast<const unsigned char *>(bytes.data()), bytes.size(),
                                          path.string(), &metadata);
    edit(tensors);
    gpt::write_file_atomically(path.string(),
                               [&](const gpt::ByteSink &put) { gpt::write_safetensors(tensors, metadata, put); });
}

// A model's losses over some steps and its weights after them.
struct Run {
    std::vector<float> losses;
    std::vector<at::Tensor> weights;
};

Run finish(const test::Model &model, std::vector<float> losses) {
    Run run{std::move(losses), {}};
    for (const auto &name : model.handle->impl->manifest().training->param_names)
        run.weights.push_back(model.handle->impl->weight(name).cpu().clone());
    return run;
}

// Bitwise on the CPU: same kernels, same state, same order (one thread per model: with several the
// BLAS may split a product differently when the machine is busy, as MKL adjusts its thread count to
// the load). On a GPU the backward's atomic adds land in any order, so there within 1e-5, far below
// what another dropout mask changes.
bool same_run(const Run &a, const Run &b, bool bitwise) {
    if (a.losses.size() != b.losses.size() || a.weights.size() != b.weights.size()) return false;
    for (size_t i = 0; i < a.losses.size(); ++i)
        if (bitwise ? a.losses[i] != b.losses[i] : std::abs(a.losses[i] - b.losses[i]) > 1e-5f) return false;
    for (size_t i = 0; i < a.weights.size(); ++i)
        if (bitwise ? !at::equal(a.weights[i], b.weights[i])
                    : (a.weights[i] - b.weights[i]).abs().max().item<double>() > 1e-5)
            return false;
    return true;
}

// Saved after 3 steps and resumed by a fresh trainer, which then steps in turn with the
// uninterrupted one: each must draw its own masks, the resumed one those the uninterrupted one draws.
void check_resume(const std::filesystem::path &artifact, bool bitwise) {
    test::ScratchArtifact scratch(artifact);
    const std::string path = (scratch.dir().parent_path() / "ckpt.safetensors").string();

    test::Model straight(artifact, 1, 1);
    REQUIRE(straight.status == GPT_OK);
    Trainer a(straight.handle);
    run_steps(a.handle, 0, 3);
    REQUIRE(gpt_trainer_save(a.handle, path.c_str()) == GPT_OK);

    test::Model resumed(artifact, 1, 1);
    REQUIRE(resumed.status == GPT_OK);
    Trainer b(resumed.handle);
    REQUIRE(gpt_trainer_load(b.handle, path.c_str()) == GPT_OK);
    gpt_trainer_state state;
    REQUIRE(gpt_trainer_get_state(b.handle, &state, sizeof state) == GPT_OK);
    CHECK(state.iteration == 3);
    std::vector<float> expected, actual;
    for (int it = 3; it < 6; ++it) {
        expected.push_back(run_steps(a.handle, it, it + 1).at(0));
        actual.push_back(run_steps(b.handle, it, it + 1).at(0));
    }
    INFO("uninterrupted " << Catch::Detail::stringify(expected) << ", resumed " << Catch::Detail::stringify(actual));
    CHECK(same_run(finish(resumed, actual), finish(straight, expected), bitwise));
}

// Two trainers in one process, stepping in turn, each train as it does alone (other seeds, other
// masks); whoever else seeds or draws from torch's default generators changes neither, and a step
// leaves those generators as it found them.
void check_independent_trainers(const std::filesystem::path &artifact, bool bitwise) {
    auto alone = [&](uint64_t seed) {
        test::Model model(artifact, 1, 1);
        REQUIRE(model.status == GPT_OK);
        Trainer trainer(model.handle, seed);
        return finish(model, run_steps(trainer.handle, 0, 4));
    };
    const Run a_alone = alone(1), b_alone = alone(2);
    CHECK_FALSE(same_run(a_alone, b_alone, false));  // the seeds' masks differ: the checks below can tell

    test::Model model_a(artifact, 1, 1), model_b(artifact, 1, 1);
    REQUIRE(model_a.status == GPT_OK);
    REQUIRE(model_b.status == GPT_OK);
    const c10::Device device = model_a.handle->impl->device();
    Trainer a(model_a.handle, 1), b(model_b.handle, 2);
    std::vector<float> losses_a, losses_b;
    for (int it = 0; it < 4; ++it) {
        losses_a.push_back(run_steps(a.handle, it, it + 1).at(0));
        at::manual_seed(static_cast<uint64_t>(it));  // someone else's use of the default generators
        (void)at::rand({16}, at::TensorOptions().device(device));
        losses_b.push_back(run_steps(b.handle, it, it + 1).at(0));
    }
    CHECK(same_run(finish(model_a, losses_a), a_alone, bitwise));
    CHECK(same_run(finish(model_b, losses_b), b_alone, bitwise));

    at::manual_seed(5);
    const at::Tensor expected = at::rand({16}, at::TensorOptions().device(device));
    at::manual_seed(5);
    run_steps(a.handle, 4, 5);
    CHECK(at::equal(at::rand({16}, at::TensorOptions().device(device)), expected));
}

// `n` uniform numbers drawn through `rng`'s lease, as a graph draws them.
at::Tensor draw(gpt::TrainerRng &rng, c10::Device device, int64_t n = 64) {
    const gpt::TrainerRng::Lease lease = rng.lend();
    return at::rand({n}, at::TensorOptions().device(device)).cpu();
}

}  // namespace

TEST_CASE("save, load and continue gives the uninterrupted run's losses and weights bitwise", "[checkpoint]") {
    SECTION("without dropout") { check_resume(test::artifact("math"), true); }
    SECTION("with dropout: the resumed trainer draws the uninterrupted run's masks") {
        check_resume(dropout_artifact(), true);
    }
    // Bitwise only if the checkpoint restores the fp32 masters: the bf16 weights alone would resume elsewhere.
    SECTION("a bf16 model: its fp32 master weights and moments") { check_resume(test::artifact("bf16-train"), true); }
}

TEST_CASE("a bf16 model's checkpoint holds fp32 masters; one of version 1 (bf16) loads widened", "[checkpoint][bf16]") {
    test::ScratchArtifact scratch(test::artifact("bf16-train"));
    const auto path = scratch.dir().parent_path() / "ckpt.safetensors";
    test::Model model(test::artifact("bf16-train"), 1, 1);
    REQUIRE(model.status == GPT_OK);
    const auto &names = model.handle->impl->manifest().training->param_names;
    Trainer trainer(model.handle);
    run_steps(trainer.handle, 0, 3);
    REQUIRE(gpt_trainer_save(trainer.handle, path.c_str()) == GPT_OK);
    std::map<std::string, std::string> metadata;
    const std::string bytes = read_all(path);
    auto saved = gpt::parse_safetensors(reinterpret_cast<const unsigned char *>(bytes.data()), bytes.size(),
                                        path.string(), &metadata);
    CHECK(metadata.at("format_version") == "2");
    bool finer_than_bf16 = false;  // the masters keep what the bf16 weights round away
    for (const auto &name : names) {
        INFO(name);
        const at::Tensor master = saved.at("param." + name);
        REQUIRE(master.scalar_type() == at::kFloat);
        CHECK(saved.at("exp_avg_sq." + name).scalar_type() == at::kFloat);
        CHECK(at::equal(model.handle->impl->weight(name), master.to(at::kBFloat16)));
        finer_than_bf16 |= !at::equal(master, master.to(at::kBFloat16).to(at::kFloat));
    }
    CHECK(finer_than_bf16);

    // Version 1 stored a bf16 model's optimizer state in bf16: it loads, widened exactly.
    auto write = [&](const std::filesystem::path &to, const std::map<std::string, at::Tensor> &tensors,
                     const std::map<std::string, std::string> &meta) {
        gpt::write_file_atomically(to.string(),
                                   [&](const gpt::ByteSink &put) { gpt::write_safetensors(tensors, meta, put); });
    };
    const auto v1 = scratch.dir().parent_path() / "v1.safetensors";
    auto v1_tensors = saved;
    for (auto &[key, tensor] : v1_tensors)
        if (key.rfind("rng.", 0) != 0) tensor = tensor.to(at::kBFloat16);
    auto v1_metadata = metadata;
    v1_metadata["format_version"] = "1";
    write(v1, v1_tensors, v1_metadata);
    test::Model other(test::artifact("bf16-train"), 1, 1);
    REQUIRE(other.status == GPT_OK);
    Trainer resumed(other.handle);
    REQUIRE(gpt_trainer_load(resumed.handle, v1.c_str()) == GPT_OK);
    for (const auto &name : names) CHECK(at::equal(other.handle->impl->weight(name), model.handle->impl->weight(name)));
    run_steps(resumed.handle, 3, 4);  // and trains on

    // A dtype that is neither the masters' nor the model's is refused, naming both, and changes nothing.
    auto half = saved;
    half.at("param." + names.front()) = half.at("param." + names.front()).to(at::kHalf);
    write(v1, half, metadata);
    const at::Tensor before = other.handle->impl->weight(names.front()).clone();
    CHECK(gpt_trainer_load(resumed.handle, v1.c_str()) == GPT_ERR_ARTIFACT_INVALID);
    CHECK(test::error_mentions("in float16, this trainer keeps it in float32"));
    CHECK(at::equal(before, other.handle->impl->weight(names.front())));
    // A later format is refused with what this runtime reads.
    auto v3_metadata = metadata;
    v3_metadata["format_version"] = "3";
    write(v1, saved, v3_metadata);
    CHECK(gpt_trainer_load(resumed.handle, v1.c_str()) == GPT_ERR_ARTIFACT_VERSION);
    CHECK(test::error_mentions("reads versions 1 and 2"));
}

TEST_CASE("two trainers in one process draw their own dropout masks, untouched by torch's default generators",
          "[checkpoint]") {
    check_independent_trainers(dropout_artifact(), true);
}

TEST_CASE("ranks resuming rank 0's checkpoint keep their own generators, the same on every resume", "[checkpoint]") {
    const c10::Device cpu(c10::DeviceType::CPU);
    gpt::TrainerRng rank0(cpu, 1337);
    draw(rank0, cpu);
    const auto states = rank0.states();
    const gpt::TrainerRng fresh(cpu, 7);
    gpt::TrainerRng resumed0 = fresh.restored(states, 0, "ckpt"), resumed1 = fresh.restored(states, 1, "ckpt");
    gpt::TrainerRng resumed1_again = fresh.restored(states, 1, "ckpt"), resumed2 = fresh.restored(states, 2, "ckpt");
    const at::Tensor continued = draw(rank0, cpu), of_rank1 = draw(resumed1, cpu);
    CHECK(at::equal(draw(resumed0, cpu), continued));  // rank 0 goes on exactly
    CHECK(at::equal(draw(resumed1_again, cpu), of_rank1));
    CHECK_FALSE(at::equal(of_rank1, continued));
    CHECK_FALSE(at::equal(draw(resumed2, cpu), of_rank1));
}

TEST_CASE("a CUDA trainer's checkpoint carries its GPU generator: resume and a second trainer as on the CPU",
          "[checkpoint][cuda]") {
    std::filesystem::path dir;
    if (!test::have_cuda_artifact(&dir)) return;
    {
        std::ifstream in(dir / "manifest.json");
        REQUIRE(nlohmann::json::parse(in)["model"].value("dropout", 0.0) > 0.0);
    }
    check_resume(dir, false);
    check_independent_trainers(dir, false);

    // Philox is counter based: rank 1 resuming rank 0's state draws what it would have drawn.
    const c10::Device gpu(c10::DeviceType::CUDA, 0);
    gpt::TrainerRng rank0(gpu, 1337), rank1(gpu, 1338);
    draw(rank0, gpu);
    draw(rank1, gpu);
    gpt::TrainerRng resumed1 = gpt::TrainerRng(gpu, 5).restored(rank0.states(), 1, "ckpt");
    CHECK(at::equal(draw(resumed1, gpu), draw(rank1, gpu)));

    // A checkpoint without the GPU's state (a CPU trainer's, an older runtime's) still loads, with a warning.
    test::ScratchArtifact scratch(dir);
    const auto path = scratch.dir().parent_path() / "ckpt.safetensors";
    test::Model model(dir, 1, 1);
    REQUIRE(model.status == GPT_OK);
    Trainer trainer(model.handle);
    REQUIRE(gpt_trainer_save(trainer.handle, path.c_str()) == GPT_OK);
    CHECK(test::read_safetensors(path).count("rng.cuda") == 1);
    edit_checkpoint(path, [](std::map<std::string, at::Tensor> &tensors) { tensors.erase("rng.cuda"); });
    test::LogCapture log;
    CHECK(gpt_trainer_load(trainer.handle, path.c_str()) == GPT_OK);
    CHECK(log.saw("carries no 'rng.cuda'"));
}

TEST_CASE("a failed step and a bad checkpoint change nothing", "[checkpoint]") {
    test::ScratchArtifact scratch(test::artifact("math"));
    const auto path = scratch.dir().parent_path() / "ckpt.safetensors";
    test::Model model(test::artifact("math"));
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

    // A generator state torch refuses (mt19937's `left` at 0, bytes 8..11 of the CPU state) is
    // refused before anything changes, as is a missing one.
    run_steps(trainer.handle, 2, 3);
    const at::Tensor stepped = model.handle->impl->weight("lm_head.weight").clone();
    const auto bad_rng = scratch.dir().parent_path() / "bad_rng.safetensors";
    std::filesystem::copy_file(path, bad_rng);
    edit_checkpoint(bad_rng,
                    [](std::map<std::string, at::Tensor> &tensors) { tensors.at("rng.cpu").narrow(0, 8, 4).zero_(); });
    CHECK(gpt_trainer_load(trainer.handle, bad_rng.c_str()) == GPT_ERR_ARTIFACT_INVALID);
    CHECK(test::error_mentions("invalid 'rng.cpu'"));
    edit_checkpoint(bad_rng, [](std::map<std::string, at::Tensor> &tensors) { tensors.erase("rng.cpu"); });
    CHECK(gpt_trainer_load(trainer.handle, bad_rng.c_str()) == GPT_ERR_ARTIFACT_INVALID);
    CHECK(at::equal(stepped, model.handle->impl->weight("lm_head.weight")));
    gpt_trainer_state state;
    REQUIRE(gpt_trainer_get_state(trainer.handle, &state, sizeof state) == GPT_OK);
    CHECK(state.iteration == 3);
}

TEST_CASE("SIGKILL during checkpoint writes always leaves a loadable checkpoint", "[checkpoint]") {
    test::ScratchArtifact scratch(test::artifact("math"));
    const auto dir = scratch.dir().parent_path();
    const std::string path = (dir / "ckpt.safetensors").string();
    // Built beside this test program (tests/CMakeLists.txt).
    const std::string writer_path =
        (std::filesystem::read_symlink("/proc/self/exe").parent_path() / "checkpoint_writer").string();
    REQUIRE(std::filesystem::exists(writer_path));

    test::Model model(test::artifact("math"));
    REQUIRE(model.status == GPT_OK);
    Trainer reader(model.handle);
    std::mt19937 rng(5);
    int64_t last_iteration = 0;
    const int rounds = 30;
    for (int round = 0; round < rounds; ++round) {
        int out = -1;  // the writer's stdout
        const pid_t pid = test::spawn_with_stdout({writer_path, test::artifact("math").string(), path}, &out);
        REQUIRE(pid > 0);
        char ready[6] = {};
        REQUIRE(read(out, ready, 6) == 6);  // "ready\n": the model is loaded, saves begin
        // Let 1..4 saves complete (however slow this machine is), then kill at a random
        // point of the next step + save.
        const int saves = 1 + static_cast<int>(rng() % 4);
        for (int seen = 0; seen < saves;) {
            char c = 0;
            REQUIRE(read(out, &c, 1) == 1);
            seen += c == '\n';
        }
        std::this_thread::sleep_for(std::chrono::microseconds(rng() % 3000));
        REQUIRE(kill(pid, SIGKILL) == 0);
        int status = 0;
        REQUIRE(waitpid(pid, &status, 0) == pid);
        REQUIRE(WIFSIGNALED(status));
        close(out);

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
    const auto root = test::artifact("math").parent_path().parent_path();
    const auto ref = test::read_safetensors(root / "reference_train.safetensors");
    test::Model model(test::artifact("math"));
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
