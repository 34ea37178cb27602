// logprobs_json.cpp — see logprobs_json.h.
#include "api/logprobs_json.h"

#include "api/generate.h"

namespace server {

namespace {

using nlohmann::json;

// Code points before byte `bytes` of `text`: OpenAI's text_offset counts characters, not bytes.
size_t characters(const std::string &text, size_t bytes) {
    size_t n = 0;
    for (size_t i = 0; i < bytes && i < text.size(); ++i)
        if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) ++n;
    return n;
}

}  // namespace

void Logprobs::add(const TokenEvent &e, const std::string &text, size_t offset) {
    tokens_.push_back(token_text(e.token));
    token_logprobs_.push_back(e.logprobs.at(0).logprob);
    json top = json::object();
    for (size_t i = 1; i < e.logprobs.size(); ++i)
        if (e.logprobs[i].token != GPT_TOKEN_NONE) top[token_text(e.logprobs[i].token)] = e.logprobs[i].logprob;
    top_logprobs_.push_back(top);
    text_offset_.push_back(characters(text, offset));
}

json Logprobs::to_json() const {
    return {{"tokens", tokens_},
            {"token_logprobs", token_logprobs_},
            {"top_logprobs", top_logprobs_},
            {"text_offset", text_offset_}};
}

std::string Logprobs::token_text(gpt_token t) const {
    return as_ids_ ? "token_id:" + std::to_string(t) : detokenize(*model_, {t});
}

}  // namespace server
