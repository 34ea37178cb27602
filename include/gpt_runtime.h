/*
 * gpt_runtime.h — C ABI of libgpt_runtime: load an ahead-of-time compiled GPT
 * artifact (see docs/ARCHITECTURE.md) and run generation without Python.
 *
 * Objects and threads
 *   struct gpt_model    Loaded, verified artifact: weights and compiled graphs.
 *                       Inference never changes it, so threads share it: its
 *                       sessions run at once. A trainer does: see below.
 *   struct gpt_session  State of one sequence, or of several decoded together
 *                       (KV cache, positions). Use a session from one thread at
 *                       a time; give each thread its own.
 *   struct gpt_trainer  Optimizer state over a model compiled with training graphs,
 *                       alone or as one rank of data-parallel training.
 *                       It updates the model's weights in place: sessions see the
 *                       new weights on their next call, so do not run sessions
 *                       while a trainer step is in progress. Its dropout masks come
 *                       from random generators of its own, so trainers in one
 *                       process train as each would alone. The compiled step draws
 *                       from torch's default generators, which each step borrows and
 *                       gives back: steps of several trainers queue for them, and
 *                       torch code in the process that draws while a step runs
 *                       draws from (and perturbs) that trainer's stream.
 *   struct gpt_detokenizer  Token bytes in, complete UTF-8 characters out, for one
 *                       stream of generated tokens; one thread at a time.
 *   Sessions and trainers share ownership of their model: gpt_model_free releases
 *   the caller's handle and returns GPT_OK, and the model (weights, graphs) is
 *   freed with the last of the handle, its sessions and its trainers. A
 *   detokenizer keeps only the model's vocabulary. Any object freed while another
 *   thread still uses it is the caller's error.
 *
 * Names
 *   gpt_<object>_<verb>: gpt_model_load, gpt_model_tokenize, gpt_session_decode,
 *   gpt_trainer_step, ... Every object has one gpt_<object>_free, which takes NULL
 *   as a no-op and returns gpt_status.
 *
 * Errors
 *   Every call that can fail returns gpt_status. On failure, outputs are left
 *   untouched and gpt_runtime_last_error() describes what happened and what to do,
 *   valid until the next call on the same thread. The exceptions, each stated at
 *   its function: GPT_ERR_BUFFER_TOO_SMALL still reports the size needed
 *   (*out_size, *out_count); gpt_model_verify reports the error it measured; a
 *   batched prefill that fails while running leaves its sequences empty;
 *   gpt_session_generate cancelled by its token callback (GPT_ERR_ABORTED) still
 *   writes the tokens generated so far and their count. No C++
 *   exception crosses this boundary and the library never aborts the process or
 *   writes to stdout.
 *
 * Logging
 *   To stderr at the level named by the GPT_LOG environment variable (trace,
 *   debug, info, warn, error, off; default warn), or to gpt_log_set_callback's sink.
 *
 * Versioning
 *   GPT_RUNTIME_ABI_VERSION grows with additive changes only; a changed
 *   signature gets a new name (_v2). The structs passed by pointer grow at their
 *   end without breaking callers built against an older header: each begins with
 *   `struct_size`, the size the caller knows.
 *     - A function that fills a struct (gpt_model_get_info, gpt_model_get_memory,
 *       gpt_trainer_get_state, the *_default_params) takes that size as its last
 *       argument, `sizeof` of the caller's struct, writes only those bytes (the
 *       fields the caller knows) and sets struct_size to the bytes it filled, which
 *       is less when the caller's header is newer than the library.
 *     - A function that reads a params struct takes the fields within its
 *       struct_size and the defaults for the rest; a struct_size larger than the
 *       library knows is refused (GPT_ERR_INVALID_ARGUMENT): a setting the library
 *       cannot see would be ignored silently.
 *   Params structs are made by their *_default_params() and then edited field by field:
 *       struct gpt_model_params params;
 *       gpt_model_default_params(&params, sizeof params);
 *       params.num_threads = 4;
 */
#ifndef GPT_RUNTIME_H
#define GPT_RUNTIME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The library is POSIX-only (ELF symbol visibility, environ, pthreads): no Windows export branch. */
#define GPT_API __attribute__((visibility("default")))

#ifdef __cplusplus
extern "C" {
#endif

/* What each version added, and what ABI 3 changed since without a new version: docs/ABI.md. */
#define GPT_RUNTIME_ABI_VERSION 3

typedef int32_t gpt_token;

typedef enum gpt_status {
    GPT_OK = 0,

    /* The call's arguments (1xx). */
    GPT_ERR_INVALID_ARGUMENT = 100, /* NULL pointer, zero count, bad option */
    GPT_ERR_OUT_OF_RANGE = 101,     /* token id >= vocab, prompt longer than the context */
    GPT_ERR_BUFFER_TOO_SMALL = 102, /* output capacity too small; the needed size is reported */

    /* The artifact (2xx). */
    GPT_ERR_ARTIFACT_NOT_FOUND = 200, /* no manifest.json at the path */
    GPT_ERR_ARTIFACT_INVALID = 201,   /* malformed manifest or file */
    GPT_ERR_ARTIFACT_VERSION = 202,   /* unknown format version */
    GPT_ERR_ARTIFACT_HASH = 203,      /* a file does not match its sha256: refused before loading */
    GPT_ERR_ARTIFACT_SIGNATURE = 204, /* signature missing or wrong */
    GPT_ERR_TORCH_VERSION = 205,      /* compiled with an incompatible torch */
    GPT_ERR_VERIFY_FAILED = 206,      /* golden vector does not match */

    /* The device (3xx). */
    GPT_ERR_DEVICE_MISMATCH = 300,    /* artifact built for another device or arch */
    GPT_ERR_DEVICE_UNAVAILABLE = 301, /* the artifact's device is not present */

    /* Resources and execution (4xx). */
    GPT_ERR_OUT_OF_MEMORY = 400, /* host or device allocation failed; the model stays usable */
    GPT_ERR_CUDA = 401,          /* a CUDA call failed; the message carries CUDA's error string */
    GPT_ERR_ABORTED = 402,       /* a callback asked to stop (a token callback, a session's abort callback) */
    GPT_ERR_BUSY = 403,          /* the object is in use. The library itself no longer returns it (gpt_model_free
                                    did, for a model with sessions, before they shared its ownership: docs/ABI.md);
                                    kept for applications' own use, e.g. gpt-server refuses a concurrent reload */
    GPT_ERR_NON_FINITE = 404,    /* training produced a NaN/Inf loss or gradient (weights were not updated), or
                                    generation met NaN/+inf logits (nothing can be sampled from them) */
    GPT_ERR_PEER_FAILED = 405,   /* another rank of distributed training died, hung past the timeout or never
                                    joined; the trainer cannot step again: free it and restart from a checkpoint */
    GPT_ERR_IO = 406,            /* a file could not be written (disk full, file size limit, permissions) */

    GPT_ERR_INTERNAL = 900
} gpt_status;

struct gpt_model;
struct gpt_session;
struct gpt_trainer;
struct gpt_detokenizer;

/* ---- library ---------------------------------------------------------------- */

GPT_API uint32_t gpt_runtime_abi_version(void);
/* Library version and the torch it was built against, e.g. "0.1.0 (torch 2.11.0)". */
GPT_API const char *gpt_runtime_version(void);
/* Static name of a status, e.g. "GPT_ERR_ARTIFACT_HASH". */
GPT_API const char *gpt_status_to_string(gpt_status status);
/* Message of the last failed call on this thread ("" if none). */
GPT_API const char *gpt_runtime_last_error(void);

enum gpt_log_level { GPT_LOG_TRACE = 0, GPT_LOG_DEBUG, GPT_LOG_INFO, GPT_LOG_WARN, GPT_LOG_ERROR };
typedef void (*gpt_log_callback)(enum gpt_log_level level, const char *message, void *user_data);
/* Route log lines to `callback` (NULL restores stderr), at the level GPT_LOG names when this is
 * called. Safe while other threads log: a line goes to the old sink or the new one, whole. The
 * callback runs on the thread that logs, one line at a time across the process (calls are
 * serialised), and must not call into the library. Once this returns, the previous callback is
 * not running and is never called again: its user_data may be freed. */
GPT_API void gpt_log_set_callback(gpt_log_callback callback, void *user_data);

/* ---- model ------------------------------------------------------------------ */

struct gpt_model_params {
    size_t struct_size; /* set by gpt_model_default_params (see Versioning) */
    /* CPU threads of each call into the model's compiled graphs, set on the calling
     * thread for that call only: models with different counts share a process
     * without retuning each other. Default 0 = the calling thread's count
     * (OMP_NUM_THREADS, else one per core). */
    int32_t num_threads;
    int32_t num_runners; /* graph instances that may run at once; default 1 (calls queue) */
    bool verify_golden;  /* run the golden vector at load; default false (see gpt_model_verify) */
    /* Ed25519 public keys the artifact's manifest.sig must verify against: a key
     * file or a directory of *.pub files. Default NULL = the GPT_TRUSTED_KEYS
     * environment variable; neither set (NULL and the variable absent) = signatures
     * are not checked (sha256 only, logged at info). Set but empty ("" here, or
     * GPT_TRUSTED_KEYS=""), or a path that yields no key (missing, unreadable,
     * malformed, a directory without *.pub files), is GPT_ERR_INVALID_ARGUMENT
     * naming it: never a silent fall-back to unsigned loading. With keys, an
     * unsigned or wrongly signed artifact is refused with GPT_ERR_ARTIFACT_SIGNATURE
     * before any of it is parsed or loaded; in a model directory, each target's
     * manifest.sig is verified before its manifest is parsed, and only targets
     * whose signature verifies are selected (see gpt_artifact_select). */
    const char *trusted_keys;
    /* The GPU a CUDA artifact runs on, as a CUDA device index. Default -1 = the
     * LOCAL_RANK environment variable when it is set (each process of a
     * data-parallel job, as `gpt train --nproc N` or torchrun starts them, takes its
     * own GPU), else 0. A GPU the machine lacks is GPT_ERR_DEVICE_UNAVAILABLE, a
     * LOCAL_RANK that is no index GPT_ERR_INVALID_ARGUMENT. CPU artifacts ignore it. */
    int32_t device_index;
    uint64_t flags; /* GPT_MODEL_* bits; default 0. An unknown bit is GPT_ERR_INVALID_ARGUMENT. */
};
/* On a GPU, each session runs its decode steps as CUDA graphs: the first step of each shape
 * (sequences stepped, cache positions read, rounded up to a power of two) is captured once
 * over the session's own buffers and replayed from then on, one launch instead of one per
 * kernel. Replays give the same logits as the plain steps. While a session captures, the
 * process's default CUDA generator is in capture mode: CUDA random ops on other threads of
 * the process (a trainer's dropout) fail meanwhile, so serve and train in separate
 * processes (as gpt-server and `gpt train` do), or set this bit. It turns capture off:
 * every step launches its kernels one by one (no capture, no memory for captured steps). */
#define GPT_MODEL_NO_CUDA_GRAPHS (UINT64_C(1) << 0)
GPT_API gpt_status gpt_model_default_params(struct gpt_model_params *params, size_t struct_size);

/* Load the artifact in `artifact_dir`: a directory holding manifest.json, or a
 * model directory (model_artifacts/<name>/) holding one artifact per target, of
 * which gpt_artifact_select's choice without CPU fallback is loaded (and logged).
 * The signature (when trusted keys are set), the manifest, the target and the
 * sha256 of every file are checked before any compiled code is loaded. Files are
 * read once: changing them on disk later does not affect the loaded model. */
GPT_API gpt_status gpt_model_load(const char *artifact_dir, const struct gpt_model_params *params,
                                  struct gpt_model **out_model);
/* Releases the caller's handle (do not use it again, not even to create sessions) and returns GPT_OK;
 * NULL is a no-op. The model is freed now, or when the last session or trainer made from it is freed:
 * they go on working meanwhile. */
GPT_API gpt_status gpt_model_free(struct gpt_model *model);

struct gpt_model_info {
    size_t struct_size;        /* bytes filled by gpt_model_get_info (see Versioning) */
    const char *name;          /* strings valid until gpt_model_free on this handle */
    const char *device;        /* "cpu" or "cuda" */
    const char *arch;          /* "x86_64", "sm_90", ... */
    const char *dtype;         /* "float32", "bfloat16", ... */
    const char *attention;     /* attention kernel compiled in: "flash", "math", ..., or
                                  "prefill flash, decode math" when the graphs differ */
    const char *torch_version; /* torch the artifact was compiled with */
    const char *tokenizer;     /* "char", "bpe" or "none" */
    int32_t vocab_size;        /* valid token ids are [0, vocab_size); those without text (past the
                                  tokenizer's ids, as nanoGPT pads GPT-2's 50257 to 50304, or a gap among
                                  them, as cl100k_base's 100256) get -inf logits and are never sampled */
    int32_t block_size;        /* context length */
    int32_t n_layer, n_head, n_embd;
    int32_t max_batch;
    gpt_token eos_token;  /* the tokenizer's end-of-text token (GPT-2's <|endoftext|>), or GPT_TOKEN_NONE */
    const char *weights;  /* "unquantized" (in dtype); "int8": weight-only int8 linears, one scale per
                             output row (compile --quantize int8); "int4" (CPU): weight-only int4 linears, a
                             scale and a zero per group of inputs (compile --quantize int4). A quantized model
                             is for inference only */
    bool extend_graph;    /* true when the artifact has the extend graph: gpt_session_extend_seq runs each piece
                             in one pass; false for artifacts compiled before it (a decode step per token) */
    bool mixed_graph;     /* true when the artifact has the mixed graph: gpt_session_append_sample_batch runs in
                             one pass; false without it (extend calls and a decode step) */
    const char *kv_cache; /* the KV cache's dtype: `dtype`'s, or "int8" (CPU, compile --kv-dtype int8: each
                             position's values rounded to int8 with a scale of their own, half of bf16's bytes) */
};
GPT_API gpt_status gpt_model_get_info(const struct gpt_model *model, struct gpt_model_info *out_info,
                                      size_t struct_size);

/* Run the artifact's golden vector (prefill + one decode step) and compare the
 * logits with those recorded at compile time. GPT_ERR_VERIFY_FAILED on mismatch;
 * the largest absolute difference is reported either way when out_max_abs_err != NULL. */
GPT_API gpt_status gpt_model_verify(const struct gpt_model *model, double *out_max_abs_err);

/* Memory in bytes. Device figures are the process's for the model's GPU (torch's
 * caching allocator serves every model and trainer on it) and 0 for a CPU model. */
struct gpt_memory_stats {
    size_t struct_size;              /* bytes filled by gpt_model_get_memory (see Versioning) */
    uint64_t weights_bytes;          /* this model's weights, tied ones counted once, and the copies of
                                        them packed for oneDNN (CPU artifacts whose graphs read them so) */
    uint64_t device_allocated_bytes; /* in live tensors now */
    uint64_t device_peak_bytes;      /* highest device_allocated_bytes since start-up or gpt_model_reset_peak_memory */
    uint64_t device_reserved_bytes;  /* held from the driver, allocated or cached */
    uint64_t host_peak_rss_bytes;    /* the process's peak resident set */
};
GPT_API gpt_status gpt_model_get_memory(const struct gpt_model *model, struct gpt_memory_stats *out_stats,
                                        size_t struct_size);
/* Starts a new device peak for the model's GPU as a whole, not for this model: torch's caching
 * allocator keeps one peak per GPU and process, so device_peak_bytes becomes device_allocated_bytes for
 * every model and trainer on that GPU (and any other torch user in the process). The model itself does
 * not change (hence const). host_peak_rss_bytes is not reset: the kernel keeps it for the process's
 * life. A CPU model has no device peak: GPT_OK, nothing changes. */
GPT_API gpt_status gpt_model_reset_peak_memory(const struct gpt_model *model);

/* ---- artifacts ---------------------------------------------------------------- */

/* Bits of the uint32_t `flags` of gpt_artifact_select and gpt_artifact_describe.
 * ALLOW_CPU_FALLBACK: a GPU is present but no artifact has its arch: take the CPU one.
 * CHECK_HASHES: also read every file and check its sha256 (describe only). */
#define GPT_ARTIFACT_ALLOW_CPU_FALLBACK (UINT32_C(1) << 0)
#define GPT_ARTIFACT_CHECK_HASHES (UINT32_C(1) << 1)

/* Which artifact of the model directory `model_dir` (one sub-directory per
 * target: cpu, sm_80, sm_90, ...) fits this machine: the GPU's exact arch first;
 * without a GPU the CPU artifact; with a GPU but no artifact for its arch the CPU
 * artifact only with GPT_ARTIFACT_ALLOW_CPU_FALLBACK. A path that is itself an
 * artifact selects itself if it fits. The chosen directory is written
 * NUL-terminated to `out_dir` (`*out_size` = bytes needed incl. the NUL;
 * GPT_ERR_BUFFER_TOO_SMALL when `capacity` is less). When nothing fits, the
 * status (GPT_ERR_DEVICE_MISMATCH, _DEVICE_UNAVAILABLE, _TORCH_VERSION, ...) and
 * gpt_runtime_last_error() name every target found, why it does not fit, and what to do.
 * With trusted keys (GPT_TRUSTED_KEYS here; gpt_model_params.trusted_keys when
 * gpt_model_load selects) each target's manifest.sig is verified before its
 * manifest is read as JSON, and a target that is unsigned or whose signature
 * does not verify is never parsed nor selected: it is logged at warn level as
 * skipped, with why, and named so when nothing fits (GPT_ERR_ARTIFACT_SIGNATURE
 * when every target was skipped so). */
GPT_API gpt_status gpt_artifact_select(const char *model_dir, uint32_t flags, char *out_dir, size_t capacity,
                                       size_t *out_size);

/* A JSON report of an artifact or model directory for ops tools, written like
 * gpt_artifact_select's out_dir: "host" (CPU arch, GPU arch and name, torch),
 * "targets" (per artifact: name, versions, device/arch/isa, dtype, attention,
 * model shape, files with sha256 and size, total bytes, "loads_here" with the
 * failing status and message) and "selected" {dir, reason} or null with
 * "selection_error". With GPT_TRUSTED_KEYS set, signatures are checked as for
 * gpt_artifact_select. Loads no compiled code. */
GPT_API gpt_status gpt_artifact_describe(const char *path, uint32_t flags, char *json, size_t capacity,
                                         size_t *out_size);

/* gpt_artifact_select and gpt_artifact_describe with the trusted keys given as
 * gpt_model_params.trusted_keys takes them, so that a caller checks a directory
 * against the keys it will load with: NULL = the GPT_TRUSTED_KEYS environment
 * variable (as the calls above), else a key file or a directory of *.pub files;
 * "" or a path that yields no key is GPT_ERR_INVALID_ARGUMENT. Unlike the calls
 * above, an unknown bit in `flags` is GPT_ERR_INVALID_ARGUMENT. */
GPT_API gpt_status gpt_artifact_select_v2(const char *model_dir, uint32_t flags, const char *trusted_keys,
                                          char *out_dir, size_t capacity, size_t *out_size);
GPT_API gpt_status gpt_artifact_describe_v2(const char *path, uint32_t flags, const char *trusted_keys, char *json,
                                            size_t capacity, size_t *out_size);

/* ---- the model's tokenizer ------------------------------------------------------ */

/* Kinds (gpt_model_info.tokenizer): "char", one id per UTF-8 character of a
 * nanoGPT char vocabulary; "bpe", byte-level BPE as GPT-2 and tiktoken encode
 * (docs/TOKENIZERS.md), giving the same ids as tiktoken for the same vocabulary;
 * "none", ids only (these calls return GPT_ERR_INVALID_ARGUMENT). */

/* UTF-8 text → token ids. Text that is not valid UTF-8, or (char) holds a
 * character outside the vocabulary, is GPT_ERR_INVALID_ARGUMENT with the byte
 * offset in the message. Special tokens' text ("<|endoftext|>") is encoded as
 * ordinary text here: a prompt cannot inject control tokens.
 * `*out_count` always receives the number of tokens needed; with a too-small
 * `capacity` the call returns GPT_ERR_BUFFER_TOO_SMALL.
 * `text` is a C string: the text ends at its first NUL byte, and "a\0b" gives the
 * ids of "a". Text that may hold U+0000 (a JSON "\u0000") goes through
 * gpt_model_tokenize_n with its length. */
GPT_API gpt_status gpt_model_tokenize(const struct gpt_model *model, const char *text, gpt_token *tokens,
                                      int32_t capacity, int32_t *out_count);
/* As gpt_model_tokenize, but the text of each special token becomes that token
 * (tiktoken's allowed_special="all"): for text the application itself wrote. */
GPT_API gpt_status gpt_model_tokenize_with_special(const struct gpt_model *model, const char *text, gpt_token *tokens,
                                                   int32_t capacity, int32_t *out_count);
/* Bit of gpt_model_tokenize_n's uint32_t `flags`: special tokens' text becomes their ids, as
 * gpt_model_tokenize_with_special. */
#define GPT_TOKENIZE_SPECIAL (UINT32_C(1) << 0)
/* As gpt_model_tokenize (with GPT_TOKENIZE_SPECIAL in `flags`: as
 * gpt_model_tokenize_with_special), for the `length` bytes at `text`, which may
 * hold NUL bytes: U+0000 is a character like any other, and a byte-level BPE
 * encodes it as the byte's token ("a\0b", length 3: the ids of "a", "\0" and "b").
 * `text` may be NULL when `length` is 0. An unknown bit in `flags` is
 * GPT_ERR_INVALID_ARGUMENT. */
GPT_API gpt_status gpt_model_tokenize_n(const struct gpt_model *model, const char *text, size_t length, uint32_t flags,
                                        gpt_token *tokens, int32_t capacity, int32_t *out_count);
/* Token ids → their bytes, NUL-terminated; a special token gives its text. An id without text
 * (see gpt_model_info.vocab_size; no sampler returns one) is GPT_ERR_OUT_OF_RANGE.
 * `*out_size` receives the bytes needed including the NUL;
 * GPT_ERR_BUFFER_TOO_SMALL when `capacity` is less. A BPE token can hold part of
 * a UTF-8 character, so the bytes of some of a sequence's tokens need not be
 * valid UTF-8: to show text as it is generated, use a gpt_detokenizer. */
GPT_API gpt_status gpt_model_detokenize(const struct gpt_model *model, const gpt_token *tokens, int32_t n_tokens,
                                        char *text, size_t capacity, size_t *out_size);

/* Streaming detokenizer: fed one token at a time, it gives out only complete
 * UTF-8 characters, holding the bytes of a character split over tokens until
 * the token that completes it. Bytes that can never form a character become
 * U+FFFD (as Python's errors="replace"), so what it gives out, concatenated, is
 * the replaced decoding of all the tokens' bytes however they were split. It
 * keeps the model's vocabulary alive on its own (it may outlive the model); use
 * one from one thread at a time, one per stream. */
GPT_API gpt_status gpt_detokenizer_create(const struct gpt_model *model, struct gpt_detokenizer **out_detokenizer);
GPT_API gpt_status gpt_detokenizer_free(struct gpt_detokenizer *detokenizer); /* NULL is a no-op */
/* Adds `token` and writes the text it completes (often all of its bytes, maybe
 * none), NUL-terminated, as gpt_model_detokenize. On GPT_ERR_BUFFER_TOO_SMALL
 * (or any error) the token is not taken: call again with a larger buffer. */
GPT_API gpt_status gpt_detokenizer_push(struct gpt_detokenizer *detokenizer, gpt_token token, char *text,
                                        size_t capacity, size_t *out_size);
/* Ends the stream: writes what is still held (an incomplete character becomes
 * U+FFFD; text held back as the possible start of a stop string; usually nothing)
 * and starts over empty: the next push begins a new text, with the same stop strings. */
GPT_API gpt_status gpt_detokenizer_flush(struct gpt_detokenizer *detokenizer, char *text, size_t capacity,
                                         size_t *out_size);
/* Stop strings: the stream's text ends just before the first place where any of
 * `stop_strings` (n_stop_strings of them, 0..GPT_MAX_STOP_STRINGS, each 1..255
 * bytes of UTF-8; copied) occurs in it, as OpenAI's `stop`. From then on push and
 * flush give out nothing and gpt_detokenizer_stopped names the string. While the
 * text given so far could be the start of one, push holds that part back; a later
 * push gives it out once it cannot be, or flush does at the end. Set before the
 * first push; 0 strings turns matching off. */
#define GPT_MAX_STOP_STRINGS 16
GPT_API gpt_status gpt_detokenizer_set_stop_strings(struct gpt_detokenizer *detokenizer,
                                                    const char *const *stop_strings, int32_t n_stop_strings);
/* Which stop string ended the text: its index in the array given, or -1 while none has. */
GPT_API gpt_status gpt_detokenizer_stopped(const struct gpt_detokenizer *detokenizer, int32_t *out_stop_index);

/* ---- session ----------------------------------------------------------------
 * A call on one sequence without `_seq` in its name (gpt_session_get_position,
 * _prefill, _decode, _generate) acts on sequence 0 of a batched session and leaves
 * the other sequences as they are; gpt_session_reset forgets every sequence. */

GPT_API gpt_status gpt_session_create(struct gpt_model *model, struct gpt_session **out_session);
GPT_API gpt_status gpt_session_free(struct gpt_session *session); /* NULL is a no-op */
/* Forget the sequence (every sequence of a batched session): positions back to 0. */
GPT_API gpt_status gpt_session_reset(struct gpt_session *session);
/* Tokens currently in the KV cache (of sequence 0). */
GPT_API gpt_status gpt_session_get_position(const struct gpt_session *session, int32_t *out_position);

/* Low level: start a sequence with `tokens` (1..block_size of them) and write the
 * next-token logits (vocab_size floats) to `logits`, for sequence 0. Every call that gives logits gives -inf at
 * the ids without text (gpt_model_info.vocab_size), so that no sampler picks them. */
GPT_API gpt_status gpt_session_prefill(struct gpt_session *session, const gpt_token *tokens, int32_t n_tokens,
                                       float *logits);
/* Low level: append one token to sequence 0 and write its next-token logits. */
GPT_API gpt_status gpt_session_decode(struct gpt_session *session, gpt_token token, float *logits);

/* Batched decoding. A decode step reads every weight once whatever the batch, so
 * stepping several sequences in one call costs little more than stepping one:
 * a session of `n_seq` independent sequences (each with its own prompt, position
 * and cache; 1..max_batch of gpt_model_info) multiplies tokens/s for concurrent
 * requests. gpt_session_create is gpt_session_create_batch with n_seq 1. */
#define GPT_TOKEN_NONE (-1) /* in gpt_session_decode_batch: this sequence sits out the step */
GPT_API gpt_status gpt_session_create_batch(struct gpt_model *model, int32_t n_seq, struct gpt_session **out_session);
/* gpt_session_prefill for sequence `seq` in [0, n_seq); the others are untouched. */
GPT_API gpt_status gpt_session_prefill_seq(struct gpt_session *session, int32_t seq, const gpt_token *tokens,
                                           int32_t n_tokens, float *logits);
/* Several prompts in one call: sequence i gets prompts[i] (n_tokens[i] tokens) and its
 * next-token logits go to logits + i * vocab_size (n_seq rows in all). n_tokens[i] 0
 * leaves sequence i as it is, its logits row unwritten. As gpt_session_prefill_seq for
 * each, but adjacent sequences share one pass of the model (its matrix products over all
 * their tokens), prompts of different lengths included: faster for a batch of new
 * requests. Every prompt and token is checked before anything runs (a refused call
 * changes nothing); a failure while running leaves the given sequences empty. */
GPT_API gpt_status gpt_session_prefill_batch(struct gpt_session *session, const gpt_token *const *prompts,
                                             const int32_t *n_tokens, float *logits);
GPT_API gpt_status gpt_session_get_position_seq(const struct gpt_session *session, int32_t seq, int32_t *out_position);
/* One step of every sequence: tokens[i] (n_seq of them) is appended to sequence i
 * and its next-token logits go to logits + i * vocab_size (n_seq rows in all).
 * GPT_TOKEN_NONE leaves sequence i as it is, its logits row unwritten: finished or
 * idle sequences sit out while the others go on. Every token and position is
 * checked before anything runs; at least one sequence must step. A step runs the
 * sequences from the first stepping one to the last and reads each cache up to
 * the furthest position among them, so its cost follows the longest of those,
 * not block_size nor the sequences outside that range. */
GPT_API gpt_status gpt_session_decode_batch(struct gpt_session *session, const gpt_token *tokens, float *logits);

/* A session's sequences as caches of their tokens, for a server that reuses the cache of a prompt's
 * shared prefix (a system prompt, few-shot examples) and prefills long prompts in pieces between
 * decode steps. Each sequence holds the cache of its first `position` tokens
 * (gpt_session_get_position_seq). Every argument is checked before anything changes.
 *
 * Append n_tokens (>= 1, position + n_tokens <= block_size) to sequence `seq` and write the
 * next-token logits after the last of them to `logits` (vocab_size floats; NULL = not wanted). At
 * position 0 this is gpt_session_prefill_seq. The tokens attend to everything the sequence held, so
 * extending a prefix gives the logits of prefilling the whole (within float rounding). It runs in
 * pieces of at most GPT_EXTEND_PIECE_TOKENS tokens, each one pass of the artifact's extend graph
 * (artifacts compiled before it: a prefill at position 0, else a decode step per token); the
 * session's abort callback is asked before each piece. Stopped (GPT_ERR_ABORTED) or failed while
 * running, the sequence holds the pieces that ran: its position says how many tokens, and a later
 * extend goes on from there. */
#define GPT_EXTEND_PIECE_TOKENS 256
GPT_API gpt_status gpt_session_extend_seq(struct gpt_session *session, int32_t seq, const gpt_token *tokens,
                                          int32_t n_tokens, float *logits);
/* Keep the first n_tokens (0..position) of sequence `seq`: the next extend or decode continues
 * from there. GPT_ERR_OUT_OF_RANGE for n_tokens outside 0..position. */
GPT_API gpt_status gpt_session_truncate_seq(struct gpt_session *session, int32_t seq, int32_t n_tokens);
/* Sequence `dst` becomes the first n_tokens (0..position of src) of sequence `src`: their cache is
 * copied, src is unchanged. Several requests with one prompt prefix then compute it once.
 * GPT_ERR_INVALID_ARGUMENT when src == dst, GPT_ERR_OUT_OF_RANGE for a sequence outside
 * [0, n_seq) or n_tokens outside 0..position of src. */
GPT_API gpt_status gpt_session_copy_seq(struct gpt_session *session, int32_t src, int32_t dst, int32_t n_tokens);
/* Asked before each piece of gpt_session_extend_seq; returning true stops it, which then returns
 * GPT_ERR_ABORTED (as ggml's abort callback: true means stop). Called on the thread that runs the
 * session; e.g. a flag set by another thread when the client went away. */
typedef bool (*gpt_abort_callback)(void *user_data);
/* NULL (the default) never stops. The session keeps both pointers until they are set again. */
GPT_API gpt_status gpt_session_set_abort_callback(struct gpt_session *session, gpt_abort_callback callback,
                                                  void *user_data);

/* Called once per generated token; return false to stop (the call then returns GPT_ERR_ABORTED,
 * with the tokens generated so far written out: see gpt_session_generate). */
typedef bool (*gpt_token_callback)(gpt_token token, void *user_data);

struct gpt_generate_params {
    size_t struct_size;          /* set by gpt_generate_default_params (see Versioning) */
    int32_t max_new_tokens;      /* default 64; must be > 0 */
    float temperature;           /* default 1.0; 0 = greedy (argmax) */
    int32_t top_k;               /* default 0 = off */
    float top_p;                 /* default 1.0 = off (nucleus sampling when < 1) */
    uint64_t seed;               /* default 0; the same seed gives the same tokens */
    gpt_token stop_token;        /* default -1 = none; generation ends after emitting it */
    gpt_token_callback on_token; /* default NULL */
    void *user_data;
    bool stop_at_eos; /* default true: generation ends when the tokenizer's EOS token (gpt_model_info.eos_token)
                         is sampled, which is not emitted; false treats EOS as any other token */
    /* Default NULL / 0: generation ends at the token whose text completes one of these strings (as
     * gpt_detokenizer_set_stop_strings: up to GPT_MAX_STOP_STRINGS, each 1..255 bytes). That token is the
     * last one written; the text before the stop string is what a gpt_detokenizer given the same strings
     * gives out. Needs a text tokenizer. */
    const char *const *stop_strings;
    int32_t n_stop_strings;
    /* Default NULL; else receives, per generated token, its log-probability under the model (the log-softmax
     * of the logits it was sampled from, before temperature, top-k and top-p), as many as out_tokens. */
    float *token_logprobs;
};
GPT_API gpt_status gpt_generate_default_params(struct gpt_generate_params *params, size_t struct_size);

/* Generate from `prompt` (replaces sequence 0). Stops after
 * max_new_tokens, at the stop token, or at EOS (see stop_at_eos). When the context (block_size) fills, the
 * most recent block_size/2 tokens are prefilled again and generation goes on.
 * Generated ids go to `out_tokens` (capacity >= max_new_tokens), their number to `*out_count`.
 * When on_token returns false the call returns GPT_ERR_ABORTED and still writes the tokens generated so
 * far, the one the callback was given last included, and their number (an exception to "outputs are left
 * untouched on failure"); every other failure writes nothing. */
GPT_API gpt_status gpt_session_generate(struct gpt_session *session, const gpt_token *prompt, int32_t n_prompt,
                                        const struct gpt_generate_params *params, gpt_token *out_tokens,
                                        int32_t capacity, int32_t *out_count);

/* ---- sampling ----------------------------------------------------------------
 * gpt_session_generate samples by itself. A caller that steps sequences itself
 * (gpt_session_decode_batch, e.g. a server batching its requests) keeps one
 * gpt_sampler per sequence, with that sequence's settings and random stream, and
 * samples every row of a step in one call. A sampler is independent of any model;
 * one thread at a time. The same settings, seed and logits give the same tokens. */
struct gpt_sampler;

struct gpt_logit_bias {
    gpt_token token;
    float bias; /* added to the token's logit before every draw */
};

/* Before its rule (greedy, temperature, top-k, top-p) a sampler adds to each row of logits
 * what OpenAI's completions API defines: logit_bias[i].bias to logit_bias[i].token, and
 * -(c * frequency_penalty + presence_penalty) to each token it has drawn c > 0 times so far
 * (its own draws: the completion, not the prompt). Log-probabilities stay those of the
 * model's logits. */
struct gpt_sampler_params {
    size_t struct_size;                      /* set by gpt_sampler_default_params (see Versioning) */
    float temperature;                       /* default 1.0; 0 = greedy (argmax, the first on ties) */
    int32_t top_k;                           /* default 0 = off */
    float top_p;                             /* default 1.0 = off (nucleus sampling when < 1) */
    uint64_t seed;                           /* default 0 */
    const struct gpt_logit_bias *logit_bias; /* default NULL; n_logit_bias entries, copied by gpt_sampler_create */
    int32_t n_logit_bias;                    /* default 0 */
    float presence_penalty;                  /* default 0 */
    float frequency_penalty;                 /* default 0 */
};
GPT_API gpt_status gpt_sampler_default_params(struct gpt_sampler_params *params, size_t struct_size);
/* GPT_ERR_INVALID_ARGUMENT unless temperature >= 0, top_k >= 0, 0 < top_p <= 1, both
 * penalties are finite and logit_bias holds n_logit_bias >= 0 entries, each a token >= 0
 * named once with a finite bias. A sampler is made without knowing the vocabulary: a call
 * that samples a vocabulary without a biased token is GPT_ERR_OUT_OF_RANGE and draws nothing. */
GPT_API gpt_status gpt_sampler_create(const struct gpt_sampler_params *params, struct gpt_sampler **out_sampler);
GPT_API gpt_status gpt_sampler_free(struct gpt_sampler *sampler); /* NULL is a no-op */

struct gpt_token_logprob {
    gpt_token token;
    float logprob; /* natural log of its probability under the model: log-softmax of the raw logits */
};
/* One token for each of n_seq rows of `logits` (row i at logits + i * vocab_size),
 * drawn by samplers[i]; a NULL sampler leaves its row out (out_tokens[i] =
 * GPT_TOKEN_NONE). With out_logprobs (NULL = none wanted), row i's entries start at
 * out_logprobs + i * (1 + n_top_logprobs): the chosen token with its log-probability,
 * then the n_top_logprobs (0..GPT_MAX_TOP_LOGPROBS) most likely tokens, most likely
 * first (equal ones by smaller id); a token whose logit is -inf (ruled out, as the ids
 * without text are) is never listed: GPT_TOKEN_NONE with -inf stands in its place, as
 * past the end of the vocabulary. NaN or +inf logits, or all -inf, in a row that
 * is sampled are GPT_ERR_NON_FINITE; every row is checked before any sampler draws,
 * so a refused call changes no sampler's random stream. */
#define GPT_MAX_TOP_LOGPROBS 20
GPT_API gpt_status gpt_sampler_sample_batch(struct gpt_sampler *const *samplers, int32_t n_seq, const float *logits,
                                            int32_t vocab_size, gpt_token *out_tokens, int32_t n_top_logprobs,
                                            struct gpt_token_logprob *out_logprobs);

/* gpt_session_decode_batch and gpt_sampler_sample_batch in one call, sampled where the
 * logits are: on a GPU only the chosen ids come back to the host (4 bytes a sequence,
 * not vocab_size floats), and its decode steps can run as CUDA graphs end to end.
 * tokens[i] (n_seq of the session) steps sequence i as in gpt_session_decode_batch and
 * samplers[i] (each sequence its own) draws its next token into out_tokens[i]; a sequence
 * that sits out (GPT_TOKEN_NONE) needs no sampler and gets GPT_TOKEN_NONE. The tokens are those
 * gpt_sampler_sample_batch would draw from the same logits with the same samplers (the
 * same rule and random stream; on a GPU its sums in double may round differently, which
 * changes a token only when a draw falls within about 1e-15 of a boundary). `logits`
 * (NULL = not wanted; copying them costs what this call saves) receives the rows as
 * gpt_session_decode_batch writes them, e.g. for log-probabilities. A sequence whose logits
 * cannot be sampled (NaN, +inf, all -inf) gets GPT_TOKEN_NONE and its sampler does not
 * draw, while the others get their tokens: the call then returns GPT_ERR_NON_FINITE naming
 * it (the step is taken: every stepping token is in its cache). */
GPT_API gpt_status gpt_session_decode_sample_batch(struct gpt_session *session, const gpt_token *tokens,
                                                   struct gpt_sampler *const *samplers, gpt_token *out_tokens,
                                                   float *logits);

/* ---- the calls to use: each knows its buffer's size ------------------------------------------
 * The session calls above write whole rows of vocab_size floats to `logits` (one row, or n_seq
 * rows for the batch calls) and trust the caller to know the session's n_seq. Their _v2 forms
 * take `logits_capacity`, the floats `logits` holds: fewer than the call writes is
 * GPT_ERR_BUFFER_TOO_SMALL before anything runs or changes. Where logits are optional (extend,
 * decode_sample), NULL with capacity 0 asks for none. The one-sequence forms name their sequence,
 * so no call acts on sequence 0 unsaid. Otherwise each does what the form it replaces does. New
 * code calls these; the forms without a capacity stay for programs built against an earlier ABI 3
 * header (docs/ABI.md). */
GPT_API gpt_status gpt_session_prefill_seq_v2(struct gpt_session *session, int32_t seq, const gpt_token *tokens,
                                              int32_t n_tokens, float *logits, size_t logits_capacity);
/* One step of sequence `seq` (the others sit out, as GPT_TOKEN_NONE in gpt_session_decode_batch):
 * its next-token logits, one row, go to `logits`. */
GPT_API gpt_status gpt_session_decode_seq_v2(struct gpt_session *session, int32_t seq, gpt_token token, float *logits,
                                             size_t logits_capacity);
GPT_API gpt_status gpt_session_prefill_batch_v2(struct gpt_session *session, const gpt_token *const *prompts,
                                                const int32_t *n_tokens, float *logits, size_t logits_capacity);
GPT_API gpt_status gpt_session_decode_batch_v2(struct gpt_session *session, const gpt_token *tokens, float *logits,
                                               size_t logits_capacity);
GPT_API gpt_status gpt_session_extend_seq_v2(struct gpt_session *session, int32_t seq, const gpt_token *tokens,
                                             int32_t n_tokens, float *logits, size_t logits_capacity);
GPT_API gpt_status gpt_session_decode_sample_batch_v2(struct gpt_session *session, const gpt_token *tokens,
                                                      struct gpt_sampler *const *samplers, gpt_token *out_tokens,
                                                      float *logits, size_t logits_capacity);
/* One forward over tokens of several sequences at once, the way a server folds a long prompt's
 * pieces into its running streams' decode steps (chunked prefill without a call of its own):
 * sequence i appends n_tokens[i] tokens of tokens[i] (0: it sits out, tokens[i] may be NULL)
 * and, where samplers[i] is not NULL, its next token is drawn after them into out_tokens[i]
 * (GPT_TOKEN_NONE where none is drawn); samplers may be NULL when none draws. A step of a
 * running sequence is its one sampled token; a prompt piece is its tokens without a sampler;
 * a prompt's last piece with one draws the first token. `logits` (NULL with capacity 0: not
 * wanted) receives the drawn sequences' rows, n_seq rows of vocab_size floats by sequence, as
 * gpt_session_decode_sample_batch_v2 writes them. With the artifact's mixed graph (CPU
 * artifacts whose decode attention is the kernel library's) this is one pass that reads every
 * weight once, and a failure changes nothing; without it, each sequence's tokens but a drawn
 * last one go in by gpt_session_extend_seq and the drawn ones as one decode step, and a failure
 * leaves what ran (gpt_session_get_position_seq says). Refusals before anything runs: an id
 * outside the vocabulary, tokens past the context (GPT_ERR_OUT_OF_RANGE), two sequences with one
 * sampler, nothing to append; a row that cannot be sampled as gpt_session_decode_sample_batch's. */
GPT_API gpt_status gpt_session_append_sample_batch(struct gpt_session *session, const gpt_token *const *tokens,
                                                   const int32_t *n_tokens, struct gpt_sampler *const *samplers,
                                                   gpt_token *out_tokens, float *logits, size_t logits_capacity);
/* gpt_sampler_sample_batch with gpt_session_decode_sample_batch's rule for a row that cannot be
 * sampled (NaN, +inf, all -inf), so that both sampling calls keep one: that row gets
 * GPT_TOKEN_NONE, its sampler does not draw and its log-probability entries are GPT_TOKEN_NONE with
 * -inf, while the other rows get their tokens; the call then returns GPT_ERR_NON_FINITE naming the
 * rows refused. Any other refusal (a bad argument, a bias outside the vocabulary) comes before any
 * sampler draws. gpt_sampler_sample_batch, which refuses the whole call for one such row, stays
 * for earlier callers. */
GPT_API gpt_status gpt_sampler_sample_batch_v2(struct gpt_sampler *const *samplers, int32_t n_seq, const float *logits,
                                               int32_t vocab_size, gpt_token *out_tokens, int32_t n_top_logprobs,
                                               struct gpt_token_logprob *out_logprobs);

/* ---- training --------------------------------------------------------------- */

struct gpt_trainer_params {
    size_t struct_size;     /* set by gpt_trainer_default_params (see Versioning) */
    float learning_rate;    /* peak learning rate; default 6e-4 */
    float min_lr;           /* floor of the cosine decay; default 6e-5 */
    int32_t warmup_iters;   /* linear warm-up steps; default 2000 */
    int32_t lr_decay_iters; /* steps until min_lr; default 600000 */
    bool decay_lr;          /* false = constant learning_rate; default true */
    uint64_t seed;          /* seeds the trainer's own dropout generators; default 1337 */
};
GPT_API gpt_status gpt_trainer_default_params(struct gpt_trainer_params *params, size_t struct_size);

/* Needs an artifact compiled with training graphs (`gpt_aot compile --train`). */
GPT_API gpt_status gpt_trainer_create(struct gpt_model *model, const struct gpt_trainer_params *params,
                                      struct gpt_trainer **out_trainer);
GPT_API gpt_status gpt_trainer_free(struct gpt_trainer *trainer); /* NULL is a no-op */

/* One optimizer step over `grad_accum_steps` micro-batches. `x` and `y` each hold
 * grad_accum_steps * batch * seq token ids, micro-batch after micro-batch, rows of
 * `seq`; targets of -1 are ignored. `*out_loss` is the mean loss of the micro-batches.
 * A non-finite loss or gradient returns GPT_ERR_NON_FINITE with the weights unchanged. */
GPT_API gpt_status gpt_trainer_step(struct gpt_trainer *trainer, const gpt_token *x, const gpt_token *y, int32_t batch,
                                    int32_t seq, int32_t grad_accum_steps, float *out_loss);
/* Loss on a batch without dropout or any update. */
GPT_API gpt_status gpt_trainer_eval(struct gpt_trainer *trainer, const gpt_token *x, const gpt_token *y, int32_t batch,
                                    int32_t seq, float *out_loss);

struct gpt_trainer_state {
    size_t struct_size;  /* bytes filled by gpt_trainer_get_state (see Versioning) */
    int64_t iteration;   /* optimizer steps taken */
    float learning_rate; /* what the next step will use */
    float grad_norm;     /* global gradient norm of the last step, before clipping */
};
GPT_API gpt_status gpt_trainer_get_state(const struct gpt_trainer *trainer, struct gpt_trainer_state *out_state,
                                         size_t struct_size);

/* Writes the weights (a bf16 model's fp32 master weights, from which its own are
 * rounded), AdamW state (fp32), iteration and the states of the trainer's random
 * generators (CPU, and the GPU's for a CUDA model) to `path` (one safetensors
 * file). The file is replaced atomically (temporary file, fsync, rename, fsync of
 * the directory): `path` always holds a complete checkpoint, the previous one if
 * the write fails or the process dies. A failed write (disk full, file size limit)
 * returns GPT_ERR_IO and leaves no temporary file. */
GPT_API gpt_status gpt_trainer_save(const struct gpt_trainer *trainer, const char *path);
/* Restores a checkpoint of a model of the same shape; nothing changes on failure.
 * The steps after it draw the dropout masks the saving trainer would have drawn
 * next. A checkpoint without the GPU generator's state (saved from a CPU model, by
 * an older runtime, or by import-ckpt) loads into a CUDA trainer with a warning,
 * its GPU masks going on from the trainer's own generator. */
GPT_API gpt_status gpt_trainer_load(struct gpt_trainer *trainer, const char *path);

/* ---- data-parallel training (ABI version 2) ----------------------------------
 * N processes ("ranks"), one trainer each, on PyTorch's c10d: rendezvous through
 * a TCPStore hosted by rank 0 at master_addr:master_port, Gloo on CPU, NCCL on CUDA.
 *   - gpt_trainer_create_distributed blocks until every rank has joined, then
 *     copies rank 0's weights to all ranks.
 *   - gpt_trainer_step is collective: every rank calls it with its own shard of the
 *     batch (same batch, seq and grad_accum_steps everywhere). Gradients are
 *     averaged over ranks once per step, after the last micro-batch; *out_loss is
 *     the mean over all ranks; all ranks update, or all return the same error.
 *     Every rank checks its arguments (pointers, sizes, token ids) before any
 *     collective and the ranks agree on the outcome in one small all-reduce: when
 *     one rank refuses, every rank returns that rank's status (the lowest refusing
 *     rank's) at once, no rank's weights, moments or iteration change, and the
 *     next step may go on.
 *   - gpt_trainer_eval is local to the rank.
 *   - All ranks hold the same weights and moments: save from rank 0 only. To
 *     resume, every rank loads the same checkpoint (any world size).
 * A rank that dies or stops answering makes the others return GPT_ERR_PEER_FAILED
 * within timeout_ms. */
struct gpt_dist_params {
    size_t struct_size;      /* set by gpt_dist_default_params (see Versioning) */
    int32_t world_size;      /* ranks in the job; default 1 */
    int32_t rank;            /* this process, in [0, world_size); default 0 */
    const char *master_addr; /* host of rank 0's store; copied at create; default "127.0.0.1" */
    int32_t master_port;     /* its TCP port; default 29500 */
    int32_t timeout_ms;      /* bound on the rendezvous and on every collective; default 300000 */
    int32_t bucket_mb;       /* gradients are all-reduced in buckets of about this many MiB; default 25 */
};
GPT_API gpt_status gpt_dist_default_params(struct gpt_dist_params *params, size_t struct_size);
/* Fills world_size, rank, master_addr and master_port from WORLD_SIZE, RANK,
 * MASTER_ADDR and MASTER_PORT (each only when set). master_addr then points to
 * the library's copy of MASTER_ADDR, valid until the process ends whatever
 * happens to the environment later (each distinct value is kept once).
 * GPT_ERR_INVALID_ARGUMENT when a variable is not a number. */
GPT_API gpt_status gpt_dist_params_from_env(struct gpt_dist_params *params);
/* gpt_trainer_create as one rank of `dist`. GPT_ERR_PEER_FAILED when the other
 * ranks do not join within timeout_ms; GPT_ERR_DEVICE_UNAVAILABLE for a CUDA
 * model when the runtime was built without CUDA (no NCCL). */
GPT_API gpt_status gpt_trainer_create_distributed(struct gpt_model *model, const struct gpt_trainer_params *params,
                                                  const struct gpt_dist_params *dist, struct gpt_trainer **out_trainer);

#ifdef __cplusplus
}
#endif

#endif /* GPT_RUNTIME_H */
