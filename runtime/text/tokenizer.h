// tokenizer.h — text <-> token ids as the artifact's tokenizer.json describes.
// Kinds: "char" (nanoGPT's char vocabulary: one id per UTF-8 character), "bpe"
// (byte-level BPE encoded exactly as tiktoken does: docs/TOKENIZERS.md) and
// "none" (the artifact takes and returns ids only).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gpt_runtime.h"

namespace gpt {

class BpeEncoder;

class Tokenizer {
public:
    // Parses tokenizer.json bytes; `vocab_size` is the model's, which the
    // vocabulary must not exceed. Throws gpt::Error (GPT_ERR_ARTIFACT_INVALID).
    Tokenizer(const std::string &json_text, const std::string &kind, int32_t vocab_size);
    ~Tokenizer();

    const std::string &kind() const { return kind_; }
    // UTF-8 text -> ids; invalid UTF-8 is refused (GPT_ERR_INVALID_ARGUMENT).
    // Special tokens (e.g. "<|endoftext|>") are recognised in the text only with
    // `allow_special`; otherwise their text is encoded like any other.
    std::vector<gpt_token> encode(std::string_view text, bool allow_special = false) const;
    // ids -> bytes. A BPE token can hold part of a character, so decoding a part
    // of a sequence may end inside one (Utf8Stream assembles streams).
    std::string decode(const gpt_token *tokens, size_t n) const;
    // One token's bytes (a special token's: its text). GPT_ERR_OUT_OF_RANGE for an id without any.
    std::string_view token_bytes(gpt_token id) const;
    // The ids below the model's vocab_size that have no text: past the tokenizer's last id (nanoGPT pads
    // GPT-2's 50257 tokens to a vocab_size of 50304) and the gaps among its ids (OpenAI's cl100k_base has no
    // id 100256). The model sets their logits to -inf, so that no sampler picks them. None for kind "none".
    std::vector<gpt_token> textless_ids() const;
    // The end-of-text token, or -1 when the tokenizer has none.
    gpt_token eos() const { return eos_; }

private:
    std::string kind_;
    int32_t vocab_size_;                                   // the model's
    std::vector<std::string> bytes_of_;                    // id -> bytes; empty at a gap in the ids
    std::unordered_map<std::string, gpt_token> char_ids_;  // "char": character -> id
    std::unique_ptr<const BpeEncoder> bpe_;                // "bpe"
    gpt_token eos_ = -1;
};

}  // namespace gpt
