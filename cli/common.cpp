// common.cpp — see common.h.
#include "common.h"

#include <cstdio>
#include <vector>

namespace cli {

int report(gpt_status status) {
    std::fprintf(stderr, "gpt: %s: %s\n", gpt_status_to_string(status), gpt_runtime_last_error());
    return 1;
}

LoadedModel::LoadedModel(const std::string &dir, int threads) {
    gpt_model_params params;
    gpt_model_default_params(&params, sizeof params);
    params.num_threads = threads;
    status = gpt_model_load(dir.c_str(), &params, &model);
}

LoadedModel::~LoadedModel() { gpt_model_free(model); }

namespace {

bool print_token(gpt_token token, void *user_data) {
    auto *model = static_cast<gpt_model *>(user_data);
    char piece[16];
    size_t size = 0;
    if (gpt_model_detokenize(model, &token, 1, piece, sizeof piece, &size) == GPT_OK) {
        std::fputs(piece, stdout);
    } else {
        std::printf("<%d>", token);
    }
    std::fflush(stdout);
    return true;
}

}  // namespace

gpt_status stream_sample(gpt_model *model, const SampleOptions &o) {
    int32_t n_prompt = 0;
    gpt_status s = gpt_model_tokenize(model, o.prompt.c_str(), nullptr, 0, &n_prompt);
    if (s != GPT_OK && s != GPT_ERR_BUFFER_TOO_SMALL) return s;
    std::vector<gpt_token> prompt(static_cast<size_t>(n_prompt));
    if ((s = gpt_model_tokenize(model, o.prompt.c_str(), prompt.data(), n_prompt, &n_prompt)) != GPT_OK) return s;

    gpt_session *session = nullptr;
    if ((s = gpt_session_create(model, &session)) != GPT_OK) return s;
    gpt_generate_params p;
    gpt_generate_default_params(&p, sizeof p);
    p.max_new_tokens = o.n;
    p.seed = o.seed;
    p.temperature = o.temperature;
    p.top_k = o.top_k;
    p.top_p = o.top_p;
    p.on_token = print_token;
    p.user_data = model;
    std::vector<gpt_token> out(static_cast<size_t>(o.n > 0 ? o.n : 0));
    int32_t count = 0;
    std::fputs(o.prompt.c_str(), stdout);
    s = gpt_session_generate(session, prompt.data(), n_prompt, &p, out.data(), o.n, &count);
    std::fputs("\n", stdout);
    gpt_session_free(session);
    return s;
}

}  // namespace cli
