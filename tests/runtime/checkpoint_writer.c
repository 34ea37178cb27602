/* checkpoint_writer.c — helper for the kill-during-save test: loads ARTIFACT,
 * prints "ready", then alternates a training step and a checkpoint save to PATH,
 * printing "saved" after each, until it is killed. */
#include <stdio.h>

#include "gpt_runtime.h"

int main(int argc, char **argv) {
    if (argc != 3) return 2;
    struct gpt_model *model = NULL;
    struct gpt_trainer *trainer = NULL;
    if (gpt_model_load(argv[1], NULL, &model) != GPT_OK || gpt_trainer_create(model, NULL, &trainer) != GPT_OK) {
        fprintf(stderr, "%s\n", gpt_runtime_last_error());
        return 1;
    }
    gpt_token x[2 * 16], y[2 * 16];
    for (int i = 0; i < 32; ++i) {
        x[i] = (gpt_token)(i % 50);
        y[i] = (gpt_token)((i + 1) % 50);
    }
    printf("ready\n");
    fflush(stdout);
    for (;;) {
        float loss = 0.0f;
        if (gpt_trainer_step(trainer, x, y, 2, 16, 1, &loss) != GPT_OK ||
            gpt_trainer_save(trainer, argv[2]) != GPT_OK) {
            fprintf(stderr, "%s\n", gpt_runtime_last_error());
            return 1;
        }
        printf("saved\n");
        fflush(stdout);
    }
}
