// test_support.h — helpers shared by the runtime tests: where the compiled test
// artifacts are, scratch copies to corrupt, and RAII wrappers over the C handles.
#pragma once

#include <ATen/Tensor.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <functional>
#include <ios>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "gpt_runtime.h"

namespace test {

// build/test_artifacts/tiny-<attention>/cpu, from GPT_TEST_ARTIFACTS.
std::filesystem::path artifact(const std::string &attention = "flash");
// build/test_artifacts/long-context/cpu: a small model with a context of 1024 tokens.
std::filesystem::path long_context_artifact();
// build/test_artifacts/tiny-cuda/<sm_XX> into *dir; it is compiled only where a GPU
// is present, so otherwise false after a printed notice that the case is skipped.
bool have_cuda_artifact(std::filesystem::path *dir);
// Eager PyTorch references written beside the artifacts.
std::map<std::string, at::Tensor> reference();

std::map<std::string, at::Tensor> read_safetensors(const std::filesystem::path &path);
void write_safetensors(const std::filesystem::path &path, const std::map<std::string, at::Tensor> &tensors);

// Removes `path` and everything below it (nftw; links are removed, not followed); missing is fine.
// Never std::filesystem::remove_all: libtorch exports a static copy of it (pytorch#133437) that
// crashes with a newer libstdc++ (seen: torch 2.11 on Ubuntu 24.04), and which copy a test binary
// gets depends on the order its libraries load in.
void remove_tree(const std::filesystem::path &path);

// A private copy of an artifact directory, removed at scope exit. It sits in a
// model directory as its `cpu` target: <tmp>/cpu.
class ScratchArtifact {
public:
    explicit ScratchArtifact(const std::filesystem::path &source);
    ~ScratchArtifact();
    const std::filesystem::path &dir() const { return dir_; }
    std::filesystem::path model_dir() const { return dir_.parent_path(); }
    // Another copy beside it, <tmp>/<name>, whose manifest names `target` (e.g. a GPU arch).
    std::filesystem::path add_target(const std::string &name, const nlohmann::json &target) const;
    std::filesystem::path file(const std::string &name) const { return dir_ / name; }
    nlohmann::json manifest() const;
    void write_manifest(const nlohmann::json &manifest) const;
    // Rewrites the manifest's size and sha256 of `name` to match the file on disk.
    void rehash(const std::string &name) const;

private:
    std::filesystem::path dir_;
};

// Rewrites the char tokenizer of `artifact` (a tiny-* copy) to keep only its first `n_text` characters, and
// rehashes it: ids n_text..vocab_size - 1 then have no text, as nanoGPT's vocab_size 50304 has 47 ids past
// GPT-2's 50257 tokens. Their logits stay as the model computes them (the tiny models' are random).
void keep_text_of_first(const ScratchArtifact &artifact, int32_t n_text);

// Captures the library's log lines (at debug level) so a test can prove which load stages ran.
class LogCapture {
public:
    LogCapture();
    ~LogCapture();
    LogCapture(const LogCapture &) = delete;
    LogCapture &operator=(const LogCapture &) = delete;
    bool saw(const std::string &needle);

private:
    std::mutex mutex_;
    std::vector<std::string> lines_;
};

// The library's defaults, as a C caller gets them (*_default_params with its sizeof).
gpt_generate_params default_generate_params();
gpt_trainer_params default_trainer_params();
// The schedule of the eager reference run (TRAIN in tests/fixtures/build_artifacts.py).
gpt_trainer_params reference_trainer_params();

// The weights bytes gpt_model_get_memory reports for the artifact in `dir`; 0 if it does not load.
uint64_t loaded_weights_bytes(const std::filesystem::path &dir);
// What the artifact in `dir` stores: its manifest, its weights file's tensors and their bytes.
struct StoredWeights {
    nlohmann::json manifest;
    std::map<std::string, at::Tensor> tensors;
    uint64_t bytes = 0;
};
StoredWeights stored_weights(const std::filesystem::path &dir);
// The bytes of `tensors`' linear weights of `dtype` (names ending in ".weight"): what a packed form copies.
uint64_t linear_weight_bytes(const std::map<std::string, at::Tensor> &tensors, at::ScalarType dtype);
// gpt_model_verify's largest error against the golden vector; -1 if verification fails.
double golden_error(gpt_model *model);

// Starts argv[0] with `argv` and its stdout piped to *stdout_fd (which the caller closes); the child's pid,
// or -1 when it could not be started.
int spawn_with_stdout(const std::vector<std::string> &argv, int *stdout_fd);

// Whether this thread's gpt_runtime_last_error() contains `needle`.
bool error_mentions(const std::string &needle);
// Flips one bit (0x20) of the byte at `offset` in place.
void flip_byte(const std::filesystem::path &file, std::streamoff offset);

// Samples `n` tokens after `prompt` in a fresh session (temperature 1, top-k 20,
// top-p 0.95). Sets *status; no Catch2 assertions, so worker threads may call it.
std::vector<gpt_token> try_generate(gpt_model *model, const std::vector<gpt_token> &prompt, uint64_t seed, int n,
                                    gpt_status *status);

struct Model {
    gpt_model *handle = nullptr;
    gpt_status status = GPT_OK;
    gpt_model_info info{};  // filled when the load succeeds
    explicit Model(const std::filesystem::path &dir, int num_runners = 1, int num_threads = 0, uint64_t flags = 0);
    ~Model() { gpt_model_free(handle); }
};

struct Session {
    gpt_session *handle = nullptr;
    explicit Session(gpt_model *model, int32_t n_seq = 1);  // n_seq > 1: gpt_session_create_batch
    ~Session() { gpt_session_free(handle); }
};

}  // namespace test
