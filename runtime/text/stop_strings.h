// stop_strings.h — where generated text must end: before the first occurrence of
// any of a request's stop strings (OpenAI's `stop`). Text arrives in pieces, so a
// piece's end that could be the start of a stop string is held back until the next
// piece shows whether it is one.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace gpt {

class StopStrings {
public:
    StopStrings() = default;
    // GPT_ERR_INVALID_ARGUMENT for more than GPT_MAX_STOP_STRINGS strings, or one that is
    // empty, longer than 255 bytes or not valid UTF-8.
    explicit StopStrings(std::vector<std::string> strings);

    bool empty() const { return strings_.empty(); }
    // Appends `text` and returns what can be given out now: everything before a stop
    // string once one is found (then nothing more, ever), else all but the longest end
    // that could still grow into one.
    std::string push(std::string_view text);
    // End of the text: what is still held back (it never became a stop string).
    std::string flush();
    // The index of the stop string found, -1 while none is.
    int stopped() const { return stopped_; }
    // A new text with the same strings.
    void restart() {
        held_.clear();
        stopped_ = -1;
    }

private:
    std::vector<std::string> strings_;
    std::string held_;
    int stopped_ = -1;
};

}  // namespace gpt
