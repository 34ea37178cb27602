/* runtime_bench — times libgpt_runtime through its public C API; prints JSON.
 *   runtime_bench generate ART --threads N --batch B --context C --tokens T --reps R [--cuda-graphs 0|1]
 *       B sequences in one session: one batched prefill of C tokens each, then T greedy
 *       decode steps of all B together, each sampled by the runtime where its logits are
 *       (gpt_session_decode_sample_batch_v2: on a GPU only the ids come back), R times;
 *       --cuda-graphs 0 loads the model with GPT_MODEL_NO_CUDA_GRAPHS
 *   runtime_bench train ART --threads N --batch B --seq S --accum A --iters I --batches FILE
 *       I optimizer steps (lr 1e-3, constant) over the batches bench/suite.py wrote: int32
 *       x then y, each (iters, accum, batch, seq); bench/peers.py reads the same file
 * Every time is wall clock (CLOCK_MONOTONIC); the first repetition is reported apart. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpt_runtime.h"
#include "peak_rss.h"

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int die(const char *what, gpt_status s) {
    fprintf(stderr, "runtime_bench: %s: %s: %s\n", what, gpt_status_to_string(s), gpt_runtime_last_error());
    return 1;
}

static int arg_int(int argc, char **argv, const char *name, int fallback) {
    for (int i = 3; i + 1 < argc; ++i)
        if (strcmp(argv[i], name) == 0) return atoi(argv[i + 1]);
    return fallback;
}

static const char *arg_str(int argc, char **argv, const char *name) {
    for (int i = 3; i + 1 < argc; ++i)
        if (strcmp(argv[i], name) == 0) return argv[i + 1];
    return NULL;
}

static gpt_token argmax(const float *logits, int n) {
    int best = 0;
    for (int i = 1; i < n; ++i)
        if (logits[i] > logits[best]) best = i;
    return best;
}

static void print_list(const char *name, const double *v, int n) {
    printf("\"%s\": [", name);
    for (int i = 0; i < n; ++i) printf("%s%.4f", i ? ", " : "", v[i]);
    printf("]");
}

/* Peak host memory, and on a GPU peak device memory of the whole run, as the peers report
 * torch.cuda.max_memory_allocated. */
static void print_peak_memory(const struct gpt_model *model, const struct gpt_model_info *info) {
    struct gpt_memory_stats stats;
    printf(", \"peak_rss_mib\": %.1f", peak_rss_mib());
    if (strcmp(info->device, "cuda") == 0 && gpt_model_get_memory(model, &stats, sizeof stats) == GPT_OK)
        printf(", \"peak_device_bytes\": %llu", (unsigned long long)stats.device_peak_bytes);
}

/* `batch` sequences in one session, each prefilled with the same prompt, then decoded together. */
static int bench_generate(struct gpt_model *model, const struct gpt_model_info *info, int argc, char **argv) {
    const int context = arg_int(argc, argv, "--context", 128);
    const int tokens = arg_int(argc, argv, "--tokens", 32);
    const int reps = arg_int(argc, argv, "--reps", 3);
    const int batch = arg_int(argc, argv, "--batch", 1);
    const int vocab = info->vocab_size;
    if (context < 1 || context + tokens > info->block_size || reps < 1 || batch < 1) {
        fprintf(stderr, "runtime_bench: need 1 <= batch, 1 <= context and context + tokens <= %d\n", info->block_size);
        return 1;
    }
    gpt_token *prompt = malloc(sizeof(gpt_token) * (size_t)context);
    gpt_token *next = malloc(sizeof(gpt_token) * (size_t)batch);
    gpt_token *generated = malloc(sizeof(gpt_token) * (size_t)tokens); /* sequence 0's */
    float *logits = malloc(sizeof(float) * (size_t)vocab * (size_t)batch);
    double *prefill_ms = malloc(sizeof(double) * (size_t)reps);
    double *decode_ms = malloc(sizeof(double) * (size_t)reps); /* per step of the whole batch */
    for (int i = 0; i < context; ++i) prompt[i] = (gpt_token)((i * 7 + 3) % vocab);
    const gpt_token **prompts = malloc(sizeof(gpt_token *) * (size_t)batch); /* the same prompt in every row */
    int32_t *lengths = malloc(sizeof(int32_t) * (size_t)batch);
    for (int b = 0; b < batch; ++b) prompts[b] = prompt, lengths[b] = context;
    struct gpt_session *session = NULL;
    gpt_status s = gpt_session_create_batch(model, batch, &session);
    if (s != GPT_OK) return die("session", s);
    struct gpt_sampler_params greedy;
    gpt_sampler_default_params(&greedy, sizeof greedy);
    greedy.temperature = 0.0f;
    struct gpt_sampler **samplers = malloc(sizeof(struct gpt_sampler *) * (size_t)batch);
    for (int b = 0; b < batch; ++b)
        if ((s = gpt_sampler_create(&greedy, &samplers[b])) != GPT_OK) return die("sampler", s);
    for (int r = 0; r < reps; ++r) {
        double t0 = now_ms();
        s = gpt_session_prefill_batch_v2(session, prompts, lengths, logits, (size_t)batch * (size_t)vocab);
        if (s != GPT_OK) return die("prefill", s);
        double t1 = now_ms();
        for (int b = 0; b < batch; ++b) next[b] = argmax(logits + (size_t)b * vocab, vocab);
        for (int i = 0; i < tokens; ++i) {
            generated[i] = next[0];
            if ((s = gpt_session_decode_sample_batch_v2(session, next, samplers, next, NULL, 0)) != GPT_OK)
                return die("decode", s);
        }
        double t2 = now_ms();
        prefill_ms[r] = t1 - t0;
        decode_ms[r] = (t2 - t1) / tokens;
    }
    printf("{");
    print_list("prefill_ms", prefill_ms, reps);
    printf(", ");
    print_list("decode_ms_per_token", decode_ms, reps);
    printf(", \"tokens\": [");
    for (int i = 0; i < tokens; ++i) printf("%s%d", i ? ", " : "", generated[i]);
    printf("]");
    print_peak_memory(model, info);
    printf("}\n");
    gpt_session_free(session);
    for (int b = 0; b < batch; ++b) gpt_sampler_free(samplers[b]);
    free(samplers), free(prompt), free(prompts), free(lengths), free(next), free(generated), free(logits),
        free(prefill_ms), free(decode_ms);
    return 0;
}

static int bench_train(struct gpt_model *model, const struct gpt_model_info *info, int argc, char **argv) {
    const int batch = arg_int(argc, argv, "--batch", 4), seq = arg_int(argc, argv, "--seq", 128);
    const int accum = arg_int(argc, argv, "--accum", 1), iters = arg_int(argc, argv, "--iters", 10);
    const char *path = arg_str(argc, argv, "--batches");
    const size_t per_step = (size_t)accum * (size_t)batch * (size_t)seq, total = per_step * (size_t)iters;
    gpt_token *x = malloc(sizeof(gpt_token) * total), *y = malloc(sizeof(gpt_token) * total);
    FILE *f = path ? fopen(path, "rb") : NULL;
    if (!f || fread(x, sizeof(gpt_token), total, f) != total || fread(y, sizeof(gpt_token), total, f) != total) {
        fprintf(stderr, "runtime_bench: --batches must name a file of %zu x and %zu y int32 ids\n", total, total);
        return 1;
    }
    fclose(f);
    double *ms = malloc(sizeof(double) * (size_t)iters), *losses = malloc(sizeof(double) * (size_t)iters);
    struct gpt_trainer_params p;
    gpt_trainer_default_params(&p, sizeof p);
    p.decay_lr = false;
    p.learning_rate = 1e-3f;
    struct gpt_trainer *trainer = NULL;
    gpt_status s = gpt_trainer_create(model, &p, &trainer);
    if (s != GPT_OK) return die("trainer", s);
    for (int it = 0; it < iters; ++it) {
        float loss = 0.0f;
        const size_t at = (size_t)it * per_step;
        const double t0 = now_ms();
        if ((s = gpt_trainer_step(trainer, x + at, y + at, batch, seq, accum, &loss)) != GPT_OK) return die("step", s);
        ms[it] = now_ms() - t0;
        losses[it] = loss;
    }
    printf("{");
    print_list("iter_ms", ms, iters);
    printf(", ");
    print_list("loss", losses, iters);
    print_peak_memory(model, info);
    printf("}\n");
    gpt_trainer_free(trainer);
    free(x), free(y), free(ms), free(losses);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 3 || (strcmp(argv[1], "generate") != 0 && strcmp(argv[1], "train") != 0)) {
        fprintf(stderr, "usage: runtime_bench generate|train ARTIFACT [--threads N] [options]\n");
        return 2;
    }
    struct gpt_model_params params;
    gpt_model_default_params(&params, sizeof params);
    params.num_threads = arg_int(argc, argv, "--threads", 0);
    if (!arg_int(argc, argv, "--cuda-graphs", 1)) params.flags |= GPT_MODEL_NO_CUDA_GRAPHS;
    struct gpt_model *model = NULL;
    const double t0 = now_ms();
    gpt_status s = gpt_model_load(argv[2], &params, &model);
    if (s != GPT_OK) return die("load", s);
    fprintf(stderr, "runtime_bench: loaded in %.0f ms\n", now_ms() - t0);
    struct gpt_model_info info;
    gpt_model_get_info(model, &info, sizeof info);
    const int rc = strcmp(argv[1], "train") == 0 ? bench_train(model, &info, argc, argv)
                                                 : bench_generate(model, &info, argc, argv);
    gpt_model_free(model);
    return rc;
}
