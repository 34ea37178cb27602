// gpt — command-line front end to libgpt_runtime, using only the public C API.
//   gpt info ART | gpt verify ART | gpt generate ART --prompt TEXT -n N --seed S
#include <CLI/CLI.hpp>

#include <cstdio>
#include <string>
#include <vector>

#include "gpt_runtime.h"

namespace {

int report(gpt_status status) {
    std::fprintf(stderr, "gpt: %s: %s\n", gpt_status_string(status), gpt_last_error());
    return 1;
}

// Owns a loaded model for the duration of a command.
struct LoadedModel {
    gpt_model *model = nullptr;
    gpt_status status = GPT_OK;
    explicit LoadedModel(const std::string &dir, int threads) {
        gpt_model_params params = gpt_model_default_params();
        params.num_threads = threads;
        status = gpt_model_load(dir.c_str(), &params, &model);
    }
    ~LoadedModel() { gpt_model_free(model); }
};

int cmd_info(const std::string &dir) {
    LoadedModel m(dir, 0);
    if (m.status != GPT_OK) return report(m.status);
    gpt_model_info info;
    if (gpt_status s = gpt_model_get_info(m.model, &info); s != GPT_OK) return report(s);
    std::printf(
        "artifact     %s\nname         %s\ntarget       %s %s\ndtype        %s\nattention    %s\n"
        "torch        %s (runtime %s)\ntokenizer    %s\nvocab_size   %d\nblock_size   %d\n"
        "n_layer      %d\nn_head       %d\nn_embd       %d\nmax_batch    %d\n",
        dir.c_str(), info.name, info.device, info.arch, info.dtype, info.attention, info.torch_version,
        gpt_runtime_version(), info.tokenizer, info.vocab_size, info.block_size, info.n_layer, info.n_head, info.n_embd,
        info.max_batch);
    return 0;
}

int cmd_verify(const std::string &dir) {
    LoadedModel m(dir, 0);
    if (m.status != GPT_OK) return report(m.status);
    double err = 0.0;
    const gpt_status s = gpt_model_verify(m.model, &err);
    if (s != GPT_OK) return report(s);
    std::printf("golden vector OK (max abs error %.3g)\n", err);
    return 0;
}

struct StreamState {
    gpt_model *model;
};

bool print_token(gpt_token token, void *user_data) {
    auto *state = static_cast<StreamState *>(user_data);
    char piece[16];
    size_t size = 0;
    if (gpt_detokenize(state->model, &token, 1, piece, sizeof piece, &size) == GPT_OK) {
        std::fputs(piece, stdout);
    } else {
        std::printf("<%d>", token);
    }
    std::fflush(stdout);
    return true;
}

struct GenerateOptions {
    std::string prompt = "\n";
    int n = 200;
    uint64_t seed = 0;
    float temperature = 0.8f;
    int top_k = 0;
    float top_p = 1.0f;
    int threads = 0;
};

int cmd_generate(const std::string &dir, const GenerateOptions &o) {
    LoadedModel m(dir, o.threads);
    if (m.status != GPT_OK) return report(m.status);
    int32_t n_prompt = 0;
    gpt_status s = gpt_tokenize(m.model, o.prompt.c_str(), nullptr, 0, &n_prompt);
    if (s != GPT_OK && s != GPT_ERR_BUFFER_TOO_SMALL) return report(s);
    std::vector<gpt_token> prompt(static_cast<size_t>(n_prompt));
    if ((s = gpt_tokenize(m.model, o.prompt.c_str(), prompt.data(), n_prompt, &n_prompt)) != GPT_OK) return report(s);

    gpt_session *session = nullptr;
    if ((s = gpt_session_create(m.model, &session)) != GPT_OK) return report(s);
    StreamState state{m.model};
    gpt_generate_params p = gpt_generate_default_params();
    p.max_new_tokens = o.n;
    p.seed = o.seed;
    p.temperature = o.temperature;
    p.top_k = o.top_k;
    p.top_p = o.top_p;
    p.on_token = print_token;
    p.user_data = &state;
    std::vector<gpt_token> out(static_cast<size_t>(o.n > 0 ? o.n : 0));
    int32_t count = 0;
    std::fputs(o.prompt.c_str(), stdout);
    s = gpt_session_generate(session, prompt.data(), n_prompt, &p, out.data(), o.n, &count);
    std::fputs("\n", stdout);
    gpt_session_free(session);
    return s == GPT_OK ? 0 : report(s);
}

int run(int argc, char **argv) {
    CLI::App app{"gpt: run ahead-of-time compiled GPT artifacts"};
    app.require_subcommand(1);
    std::string artifact;
    GenerateOptions gen;

    auto *info = app.add_subcommand("info", "describe an artifact");
    info->add_option("artifact", artifact, "artifact directory (model_artifacts/<name>/<target>)")->required();
    auto *verify = app.add_subcommand("verify", "run the golden vector; exit 0 only if it matches");
    verify->add_option("artifact", artifact, "artifact directory")->required();
    auto *generate = app.add_subcommand("generate", "generate text from a prompt");
    generate->add_option("artifact", artifact, "artifact directory")->required();
    generate->add_option("--prompt,-p", gen.prompt, "prompt text");
    generate->add_option("-n,--max-new-tokens", gen.n, "tokens to generate")->check(CLI::PositiveNumber);
    generate->add_option("--seed", gen.seed, "sampling seed");
    generate->add_option("--temperature", gen.temperature, "0 = greedy")->check(CLI::NonNegativeNumber);
    generate->add_option("--top-k", gen.top_k, "0 = off")->check(CLI::NonNegativeNumber);
    generate->add_option("--top-p", gen.top_p, "1 = off")->check(CLI::Range(0.0f, 1.0f));
    generate->add_option("--threads", gen.threads, "CPU threads, 0 = default")->check(CLI::NonNegativeNumber);

    CLI11_PARSE(app, argc, argv);
    if (*info) return cmd_info(artifact);
    if (*verify) return cmd_verify(artifact);
    return cmd_generate(artifact, gen);
}

}  // namespace

int main(int argc, char **argv) {
    try {
        return run(argc, argv);
    } catch (const std::exception &e) {
        std::fprintf(stderr, "gpt: %s\n", e.what());
        return 1;
    }
}
