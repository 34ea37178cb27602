// fuzz_tokenizer.cpp — tokenizer.json and prompt text into the char tokenizer
// (runtime/formats/tokenizer.cpp). Input: tokenizer.json, a NUL byte, then the text.
#include <cstdint>
#include <string>

#include "base/error.h"
#include "text/tokenizer.h"
#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const std::string input(reinterpret_cast<const char *>(data), size);
    const size_t split = input.find('\0');
    const std::string json = input.substr(0, split);
    const std::string text = split == std::string::npos ? std::string() : input.substr(split + 1);
    constexpr int32_t kVocab = 128;
    try {
        const gpt::Tokenizer tokenizer(json, "char", kVocab);
        try {
            const std::vector<gpt_token> ids = tokenizer.encode(text);
            for (gpt_token id : ids) FUZZ_CHECK(id >= 0 && id < kVocab);
            FUZZ_CHECK(tokenizer.decode(ids.data(), ids.size()) == text);  // lossless for accepted text
        } catch (const gpt::Error &e) {
            FUZZ_CHECK(e.status() == GPT_ERR_INVALID_ARGUMENT);  // text outside the vocabulary, or bad UTF-8
        }
        // Arbitrary ids: decoded or refused as out of range, never read past the vocabulary.
        std::vector<gpt_token> raw;
        for (size_t i = 0; i + 4 <= text.size(); i += 4)
            raw.push_back(static_cast<gpt_token>(static_cast<uint32_t>(static_cast<uint8_t>(text[i])) |
                                                 static_cast<uint32_t>(static_cast<uint8_t>(text[i + 1])) << 8 |
                                                 static_cast<uint32_t>(static_cast<uint8_t>(text[i + 2])) << 16 |
                                                 static_cast<uint32_t>(static_cast<uint8_t>(text[i + 3])) << 24));
        try {
            (void)tokenizer.decode(raw.data(), raw.size());
        } catch (const gpt::Error &e) {
            FUZZ_CHECK(e.status() == GPT_ERR_OUT_OF_RANGE);
        }
    } catch (const gpt::Error &e) {
        FUZZ_CHECK(e.status() == GPT_ERR_ARTIFACT_INVALID);
    }
    return 0;
}
