// utf8.cpp — one classifier of the next sequence, used by both the validity
// check and the stream, so the two cannot disagree about what is a character.
#include "text/utf8.h"

#include <cstdint>

namespace gpt {

namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

enum class Next { complete, ill_formed, truncated };

struct Sequence {
    Next kind;
    size_t length;  // complete: the character's bytes; ill_formed: the maximal subpart to replace
};

// The sequence at the start of `s` (non-empty), per Table 3-7 of the Unicode
// standard: the lead byte fixes the length and the range of the second byte.
Sequence classify(std::string_view s) {
    const auto byte = [&](size_t i) { return static_cast<uint8_t>(s[i]); };
    const uint8_t lead = byte(0);
    if (lead < 0x80) return {Next::complete, 1};
    size_t length = 0;
    uint8_t low = 0x80, high = 0xBF;  // the second byte's range
    if (lead >= 0xC2 && lead <= 0xDF) {
        length = 2;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
        length = 3;
        if (lead == 0xE0) low = 0xA0;   // no overlongs
        if (lead == 0xED) high = 0x9F;  // no surrogates
    } else if (lead >= 0xF0 && lead <= 0xF4) {
        length = 4;
        if (lead == 0xF0) low = 0x90;   // no overlongs
        if (lead == 0xF4) high = 0x8F;  // nothing past U+10FFFF
    } else {
        return {Next::ill_formed, 1};  // a continuation byte, C0, C1 or F5..FF
    }
    for (size_t i = 1; i < length; ++i) {
        if (i == s.size()) return {Next::truncated, i};
        const uint8_t b = byte(i);
        const bool in_range = i == 1 ? (b >= low && b <= high) : (b >= 0x80 && b <= 0xBF);
        if (!in_range) return {Next::ill_formed, i};
    }
    return {Next::complete, length};
}

}  // namespace

size_t first_invalid_utf8(std::string_view text) {
    for (size_t i = 0; i < text.size();) {
        const Sequence seq = classify(text.substr(i));
        if (seq.kind != Next::complete) return i;
        i += seq.length;
    }
    return std::string_view::npos;
}

std::string Utf8Stream::push(std::string_view bytes) {
    pending_.append(bytes);
    std::string out;
    size_t i = 0;
    while (i < pending_.size()) {
        const Sequence seq = classify(std::string_view(pending_).substr(i));
        if (seq.kind == Next::truncated) break;  // may still complete: hold it
        if (seq.kind == Next::complete)
            out.append(pending_, i, seq.length);
        else
            out.append(kReplacement);
        i += seq.length;
    }
    pending_.erase(0, i);
    return out;
}

std::string Utf8Stream::flush() {
    std::string out = pending_.empty() ? std::string() : std::string(kReplacement);
    pending_.clear();
    return out;
}

}  // namespace gpt
