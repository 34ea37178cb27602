/* Loads an artifact through the installed libgpt_runtime and generates a few tokens. */
#include <gpt_runtime.h>
#include <stdio.h>

int main(int argc, char **argv) {
    struct gpt_model *model = NULL;
    struct gpt_session *session = NULL;
    if (argc != 2 || gpt_model_load(argv[1], NULL, &model) != GPT_OK || gpt_session_create(model, &session) != GPT_OK) {
        fprintf(stderr, "consumer: %s\n", gpt_runtime_last_error());
        return 1;
    }
    const gpt_token prompt[] = {1, 2, 3};
    gpt_token out[8];
    int32_t n = 0;
    struct gpt_generate_params p;
    gpt_generate_default_params(&p, sizeof p);
    p.max_new_tokens = 8;
    gpt_status s = gpt_session_generate(session, prompt, 3, &p, out, 8, &n);
    gpt_session_free(session);
    gpt_model_free(model);
    printf("consumer generated %d tokens (abi %u)\n", n, gpt_runtime_abi_version());
    return s == GPT_OK && n == 8 ? 0 : 1;
}
