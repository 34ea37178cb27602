// split_pattern.h — the pre-tokenizer: a BPE tokenizer's regex (GPT-2's
// `'s|'t|...| ?\p{L}+| ?\p{N}+|...`) cuts text into pieces that are merged
// separately. Compiled once with PCRE2 (Unicode properties, JIT); matching is
// thread-safe.
#pragma once

#include <memory>
#include <string>
#include <string_view>

namespace gpt {

class SplitPattern {
public:
    // `pattern` is written for tiktoken's regex engine. Throws gpt::Error
    // (GPT_ERR_ARTIFACT_INVALID) when PCRE2 cannot compile it.
    explicit SplitPattern(std::string_view pattern);
    ~SplitPattern();
    SplitPattern(const SplitPattern &) = delete;
    SplitPattern &operator=(const SplitPattern &) = delete;

    // Calls on_piece(piece) for each non-empty match in `text` (valid UTF-8),
    // left to right, as tiktoken's find_iter; text no match covers is skipped.
    template <class OnPiece>
    void split(std::string_view text, OnPiece &&on_piece) const {
        size_t at = 0;
        size_t begin = 0, end = 0;
        while (next_match(text, at, &begin, &end)) {
            if (end > begin) on_piece(text.substr(begin, end - begin));
            at = end;
        }
    }

    // The pattern as given to PCRE2, after translating what the two engines
    // read differently (see split_pattern.cpp).
    const std::string &pcre2_pattern() const { return translated_; }

private:
    // The first match at or after `at`; an empty match moves `at` one character on.
    bool next_match(std::string_view text, size_t at, size_t *begin, size_t *end) const;

    struct Compiled;
    std::string translated_;
    std::unique_ptr<Compiled> compiled_;
};

}  // namespace gpt
