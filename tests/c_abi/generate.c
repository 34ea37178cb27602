/* generate.c — compiled as C: include the header, link libgpt_runtime, generate text,
 * and fill a struct as declared by an older header.
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
    return 0;
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
