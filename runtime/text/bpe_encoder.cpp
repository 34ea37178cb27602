// bpe_encoder.cpp — segments, pieces, merges.
#include "text/bpe_encoder.h"

#include <algorithm>

namespace gpt {

BpeEncoder::BpeEncoder(RankTable ranks, std::shared_ptr<const SplitPattern> pattern,
                       std::vector<std::pair<std::string, gpt_token>> special)
    : ranks_(std::move(ranks)), pattern_(std::move(pattern)), special_(std::move(special)) {
    std::stable_sort(special_.begin(), special_.end(),
                     [](const auto &a, const auto &b) { return a.first.size() > b.first.size(); });
}

void BpeEncoder::encode_ordinary(std::string_view text, std::vector<gpt_token> &out) const {
    pattern_->split(text, [&](std::string_view piece) {
        const gpt_token whole = ranks_.find(piece);  // most pieces are one token
        if (whole >= 0)
            out.push_back(whole);
        else
            byte_pair_encode(piece, ranks_, out);
    });
}

void BpeEncoder::encode(std::string_view text, bool allow_special, std::vector<gpt_token> &out) const {
    if (!allow_special || special_.empty()) return encode_ordinary(text, out);
    // next[k]: where special k next occurs at or after `at` (npos: nowhere).
    std::vector<size_t> next(special_.size());
    for (size_t k = 0; k < special_.size(); ++k) next[k] = text.find(special_[k].first);
    size_t at = 0;
    for (;;) {
        size_t found = std::string_view::npos, which = 0;
        for (size_t k = 0; k < special_.size(); ++k) {
            if (next[k] != std::string_view::npos && next[k] < at) next[k] = text.find(special_[k].first, at);
            if (next[k] < found) found = next[k], which = k;  // ties keep the longest (sorted first)
        }
        if (found == std::string_view::npos) break;
        encode_ordinary(text.substr(at, found - at), out);
        out.push_back(special_[which].second);
        at = found + special_[which].first.size();
    }
    encode_ordinary(text.substr(at), out);
}

}  // namespace gpt
