/* dist_rank.c — one rank of the data-parallel tests: trains ARTIFACT for STEPS
 * steps (0 = until stopped) on its shard of a deterministic global batch and
 * prints "loss <iteration> <loss> <grad norm>" per step, then "status <name>".
 *   dist_rank ARTIFACT WORLD RANK PORT TIMEOUT_MS STEPS CKPT_PREFIX RESUME
 * WORLD 1 uses the plain (not distributed) trainer. Rank 0 saves
 * CKPT_PREFIX.<iteration> after every step unless CKPT_PREFIX is "-"; RESUME
 * ("-" = none) is a checkpoint every rank loads first. With BAD_STEP (optional;
 * -1 = none) this rank puts an out-of-range token into that step's batch; a step
 * refused for its arguments prints "refused <iteration> <status> <ms>" and is
 * retried once with good data. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "gpt_runtime.h"

enum { GLOBAL_ROWS = 4, SEQ = 16, ACCUM = 2, VOCAB = 90 };

/* Micro-batch k of step `it`: GLOBAL_ROWS rows of SEQ tokens; rank r of `world`
 * takes rows [r * GLOBAL_ROWS / world, (r + 1) * GLOBAL_ROWS / world). */
static void shard(long it, int world, int rank, gpt_token *x, gpt_token *y) {
    const int rows = GLOBAL_ROWS / world;
    int n = 0;
    for (int k = 0; k < ACCUM; ++k)
        for (int row = rank * rows; row < (rank + 1) * rows; ++row)
            for (int t = 0; t < SEQ; ++t, ++n) {
                const unsigned long h =
                    (unsigned long)(((it * ACCUM + k) * GLOBAL_ROWS + row) * SEQ + t) * 2654435761UL;
                x[n] = (gpt_token)((h >> 7) % VOCAB);
                y[n] = (gpt_token)((h >> 17) % VOCAB);
            }
}

static int finish(gpt_status status) {
    printf("status %s\n", gpt_status_to_string(status));
    if (status != GPT_OK) fprintf(stderr, "%s\n", gpt_runtime_last_error());
    return status == GPT_OK ? 0 : 1;
}

int main(int argc, char **argv) {
    if (argc != 9 && argc != 10) {
        fprintf(stderr, "usage: dist_rank ARTIFACT WORLD RANK PORT TIMEOUT_MS STEPS CKPT_PREFIX RESUME [BAD_STEP]\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    struct gpt_dist_params dist;
    gpt_dist_default_params(&dist, sizeof dist);
    dist.world_size = atoi(argv[2]);
    dist.rank = atoi(argv[3]);
    dist.master_port = atoi(argv[4]);
    dist.timeout_ms = atoi(argv[5]);
    const long steps = atol(argv[6]);
    const char *prefix = argv[7], *resume = argv[8];
    const long bad_step = argc == 10 ? atol(argv[9]) : -1;
    long retried = -1;
    if (dist.world_size < 1 || GLOBAL_ROWS % dist.world_size != 0) return 2;

    struct gpt_trainer_params params;

    gpt_trainer_default_params(&params, sizeof params);
    params.learning_rate = 1e-2f;
    params.warmup_iters = 2;
    params.lr_decay_iters = 20;
    struct gpt_model *model = NULL;
    struct gpt_trainer *trainer = NULL;
    gpt_status s = gpt_model_load(argv[1], NULL, &model);
    if (s == GPT_OK)
        s = dist.world_size == 1 ? gpt_trainer_create(model, &params, &trainer)
                                 : gpt_trainer_create_distributed(model, &params, &dist, &trainer);
    if (s == GPT_OK && resume[0] != '-') s = gpt_trainer_load(trainer, resume);
    struct gpt_trainer_state state = {0};
    if (s == GPT_OK) s = gpt_trainer_get_state(trainer, &state, sizeof state);

    static gpt_token x[ACCUM * GLOBAL_ROWS * SEQ], y[ACCUM * GLOBAL_ROWS * SEQ];
    const int rows = GLOBAL_ROWS / dist.world_size;
    for (long it = state.iteration; s == GPT_OK && (steps == 0 || it < steps); ++it) {
        float loss = 0.0f;
        shard(it, dist.world_size, dist.rank, x, y);
        if (it == bad_step && retried != it) x[rows * SEQ + 1] = VOCAB + 1000; /* in micro-batch 1 */
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        s = gpt_trainer_step(trainer, x, y, rows, SEQ, ACCUM, &loss);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        if (s != GPT_OK && s != GPT_ERR_PEER_FAILED && argc == 10 && retried != it) {
            const long ms = (t1.tv_sec - t0.tv_sec) * 1000L + (t1.tv_nsec - t0.tv_nsec) / 1000000L;
            printf("refused %ld %s %ld\n", it, gpt_status_to_string(s), ms);
            fprintf(stderr, "%s\n", gpt_runtime_last_error());
            retried = it;
            s = GPT_OK;
            --it;
            continue;
        }
        if (s != GPT_OK) break;
        struct gpt_trainer_state after = {0};
        gpt_trainer_get_state(trainer, &after, sizeof after);
        printf("loss %ld %.9g %.9g\n", it, loss, after.grad_norm);
        if (dist.rank == 0 && prefix[0] != '-') {
            char path[4096];
            snprintf(path, sizeof path, "%s.%ld", prefix, it + 1);
            s = gpt_trainer_save(trainer, path);
        }
    }
    gpt_trainer_free(trainer);
    gpt_model_free(model);
    return finish(s);
}
