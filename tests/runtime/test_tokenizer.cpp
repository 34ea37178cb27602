// The char tokenizer over UTF-8, and its refusal of malformed files and text.
#include <catch2/catch.hpp>

#include "base/error.h"
#include "formats/tokenizer.h"

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
