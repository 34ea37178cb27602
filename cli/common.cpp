// common.cpp — see common.h.
#include "common.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace cli {

int report(gpt_status status) {
    std::fprintf(stderr, "gpt: %s: %s\n", gpt_status_to_string(status), gpt_runtime_last_error());
    return 1;
}

LoadedModel::LoadedModel(const std::string &path, int threads, bool allow_cpu_fallback) {
    std::string dir = path;  // without fallback, gpt_model_load makes the same choice itself
    if (allow_cpu_fallback) {
        size_t size = 0;
        status = gpt_artifact_select(path.c_str(), GPT_ARTIFACT_ALLOW_CPU_FALLBACK, nullptr, 0, &size);
        if (status != GPT_ERR_BUFFER_TOO_SMALL) return;
        dir.assign(size, '\0');
        if ((status = gpt_artifact_select(path.c_str(), GPT_ARTIFACT_ALLOW_CPU_FALLBACK, dir.data(), size, &size)) !=
            GPT_OK)
            return;
        dir.resize(size - 1);
    }
    gpt_model_params params;
    gpt_model_default_params(&params, sizeof params);
    params.num_threads = threads;
    status = gpt_model_load(dir.c_str(), &params, &model);
    // An artifact is a shared library now running in this process; without keys nothing checked who built it.
    if (status == GPT_OK && std::getenv("GPT_TRUSTED_KEYS") == nullptr)
        std::fprintf(stderr,
                     "gpt: warning: %s is unverified: no signature was checked (GPT_TRUSTED_KEYS is not set), so its "
                     "compiled code runs as it is; set GPT_TRUSTED_KEYS to a .pub file or a directory of them to "
                     "load signed artifacts only\n",
                     dir.c_str());
}

LoadedModel::~LoadedModel() { gpt_model_free(model); }

namespace {

// What the token callback prints through: the detokenizer when the model has text.
struct Printer {
    gpt_detokenizer *detokenizer = nullptr;
};

// Writes `text` (its size with the NUL) from a detokenizer call that may need a larger buffer.
template <typename Call>
void print_text(Call call) {
    char small[64];
    size_t size = 0;
    gpt_status s = call(small, sizeof small, &size);
    if (s == GPT_OK) {
        std::fwrite(small, 1, size - 1, stdout);
    } else if (s == GPT_ERR_BUFFER_TOO_SMALL) {
        std::vector<char> big(size);
        if (call(big.data(), big.size(), &size) == GPT_OK) std::fwrite(big.data(), 1, size - 1, stdout);
    }
}

bool print_token(gpt_token token, void *user_data) {
    const auto *printer = static_cast<const Printer *>(user_data);
    if (printer->detokenizer == nullptr) {
        std::printf("<%d>", token);
    } else {
        print_text([&](char *text, size_t capacity, size_t *size) {
            return gpt_detokenizer_push(printer->detokenizer, token, text, capacity, size);
        });
    }
    std::fflush(stdout);
    return true;
}

gpt_status prompt_tokens(gpt_model *model, const SampleOptions &o, std::vector<gpt_token> *prompt) {
    if (!o.prompt_ids.empty()) {
        *prompt = o.prompt_ids;
        return GPT_OK;
    }
    int32_t n_prompt = 0;
    gpt_status s = gpt_model_tokenize(model, o.prompt.c_str(), nullptr, 0, &n_prompt);
    if (s != GPT_OK && s != GPT_ERR_BUFFER_TOO_SMALL) return s;
    prompt->resize(static_cast<size_t>(n_prompt));
    return gpt_model_tokenize(model, o.prompt.c_str(), prompt->data(), n_prompt, &n_prompt);
}

}  // namespace

std::string sample_options_problem(const SampleOptions &o) {
    // The runtime's wording (exec/session.cpp, abi/c_api_session.cpp), so either refusal reads the same.
    if (o.n <= 0) return "max_new_tokens must be > 0";
    if (o.top_k < 0 || !(o.top_p > 0.0f && o.top_p <= 1.0f) || !(o.temperature >= 0.0f))
        return "need temperature >= 0, top_k >= 0 and 0 < top_p <= 1";
    return "";
}

gpt_status stream_sample(gpt_model *model, const SampleOptions &o) {
    std::vector<gpt_token> prompt;
    gpt_status s = prompt_tokens(model, o, &prompt);
    if (s != GPT_OK) return s;
    Printer printer;
    gpt_model_info info;
    if ((s = gpt_model_get_info(model, &info, sizeof info)) != GPT_OK) return s;
    if (std::string(info.tokenizer) != "none" && (s = gpt_detokenizer_create(model, &printer.detokenizer)) != GPT_OK)
        return s;

    gpt_session *session = nullptr;
    if ((s = gpt_session_create(model, &session)) != GPT_OK) {
        gpt_detokenizer_free(printer.detokenizer);
        return s;
    }
    gpt_generate_params p;
    gpt_generate_default_params(&p, sizeof p);
    p.max_new_tokens = o.n;
    p.seed = o.seed;
    p.temperature = o.temperature;
    p.top_k = o.top_k;
    p.top_p = o.top_p;
    p.stop_at_eos = !o.ignore_eos;
    p.on_token = print_token;
    p.user_data = &printer;
    // The prompt is echoed as the model reads it: its ids decoded through the same detokenizer.
    for (const gpt_token token : prompt) print_token(token, &printer);
    std::vector<gpt_token> out(static_cast<size_t>(o.n > 0 ? o.n : 0));
    int32_t count = 0;
    s = gpt_session_generate(session, prompt.data(), static_cast<int32_t>(prompt.size()), &p, out.data(), o.n, &count);
    if (printer.detokenizer != nullptr)
        print_text([&](char *text, size_t capacity, size_t *size) {
            return gpt_detokenizer_flush(printer.detokenizer, text, capacity, size);
        });
    std::fputs("\n", stdout);
    gpt_session_free(session);
    gpt_detokenizer_free(printer.detokenizer);
    return s;
}

}  // namespace cli
