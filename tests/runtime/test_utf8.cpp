// UTF-8 checks and the streaming assembler against Python's decoding rules
// (bytes.decode("utf-8", errors="replace"): one U+FFFD per maximal ill-formed
// subsequence), whatever the split of the bytes into pushes.
#include <catch2/catch.hpp>
#include <random>
#include <string>

#include "text/utf8.h"

namespace {

const std::string kFffd = "\xEF\xBF\xBD";

// The stream's output with the bytes pushed in pieces of the given sizes (cycled).
std::string streamed(const std::string &bytes, const std::vector<size_t> &sizes, bool *each_piece_valid) {
    gpt::Utf8Stream stream;
    std::string out;
    *each_piece_valid = true;
    size_t at = 0;
    for (size_t k = 0; at < bytes.size(); ++k) {
        const size_t n = std::min(sizes[k % sizes.size()], bytes.size() - at);
        const std::string piece = stream.push(std::string_view(bytes).substr(at, n));
        *each_piece_valid &= gpt::first_invalid_utf8(piece) == std::string::npos;
        out += piece;
        at += n;
    }
    return out + stream.flush();
}

}  // namespace

TEST_CASE("validity follows the standard's table", "[utf8]") {
    CHECK(gpt::first_invalid_utf8("") == std::string::npos);
    CHECK(gpt::first_invalid_utf8("a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80") == std::string::npos);  // a é € 😀
    CHECK(gpt::first_invalid_utf8("ab\xC0\xAF") == 2);                                             // overlong '/'
    CHECK(gpt::first_invalid_utf8("\xE0\x80\xAF") == 0);                                           // overlong
    CHECK(gpt::first_invalid_utf8("x\xED\xA0\x80") == 1);                                          // surrogate
    CHECK(gpt::first_invalid_utf8("\xF4\x90\x80\x80") == 0);                                       // > U+10FFFF
    CHECK(gpt::first_invalid_utf8("ok\xE2\x82") == 2);                                             // cut at the end
    CHECK(gpt::first_invalid_utf8("\x80") == 0);                                                   // lone continuation
}

TEST_CASE("the stream holds a split character until it completes", "[utf8]") {
    gpt::Utf8Stream s;
    CHECK(s.push("a\xF0\x9F") == "a");
    CHECK(s.pending() == 2);
    CHECK(s.push("\x98") == "");
    CHECK(s.push("\x80!") == "\xF0\x9F\x98\x80!");
    CHECK(s.pending() == 0);
    CHECK(s.flush() == "");
}

TEST_CASE("ill-formed bytes become one U+FFFD per maximal subpart, as Python decodes them", "[utf8]") {
    // Expected values are Python 3's bytes.decode("utf-8", errors="replace").
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"\x80", kFffd},
        {"\xE2\x82"
         "A",
         kFffd + "A"},                            // a cut 3-byte sequence is one subpart
        {"\xF0\x80", kFffd + kFffd},              // F0 80: 80 is not a valid second byte
        {"\xED\xA0\x80", kFffd + kFffd + kFffd},  // surrogates: each byte alone
        {"\xC0\xAF", kFffd + kFffd},
        {"\xF4\x8F\xBF", kFffd},  // cut at the end: one
        {"a\xFF"
         "b",
         "a" + kFffd + "b"},
    };
    for (const auto &[bytes, expected] : cases) {
        bool valid = false;
        CHECK(streamed(bytes, {bytes.size()}, &valid) == expected);
        CHECK(streamed(bytes, {1}, &valid) == expected);
        CHECK(valid);
    }
}

TEST_CASE("any split of random bytes gives the same text, every piece valid", "[utf8]") {
    std::mt19937 rng(7);
    // Mostly UTF-8 with stray bytes: lead bytes, continuations and ASCII in proportion.
    const std::vector<std::string> atoms = {"a",    " ",    "\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F\x98\x80",
                                            "\x80", "\xE2", "\xF0\x9F", "\xFF",         "\xED\xA0"};
    for (int round = 0; round < 2000; ++round) {
        std::string bytes;
        const int n = std::uniform_int_distribution<int>(0, 12)(rng);
        for (int i = 0; i < n; ++i) bytes += atoms[std::uniform_int_distribution<size_t>(0, atoms.size() - 1)(rng)];
        bool valid_whole = false, valid_split = false;
        const std::string whole = streamed(bytes, {bytes.size() + 1}, &valid_whole);
        const size_t a = std::uniform_int_distribution<size_t>(1, 4)(rng),
                     b = std::uniform_int_distribution<size_t>(1, 4)(rng);
        CHECK(streamed(bytes, {a, b}, &valid_split) == whole);
        CHECK(valid_split);
        CHECK(gpt::first_invalid_utf8(whole) == std::string::npos);
        if (gpt::first_invalid_utf8(bytes) == std::string::npos) CHECK(whole == bytes);
    }
}
