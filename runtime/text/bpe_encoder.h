// bpe_encoder.h — tiktoken's encoder: special tokens (when allowed) cut the text
// into segments, the split pattern cuts each segment into pieces, and each piece
// is one token if its bytes are one, else byte-pair merged.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "text/byte_pair.h"
#include "text/split_pattern.h"

namespace gpt {

class BpeEncoder {
public:
    // `ranks`: every ordinary token (all 256 single bytes among them);
    // `special`: (text, id) of each special token.
    BpeEncoder(RankTable ranks, std::shared_ptr<const SplitPattern> pattern,
               std::vector<std::pair<std::string, gpt_token>> special);

    // Appends the ids of `text` (valid UTF-8) to `out`. Special tokens' text is
    // recognised only with `allow_special` (tiktoken's allowed_special="all");
    // otherwise it is ordinary text, as tiktoken's encode_ordinary.
    void encode(std::string_view text, bool allow_special, std::vector<gpt_token> &out) const;

private:
    void encode_ordinary(std::string_view text, std::vector<gpt_token> &out) const;

    RankTable ranks_;
    std::shared_ptr<const SplitPattern> pattern_;             // compiled once, shareable between encoders
    std::vector<std::pair<std::string, gpt_token>> special_;  // longest first: the longest match wins at a position
};

}  // namespace gpt
