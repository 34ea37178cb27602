/* tokenize_bench — encode throughput of the model's tokenizer through the public C API; prints JSON.
 *   tokenize_bench ARTIFACT TEXTFILE --mode whole|lines --reps N
 *       whole: the file's text in one gpt_model_tokenize call
 *       lines: one call per line, its newline included (prompt-sized calls)
 *   One untimed repetition first (warm-up; it also gives the ids' count and checksum), then N timed.
 *   Each timed repetition's throughput is the file's bytes over its wall clock (CLOCK_MONOTONIC),
 *   in MB/s (10^6 bytes), and over the process's CPU time (CLOCK_PROCESS_CPUTIME_ID:
 *   "cpu_mb_per_s"). "ids_sha256" is the sha256 of every id of one repetition, in order, as
 *   little-endian int32: bench/tokenizer_speed.py computes the same for tiktoken and HF tokenizers. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sodium.h>

#include "gpt_runtime.h"
#include "peak_rss.h"

static double clock_s(clockid_t clock) {
    struct timespec t;
    clock_gettime(clock, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static double now_s(void) { return clock_s(CLOCK_MONOTONIC); }

/* The process's CPU time: on a shared core, wall time also counts the slices other processes ran. */
static double cpu_s(void) { return clock_s(CLOCK_PROCESS_CPUTIME_ID); }

static int die(const char *what, gpt_status s) {
    fprintf(stderr, "tokenize_bench: %s: %s: %s\n", what, gpt_status_to_string(s), gpt_runtime_last_error());
    return 1;
}

static const char *arg_str(int argc, char **argv, const char *name) {
    for (int i = 3; i + 1 < argc; ++i)
        if (strcmp(argv[i], name) == 0) return argv[i + 1];
    return NULL;
}

/* The ids' checksum: sha256 (libsodium) over each id as little-endian int32. */
static void sha256_ids(crypto_hash_sha256_state *s, const gpt_token *ids, int32_t n) {
    for (int32_t i = 0; i < n; ++i) {
        const uint32_t u = (uint32_t)ids[i];
        const unsigned char le[4] = {(unsigned char)u, (unsigned char)(u >> 8), (unsigned char)(u >> 16),
                                     (unsigned char)(u >> 24)};
        crypto_hash_sha256_update(s, le, sizeof le);
    }
}

static void sha256_hex(crypto_hash_sha256_state *s, char out[65]) {
    unsigned char digest[crypto_hash_sha256_BYTES];
    crypto_hash_sha256_final(s, digest);
    sodium_bin2hex(out, 65, digest, sizeof digest);
}

/* ---- the benchmark ---------------------------------------------------------------------- */

/* The file's text, and its lines each as its own NUL-terminated string (newline kept). */
struct text {
    char *whole; /* NUL-terminated */
    size_t bytes;
    char *line_store;
    char **lines;
    size_t n_lines;
};

static int read_text(const char *path, struct text *t) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        perror(path);
        return 1;
    }
    fseek(f, 0, SEEK_END);
    const long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    t->bytes = size > 0 ? (size_t)size : 0;
    t->whole = malloc(t->bytes + 1);
    if (t->whole == NULL || fread(t->whole, 1, t->bytes, f) != t->bytes) {
        fprintf(stderr, "tokenize_bench: cannot read %s\n", path);
        fclose(f);
        return 1;
    }
    fclose(f);
    t->whole[t->bytes] = '\0';
    if (strlen(t->whole) != t->bytes) {
        fprintf(stderr, "tokenize_bench: %s holds a NUL byte\n", path);
        return 1;
    }
    t->n_lines = 0;
    for (size_t i = 0; i < t->bytes; ++i)
        if (t->whole[i] == '\n' || i + 1 == t->bytes) ++t->n_lines;
    t->line_store = malloc(t->bytes + t->n_lines + 1);
    t->lines = malloc(sizeof(char *) * (t->n_lines + 1));
    size_t at = 0, n = 0;
    for (size_t begin = 0; begin < t->bytes;) {
        size_t end = begin;
        while (end < t->bytes && t->whole[end] != '\n') ++end;
        if (end < t->bytes) ++end; /* the newline belongs to its line */
        t->lines[n++] = t->line_store + at;
        memcpy(t->line_store + at, t->whole + begin, end - begin);
        at += end - begin;
        t->line_store[at++] = '\0';
        begin = end;
    }
    return 0;
}

/* One repetition: every call of the mode. With `hash`, the ids go into it and *tokens counts them. */
static gpt_status run_once(const struct gpt_model *model, const struct text *t, int lines, gpt_token *ids,
                           int32_t capacity, crypto_hash_sha256_state *hash, long long *tokens) {
    if (!lines) {
        int32_t count = 0;
        const gpt_status s = gpt_model_tokenize(model, t->whole, ids, capacity, &count);
        if (s != GPT_OK) return s;
        if (hash != NULL) {
            sha256_ids(hash, ids, count);
            *tokens += count;
        }
        return GPT_OK;
    }
    for (size_t i = 0; i < t->n_lines; ++i) {
        int32_t count = 0;
        const gpt_status s = gpt_model_tokenize(model, t->lines[i], ids, capacity, &count);
        if (s != GPT_OK) return s;
        if (hash != NULL) {
            sha256_ids(hash, ids, count);
            *tokens += count;
        }
    }
    return GPT_OK;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: tokenize_bench ARTIFACT TEXTFILE --mode whole|lines --reps N\n");
        return 2;
    }
    const char *mode = arg_str(argc, argv, "--mode");
    const char *reps_arg = arg_str(argc, argv, "--reps");
    const int reps = reps_arg != NULL ? atoi(reps_arg) : 3;
    if (mode == NULL) mode = "whole";
    if ((strcmp(mode, "whole") != 0 && strcmp(mode, "lines") != 0) || reps < 1) {
        fprintf(stderr, "tokenize_bench: --mode is whole or lines, --reps at least 1\n");
        return 2;
    }
    const int lines = strcmp(mode, "lines") == 0;

    struct text t;
    if (read_text(argv[2], &t) != 0) return 1;
    if (t.bytes >= INT32_MAX) {
        fprintf(stderr, "tokenize_bench: the text is too long for one call\n");
        return 1;
    }

    struct gpt_model_params params;
    gpt_model_default_params(&params, sizeof params);
    struct gpt_model *model = NULL;
    const double load_start = now_s();
    gpt_status s = gpt_model_load(argv[1], &params, &model);
    if (s != GPT_OK) return die("load", s);
    const double load_s = now_s() - load_start;

    /* A BPE token is at least one byte of ordinary text: as many ids as bytes always fit. */
    const int32_t capacity = (int32_t)t.bytes + 1;
    gpt_token *ids = malloc(sizeof(gpt_token) * (size_t)capacity);
    double *mb_per_s = malloc(sizeof(double) * (size_t)reps);
    double *cpu_mb_per_s = malloc(sizeof(double) * (size_t)reps);
    if (ids == NULL || mb_per_s == NULL || cpu_mb_per_s == NULL) {
        fprintf(stderr, "tokenize_bench: out of memory\n");
        return 1;
    }

    crypto_hash_sha256_state hash;
    crypto_hash_sha256_init(&hash);
    long long tokens = 0;
    s = run_once(model, &t, lines, ids, capacity, &hash, &tokens); /* untimed: warm-up and checksum */
    if (s != GPT_OK) return die("tokenize", s);
    char hex[65];
    sha256_hex(&hash, hex);

    for (int r = 0; r < reps; ++r) {
        const double start = now_s(), cpu_start = cpu_s();
        s = run_once(model, &t, lines, ids, capacity, NULL, NULL);
        const double cpu_seconds = cpu_s() - cpu_start, seconds = now_s() - start;
        if (s != GPT_OK) return die("tokenize", s);
        mb_per_s[r] = (double)t.bytes / seconds / 1e6;
        cpu_mb_per_s[r] = (double)t.bytes / cpu_seconds / 1e6;
    }

    printf(
        "{\"impl\": \"runtime\", \"mode\": \"%s\", \"bytes\": %zu, \"calls\": %zu, \"tokens\": %lld, "
        "\"ids_sha256\": \"%s\", \"load_s\": %.3f, \"mb_per_s\": [",
        mode, t.bytes, lines ? t.n_lines : (size_t)1, tokens, hex, load_s);
    for (int r = 0; r < reps; ++r) printf("%s%.4f", r ? ", " : "", mb_per_s[r]);
    printf("], \"cpu_mb_per_s\": [");
    for (int r = 0; r < reps; ++r) printf("%s%.4f", r ? ", " : "", cpu_mb_per_s[r]);
    printf("], \"peak_rss_mib\": %.1f}\n", peak_rss_mib()); /* the whole process: libtorch and the model too */

    free(cpu_mb_per_s);
    free(mb_per_s);
    free(ids);
    free(t.lines);
    free(t.line_store);
    free(t.whole);
    s = gpt_model_free(model);
    return s == GPT_OK ? 0 : die("free", s);
}
