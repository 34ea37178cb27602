// stop_strings.cpp — see stop_strings.h. At most 16 strings of at most 255 bytes:
// the held text is shorter than the longest string, so a plain search is enough.
#include "text/stop_strings.h"

#include <algorithm>

#include "base/error.h"
#include "gpt_runtime.h"
#include "text/utf8.h"

namespace gpt {

StopStrings::StopStrings(std::vector<std::string> strings) : strings_(std::move(strings)) {
    if (strings_.size() > GPT_MAX_STOP_STRINGS)
        fail(GPT_ERR_INVALID_ARGUMENT, "at most " + std::to_string(GPT_MAX_STOP_STRINGS) + " stop strings, not " +
                                           std::to_string(strings_.size()));
    for (const std::string &s : strings_) {
        if (s.empty() || s.size() > 255)
            fail(GPT_ERR_INVALID_ARGUMENT, "a stop string holds 1 to 255 bytes, not " + std::to_string(s.size()));
        if (first_invalid_utf8(s) != std::string_view::npos)
            fail(GPT_ERR_INVALID_ARGUMENT, "a stop string is not valid UTF-8");
    }
}

std::string StopStrings::push(std::string_view text) {
    if (stopped_ >= 0) return {};
    if (strings_.empty()) return std::string(text);
    held_.append(text);
    // The earliest occurrence of any string; at one place, the first string given.
    size_t earliest = std::string::npos;
    for (size_t i = 0; i < strings_.size(); ++i) {
        const size_t at = held_.find(strings_[i]);
        if (at < earliest) {
            earliest = at;
            stopped_ = static_cast<int>(i);
        }
    }
    if (stopped_ >= 0) {
        std::string out = held_.substr(0, earliest);
        held_.clear();
        return out;
    }
    // Hold the longest end of the text that is the start of some string.
    size_t hold = 0;
    for (const std::string &s : strings_)
        for (size_t n = std::min(s.size() - 1, held_.size()); n > hold; --n)
            if (held_.compare(held_.size() - n, n, s, 0, n) == 0) {
                hold = n;
                break;
            }
    std::string out = held_.substr(0, held_.size() - hold);
    held_.erase(0, held_.size() - hold);
    return out;
}

std::string StopStrings::flush() {
    std::string out;
    out.swap(held_);
    return out;
}

}  // namespace gpt
