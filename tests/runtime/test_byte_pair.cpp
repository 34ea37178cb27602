// The byte-pair merge: tiktoken's scan and the heap used for long pieces agree
// on every piece (same merges: lowest rank, then leftmost), and both agree with
// a hand-worked example.
#include <catch2/catch.hpp>
#include <random>

#include "text/byte_pair.h"

namespace {

// All single bytes, then merges over a tiny alphabet with ranks chosen so that
// ties, chains and overlapping candidates all occur.
gpt::RankTable table() {
    gpt::RankTable t;
    for (int b = 0; b < 256; ++b) t.add(std::string(1, static_cast<char>(b)), b);
    gpt_token next = 256;
    for (const char *token : {"ab", "aa", "ba", "abab", "aab", "bb", "aaa", "bab", "abb", "aabb", "ba b", "a b"})
        t.add(token, next++);
    return t;
}

std::vector<gpt_token> scan(const std::string &piece, const gpt::RankTable &t) {
    std::vector<gpt_token> out;
    gpt::byte_pair_encode_scan(piece, t, out);
    return out;
}

std::vector<gpt_token> heap(const std::string &piece, const gpt::RankTable &t) {
    std::vector<gpt_token> out;
    gpt::byte_pair_encode_heap(piece, t, out);
    return out;
}

}  // namespace

TEST_CASE("merges go by rank, leftmost first", "[bpe]") {
    const gpt::RankTable t = table();
    // "aaab": pairs aa(257) aa(257) ab(256): ab first -> a a ab; then aa(257) beats a+ab = aab(260)
    // -> aa ab, and aa+ab = "aaab" is no token.
    CHECK(scan("aaab", t) == std::vector<gpt_token>{257, 256});
    CHECK(heap("aaab", t) == std::vector<gpt_token>{257, 256});
    // "aaaa": three equal aa candidates, the leftmost merges first -> aa a a -> aa aa ("aaa" needs aa+a
    // adjacent: after aa|a|a the pairs are aaa(262) and aa(257); aa wins).
    CHECK(scan("aaaa", t) == std::vector<gpt_token>{257, 257});
    CHECK(heap("aaaa", t) == std::vector<gpt_token>{257, 257});
}

TEST_CASE("scan and heap agree on random pieces", "[bpe]") {
    const gpt::RankTable t = table();
    std::mt19937 rng(11);
    const std::string alphabet = "ab ";
    for (int round = 0; round < 5000; ++round) {
        const size_t n = std::uniform_int_distribution<size_t>(1, round < 4000 ? 24 : 600)(rng);
        std::string piece;
        for (size_t i = 0; i < n; ++i) piece += alphabet[std::uniform_int_distribution<size_t>(0, 2)(rng)];
        const auto a = scan(piece, t);
        REQUIRE(a == heap(piece, t));
        CHECK(a.size() <= piece.size());
    }
}

TEST_CASE("a megabyte-long piece merges in n log n", "[bpe]") {
    const gpt::RankTable t = table();
    const std::string piece(1 << 20, 'a');
    std::vector<gpt_token> out;
    gpt::byte_pair_encode(piece, t, out);  // the heap: the scan would take ~10^12 steps
    // aa everywhere, then aaa never (aa|aa is not aaa+a): 2^19 tokens of "aa".
    CHECK(out.size() == (1u << 19));
    CHECK(out.front() == 257);
}
