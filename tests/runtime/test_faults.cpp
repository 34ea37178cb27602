// Faults from outside the call: a write that fails half way through a checkpoint
// save, artifact files changed on disk under a loaded model, and requests larger
// than the manifest's sizes allow. Each ends in a clear status with nothing lost.
#include <sys/resource.h>

#include <catch2/catch.hpp>

#include <csignal>
#include <fstream>
#include <string>
#include <vector>

#include "exec/model.h"
#include "test_support.h"

namespace {

std::string read_all(const std::filesystem::path &path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

// Files in `dir` other than `keep`: a failed save must leave none behind.
std::vector<std::string> strays(const std::filesystem::path &dir, const std::string &keep) {
    std::vector<std::string> out;
    for (const auto &e : std::filesystem::directory_iterator(dir))
        if (e.path().filename() != keep) out.push_back(e.path().filename().string());
    return out;
}

// Saves with the process's file size limit set to `limit` bytes, as a full disk
// or a quota would stop the write. SIGXFSZ is ignored so write() reports EFBIG.
gpt_status save_with_file_size_limit(gpt_trainer *trainer, const std::string &path, rlim_t limit) {
    rlimit old{};
    REQUIRE(getrlimit(RLIMIT_FSIZE, &old) == 0);
    const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
    rlimit tight = old;
    tight.rlim_cur = limit;
    REQUIRE(setrlimit(RLIMIT_FSIZE, &tight) == 0);
    const gpt_status s = gpt_trainer_save(trainer, path.c_str());
    REQUIRE(setrlimit(RLIMIT_FSIZE, &old) == 0);
    std::signal(SIGXFSZ, old_handler);
    return s;
}

std::vector<gpt_token> greedy(gpt_model *model, const std::vector<gpt_token> &prompt) {
    test::Session session(model);
    gpt_generate_params p = test::default_generate_params();
    p.max_new_tokens = 16;
    p.temperature = 0.0f;
    std::vector<gpt_token> out(16);
    int32_t n = 0;
    REQUIRE(gpt_session_generate(session.handle, prompt.data(), static_cast<int32_t>(prompt.size()), &p, out.data(), 16,
                                 &n) == GPT_OK);
    out.resize(static_cast<size_t>(n));
    return out;
}

using test::flip_byte;

}  // namespace

TEST_CASE("WriteErrorDuringSaveKeepsThePreviousCheckpointAndLeavesNoTemporaryFile", "[faults]") {
    test::ScratchArtifact scratch(test::artifact("math"));
    const auto dir = scratch.dir().parent_path() / "checkpoints";
    std::filesystem::create_directory(dir);
    const std::string path = (dir / "ckpt.safetensors").string();
    test::Model model(scratch.dir());
    REQUIRE(model.status == GPT_OK);
    gpt_trainer *trainer = nullptr;
    REQUIRE(gpt_trainer_create(model.handle, nullptr, &trainer) == GPT_OK);
    std::vector<gpt_token> x(32), y(32);
    for (int i = 0; i < 32; ++i) x[i] = i % 50, y[i] = (i + 1) % 50;
    float loss = 0.0f;
    REQUIRE(gpt_trainer_step(trainer, x.data(), y.data(), 2, 16, 1, &loss) == GPT_OK);
    REQUIRE(gpt_trainer_save(trainer, path.c_str()) == GPT_OK);
    const std::string saved = read_all(path);
    REQUIRE(gpt_trainer_step(trainer, x.data(), y.data(), 2, 16, 1, &loss) == GPT_OK);  // iteration 2, unsaved

    // The write stops at the start, after a byte, inside the header, half way, one byte short.
    const std::vector<rlim_t> limits = {0, 1, 8, 4096, saved.size() / 2, saved.size() - 1};
    int trials = 0;
    for (int round = 0; round < 3; ++round)
        for (rlim_t limit : limits) {
            INFO("file size limit " << limit);
            CHECK(save_with_file_size_limit(trainer, path, limit) == GPT_ERR_IO);
            CHECK(std::string(gpt_runtime_last_error()).find("ckpt.safetensors") != std::string::npos);
            CHECK(read_all(path) == saved);
            CHECK(strays(dir, "ckpt.safetensors").empty());
            ++trials;
        }
    CHECK(trials == 18);

    // The previous checkpoint is whole: it loads and rewinds the trainer to iteration 1.
    REQUIRE(gpt_trainer_load(trainer, path.c_str()) == GPT_OK);
    gpt_trainer_state state{};
    REQUIRE(gpt_trainer_get_state(trainer, &state, sizeof state) == GPT_OK);
    CHECK(state.iteration == 1);
    // And once the limit is lifted the same trainer saves normally.
    CHECK(gpt_trainer_save(trainer, path.c_str()) == GPT_OK);
    gpt_trainer_free(trainer);
}

TEST_CASE("SaveIntoAMissingOrReadOnlyDirectoryIsAnIoError", "[faults]") {
    test::Model model(test::artifact("math"));
    REQUIRE(model.status == GPT_OK);
    gpt_trainer *trainer = nullptr;
    REQUIRE(gpt_trainer_create(model.handle, nullptr, &trainer) == GPT_OK);
    CHECK(gpt_trainer_save(trainer, "/nonexistent/dir/ckpt.safetensors") == GPT_ERR_IO);
    CHECK(std::string(gpt_runtime_last_error()).find("/nonexistent/dir") != std::string::npos);
    gpt_trainer_free(trainer);
}

TEST_CASE("ArtifactChangedOnDiskAfterLoadDoesNotAffectTheModelAndReloadDetectsIt", "[faults]") {
    test::ScratchArtifact art(test::artifact("flash"));
    test::Model model(art.dir());
    REQUIRE(model.status == GPT_OK);
    const std::vector<gpt_token> prompt = {40, 69, 2};
    const auto before = greedy(model.handle, prompt);

    // Every file the model was loaded from is changed under it.
    for (const char *name :
         {"weights.safetensors", "prefill.pt2", "decode.pt2", "decode_one.pt2", "tokenizer.json", "golden.safetensors"})
        flip_byte(art.file(name), static_cast<std::streamoff>(std::filesystem::file_size(art.file(name)) / 2));
    CHECK(greedy(model.handle, prompt) == before);
    double err = 0;
    CHECK(gpt_model_verify(model.handle, &err) == GPT_OK);

    gpt_model *reloaded = nullptr;
    CHECK(gpt_model_load(art.dir().c_str(), nullptr, &reloaded) == GPT_ERR_ARTIFACT_HASH);
    CHECK(reloaded == nullptr);

    // Even with the directory gone, the loaded model keeps working from its verified copy.
    test::remove_tree(art.dir());
    CHECK(greedy(model.handle, prompt) == before);
}

TEST_CASE("OversizedPromptAndBatchAreRefusedBeforeAnyMemoryIsTouched", "[faults]") {
    test::Model model(test::artifact("math"));
    REQUIRE(model.status == GPT_OK);
    test::Session session(model.handle);
    // The buffers hold 2 tokens; the counts claim far more. The manifest's sizes
    // refuse the call before a single token is read or a buffer allocated for it.
    const gpt_token two[2] = {1, 2};
    gpt_token out[4] = {0};
    int32_t n = -1;
    gpt_generate_params p = test::default_generate_params();
    p.max_new_tokens = 4;
    CHECK(gpt_session_generate(session.handle, two, INT32_MAX, &p, out, 4, &n) == GPT_ERR_OUT_OF_RANGE);
    CHECK(std::string(gpt_runtime_last_error()).find("exceeds the context") != std::string::npos);
    CHECK(n == -1);
    std::vector<float> logits(static_cast<size_t>(model.info.vocab_size));
    CHECK(gpt_session_prefill(session.handle, two, model.info.block_size + 1, logits.data()) == GPT_ERR_OUT_OF_RANGE);

    gpt_trainer *trainer = nullptr;
    REQUIRE(gpt_trainer_create(model.handle, nullptr, &trainer) == GPT_OK);
    float loss = -1.0f;
    const int32_t max_batch = model.handle->impl->manifest().training->train_step.max_batch;
    CHECK(gpt_trainer_step(trainer, two, two, max_batch + 1, 16, 1, &loss) == GPT_ERR_INVALID_ARGUMENT);
    CHECK(gpt_trainer_step(trainer, two, two, 1 << 30, 16, 1, &loss) == GPT_ERR_INVALID_ARGUMENT);
    CHECK(gpt_trainer_step(trainer, two, two, 1, model.info.block_size + 1, 1, &loss) == GPT_ERR_OUT_OF_RANGE);
    CHECK(gpt_trainer_eval(trainer, two, two, INT32_MAX, INT32_MAX, &loss) == GPT_ERR_INVALID_ARGUMENT);
    CHECK(loss == -1.0f);
    gpt_trainer_free(trainer);
}
