// fuzz_tokenizer.cpp — the tokenizers (runtime/text): tokenizer.json's reader,
// byte-level BPE encoding, decoding and the streaming detokenizer.
//
// Input: a mode byte, then
//   mode 0 (reader):  tokenizer.json (kind char if the mode's bit 1 is clear, else bpe), '\0', text
//   mode 1 (encoder): text for a fixed BPE vocabulary (merges of common English bytes and
//                     of multi-byte characters, one special token)
//   mode 2 (vocab):   extra tokens separated by '\x01' (up to 256, ranked after the 256
//                     bytes in their order), '\0', text: merges in any order of ranks
// Bit 2 of the mode byte allows special tokens. For every tokenizer accepted and
// every valid UTF-8 text: ids in range, decode(encode(text)) == text, and the
// streaming detokenizer fed one token at a time gives the text back with every
// output valid UTF-8. Invalid UTF-8 is refused with GPT_ERR_INVALID_ARGUMENT.
#include <sodium.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "base/error.h"
#include "fuzz_check.h"
#include "text/bpe_encoder.h"
#include "text/tokenizer.h"
#include "text/utf8.h"

namespace {

using nlohmann::json;

constexpr int32_t kModelVocab = 1024;
const char *const kPattern = R"('(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s)";

std::string base64(const std::string &bytes) {
    std::string out(sodium_base64_ENCODED_LEN(bytes.size(), sodium_base64_VARIANT_ORIGINAL), '\0');
    sodium_bin2base64(out.data(), out.size(), reinterpret_cast<const unsigned char *>(bytes.data()), bytes.size(),
                      sodium_base64_VARIANT_ORIGINAL);
    out.resize(out.size() - 1);
    return out;
}

// The 256 bytes, then `extra` (duplicates and single bytes skipped), then "<|s|>".
std::string bpe_json(const std::vector<std::string> &extra) {
    json vocab = json::array();
    for (int b = 0; b < 256; ++b) vocab.push_back(base64(std::string(1, static_cast<char>(b))));
    std::set<std::string> seen;
    for (const std::string &token : extra)
        if (token.size() > 1 && seen.insert(token).second && vocab.size() < kModelVocab - 1)
            vocab.push_back(base64(token));
    const auto special = static_cast<int32_t>(vocab.size());
    vocab.push_back(nullptr);
    return json{
        {"kind", "bpe"}, {"pattern", kPattern}, {"vocab", vocab}, {"special", {{"<|s|>", special}}}, {"eos", special}}
        .dump();
}

const gpt::Tokenizer &fixed_tokenizer() {
    static const gpt::Tokenizer tokenizer = [] {
        std::vector<std::string> extra;
        const std::string common = " etaoinshrdlu";
        for (char a : common)
            for (char b : common) extra.push_back(std::string{a, b});
        for (const char *t : {" the", "the", " and", "ing", "tion", " of", "'s", "\xC3\xA9", "\xE2\x80", "\xE2\x80\x99",
                              "\xF0\x9F", "\xF0\x9F\x98", "  ", "   ", "\n\n", " \n"})
            extra.push_back(t);
        return gpt::Tokenizer(bpe_json(extra), "bpe", kModelVocab);
    }();
    return tokenizer;
}

// The promises for one text: `encode` refuses it (bad UTF-8, or a char vocabulary
// without one of its characters) or its ids are in range, decode back to the text,
// and stream back to it in complete characters. `bytes_of(id)` is a token's bytes.
template <typename Encode, typename BytesOf>
void check_text(const std::string &text, bool char_vocabulary, Encode encode, BytesOf bytes_of) {
    std::vector<gpt_token> ids;
    try {
        ids = encode(text);
    } catch (const gpt::Error &e) {
        FUZZ_CHECK(e.status() == GPT_ERR_INVALID_ARGUMENT);
        FUZZ_CHECK(gpt::first_invalid_utf8(text) != std::string::npos || char_vocabulary);
        return;
    }
    FUZZ_CHECK(gpt::first_invalid_utf8(text) == std::string::npos);
    std::string decoded, streamed;
    gpt::Utf8Stream stream;
    for (const gpt_token id : ids) {
        FUZZ_CHECK(id >= 0 && id < kModelVocab);
        const std::string_view bytes = bytes_of(id);
        decoded += bytes;
        const std::string piece = stream.push(bytes);
        FUZZ_CHECK(gpt::first_invalid_utf8(piece) == std::string::npos);
        streamed += piece;
    }
    FUZZ_CHECK(stream.flush().empty());
    FUZZ_CHECK(decoded == text);
    FUZZ_CHECK(streamed == text);
}

void check_tokenizer(const gpt::Tokenizer &tokenizer, const std::string &text, bool allow_special) {
    check_text(
        text, tokenizer.kind() == "char", [&](const std::string &t) { return tokenizer.encode(t, allow_special); },
        [&](gpt_token id) { return tokenizer.token_bytes(id); });
    FUZZ_CHECK(tokenizer.decode(nullptr, 0).empty());
}

// Mode 2 without JSON or regex compilation per input: the 256 bytes, the fuzzed
// tokens in their order, and "<|s|>", straight into an encoder.
void check_fuzzed_vocabulary(const std::string &head, const std::string &text, bool allow_special) {
    static const auto pattern = std::make_shared<const gpt::SplitPattern>(kPattern);
    gpt::RankTable ranks;
    std::vector<std::string> bytes_of;
    const auto add = [&](const std::string &token) {
        if (ranks.add(token, static_cast<gpt_token>(bytes_of.size()))) bytes_of.push_back(token);
    };
    for (int b = 0; b < 256; ++b) add(std::string(1, static_cast<char>(b)));
    for (size_t at = 0; at <= head.size() && bytes_of.size() < 512;) {
        const size_t end = std::min(head.find('\x01', at), head.size());
        if (end > at) add(head.substr(at, end - at));
        at = end + 1;
    }
    const auto special = static_cast<gpt_token>(bytes_of.size());
    bytes_of.emplace_back("<|s|>");
    const gpt::BpeEncoder encoder(std::move(ranks), pattern, {{"<|s|>", special}});
    check_text(
        text, false,
        [&](const std::string &t) {
            if (gpt::first_invalid_utf8(t) != std::string::npos) gpt::fail(GPT_ERR_INVALID_ARGUMENT, "not UTF-8");
            std::vector<gpt_token> ids;
            encoder.encode(t, allow_special, ids);
            return ids;
        },
        [&](gpt_token id) { return std::string_view(bytes_of.at(static_cast<size_t>(id))); });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    const uint8_t mode = data[0];
    const bool allow_special = mode & 4;
    const std::string input(reinterpret_cast<const char *>(data) + 1, size - 1);
    const size_t split = input.find('\0');
    const std::string head = input.substr(0, split);
    const std::string text = split == std::string::npos ? std::string() : input.substr(split + 1);
    switch (mode % 3) {
        case 0:
            try {
                const gpt::Tokenizer tokenizer(head, mode & 2 ? "bpe" : "char", kModelVocab);
                check_tokenizer(tokenizer, text, allow_special);
                // Arbitrary ids: decoded or refused as out of range, never read past the vocabulary.
                std::vector<gpt_token> raw;
                for (size_t i = 0; i + 2 <= text.size(); i += 2)
                    raw.push_back(
                        static_cast<gpt_token>(static_cast<uint8_t>(text[i]) << 8 | static_cast<uint8_t>(text[i + 1])) -
                        1);
                try {
                    (void)tokenizer.decode(raw.data(), raw.size());
                } catch (const gpt::Error &e) {
                    FUZZ_CHECK(e.status() == GPT_ERR_OUT_OF_RANGE);
                }
            } catch (const gpt::Error &e) {
                FUZZ_CHECK(e.status() == GPT_ERR_ARTIFACT_INVALID);
            }
            break;
        case 1: check_tokenizer(fixed_tokenizer(), input, allow_special); break;
        default: check_fuzzed_vocabulary(head, text, allow_special);
    }
    return 0;
}
