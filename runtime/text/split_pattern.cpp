// split_pattern.cpp — PCRE2 behind SplitPattern.
//
// Tokenizer patterns are written for tiktoken's engine (Rust's regex crate),
// where \s is Unicode's White_Space property and $ is the end of the text only
// (PCRE2_DOLLAR_ENDONLY: not also before a final newline). PCRE2's \s in UCP mode is \p{Z}
// plus HT..CR, which leaves out U+0085 (NEXT LINE); it is added wherever the
// pattern says \s or \S, so both engines cut the same pieces.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "text/split_pattern.h"

#include <pcre2.h>

#include "base/error.h"

namespace gpt {

namespace {

// \s and \S rewritten to include U+0085; everything else verbatim.
std::string translate(std::string_view pattern) {
    std::string out;
    bool in_class = false;
    for (size_t i = 0; i < pattern.size(); ++i) {
        const char c = pattern[i];
        if (c == '\\' && i + 1 < pattern.size()) {
            const char e = pattern[++i];
            if (e == 's') {
                out += in_class ? "\\s\\x{85}" : "[\\s\\x{85}]";
            } else if (e == 'S') {
                if (in_class)
                    fail(GPT_ERR_ARTIFACT_INVALID, "tokenizer pattern: \\S inside a character class is not supported");
                out += "[^\\s\\x{85}]";
            } else {
                out += c;
                out += e;
            }
            continue;
        }
        if (!in_class && c == '[') {
            in_class = true;
            out += c;
            // A ']' right after '[' or '[^' is a literal member, not the end.
            if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
            if (i + 1 < pattern.size() && pattern[i + 1] == ']') out += pattern[++i];
            continue;
        }
        if (in_class && c == ']') in_class = false;
        out += c;
    }
    return out;
}

// Per-thread match state: one ovector pair (only the whole match is used) and
// a JIT stack that long whitespace runs may need beyond the default 32 KiB.
struct MatchState {
    pcre2_match_data *data = pcre2_match_data_create(1, nullptr);
    pcre2_jit_stack *stack = pcre2_jit_stack_create(size_t{32} << 10, size_t{4} << 20, nullptr);
    pcre2_match_context *context = pcre2_match_context_create(nullptr);
    MatchState() {
        if (data == nullptr || stack == nullptr || context == nullptr)
            fail(GPT_ERR_OUT_OF_MEMORY, "cannot allocate regex match state");
        pcre2_jit_stack_assign(context, nullptr, stack);
    }
    ~MatchState() {
        pcre2_match_context_free(context);
        pcre2_jit_stack_free(stack);
        pcre2_match_data_free(data);
    }
    MatchState(const MatchState &) = delete;
    MatchState &operator=(const MatchState &) = delete;
};

}  // namespace

struct SplitPattern::Compiled {
    pcre2_code *code = nullptr;
    ~Compiled() { pcre2_code_free(code); }
};

SplitPattern::SplitPattern(std::string_view pattern)
    : translated_(translate(pattern)), compiled_(std::make_unique<Compiled>()) {
    int error = 0;
    PCRE2_SIZE offset = 0;
    compiled_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated_.data()), translated_.size(),
                                    PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY, &error, &offset, nullptr);
    if (compiled_->code == nullptr) {
        PCRE2_UCHAR message[256];
        pcre2_get_error_message(error, message, sizeof message);
        fail(GPT_ERR_ARTIFACT_INVALID, "tokenizer pattern does not compile at offset " + std::to_string(offset) + ": " +
                                           reinterpret_cast<const char *>(message));
    }
    // Without JIT (an unsupported CPU) pcre2_match interprets: slower, same result.
    (void)pcre2_jit_compile(compiled_->code, PCRE2_JIT_COMPLETE);
}

SplitPattern::~SplitPattern() = default;

bool SplitPattern::next_match(std::string_view text, size_t at, size_t *begin, size_t *end) const {
    thread_local MatchState state;
    if (text.empty() || at > text.size()) return false;
    // The caller checked the text is UTF-8; PCRE2 need not check it again on every call.
    const int rc = pcre2_match(compiled_->code, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), at,
                               PCRE2_NO_UTF_CHECK, state.data, state.context);
    if (rc == PCRE2_ERROR_NOMATCH) return false;
    if (rc < 0) {
        PCRE2_UCHAR message[256];
        pcre2_get_error_message(rc, message, sizeof message);
        fail(GPT_ERR_INVALID_ARGUMENT,
             std::string("text cannot be split by the tokenizer's pattern: ") + reinterpret_cast<char *>(message));
    }
    const PCRE2_SIZE *ovector = pcre2_get_ovector_pointer(state.data);
    *begin = ovector[0];
    *end = ovector[1];
    return true;
}

}  // namespace gpt
