// The char and BPE tokenizers over UTF-8, and their refusal of malformed files and text.
#include <sodium.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "text/split_pattern.h"
#include "text/tokenizer.h"

namespace {

gpt_status status_of(const std::function<void()> &f) {
    try {
        f();
        return GPT_OK;
    } catch (const gpt::Error &e) {
        return e.status();
    }
}

}  // namespace

TEST_CASE("multi-byte characters round-trip", "[tokenizer]") {
    gpt::Tokenizer t(R"({"kind":"char","itos":["a","é","\n","€"]})", "char", 4);
    const auto ids = t.encode("aé€\na");
    CHECK(ids == std::vector<gpt_token>{0, 1, 3, 2, 0});
    CHECK(t.decode(ids.data(), ids.size()) == "aé€\na");
}

TEST_CASE("bad text and bad files are refused", "[tokenizer]") {
    gpt::Tokenizer t(R"({"kind":"char","itos":["a","b"]})", "char", 2);
    CHECK(status_of([&] { t.encode("abc"); }) == GPT_ERR_INVALID_ARGUMENT);
    CHECK(status_of([&] { t.encode("a\xc3"); }) == GPT_ERR_INVALID_ARGUMENT);  // cut UTF-8 sequence
    const gpt_token bad[] = {2};
    CHECK(status_of([&] { t.decode(bad, 1); }) == GPT_ERR_OUT_OF_RANGE);
    CHECK(status_of([] { gpt::Tokenizer("{", "char", 2); }) == GPT_ERR_ARTIFACT_INVALID);
    CHECK(status_of([] { gpt::Tokenizer(R"({"kind":"char","itos":["a","b","c"]})", "char", 2); }) ==
          GPT_ERR_ARTIFACT_INVALID);  // more characters than the model's vocabulary
    CHECK(status_of([] { gpt::Tokenizer(R"({"kind":"char","itos":["ab"]})", "char", 2); }) == GPT_ERR_ARTIFACT_INVALID);
    CHECK(status_of([] { gpt::Tokenizer(R"({"kind":"bpe"})", "char", 2); }) == GPT_ERR_ARTIFACT_INVALID);
}

TEST_CASE("an artifact without a tokenizer takes ids only", "[tokenizer]") {
    gpt::Tokenizer t(R"({"kind":"none"})", "none", 10);
    CHECK(status_of([&] { t.encode("a"); }) == GPT_ERR_INVALID_ARGUMENT);
}

namespace {

using nlohmann::json;

std::string base64(const std::string &bytes) {
    std::string out(sodium_base64_ENCODED_LEN(bytes.size(), sodium_base64_VARIANT_ORIGINAL), '\0');
    sodium_bin2base64(out.data(), out.size(), reinterpret_cast<const unsigned char *>(bytes.data()), bytes.size(),
                      sodium_base64_VARIANT_ORIGINAL);
    out.resize(out.size() - 1);  // the NUL
    return out;
}

// A byte-level BPE in the artifact's form: the 256 bytes, " a" and "ab" and " ab",
// then a special token; GPT-2's split pattern.
json small_bpe() {
    json vocab = json::array();
    for (int b = 0; b < 256; ++b) vocab.push_back(base64(std::string(1, static_cast<char>(b))));
    for (const char *merged : {" a", "ab", " ab"}) vocab.push_back(base64(merged));
    vocab.push_back(nullptr);
    return {{"kind", "bpe"},
            {"pattern", R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)"},
            {"vocab", vocab},
            {"special", {{"<|end|>", 259}}},
            {"eos", 259}};
}

}  // namespace

TEST_CASE("a byte-level BPE encodes by rank, specials only when allowed", "[tokenizer]") {
    const gpt::Tokenizer t(small_bpe().dump(), "bpe", 300);
    CHECK(t.eos() == 259);
    // " ab" is one piece and one token; "ab ab" splits into "ab" and " ab".
    CHECK(t.encode("ab ab") == std::vector<gpt_token>{257, 258});
    CHECK(t.encode("x<|end|>") == std::vector<gpt_token>{'x', '<', '|', 'e', 'n', 'd', '|', '>'});
    CHECK(t.encode("x<|end|>", true) == std::vector<gpt_token>{'x', 259});
    const std::vector<gpt_token> ids = {'x', 259, 258};
    CHECK(t.decode(ids.data(), ids.size()) == "x<|end|> ab");
    // A two-byte character as two single-byte tokens: each token alone is not UTF-8, together they are.
    CHECK(t.encode("\xC3\xA9") == std::vector<gpt_token>{0xC3, 0xA9});
    CHECK(status_of([&] { t.encode("ok\xFF"); }) == GPT_ERR_INVALID_ARGUMENT);
    const gpt_token beyond[] = {260};
    CHECK(status_of([&] { t.decode(beyond, 1); }) == GPT_ERR_OUT_OF_RANGE);
}

TEST_CASE("malformed BPE files are refused with the problem named", "[tokenizer]") {
    const auto refusal = [](const json &j, int32_t vocab_size = 300) {
        try {
            gpt::Tokenizer(j.dump(), "bpe", vocab_size);
        } catch (const gpt::Error &e) {
            CHECK(e.status() == GPT_ERR_ARTIFACT_INVALID);
            return std::string(e.what());
        }
        return std::string("accepted");
    };
    CHECK(refusal(small_bpe()) == "accepted");
    CHECK_THAT(refusal(small_bpe(), 259), Catch::Contains("1..vocab_size (259) tokens, has 260"));
    json j = small_bpe();
    j["vocab"][257] = base64(" a");
    CHECK_THAT(refusal(j), Catch::Contains("entry 257 repeats the bytes"));
    j = small_bpe();
    j["vocab"][65] = base64("zz");
    CHECK_THAT(refusal(j), Catch::Contains("no token for the single byte 65"));
    j = small_bpe();
    j["vocab"][10] = "not base64!";
    CHECK_THAT(refusal(j), Catch::Contains("entry 10 is not non-empty base64"));
    j = small_bpe();
    j["special"] = {{"<|end|>", 256}};
    CHECK_THAT(refusal(j), Catch::Contains("has id 256, which is an ordinary token's"));
    j = small_bpe();
    j["special"] = json::object();
    CHECK_THAT(refusal(j), Catch::Contains("entry 259 is null but no special token has that id"));
    j = small_bpe();
    j["pattern"] = "(unclosed";
    CHECK_THAT(refusal(j), Catch::Contains("pattern does not compile"));
    j = small_bpe();
    j["eos"] = 400;
    CHECK_THAT(refusal(j), Catch::Contains("'eos' must be null or a token id"));
}

TEST_CASE("the split pattern reads \\s as tiktoken does, NEL included", "[tokenizer]") {
    const gpt::Tokenizer t(small_bpe().dump(), "bpe", 300);
    // U+0085 is White_Space for tiktoken's engine: "a", "\u0085" (whitespace run), "b" —
    // with PCRE2's own \s it would join the punctuation class: "a", "\u0085b"... as " ?[^\s\p{L}\p{N}]+".
    const auto ids = t.encode(
        "a\xC2\x85"
        "b");
    CHECK(ids == std::vector<gpt_token>{'a', 0xC2, 0x85, 'b'});
}

TEST_CASE("text no match of the split pattern covers stays, as pieces of its own", "[tokenizer]") {
    // The pieces Hugging Face tokenizers' Split(pattern, behavior="isolated") gives (tokenizers 0.23).
    const auto pieces = [](const char *pattern, std::string_view text) {
        std::vector<std::string> out;
        gpt::SplitPattern(pattern).split(text, [&](std::string_view piece) { out.emplace_back(piece); });
        return out;
    };
    using Pieces = std::vector<std::string>;
    CHECK(pieces("[a-z]+", "ab, cd!") == Pieces{"ab", ", ", "cd", "!"});
    CHECK(pieces("[a-z]+", " a b ") == Pieces{" ", "a", " ", "b", " "});
    CHECK(pieces("[a-z]+", "!!") == Pieces{"!!"});
    CHECK(pieces("[a-z]+", "").empty());
    // An empty match ends the stretch before it: "a" and "b", not "ab".
    CHECK(pieces("x*", "abxxc") == Pieces{"a", "b", "xx", "c"});
    CHECK(pieces("x*", "\xC3\xA9\xE2\x82\xAC") == Pieces{"\xC3\xA9", "\xE2\x82\xAC"});

    // Through the tokenizer, every byte is encoded and decodes back.
    json j = small_bpe();
    j["pattern"] = R"( ?\p{L}+)";
    const gpt::Tokenizer t(j.dump(), "bpe", 300);
    const std::string text = "ab, 42 ab!";
    const auto ids = t.encode(text);
    // Pieces "ab", ", 42", " ab", "!", as HF splits them; skipping the stretches would give {257, 258}.
    CHECK(ids == std::vector<gpt_token>{257, ',', ' ', '4', '2', 258, '!'});
    CHECK(t.decode(ids.data(), ids.size()) == text);
}
