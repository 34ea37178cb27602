// tokenizer.h — text <-> token ids as the artifact's tokenizer.json describes.
// Kinds: "char" (one vocabulary entry per UTF-8 character) and "none" (ids only).
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "gpt_runtime.h"

namespace gpt {

class Tokenizer {
public:
    // Parses tokenizer.json bytes; `vocab_size` is the model's, which the vocabulary must not exceed.
    Tokenizer(const std::string &json_text, const std::string &kind, int32_t vocab_size);

    const std::string &kind() const { return kind_; }
    std::vector<gpt_token> encode(const std::string &text) const;
    std::string decode(const gpt_token *tokens, size_t n) const;

private:
    std::string kind_;
    std::vector<std::string> itos_;
    std::unordered_map<std::string, gpt_token> stoi_;
};

}  // namespace gpt
