// generate.cpp — see generate.h.
#include "generate.h"

#include <cmath>

namespace server {

namespace {

// The text `token` completes, through the stream's detokenizer (a BPE token can
// end inside a character: its bytes wait for the next token).
std::string piece_of(gpt_detokenizer *detokenizer, gpt_token token) {
    if (detokenizer == nullptr) return "";
    char text[64];
    size_t size = 0;
    gpt_status s = gpt_detokenizer_push(detokenizer, token, text, sizeof text, &size);
    if (s == GPT_OK) return std::string(text, size - 1);
    if (s != GPT_ERR_BUFFER_TOO_SMALL) return "";
    std::string big(size, '\0');
    if (gpt_detokenizer_push(detokenizer, token, big.data(), big.size(), &size) != GPT_OK) return "";
    big.resize(size - 1);
    return big;
}

struct CallbackState {
    gpt_detokenizer *detokenizer;
    const GenerationControl *control;
    GenerationResult *result;
    Clock::time_point last;
    bool client_gone = false;
    bool timed_out = false;
    bool shutting_down = false;
};

bool on_token(gpt_token token, void *user_data) {
    auto &st = *static_cast<CallbackState *>(user_data);
    const Clock::time_point now = Clock::now();
    GenerationResult &r = *st.result;
    if (r.tokens.empty()) {
        r.time_to_first_token = std::chrono::duration<double>(now - st.control->started).count();
    } else if (st.control->on_gap) {
        st.control->on_gap(std::chrono::duration<double>(now - st.last).count());
    }
    st.last = now;
    const std::string piece = piece_of(st.detokenizer, token);
    r.tokens.push_back(token);
    r.text += piece;
    if (st.control->sink && !st.control->sink(token, piece)) return !(st.client_gone = true);
    if (now >= st.control->deadline) return !(st.timed_out = true);
    if (st.control->stop_all->load()) return !(st.shutting_down = true);
    return true;
}

}  // namespace

std::vector<gpt_token> tokenize_prompt(const ServedModel &model, const std::string &prompt) {
    int32_t n = 0;
    gpt_status s = gpt_model_tokenize(model.model, prompt.c_str(), nullptr, 0, &n);
    if (s != GPT_ERR_BUFFER_TOO_SMALL && s != GPT_OK)
        throw BadRequest(std::string("prompt: ") + gpt_runtime_last_error());
    if (n == 0) throw BadRequest("prompt encodes to no tokens");
    if (n > model.info.block_size)
        throw BadRequest("prompt is " + std::to_string(n) + " tokens, the model's context is " +
                         std::to_string(model.info.block_size));
    std::vector<gpt_token> tokens(static_cast<size_t>(n));
    if (gpt_model_tokenize(model.model, prompt.c_str(), tokens.data(), n, &n) != GPT_OK)
        throw BadRequest(std::string("prompt: ") + gpt_runtime_last_error());
    return tokens;
}

GenerationResult run_generation(const ServedModel &model, const std::vector<gpt_token> &prompt,
                                const GenerateRequest &request, const GenerationControl &control) {
    GenerationResult result;
    gpt_detokenizer *detokenizer = nullptr;
    if ((result.status = gpt_detokenizer_create(model.model, &detokenizer)) != GPT_OK) {
        result.error = gpt_runtime_last_error();
        return result;
    }
    CallbackState state{detokenizer, &control, &result, control.started};
    gpt_session *session = nullptr;
    if ((result.status = gpt_session_create(model.model, &session)) != GPT_OK) {
        result.error = gpt_runtime_last_error();
        gpt_detokenizer_free(detokenizer);
        return result;
    }
    gpt_generate_params p;
    gpt_generate_default_params(&p, sizeof p);
    p.max_new_tokens = request.max_tokens;
    p.temperature = request.temperature;
    p.top_k = request.top_k;
    p.top_p = request.top_p;
    p.seed = request.seed;
    p.on_token = on_token;
    p.user_data = &state;
    std::vector<gpt_token> out(static_cast<size_t>(request.max_tokens));
    int32_t count = 0;
    result.status = gpt_session_generate(session, prompt.data(), static_cast<int32_t>(prompt.size()), &p, out.data(),
                                         request.max_tokens, &count);
    if (result.status != GPT_OK) result.error = gpt_runtime_last_error();
    gpt_session_free(session);
    gpt_detokenizer_free(detokenizer);  // a character left incomplete at the end is not text: dropped
    if (result.status == GPT_OK) {
        result.finish_reason = count < request.max_tokens ? "stop" : "length";  // "stop": the model's EOS
    } else if (result.status == GPT_ERR_ABORTED) {  // our callback stopped it: the reason says why
        result.finish_reason = state.client_gone ? "cancelled" : state.timed_out ? "timeout" : "shutdown";
        result.error.clear();
    }
    return result;
}

}  // namespace server
