// tokenizer.cpp — tokenizer.json's readers (every field checked: the file comes
// from outside, hashed but possibly hand-made) and the char encoder.
#include "text/tokenizer.h"

#include <sodium.h>

#include <algorithm>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "text/bpe_encoder.h"
#include "text/utf8.h"

namespace gpt {

namespace {

using nlohmann::json;

struct Vocabulary {
    std::vector<std::string> bytes_of;
    std::unordered_map<std::string, gpt_token> char_ids;
    std::unique_ptr<const BpeEncoder> bpe;
    gpt_token eos = -1;
};

// j[key], or null when absent (a const json's operator[] must not see a missing key).
const json &member(const json &j, const char *key) {
    static const json absent;
    const auto it = j.find(key);
    return it == j.end() ? absent : *it;
}

[[noreturn]] void invalid(const std::string &what) { fail(GPT_ERR_ARTIFACT_INVALID, "tokenizer.json: " + what); }

bool one_character(const std::string &s) {
    return !s.empty() && first_invalid_utf8(s) == std::string::npos &&
           (s.size() == 1 || std::all_of(s.begin() + 1, s.end(), [](char c) { return (c & 0xC0) == 0x80; }));
}

Vocabulary read_char(const json &j, int32_t vocab_size) {
    const json &itos = member(j, "itos");
    if (!itos.is_array() || itos.empty() || itos.size() > static_cast<size_t>(vocab_size))
        invalid("'itos' must list 1..vocab_size characters");
    Vocabulary v;
    for (const auto &entry : itos) {
        if (!entry.is_string()) invalid("'itos' entries must be strings");
        std::string s = entry.get<std::string>();
        if (!one_character(s)) invalid("each 'itos' entry must be one UTF-8 character");
        if (!v.char_ids.emplace(s, static_cast<gpt_token>(v.bytes_of.size())).second)
            invalid("character '" + s + "' appears twice in 'itos'");
        v.bytes_of.push_back(std::move(s));
    }
    return v;
}

std::string base64_bytes(const std::string &text, size_t id) {
    std::string out(text.size(), '\0');
    size_t length = 0;
    if (sodium_base642bin(reinterpret_cast<unsigned char *>(out.data()), out.size(), text.data(), text.size(), nullptr,
                          &length, nullptr, sodium_base64_VARIANT_ORIGINAL) != 0 ||
        length == 0)
        invalid("'vocab' entry " + std::to_string(id) + " is not non-empty base64");
    out.resize(length);
    return out;
}

// {"kind":"bpe","pattern":..,"vocab":[base64 | null],"special":{text: id},"eos": id | null}:
// vocab[id] holds the bytes of token `id`, whose BPE rank is `id`; null marks a
// special token's id, or an id no token has (a gap, as OpenAI's encodings leave:
// no text, never sampled). docs/TOKENIZERS.md describes the form.
Vocabulary read_bpe(const json &j, int32_t vocab_size) {
    const json &vocab = member(j, "vocab");
    const json &special = member(j, "special");
    if (!member(j, "pattern").is_string()) invalid("'pattern' must be a string");
    if (!vocab.is_array() || vocab.empty() || vocab.size() > static_cast<size_t>(vocab_size))
        invalid("'vocab' must list 1..vocab_size (" + std::to_string(vocab_size) + ") tokens, has " +
                std::to_string(vocab.is_array() ? vocab.size() : 0));
    if (!special.is_object()) invalid("'special' must be an object");
    Vocabulary v;
    v.bytes_of.resize(vocab.size());
    std::vector<bool> is_null(vocab.size(), false);
    RankTable ranks;
    for (size_t id = 0; id < vocab.size(); ++id) {
        if (vocab[id].is_null()) {
            is_null[id] = true;
            continue;
        }
        if (!vocab[id].is_string()) invalid("'vocab' entries must be base64 strings or null");
        v.bytes_of[id] = base64_bytes(vocab[id].get<std::string>(), id);
        if (!ranks.add(v.bytes_of[id], static_cast<gpt_token>(id)))
            invalid("'vocab' entry " + std::to_string(id) + " repeats the bytes of an earlier token");
    }
    for (int byte = 0; byte < 256; ++byte)
        if (ranks.find(std::string(1, static_cast<char>(byte))) < 0)
            invalid("no token for the single byte " + std::to_string(byte) + ": text holding it could not be encoded");
    std::vector<std::pair<std::string, gpt_token>> specials;
    for (const auto &[text, id] : special.items()) {
        if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= static_cast<int64_t>(vocab.size()))
            invalid("special token '" + text + "' needs an id in [0, " + std::to_string(vocab.size()) + ")");
        const auto slot = static_cast<size_t>(id.get<int64_t>());
        if (!is_null[slot] || !v.bytes_of[slot].empty())
            invalid("special token '" + text + "' has id " + std::to_string(slot) +
                    ", which is an ordinary token's or another special's");
        if (text.empty() || first_invalid_utf8(text) != std::string::npos)
            invalid("a special token's text must be non-empty UTF-8");
        v.bytes_of[slot] = text;
        specials.emplace_back(text, static_cast<gpt_token>(slot));
    }
    const json &eos = member(j, "eos");
    if (!eos.is_null()) {
        if (!eos.is_number_integer() || eos.get<int64_t>() < 0 ||
            eos.get<int64_t>() >= static_cast<int64_t>(vocab.size()))
            invalid("'eos' must be null or a token id");
        v.eos = static_cast<gpt_token>(eos.get<int64_t>());
        if (v.bytes_of[static_cast<size_t>(v.eos)].empty()) invalid("'eos' is an id no token has");
    }
    v.bpe = std::make_unique<const BpeEncoder>(
        std::move(ranks), std::make_shared<const SplitPattern>(member(j, "pattern").get<std::string>()),
        std::move(specials));
    return v;
}

}  // namespace

Tokenizer::Tokenizer(const std::string &json_text, const std::string &kind, int32_t vocab_size)
    : kind_(kind), vocab_size_(vocab_size) {
    const json j = json::parse(json_text, nullptr, false);
    if (j.is_discarded() || !j.is_object() || member(j, "kind") != kind)
        fail(GPT_ERR_ARTIFACT_INVALID,
             "tokenizer.json is malformed or disagrees with the manifest's kind '" + kind + "'");
    Vocabulary v;
    if (kind == "char")
        v = read_char(j, vocab_size);
    else if (kind == "bpe")
        v = read_bpe(j, vocab_size);
    else if (kind != "none")
        fail(GPT_ERR_ARTIFACT_INVALID, "unknown tokenizer kind '" + kind + "'");
    bytes_of_ = std::move(v.bytes_of);
    char_ids_ = std::move(v.char_ids);
    bpe_ = std::move(v.bpe);
    eos_ = v.eos;
}

Tokenizer::~Tokenizer() = default;

std::vector<gpt_token> Tokenizer::encode(std::string_view text, bool allow_special) const {
    if (kind_ == "none") fail(GPT_ERR_INVALID_ARGUMENT, "this artifact has no text tokenizer: pass token ids");
    const size_t bad = first_invalid_utf8(text);
    if (bad != std::string_view::npos)
        fail(GPT_ERR_INVALID_ARGUMENT, "text is not valid UTF-8 at byte " + std::to_string(bad));
    std::vector<gpt_token> ids;
    if (bpe_) {
        bpe_->encode(text, allow_special, ids);
        return ids;
    }
    for (size_t i = 0; i < text.size();) {
        size_t len = 1;
        while (i + len < text.size() && (static_cast<unsigned char>(text[i + len]) & 0xC0) == 0x80) ++len;
        const std::string ch(text.substr(i, len));
        const auto it = char_ids_.find(ch);
        if (it == char_ids_.end()) {
            // An ASCII control character by its number: a NUL would end the message where callers read it
            // (gpt_runtime_last_error() is a C string), and \n or ESC would garble a log line.
            char control[8];
            const auto byte = static_cast<unsigned char>(ch[0]);
            std::snprintf(control, sizeof control, "U+%04X", byte);
            fail(GPT_ERR_INVALID_ARGUMENT, "character " + (byte < 0x20 || byte == 0x7F ? control : "'" + ch + "'") +
                                               " at byte " + std::to_string(i) + " is not in the model's vocabulary");
        }
        ids.push_back(it->second);
        i += len;
    }
    return ids;
}

std::string_view Tokenizer::token_bytes(gpt_token id) const {
    if (kind_ == "none") fail(GPT_ERR_INVALID_ARGUMENT, "this artifact has no text tokenizer");
    if (id < 0 || static_cast<size_t>(id) >= bytes_of_.size())
        fail(GPT_ERR_OUT_OF_RANGE, "token id " + std::to_string(id) + " has no text (the tokenizer's ids are 0.." +
                                       std::to_string(bytes_of_.size() - 1) + "; no sampler gives one past them)");
    const std::string &bytes = bytes_of_[static_cast<size_t>(id)];
    if (bytes.empty())
        fail(GPT_ERR_OUT_OF_RANGE,
             "token id " + std::to_string(id) + " has no text (a gap in the tokenizer's ids, which no sampler gives)");
    return bytes;
}

std::vector<gpt_token> Tokenizer::textless_ids() const {
    std::vector<gpt_token> ids;
    if (kind_ == "none") return ids;
    for (gpt_token id = 0; id < vocab_size_; ++id)
        if (static_cast<size_t>(id) >= bytes_of_.size() || bytes_of_[static_cast<size_t>(id)].empty())
            ids.push_back(id);
    return ids;
}

std::string Tokenizer::decode(const gpt_token *tokens, size_t n) const {
    std::string text;
    for (size_t i = 0; i < n; ++i) text += token_bytes(tokens[i]);
    return text;
}

}  // namespace gpt
