// test_support.cpp — see test_support.h.
#include "test_support.h"

#include <catch2/catch.hpp>

#include <ftw.h>
#include <spawn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

#include "exec/safetensors.h"
#include "formats/files.h"
#include "formats/integrity.h"

namespace test {

namespace {

std::filesystem::path artifacts_root() {
    const char *root = std::getenv("GPT_TEST_ARTIFACTS");
    if (root == nullptr || !std::filesystem::exists(root))
        FAIL(
            "GPT_TEST_ARTIFACTS must name the directory made by tests/fixtures/build_artifacts.py "
            "(scripts/test.sh does this)");
    return root;
}

std::vector<unsigned char> read_bytes(const std::filesystem::path &path) {
    std::ifstream in(path, std::ios::binary);
    return std::vector<unsigned char>(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

std::filesystem::path artifact(const std::string &attention) {
    return artifacts_root() / ("tiny-" + attention) / "cpu";
}

std::filesystem::path long_context_artifact() { return artifacts_root() / "long-context" / "cpu"; }

bool have_cuda_artifact(std::filesystem::path *dir) {
    const auto root = artifacts_root() / "tiny-cuda";
    if (std::filesystem::is_directory(root))
        for (const auto &entry : std::filesystem::directory_iterator(root))
            if (std::filesystem::exists(entry.path() / "manifest.json")) {
                *dir = entry.path();
                return true;
            }
    WARN("skipped: no CUDA test artifact (tests/fixtures/build_artifacts.py builds one on a GPU)");
    return false;
}

std::map<std::string, at::Tensor> reference() { return read_safetensors(artifacts_root() / "reference.safetensors"); }

std::map<std::string, at::Tensor> read_safetensors(const std::filesystem::path &path) {
    const auto bytes = read_bytes(path);
    return gpt::parse_safetensors(bytes.data(), bytes.size(), path.filename().string());
}

void write_safetensors(const std::filesystem::path &path, const std::map<std::string, at::Tensor> &tensors) {
    gpt::write_file_atomically(path.string(),
                               [&](const gpt::ByteSink &put) { gpt::write_safetensors(tensors, {}, put); });
}

void keep_text_of_first(const ScratchArtifact &artifact, int32_t n_text) {
    nlohmann::json tokenizer;
    std::ifstream(artifact.file("tokenizer.json")) >> tokenizer;
    REQUIRE(tokenizer["kind"] == "char");
    REQUIRE(tokenizer["itos"].size() > static_cast<size_t>(n_text));
    tokenizer["itos"].erase(tokenizer["itos"].begin() + n_text, tokenizer["itos"].end());
    std::ofstream(artifact.file("tokenizer.json")) << tokenizer.dump();
    artifact.rehash("tokenizer.json");
}

LogCapture::LogCapture() {
    setenv("GPT_LOG", "debug", 1);
    gpt_log_set_callback(
        [](gpt_log_level, const char *message, void *user) {
            auto *self = static_cast<LogCapture *>(user);
            std::lock_guard<std::mutex> lock(self->mutex_);
            self->lines_.emplace_back(message);
        },
        this);
}

LogCapture::~LogCapture() { gpt_log_set_callback(nullptr, nullptr); }

bool LogCapture::saw(const std::string &needle) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto &l : lines_)
        if (l.find(needle) != std::string::npos) return true;
    return false;
}

void remove_tree(const std::filesystem::path &path) {
    // Depth first, so each directory is empty when its turn comes; FTW_PHYS: a link is removed, not followed.
    const auto remove_one = [](const char *entry, const struct stat *, int, struct FTW *) {
        return std::remove(entry);
    };
    if (::access(path.c_str(), F_OK) != 0) return;
    REQUIRE(::nftw(path.c_str(), remove_one, 16, FTW_DEPTH | FTW_PHYS) == 0);
}

ScratchArtifact::ScratchArtifact(const std::filesystem::path &source) {
    std::string templ = (std::filesystem::temp_directory_path() / "gpt_test.XXXXXX").string();
    REQUIRE(mkdtemp(templ.data()) != nullptr);
    dir_ = std::filesystem::path(templ) / "cpu";
    std::filesystem::copy(source, dir_, std::filesystem::copy_options::recursive);
}

ScratchArtifact::~ScratchArtifact() { remove_tree(dir_.parent_path()); }

std::filesystem::path ScratchArtifact::add_target(const std::string &name, const nlohmann::json &target) const {
    const std::filesystem::path other = model_dir() / name;
    std::filesystem::copy(dir_, other, std::filesystem::copy_options::recursive);
    nlohmann::json m = manifest();
    m["target"] = target;
    std::ofstream(other / "manifest.json") << m.dump(2);
    return other;
}

nlohmann::json ScratchArtifact::manifest() const {
    std::ifstream in(file("manifest.json"));
    return nlohmann::json::parse(in);
}

void ScratchArtifact::write_manifest(const nlohmann::json &manifest) const {
    std::ofstream(file("manifest.json")) << manifest.dump(2);
}

void ScratchArtifact::rehash(const std::string &name) const {
    const auto bytes = read_bytes(file(name));
    auto m = manifest();
    m["files"][name]["size"] = bytes.size();
    m["files"][name]["sha256"] = gpt::sha256_hex(bytes.data(), bytes.size());
    write_manifest(m);
}

uint64_t loaded_weights_bytes(const std::filesystem::path &dir) {
    gpt_model *model = nullptr;
    if (gpt_model_load(dir.c_str(), nullptr, &model) != GPT_OK) return 0;
    gpt_memory_stats stats{};
    const gpt_status status = gpt_model_get_memory(model, &stats, sizeof stats);
    gpt_model_free(model);
    return status == GPT_OK ? stats.weights_bytes : 0;
}

StoredWeights stored_weights(const std::filesystem::path &dir) {
    StoredWeights stored;
    std::ifstream manifest_file(dir / "manifest.json");
    stored.manifest = nlohmann::json::parse(manifest_file);
    stored.tensors = read_safetensors(dir / "weights.safetensors");
    for (const auto &[name, tensor] : stored.tensors) stored.bytes += tensor.nbytes();
    return stored;
}

uint64_t linear_weight_bytes(const std::map<std::string, at::Tensor> &tensors, at::ScalarType dtype) {
    const std::string suffix = ".weight";
    uint64_t bytes = 0;
    for (const auto &[name, tensor] : tensors)
        if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0 &&
            tensor.scalar_type() == dtype)
            bytes += static_cast<uint64_t>(tensor.nbytes());
    return bytes;
}

double golden_error(gpt_model *model) {
    double err = -1;
    return gpt_model_verify(model, &err) == GPT_OK ? err : -1;
}

int spawn_with_stdout(const std::vector<std::string> &argv, int *stdout_fd) {
    std::vector<std::string> args = argv;
    std::vector<char *> pointers;
    for (std::string &a : args) pointers.push_back(a.data());
    pointers.push_back(nullptr);
    int out[2];
    if (pipe(out) != 0) return -1;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&actions, out[0]);
    pid_t pid = -1;
    const int spawned = posix_spawn(&pid, pointers[0], &actions, nullptr, pointers.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    close(out[1]);
    if (spawned != 0) {
        close(out[0]);
        return -1;
    }
    *stdout_fd = out[0];
    return pid;
}

bool error_mentions(const std::string &needle) {
    return std::string(gpt_runtime_last_error()).find(needle) != std::string::npos;
}

void flip_byte(const std::filesystem::path &file, std::streamoff offset) {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(offset);
    char c = 0;
    f.get(c);
    f.seekp(offset);
    f.put(static_cast<char>(c ^ 0x20));
}

// No Catch2 assertions (try_generate's worker threads call it): with a valid
// pointer and size the library cannot fail, and a struct left unfilled would be
// refused by the call it is passed to.
gpt_generate_params default_generate_params() {
    gpt_generate_params p{};
    gpt_generate_default_params(&p, sizeof p);
    return p;
}

gpt_trainer_params default_trainer_params() {
    gpt_trainer_params p{};
    gpt_trainer_default_params(&p, sizeof p);
    return p;
}

std::vector<gpt_token> try_generate(gpt_model *model, const std::vector<gpt_token> &prompt, uint64_t seed, int n,
                                    gpt_status *status) {
    gpt_session *session = nullptr;
    if ((*status = gpt_session_create(model, &session)) != GPT_OK) return {};
    gpt_generate_params p = default_generate_params();
    p.max_new_tokens = n;
    p.seed = seed;
    p.temperature = 1.0f;
    p.top_k = 20;
    p.top_p = 0.95f;
    std::vector<gpt_token> out(static_cast<size_t>(n));
    int32_t count = 0;
    *status =
        gpt_session_generate(session, prompt.data(), static_cast<int32_t>(prompt.size()), &p, out.data(), n, &count);
    gpt_session_free(session);
    out.resize(*status == GPT_OK ? static_cast<size_t>(count) : 0);
    return out;
}

gpt_trainer_params reference_trainer_params() {
    gpt_trainer_params p = default_trainer_params();
    p.learning_rate = 1e-2f;
    p.min_lr = 1e-3f;
    p.warmup_iters = 2;
    p.lr_decay_iters = 10;
    return p;
}

Model::Model(const std::filesystem::path &dir, int num_runners, int num_threads, uint64_t flags) {
    gpt_model_params params;
    gpt_model_default_params(&params, sizeof params);
    params.num_runners = num_runners;
    params.num_threads = num_threads;
    params.flags = flags;
    status = gpt_model_load(dir.c_str(), &params, &handle);
    if (status == GPT_OK) REQUIRE(gpt_model_get_info(handle, &info, sizeof info) == GPT_OK);
}

Session::Session(gpt_model *model, int32_t n_seq) {
    REQUIRE((n_seq == 1 ? gpt_session_create(model, &handle) : gpt_session_create_batch(model, n_seq, &handle)) ==
            GPT_OK);
}

}  // namespace test
