// The char and BPE tokenizers over UTF-8, and their refusal of malformed files and text.
#include <sodium.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "text/split_pattern.h"
#include "text/tokenizer.h"
#include "text/unicode_tables.h"

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

TEST_CASE("a character outside a char vocabulary is named, a control character by its number", "[tokenizer]") {
    gpt::Tokenizer t(R"({"kind":"char","itos":["a","b"]})", "char", 2);
    const auto refusal = [&](std::string_view text) {
        try {
            t.encode(text);
        } catch (const gpt::Error &e) {
            CHECK(e.status() == GPT_ERR_INVALID_ARGUMENT);
            return std::string(e.what());
        }
        return std::string("accepted");
    };
    CHECK(refusal(std::string_view("a\0b", 3)) == "character U+0000 at byte 1 is not in the model's vocabulary");
    CHECK(refusal("ab\x1B") == "character U+001B at byte 2 is not in the model's vocabulary");
    CHECK(refusal("\xC3\xA9") == "character '\xC3\xA9' at byte 0 is not in the model's vocabulary");
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
    j["special"] = {{"<|end|>", 259}, {"<|again|>", 259}};
    CHECK_THAT(refusal(j), Catch::Contains("special token '<|end|>' has id 259, which is an ordinary token's or "
                                           "another special's"));
    j = small_bpe();
    j["pattern"] = "(unclosed";
    CHECK_THAT(refusal(j), Catch::Contains("pattern does not compile"));
    j = small_bpe();
    j["eos"] = 400;
    CHECK_THAT(refusal(j), Catch::Contains("'eos' must be null or a token id"));
    j = small_bpe();
    j["vocab"][260] = nullptr;
    j["eos"] = 260;
    CHECK_THAT(refusal(j), Catch::Contains("'eos' is an id no token has"));
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

namespace {

// The pieces `pattern` cuts `text` into.
std::vector<std::string> pieces(const char *pattern, std::string_view text) {
    std::vector<std::string> out;
    gpt::SplitPattern(pattern).split(text, [&](std::string_view piece) { out.emplace_back(piece); });
    return out;
}

const char *const kGpt2Pattern = R"('(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s)";

}  // namespace

TEST_CASE("the split pattern's classes are tiktoken's: White_Space, Unicode 16 letters and numbers", "[tokenizer]") {
    using Pieces = std::vector<std::string>;
    // The gained code points are relative to PCRE2's own tables: a PCRE2 of another Unicode
    // version needs scripts/gen_unicode_tables.py run against it.
    CHECK(gpt::SplitPattern::pcre2_unicode_version() == gpt::unicode_tables::kPcre2UnicodeVersion);
    // U+180E MONGOLIAN VOWEL SEPARATOR (E1 A0 8E) is no longer White_Space (Unicode 6.3), PCRE2's \s still held
    // it: " \u180e" is one piece of " ?[^\s\p{L}\p{N}]++", not a whitespace run (issue 41).
    CHECK(pieces(kGpt2Pattern,
                 " \xE1\xA0\x8E"
                 "b") == Pieces{" \xE1\xA0\x8E", "b"});
    // U+1D2C0 KAKTOVIK NUMERAL ZERO (F0 9D 8B 80), Unicode 15: \p{N}, as digits are.
    CHECK(pieces(kGpt2Pattern,
                 "1\xF0\x9D\x8B\x80"
                 "2!") == Pieces{"1\xF0\x9D\x8B\x80"
                                 "2",
                                 "!"});
    // U+1E4D0 NAG MUNDARI LETTER O (F0 9E 93 90), Unicode 15: \p{L}; \pL, \p{Letter} and \p{is_letter} name it too.
    for (const char *letter : {R"(\p{L}+)", R"(\pL+)", R"(\p{Letter}+)", R"(\p{is_letter}+)", R"([^\s\P{Lt}\d]+|\w+)"})
        CHECK(pieces(letter,
                     "a\xF0\x9E\x93\x90"
                     "b") == Pieces{"a\xF0\x9E\x93\x90"
                                    "b"});
    // \S inside a class is White_Space's complement written out; \d is \p{Nd}; \b is a boundary of Unicode \w.
    CHECK(pieces(R"([\S]+)", "a\xE1\xA0\x8E b") == Pieces{"a\xE1\xA0\x8E", " ", "b"});
    CHECK(pieces(R"(\d+)", "1\xF0\x9E\x93\xB0") == Pieces{"1\xF0\x9E\x93\xB0"});  // U+1E4F0 NAG MUNDARI DIGIT ZERO
    // (the second letter is no match: no boundary before it; the stretch is a piece of its own).
    CHECK(pieces(R"(\b.)", "\xF0\x9E\x93\x90\xF0\x9E\x93\x90 x") ==
          Pieces{"\xF0\x9E\x93\x90", "\xF0\x9E\x93\x90", " ", "x"});
    // '.' is anything but \n, whatever PCRE2's build takes for a newline.
    CHECK(pieces(".+", "a\rb\nc") == Pieces{"a\rb", "\n", "c"});
}

TEST_CASE("split patterns PCRE2 cannot read as tiktoken does are refused", "[tokenizer]") {
    const auto refusal = [](const char *pattern) {
        try {
            gpt::SplitPattern p(pattern);
        } catch (const gpt::Error &e) {
            CHECK(e.status() == GPT_ERR_ARTIFACT_INVALID);
            return std::string(e.what());
        }
        return std::string("accepted");
    };
    // A class cannot leave out what PCRE2's Unicode 14 tables lack (Unicode 15 and 16 letters, marks, digits).
    CHECK_THAT(refusal(R"([\P{L}x])"), Catch::Contains("\\P{L} inside a character class"));
    CHECK_THAT(refusal(R"([^\W])"), Catch::Contains("\\W inside a character class"));
    CHECK_THAT(refusal(R"([\D])"), Catch::Contains("\\D inside a character class"));
    CHECK(refusal(R"([\P{Lt}\S])") == "accepted");  // \p{Lt} gained nothing; \S is written out
    // The regex crate's nested classes and set operations; PCRE2 would read them as literal characters.
    CHECK_THAT(refusal(R"([a[bc]])"), Catch::Contains("nested class"));
    CHECK_THAT(refusal(R"([[:alpha:]])"), Catch::Contains("nested class"));
    CHECK_THAT(refusal(R"([\p{L}&&\p{Greek}])"), Catch::Contains("class operator &&"));
    CHECK_THAT(refusal(R"([a-z--c])"), Catch::Contains("class operator --"));
    CHECK(refusal(R"([\[\]a-])") == "accepted");  // escaped brackets, a '-' at the end
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

TEST_CASE("ids no token has (gaps, as in cl100k_base) are read, have no text and are never encoded", "[tokenizer]") {
    // cl100k_base's layout in small: ranks, a gap, specials, a gap, one more special (there 100256 is missing,
    // <|endoftext|> and the fim tokens are 100257..100260, 100261..100275 are missing, <|endofprompt|> is 100276).
    json j = small_bpe();  // ordinary tokens 0..258
    for (int id = 259; id < 265; ++id) j["vocab"][static_cast<size_t>(id)] = nullptr;
    j["special"] = {{"<|end|>", 260}, {"<|fim|>", 264}};
    j["eos"] = 260;
    const gpt::Tokenizer t(j.dump(), "bpe", 300);
    CHECK(t.eos() == 260);
    CHECK(t.encode("x<|end|> ab<|fim|>", true) == std::vector<gpt_token>{'x', 260, 258, 264});
    const gpt_token specials[] = {260, 264};
    CHECK(t.decode(specials, 2) == "<|end|><|fim|>");
    const std::vector<gpt_token> without_text = t.textless_ids();  // the gaps, then past the last id
    CHECK(std::vector<gpt_token>(without_text.begin(), without_text.begin() + 4) ==
          std::vector<gpt_token>{259, 261, 262, 263});
    CHECK(without_text.size() == 4 + (300 - 265));
    CHECK(without_text.back() == 299);
    CHECK(gpt::Tokenizer(R"({"kind":"char","itos":["a","b"]})", "char", 4).textless_ids() ==
          std::vector<gpt_token>{2, 3});
    CHECK(gpt::Tokenizer(R"({"kind":"none"})", "none", 4).textless_ids().empty());
    for (const gpt_token gap : {259, 261, 263}) {
        try {
            t.token_bytes(gap);
            FAIL("token " << gap << " has bytes");
        } catch (const gpt::Error &e) {
            CHECK(e.status() == GPT_ERR_OUT_OF_RANGE);
            CHECK_THAT(e.what(), Catch::Contains("token id " + std::to_string(gap) + " has no text"));
        }
    }
}
