// split_pattern.cpp — PCRE2 behind SplitPattern.
//
// Tokenizer patterns are written for tiktoken's engine (Rust's fancy-regex, which hands
// classes and properties to the regex crate). PCRE2 (with PCRE2_UTF | PCRE2_UCP) reads some
// of their escapes differently, so translate() rewrites those, in this one place, into what
// the regex crate means (its tables, in unicode_tables.h, generated from them):
//   \s \S   White_Space, as an explicit class. PCRE2's \s is \p{Z} plus its \h and \v lists,
//           which hold U+180E (MONGOLIAN VOWEL SEPARATOR, White_Space until Unicode 6.3).
//   \p{..} \P{..} \pX \PX \d \D   a general category (by any name the regex crate takes for
//           one) as PCRE2's property plus the code points the category gained from PCRE2's
//           Unicode version to the regex crate's (Kaktovik numerals, Unicode 15, are \p{N} for
//           tiktoken and unassigned for PCRE2 10.42). Other properties (scripts, binary ones)
//           keep PCRE2's meaning.
//   \w \W   UTS #18's <word> (Alphabetic, marks, Nd, Pc, Join_Control), from PCRE2's properties
//           plus what they gained (PCRE2 10.42's \w is \p{L}, \p{N} and '_'); \b \B as
//           look-arounds over it.
//   $       the end of the text only (PCRE2_DOLLAR_ENDONLY, not also before a final newline);
//           . excludes \n only (newline convention LF, whatever PCRE2's build default).
// Inside a class a negated escape needs its complement written out: \S's is; \W's, and
// \P{..}'s and \D's of a category that gained code points, cannot be (PCRE2 has no class
// subtraction) and are refused, as are nested classes and set operations (&&, --, ~~), which
// the regex crate has and PCRE2 reads as literal characters.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "text/split_pattern.h"

#include <pcre2.h>

#include <cstdio>
#include <vector>

#include "base/error.h"
#include "text/unicode_tables.h"

namespace gpt {

namespace {

using unicode_tables::Range;

[[noreturn]] void unsupported(const std::string &what) {
    fail(GPT_ERR_ARTIFACT_INVALID, "tokenizer pattern: " + what + " is not supported (docs/TOKENIZERS.md)");
}

void append_code_point(std::string &out, char32_t c) {
    char buffer[16];
    std::snprintf(buffer, sizeof buffer, "\\x{%X}", static_cast<unsigned>(c));
    out += buffer;
}

// `ranges` as class items: \x{A}\x{B}-\x{C}...
std::string class_items(const std::vector<Range> &ranges) {
    std::string out;
    for (const Range &r : ranges) {
        append_code_point(out, r.first);
        if (r.last != r.first) {
            out += '-';
            append_code_point(out, r.last);
        }
    }
    return out;
}

// Every code point not in `ranges` (sorted, disjoint), as ranges. PCRE2 refuses a surrogate
// written as \x{..} in UTF mode, so no range starts or ends on one (none is in UTF-8 text).
std::vector<Range> complement(const std::vector<Range> &ranges) {
    std::vector<Range> out;
    const auto add = [&out](char32_t first, char32_t last) {
        if (first >= 0xD800 && first <= 0xDFFF) first = 0xE000;
        if (last >= 0xD800 && last <= 0xDFFF) last = 0xD7FF;
        if (first <= last) out.push_back({first, last});
    };
    char32_t next = 0;
    for (const Range &r : ranges) {
        if (r.first > next) add(next, r.first - 1);
        next = r.last + 1;
    }
    if (next <= 0x10FFFF) add(next, 0x10FFFF);
    return out;
}

template <size_t N>
std::vector<Range> table(const Range (&ranges)[N]) {
    return {ranges, ranges + N};
}

// What an escape matches, as class items, and whether the escape is negated (\S, \P{L}):
// `items` may hold PCRE2 properties, so a negated one is written [^items] outside a class;
// `complement` holds its complement's items when it is explicit (empty: not computable).
struct ClassEscape {
    std::string items;
    bool negated = false;
    std::string complement;  // for a negated escape inside a class
};

ClassEscape explicit_set(const std::vector<Range> &ranges, bool negated) {
    return {class_items(ranges), negated, negated ? class_items(complement(ranges)) : std::string()};
}

// A general category by any name the regex crate takes for it, compared as it compares them
// (regex-syntax's symbolic_name_normalize: ASCII letters lower-cased, ' ', '_' and '-' dropped,
// an "is" prefix ignored, except that "isc" stays "isc"). Null when `name` is no category.
const unicode_tables::Category *category_named(std::string_view name) {
    std::string normalized;
    const bool is_prefix = name.size() >= 2 && (name[0] == 'i' || name[0] == 'I') && (name[1] == 's' || name[1] == 'S');
    for (size_t i = is_prefix ? 2 : 0; i < name.size(); ++i) {
        const auto c = static_cast<unsigned char>(name[i]);
        if (c == ' ' || c == '_' || c == '-' || c >= 0x80) continue;
        normalized += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    }
    if (is_prefix && normalized == "c") normalized = "isc";
    for (const auto &alias : unicode_tables::kCategoryAliases) {
        if (normalized != alias.name) continue;
        for (const auto &category : unicode_tables::kCategories)
            if (std::string_view(category.abbreviation) == alias.abbreviation) return &category;
    }
    return nullptr;
}

// \w: the properties of UTS #18's <word> that PCRE2 has, and what they lack.
std::string word_items() { return unicode_tables::kWordItems + class_items(table(unicode_tables::kGainedWord)); }

ClassEscape category_escape(const unicode_tables::Category &category, bool negated) {
    ClassEscape e;
    e.items = std::string("\\p{") + category.abbreviation + "}" +
              class_items({category.gained, category.gained + category.n_gained});
    e.negated = negated;
    if (negated && category.n_gained == 0) e.complement = std::string("\\P{") + category.abbreviation + "}";
    return e;
}

// The escape at pattern[i] ('\\' there) if translate() rewrites it; `*length` gets its length.
bool class_escape(std::string_view pattern, size_t i, ClassEscape *out, size_t *length) {
    const char e = pattern[i + 1];
    *length = 2;
    switch (e) {
        case 's':
        case 'S': *out = explicit_set(table(unicode_tables::kWhiteSpace), e == 'S'); return true;
        case 'w':
        case 'W':
            out->items = word_items();
            out->negated = e == 'W';
            return true;
        case 'd':
        case 'D': *out = category_escape(*category_named("Nd"), e == 'D'); return true;
        case 'p':
        case 'P': {
            std::string_view name;
            if (i + 2 >= pattern.size()) return false;
            if (pattern[i + 2] == '{') {
                const size_t close = pattern.find('}', i + 3);
                if (close == std::string_view::npos) return false;
                name = pattern.substr(i + 3, close - (i + 3));
                *length = close + 1 - i;
            } else {
                name = pattern.substr(i + 2, 1);
                *length = 3;
            }
            const unicode_tables::Category *category = category_named(name);
            if (category == nullptr) return false;  // a script or another property: PCRE2's meaning
            *out = category_escape(*category, e == 'P');
            return true;
        }
        default: return false;
    }
}

// Rewrites what the two engines read differently (see the top of this file); the rest verbatim.
std::string translate(std::string_view pattern) {
    std::string out;
    bool in_class = false;
    for (size_t i = 0; i < pattern.size(); ++i) {
        const char c = pattern[i];
        if (c == '\\' && i + 1 < pattern.size()) {
            ClassEscape escape;
            size_t length = 0;
            if (class_escape(pattern, i, &escape, &length)) {
                if (!in_class) {
                    out += (escape.negated ? "[^" : "[") + escape.items + "]";
                } else if (!escape.negated) {
                    out += escape.items;
                } else if (!escape.complement.empty()) {
                    out += escape.complement;
                } else {
                    unsupported(std::string(pattern.substr(i, length)) +
                                " inside a character class (a class cannot leave out the code points PCRE2's older "
                                "tables lack)");
                }
                i += length - 1;
                continue;
            }
            const char e = pattern[++i];
            if (!in_class && (e == 'b' || e == 'B')) {
                // A word boundary of Unicode \w, as the regex crate has it.
                const std::string word = "[" + word_items() + "]";
                const std::string at = "(?<=" + word + ")", not_at = "(?<!" + word + ")";
                const std::string before = "(?=" + word + ")", not_before = "(?!" + word + ")";
                out += e == 'b' ? "(?:" + at + not_before + "|" + not_at + before + ")"
                                : "(?:" + at + before + "|" + not_at + not_before + ")";
                continue;
            }
            out += c;
            out += e;
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
        if (in_class && c == '[') unsupported("a nested class or POSIX class ([...[...]...])");
        if (in_class && i + 1 < pattern.size() && pattern[i + 1] == c && (c == '&' || c == '-' || c == '~'))
            unsupported(std::string("the class operator ") + c + c);
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
    // LF is the only newline, as in the regex crate ('.' matches anything but \n), whatever PCRE2's build default.
    const std::unique_ptr<pcre2_compile_context, void (*)(pcre2_compile_context *)> context(
        pcre2_compile_context_create(nullptr), pcre2_compile_context_free);
    if (context == nullptr) fail(GPT_ERR_OUT_OF_MEMORY, "cannot allocate a regex compile context");
    pcre2_set_newline(context.get(), PCRE2_NEWLINE_LF);
    compiled_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated_.data()), translated_.size(),
                                    PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY, &error, &offset, context.get());
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

std::string SplitPattern::pcre2_unicode_version() {
    char version[32] = {};
    if (pcre2_config(PCRE2_CONFIG_UNICODE_VERSION, version) < 0) return "";
    return version;
}

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
