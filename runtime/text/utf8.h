// utf8.h — UTF-8 as the Unicode standard defines it (no overlongs, no surrogates,
// nothing past U+10FFFF): checking prompts, and turning a stream of token bytes
// into text that never shows a broken character.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace gpt {

// Byte offset of the first byte that is not part of a valid UTF-8 sequence, or
// std::string_view::npos when `text` is valid (a sequence cut by the end is invalid).
size_t first_invalid_utf8(std::string_view text);

// Token bytes in, complete characters out. A BPE token may end inside a
// character (GPT-2 splits many emoji and CJK characters over tokens), so bytes
// that could still become a character are held until the next push completes
// them. Bytes that can never become one are each replaced by U+FFFD, one per
// maximal ill-formed subsequence (Unicode's "substitution of maximal subparts",
// as Python's bytes.decode(errors="replace")): the stream's output is exactly the
// replaced decoding of all bytes pushed, whatever the split.
class Utf8Stream {
public:
    // Appends `bytes` and returns the text that is now complete.
    std::string push(std::string_view bytes);
    // End of the stream: a held incomplete sequence becomes one U+FFFD.
    std::string flush();
    // Bytes held back, waiting for the rest of their character (0..3).
    size_t pending() const { return pending_.size(); }

private:
    std::string pending_;
};

}  // namespace gpt
