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
    // (GPT_ERR_ARTIFACT_INVALID) when PCRE2 cannot compile it or it uses what cannot
    // be translated for PCRE2 (split_pattern.cpp).
    explicit SplitPattern(std::string_view pattern);
    ~SplitPattern();
    SplitPattern(const SplitPattern &) = delete;
    SplitPattern &operator=(const SplitPattern &) = delete;

    // Calls on_piece(piece) for the pieces of `text` (valid UTF-8), left to
    // right: each non-empty match, and each stretch no match covers (between
    // two matches, before the first, after the last) as one piece of its own,
    // so the pieces always concatenate to the whole text and every byte is
    // encoded. This is Hugging Face's Split pre-tokenizer with behavior
    // "isolated", which tokenizer.json files use; an empty match gives no
    // piece but ends the stretch before it, as in HF. tiktoken's find_iter drops the stretches, but
    // its patterns (GPT-2's, cl100k's, o200k's) leave none, so for them both
    // give the same pieces.
    template <class OnPiece>
    void split(std::string_view text, OnPiece &&on_piece) const {
        size_t covered = 0;  // the end of the last piece given out
        size_t at = 0;
        size_t begin = 0, end = 0;
        while (next_match(text, at, &begin, &end)) {
            if (begin > covered) on_piece(text.substr(covered, begin - covered));
            if (end > begin) on_piece(text.substr(begin, end - begin));
            covered = end;
            at = end > begin ? end : next_char(text, end);
        }
        if (text.size() > covered) on_piece(text.substr(covered));
    }

    // The pattern as given to PCRE2, after translating what the two engines
    // read differently (see split_pattern.cpp).
    const std::string &pcre2_pattern() const { return translated_; }
    // The Unicode version of PCRE2's tables ("14.0.0" for PCRE2 10.42): the translation adds
    // what the categories gained from unicode_tables::kPcre2UnicodeVersion on, so the two must agree.
    static std::string pcre2_unicode_version();

private:
    // The first match at or after `at`, empty or not; false when there is none.
    bool next_match(std::string_view text, size_t at, size_t *begin, size_t *end) const;
    // Where the character after the one at `at` starts; past the end when `at` is the end.
    static size_t next_char(std::string_view text, size_t at) {
        ++at;
        while (at < text.size() && (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80) ++at;
        return at;
    }

    struct Compiled;
    std::string translated_;
    std::unique_ptr<Compiled> compiled_;
};

}  // namespace gpt
