// byte_pair.h — byte-pair merging by rank, as tiktoken does it: a piece starts
// as single bytes, and the adjacent pair whose joined bytes have the lowest rank
// is merged (leftmost first on ties) until no joined pair is a token. Ranks are
// token ids.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gpt_runtime.h"

namespace gpt {

class RankTable {
public:
    RankTable() = default;
    RankTable(RankTable &&) = default;  // a deque's move keeps its elements in place: the keys stay valid
    RankTable &operator=(RankTable &&) = default;
    RankTable(const RankTable &) = delete;  // a copy's keys would view into the original
    RankTable &operator=(const RankTable &) = delete;

    // Gives `bytes` the rank `id`; false (and no change) when they already have one.
    bool add(std::string bytes, gpt_token id);
    // The rank of `bytes`, or -1 when they are not a token.
    gpt_token find(std::string_view bytes) const {
        const auto it = ranks_.find(bytes);
        return it == ranks_.end() ? -1 : it->second;
    }
    size_t size() const { return ranks_.size(); }

private:
    struct Hash {
        size_t operator()(std::string_view s) const noexcept;
    };
    std::deque<std::string> storage_;  // the keys' bytes: a deque never moves its elements

    std::unordered_map<std::string_view, gpt_token, Hash> ranks_;
};

// Appends the tokens of `piece` (non-empty) to `out`. Every single byte must be
// a token (the tokenizer's reader checks this). Pieces up to a few hundred bytes
// take tiktoken's quadratic scan; longer ones a heap, so a hostile megabyte-long
// word costs O(n log n), not O(n^2). Both give the same tokens.
void byte_pair_encode(std::string_view piece, const RankTable &ranks, std::vector<gpt_token> &out);

// The two merge strategies, exposed for the test that compares them.
void byte_pair_encode_scan(std::string_view piece, const RankTable &ranks, std::vector<gpt_token> &out);
void byte_pair_encode_heap(std::string_view piece, const RankTable &ranks, std::vector<gpt_token> &out);

}  // namespace gpt
