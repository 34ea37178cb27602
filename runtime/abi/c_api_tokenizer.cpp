// c_api_tokenizer.cpp — the C ABI of the model's tokenizer: text to ids, ids to
// bytes, and the streaming detokenizer for generated text.
#include <optional>
#include <string_view>

#include "abi/c_api_guard.h"
#include "exec/model.h"
#include "text/stop_strings.h"
#include "text/tokenizer.h"
#include "text/utf8.h"

using gpt::c_api::copy_out;
using gpt::c_api::guarded;
using gpt::c_api::require;

struct gpt_detokenizer {
    std::shared_ptr<const gpt::Tokenizer> tokenizer;  // the vocabulary, alive as long as this needs it
    // Token bytes -> complete characters -> text before any stop string. A push that cannot be
    // written out leaves both as they were (the caller retries with a larger buffer).
    struct State {
        gpt::Utf8Stream characters;
        gpt::StopStrings stop;
    } state;
};

namespace {

// Every tokenize call: `text` holds `length` bytes, any of them NUL, or is a C string (no `length`).
gpt_status tokenize(const char *function, const gpt_model *model, const char *text, std::optional<size_t> length,
                    uint32_t flags, gpt_token *tokens, int32_t capacity, int32_t *out_count) {
    return guarded(function, [&] {
        require(model != nullptr && out_count != nullptr && (text != nullptr || length == size_t{0}),
                "model, text and out_count must not be NULL");
        require((flags & ~static_cast<uint32_t>(GPT_TOKENIZE_SPECIAL)) == 0,
                "flags holds a bit this library does not know");
        require(capacity >= 0 && (tokens != nullptr || capacity == 0), "tokens must hold capacity entries");
        const std::string_view view = length ? std::string_view(text, *length) : std::string_view(text);
        const auto ids = model->impl->tokenizer().encode(view, (flags & GPT_TOKENIZE_SPECIAL) != 0);
        *out_count = static_cast<int32_t>(ids.size());
        if (ids.size() > static_cast<size_t>(capacity))
            gpt::fail(GPT_ERR_BUFFER_TOO_SMALL,
                      "text needs " + std::to_string(ids.size()) + " tokens, capacity is " + std::to_string(capacity));
        std::copy(ids.begin(), ids.end(), tokens);
    });
}

// Writes `text` as copy_out does and, only when it fit, commits `next` as the stream's state.
void give_out(gpt_detokenizer *d, const std::string &text, gpt_detokenizer::State next, char *out, size_t capacity,
              size_t *out_size) {
    copy_out(text, out, capacity, out_size);
    d->state = std::move(next);
}

}  // namespace

extern "C" {

gpt_status gpt_model_tokenize(const struct gpt_model *model, const char *text, gpt_token *tokens, int32_t capacity,
                              int32_t *out_count) {
    return tokenize(__func__, model, text, std::nullopt, 0, tokens, capacity, out_count);
}

gpt_status gpt_model_tokenize_with_special(const struct gpt_model *model, const char *text, gpt_token *tokens,
                                           int32_t capacity, int32_t *out_count) {
    return tokenize(__func__, model, text, std::nullopt, GPT_TOKENIZE_SPECIAL, tokens, capacity, out_count);
}

gpt_status gpt_model_tokenize_n(const struct gpt_model *model, const char *text, size_t length, uint32_t flags,
                                gpt_token *tokens, int32_t capacity, int32_t *out_count) {
    return tokenize(__func__, model, text, length, flags, tokens, capacity, out_count);
}

gpt_status gpt_model_detokenize(const struct gpt_model *model, const gpt_token *tokens, int32_t n_tokens, char *text,
                                size_t capacity, size_t *out_size) {
    return guarded(__func__, [&] {
        require(model != nullptr && out_size != nullptr, "model and out_size must not be NULL");
        require(n_tokens >= 0 && (tokens != nullptr || n_tokens == 0), "tokens must hold n_tokens entries");
        require(text != nullptr || capacity == 0, "text must hold capacity bytes");
        copy_out(model->impl->tokenizer().decode(tokens, static_cast<size_t>(n_tokens)), text, capacity, out_size);
    });
}

gpt_status gpt_detokenizer_create(const struct gpt_model *model, struct gpt_detokenizer **out_detokenizer) {
    return guarded(__func__, [&] {
        require(model != nullptr && out_detokenizer != nullptr, "model and out_detokenizer must not be NULL");
        if (model->impl->tokenizer().kind() == "none")
            gpt::fail(GPT_ERR_INVALID_ARGUMENT, "this artifact has no text tokenizer");
        *out_detokenizer = new gpt_detokenizer{model->impl->shared_tokenizer(), {}};
    });
}

gpt_status gpt_detokenizer_free(struct gpt_detokenizer *detokenizer) {
    return guarded(__func__, [&] { delete detokenizer; });
}

gpt_status gpt_detokenizer_push(struct gpt_detokenizer *detokenizer, gpt_token token, char *text, size_t capacity,
                                size_t *out_size) {
    return guarded(__func__, [&] {
        require(detokenizer != nullptr && out_size != nullptr, "detokenizer and out_size must not be NULL");
        require(text != nullptr || capacity == 0, "text must hold capacity bytes");
        gpt_detokenizer::State next = detokenizer->state;
        const std::string complete = next.stop.push(next.characters.push(detokenizer->tokenizer->token_bytes(token)));
        give_out(detokenizer, complete, std::move(next), text, capacity, out_size);
    });
}

gpt_status gpt_detokenizer_flush(struct gpt_detokenizer *detokenizer, char *text, size_t capacity, size_t *out_size) {
    return guarded(__func__, [&] {
        require(detokenizer != nullptr && out_size != nullptr, "detokenizer and out_size must not be NULL");
        require(text != nullptr || capacity == 0, "text must hold capacity bytes");
        gpt_detokenizer::State next = detokenizer->state;
        std::string rest = next.stop.push(next.characters.flush());
        rest += next.stop.flush();
        next.stop.restart();  // the same strings for the next stream
        give_out(detokenizer, rest, std::move(next), text, capacity, out_size);
    });
}

gpt_status gpt_detokenizer_set_stop_strings(struct gpt_detokenizer *detokenizer, const char *const *stop_strings,
                                            int32_t n_stop_strings) {
    return guarded(__func__, [&] {
        require(detokenizer != nullptr, "detokenizer must not be NULL");
        require(n_stop_strings >= 0 && (stop_strings != nullptr || n_stop_strings == 0),
                "stop_strings must hold n_stop_strings entries");
        detokenizer->state.stop = gpt::StopStrings(gpt::c_api::string_list(stop_strings, n_stop_strings));
    });
}

gpt_status gpt_detokenizer_stopped(const struct gpt_detokenizer *detokenizer, int32_t *out_stop_index) {
    return guarded(__func__, [&] {
        require(detokenizer != nullptr && out_stop_index != nullptr, "detokenizer and out_stop_index must not be NULL");
        *out_stop_index = detokenizer->state.stop.stopped();
    });
}

}  // extern "C"
