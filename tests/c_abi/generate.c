/* generate.c — compiled as C: include the header, link libgpt_runtime, generate text,
 * fill a struct as declared by an older header, and step two sequences with one
 * sampler each, log-probabilities and a stop string, as a server would.
 * Usage: c_abi_generate ARTIFACT_DIR. Exit 0 only if every check holds. */
#include <stdio.h>
#include <string.h>

#include "gpt_runtime.h"

#define CHECK(cond)                                                                      \
    do {                                                                                 \
        if (!(cond)) {                                                                   \
            fprintf(stderr, "check failed: %s (%s)\n", #cond, gpt_runtime_last_error()); \
            return 1;                                                                    \
        }                                                                                \
    } while (0)

enum { N_NEW = 24 };

static bool count_tokens(gpt_token token, void *user_data) {
    (void)token;
    ++*(int *)user_data;
    return true;
}

/* gpt_model_info as a caller built against an older header could hold it: the
 * fields up to `attention`, then bytes of its own that the library must not touch. */
struct older_model_info {
    size_t struct_size;
    const char *name, *device, *arch, *dtype, *attention;
};
struct older_caller {
    struct older_model_info info;
    unsigned char guard[64];
};

static int check_older_caller(struct gpt_model *model, const struct gpt_model_info *info) {
    struct older_caller caller;
    memset(&caller, 0xA5, sizeof caller);
    CHECK(gpt_model_get_info(model, (struct gpt_model_info *)(void *)&caller.info, sizeof caller.info) == GPT_OK);
    CHECK(caller.info.struct_size == sizeof caller.info);
    CHECK(strcmp(caller.info.name, info->name) == 0 && strcmp(caller.info.attention, info->attention) == 0);
    for (size_t i = 0; i < sizeof caller.guard; ++i) CHECK(caller.guard[i] == 0xA5);
    return 0;
}

/* Two sequences stepped together: one sampler each, every row of a step drawn in one call with its
 * log-probabilities, the text cut before a stop string by the detokenizer. */
static int step_batch(struct gpt_model *model, const struct gpt_model_info *info) {
    enum { N_SEQ = 2, N_TOP = 2, STEPS = 8 };
    struct gpt_session *session = NULL;
    CHECK(gpt_session_create_batch(model, N_SEQ, &session) == GPT_OK);
    const gpt_token a[] = {1, 2, 3}, b[] = {4, 5};
    const gpt_token *prompts[N_SEQ] = {a, b};
    const int32_t n_tokens[N_SEQ] = {3, 2};
    static float logits[N_SEQ * 4096];
    CHECK(info->vocab_size <= 4096);
    CHECK(gpt_session_prefill_batch_v2(session, prompts, n_tokens, logits, sizeof logits / sizeof *logits) == GPT_OK);
    struct gpt_sampler_params sp;
    CHECK(gpt_sampler_default_params(&sp, sizeof sp) == GPT_OK);
    struct gpt_sampler *samplers[N_SEQ] = {NULL, NULL};
    for (int i = 0; i < N_SEQ; ++i) {
        sp.seed = 10u + (uint64_t)i;
        CHECK(gpt_sampler_create(&sp, &samplers[i]) == GPT_OK);
    }
    struct gpt_detokenizer *detokenizer = NULL;
    CHECK(gpt_detokenizer_create(model, &detokenizer) == GPT_OK);
    const char *stop[] = {"\n"};
    CHECK(gpt_detokenizer_set_stop_strings(detokenizer, stop, 1) == GPT_OK);
    gpt_token tokens[N_SEQ];
    struct gpt_token_logprob logprobs[N_SEQ * (1 + N_TOP)];
    for (int step = 0; step < STEPS; ++step) {
        CHECK(gpt_sampler_sample_batch_v2(samplers, N_SEQ, logits, info->vocab_size, tokens, N_TOP, logprobs) ==
              GPT_OK);
        for (int i = 0; i < N_SEQ; ++i) {
            const struct gpt_token_logprob *row = logprobs + i * (1 + N_TOP);
            CHECK(row[0].token == tokens[i] && row[0].logprob <= 0.0f);
            CHECK(row[1].logprob >= row[2].logprob && row[1].logprob >= row[0].logprob);
        }
        char piece[64];
        size_t size = 0;
        CHECK(gpt_detokenizer_push(detokenizer, tokens[0], piece, sizeof piece, &size) == GPT_OK);
        CHECK(strchr(piece, '\n') == NULL); /* the text given out never holds the stop string */
        CHECK(gpt_session_decode_batch_v2(session, tokens, logits, sizeof logits / sizeof *logits) == GPT_OK);
    }
    int32_t stopped = -2;
    CHECK(gpt_detokenizer_stopped(detokenizer, &stopped) == GPT_OK);
    CHECK(stopped == -1 || stopped == 0);
    gpt_detokenizer_free(detokenizer);
    for (int i = 0; i < N_SEQ; ++i) CHECK(gpt_sampler_free(samplers[i]) == GPT_OK);
    CHECK(gpt_session_free(session) == GPT_OK);
    return 0;
}

static int run(struct gpt_model *model) {
    struct gpt_model_info info;
    CHECK(gpt_model_get_info(model, &info, sizeof info) == GPT_OK);
    CHECK(info.struct_size == sizeof info);
    CHECK(strcmp(info.device, "cpu") == 0);
    if (check_older_caller(model, &info) != 0) return 1;

    gpt_token prompt[16];
    int32_t n_prompt = 0;
    CHECK(gpt_model_tokenize(model, "Hello", prompt, 16, &n_prompt) == GPT_OK);
    CHECK(n_prompt == 5);

    struct gpt_session *session = NULL;
    CHECK(gpt_session_create(model, &session) == GPT_OK);
    struct gpt_generate_params params;
    CHECK(gpt_generate_default_params(&params, sizeof params) == GPT_OK);
    int streamed = 0;
    params.max_new_tokens = N_NEW;
    params.seed = 1234;
    params.on_token = count_tokens;
    params.user_data = &streamed;
    gpt_token out[N_NEW];
    int32_t n_out = 0;
    gpt_status status = gpt_session_generate(session, prompt, n_prompt, &params, out, N_NEW, &n_out);
    gpt_session_free(session);
    CHECK(status == GPT_OK);
    CHECK(n_out == N_NEW && streamed == N_NEW);
    for (int i = 0; i < n_out; ++i) CHECK(out[i] >= 0 && out[i] < info.vocab_size);

    char text[4 * N_NEW + 1];
    size_t size = 0;
    CHECK(gpt_model_detokenize(model, out, n_out, text, sizeof text, &size) == GPT_OK);
    CHECK(size == (size_t)n_out + 1); /* one byte per ASCII character, plus the NUL */
    printf("generated from C: \"Hello%s\"\n", text);
    return step_batch(model, &info);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s ARTIFACT_DIR\n", argv[0]);
        return 2;
    }
    CHECK(gpt_runtime_abi_version() == GPT_RUNTIME_ABI_VERSION);
    struct gpt_model_params mp;
    CHECK(gpt_model_default_params(&mp, sizeof mp) == GPT_OK);
    struct gpt_model *model = NULL;
    CHECK(gpt_model_load(argv[1], &mp, &model) == GPT_OK);
    int rc = run(model);
    CHECK(gpt_model_free(model) == GPT_OK);
    return rc;
}
