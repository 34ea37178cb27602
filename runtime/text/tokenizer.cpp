// tokenizer.cpp — char-level tokenizer over UTF-8 code points.
#include "formats/tokenizer.h"

#include <nlohmann/json.hpp>

#include "base/error.h"

namespace gpt {

namespace {

// Byte length of the UTF-8 sequence starting with `lead`, 0 if invalid.
size_t utf8_length(unsigned char lead) {
    if (lead < 0x80) return 1;
    if ((lead & 0xE0) == 0xC0) return 2;
    if ((lead & 0xF0) == 0xE0) return 3;
    if ((lead & 0xF8) == 0xF0) return 4;
    return 0;
}

}  // namespace

Tokenizer::Tokenizer(const std::string &json_text, const std::string &kind, int32_t vocab_size) : kind_(kind) {
    auto j = nlohmann::json::parse(json_text, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("kind") || j["kind"] != kind)
        fail(GPT_ERR_ARTIFACT_INVALID,
             "tokenizer.json is malformed or disagrees with the manifest's kind '" + kind + "'");
    if (kind == "none") return;
    if (kind != "char") fail(GPT_ERR_ARTIFACT_INVALID, "unknown tokenizer kind '" + kind + "'");
    const auto &itos = j["itos"];
    if (!itos.is_array() || itos.empty() || itos.size() > static_cast<size_t>(vocab_size))
        fail(GPT_ERR_ARTIFACT_INVALID, "tokenizer.json: 'itos' must list 1..vocab_size characters");
    for (const auto &entry : itos) {
        if (!entry.is_string()) fail(GPT_ERR_ARTIFACT_INVALID, "tokenizer.json: 'itos' entries must be strings");
        const std::string s = entry.get<std::string>();
        if (s.empty() || utf8_length(static_cast<unsigned char>(s[0])) != s.size())
            fail(GPT_ERR_ARTIFACT_INVALID, "tokenizer.json: each 'itos' entry must be one UTF-8 character");
        stoi_.emplace(s, static_cast<gpt_token>(itos_.size()));
        itos_.push_back(s);
    }
}

std::vector<gpt_token> Tokenizer::encode(const std::string &text) const {
    if (kind_ != "char") fail(GPT_ERR_INVALID_ARGUMENT, "this artifact has no text tokenizer: pass token ids");
    std::vector<gpt_token> ids;
    for (size_t i = 0; i < text.size();) {
        const size_t len = utf8_length(static_cast<unsigned char>(text[i]));
        if (len == 0 || i + len > text.size())
            fail(GPT_ERR_INVALID_ARGUMENT, "text is not valid UTF-8 at byte " + std::to_string(i));
        const std::string ch = text.substr(i, len);
        auto it = stoi_.find(ch);
        if (it == stoi_.end())
            fail(GPT_ERR_INVALID_ARGUMENT,
                 "character '" + ch + "' at byte " + std::to_string(i) + " is not in the model's vocabulary");
        ids.push_back(it->second);
        i += len;
    }
    return ids;
}

std::string Tokenizer::decode(const gpt_token *tokens, size_t n) const {
    if (kind_ != "char") fail(GPT_ERR_INVALID_ARGUMENT, "this artifact has no text tokenizer");
    std::string text;
    for (size_t i = 0; i < n; ++i) {
        if (tokens[i] < 0 || static_cast<size_t>(tokens[i]) >= itos_.size())
            fail(GPT_ERR_OUT_OF_RANGE, "token id " + std::to_string(tokens[i]) + " has no text (vocabulary of " +
                                           std::to_string(itos_.size()) + ")");
        text += itos_[tokens[i]];
    }
    return text;
}

}  // namespace gpt
