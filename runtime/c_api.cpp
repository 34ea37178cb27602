// c_api.cpp — the C ABI shim: argument checks, and the one place where C++
// exceptions become a gpt_status plus a per-thread message.
#include <c10/util/Exception.h>

#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include "artifact_select.h"
#include "collectives.h"
#include "device.h"
#include "error.h"
#include "gpt_runtime.h"
#include "log.h"
#include "memory.h"
#include "model.h"
#include "session.h"
#include "trainer.h"

#define GPT_RUNTIME_VERSION "0.1.0"

namespace {

// Runs `body`, mapping every exception to a status. The message is logged and kept for gpt_last_error().
template <typename Body>
gpt_status guarded(const char *function, Body &&body) noexcept {
    gpt_status status = GPT_OK;
    std::string message;
    try {
        body();
        return GPT_OK;
    } catch (const gpt::Error &e) {
        status = e.status();
        message = e.what();
    } catch (const c10::OutOfMemoryError &e) {
        status = GPT_ERR_OUT_OF_MEMORY;
        message = std::string("out of device memory: ") + e.what_without_backtrace();
    } catch (const std::bad_alloc &) {
        status = GPT_ERR_OUT_OF_MEMORY;
        message = "out of host memory";
    } catch (const c10::AcceleratorError &e) {
        status = GPT_ERR_CUDA;
        message = std::string("CUDA error: ") + e.what_without_backtrace();
    } catch (const c10::Error &e) {
        status = GPT_ERR_INTERNAL;
        message = std::string("torch error: ") + e.what_without_backtrace();
    } catch (const std::exception &e) {
        status = GPT_ERR_INTERNAL;
        message = e.what();
    } catch (...) {
        status = GPT_ERR_INTERNAL;
        message = "unknown exception";
    }
    try {
        message = std::string(function) + ": " + message;
        gpt::set_last_error(message);
        gpt::log(GPT_LOG_DEBUG, message + " -> " + gpt_status_string(status));
    } catch (...) {  // logging must not turn a status into a crash
    }
    return status;
}

void require(bool condition, const char *what) {
    if (!condition) gpt::fail(GPT_ERR_INVALID_ARGUMENT, what);
}

// The buffer convention of the string outputs: `*out_size` = bytes needed incl. the NUL.
void copy_out(const std::string &s, char *out, size_t capacity, size_t *out_size) {
    *out_size = s.size() + 1;
    if (out == nullptr || s.size() + 1 > capacity)
        gpt::fail(GPT_ERR_BUFFER_TOO_SMALL,
                  "output needs " + std::to_string(s.size() + 1) + " bytes, capacity is " + std::to_string(capacity));
    std::memcpy(out, s.c_str(), s.size() + 1);
}

}  // namespace

extern "C" {

uint32_t gpt_runtime_abi_version(void) { return GPT_RUNTIME_ABI_VERSION; }

const char *gpt_runtime_version(void) {
    static const std::string version = GPT_RUNTIME_VERSION " (torch " + gpt::runtime_torch_version() + ")";
    return version.c_str();
}

const char *gpt_status_string(gpt_status status) {
    switch (status) {
        case GPT_OK: return "GPT_OK";
        case GPT_ERR_INVALID_ARGUMENT: return "GPT_ERR_INVALID_ARGUMENT";
        case GPT_ERR_OUT_OF_RANGE: return "GPT_ERR_OUT_OF_RANGE";
        case GPT_ERR_BUFFER_TOO_SMALL: return "GPT_ERR_BUFFER_TOO_SMALL";
        case GPT_ERR_ARTIFACT_NOT_FOUND: return "GPT_ERR_ARTIFACT_NOT_FOUND";
        case GPT_ERR_ARTIFACT_INVALID: return "GPT_ERR_ARTIFACT_INVALID";
        case GPT_ERR_ARTIFACT_VERSION: return "GPT_ERR_ARTIFACT_VERSION";
        case GPT_ERR_ARTIFACT_HASH: return "GPT_ERR_ARTIFACT_HASH";
        case GPT_ERR_ARTIFACT_SIGNATURE: return "GPT_ERR_ARTIFACT_SIGNATURE";
        case GPT_ERR_TORCH_VERSION: return "GPT_ERR_TORCH_VERSION";
        case GPT_ERR_VERIFY_FAILED: return "GPT_ERR_VERIFY_FAILED";
        case GPT_ERR_DEVICE_MISMATCH: return "GPT_ERR_DEVICE_MISMATCH";
        case GPT_ERR_DEVICE_UNAVAILABLE: return "GPT_ERR_DEVICE_UNAVAILABLE";
        case GPT_ERR_OUT_OF_MEMORY: return "GPT_ERR_OUT_OF_MEMORY";
        case GPT_ERR_CUDA: return "GPT_ERR_CUDA";
        case GPT_ERR_ABORTED: return "GPT_ERR_ABORTED";
        case GPT_ERR_BUSY: return "GPT_ERR_BUSY";
        case GPT_ERR_NON_FINITE: return "GPT_ERR_NON_FINITE";
        case GPT_ERR_PEER_FAILED: return "GPT_ERR_PEER_FAILED";
        case GPT_ERR_IO: return "GPT_ERR_IO";
        case GPT_ERR_INTERNAL: return "GPT_ERR_INTERNAL";
    }
    return "GPT_ERR_UNKNOWN";
}

const char *gpt_last_error(void) { return gpt::last_error(); }

void gpt_log_set_callback(gpt_log_callback callback, void *user_data) {
    try {
        gpt::set_log_callback(callback, user_data);
    } catch (...) {
    }
}

struct gpt_model_params gpt_model_default_params(void) {
    gpt_model_params p{};
    p.num_threads = 0;
    p.num_runners = 1;
    p.verify_golden = false;
    p.trusted_keys = nullptr;
    return p;
}

gpt_status gpt_model_load(const char *artifact_dir, const struct gpt_model_params *params,
                          struct gpt_model **out_model) {
    return guarded(__func__, [&] {
        require(artifact_dir != nullptr && out_model != nullptr, "artifact_dir and out_model must not be NULL");
        const gpt_model_params p = params ? *params : gpt_model_default_params();
        require(p.num_threads >= 0 && p.num_runners >= 0, "num_threads and num_runners must be >= 0");
        const std::string dir = gpt::resolve_artifact_dir(artifact_dir, false);
        auto model = std::make_unique<gpt_model>(std::make_unique<gpt::Model>(dir, p));
        const gpt::Manifest &m = model->impl->manifest();
        gpt_model_info &info = model->info;
        info.name = m.name.c_str();
        info.device = m.target.device.c_str();
        info.arch = m.target.arch.c_str();
        info.dtype = m.dtype.c_str();
        model->attention = m.attention == m.decode_attention
                               ? m.attention
                               : "prefill " + m.attention + ", decode " + m.decode_attention;
        info.attention = model->attention.c_str();
        info.torch_version = m.torch_version.c_str();
        info.tokenizer = m.tokenizer_kind.c_str();
        info.vocab_size = m.model.vocab_size;
        info.block_size = m.model.block_size;
        info.n_layer = m.model.n_layer;
        info.n_head = m.model.n_head;
        info.n_embd = m.model.n_embd;
        info.max_batch = m.prefill.max_batch;
        *out_model = model.release();
    });
}

gpt_status gpt_model_free(struct gpt_model *model) {
    return guarded(__func__, [&] {
        if (model == nullptr) return;
        const int live = model->impl->live_sessions().load();
        if (live > 0)
            gpt::fail(GPT_ERR_BUSY,
                      "model still has " + std::to_string(live) + " session(s) or trainer(s): free them first");
        delete model;
    });
}

gpt_status gpt_model_get_info(const struct gpt_model *model, struct gpt_model_info *out_info) {
    return guarded(__func__, [&] {
        require(model != nullptr && out_info != nullptr, "model and out_info must not be NULL");
        *out_info = model->info;
    });
}

gpt_status gpt_model_verify(const struct gpt_model *model, double *out_max_abs_err) {
    return guarded(__func__, [&] {
        require(model != nullptr, "model must not be NULL");
        const gpt::VerifyResult result = model->impl->verify();
        // Reported on failure too: the distance helps the operator judge it.
        if (out_max_abs_err != nullptr) *out_max_abs_err = result.max_abs_err;
        if (!result.failure.empty()) gpt::fail(GPT_ERR_VERIFY_FAILED, result.failure);
    });
}

gpt_status gpt_model_get_memory(const struct gpt_model *model, struct gpt_memory_stats *out_stats) {
    return guarded(__func__, [&] {
        require(model != nullptr && out_stats != nullptr, "model and out_stats must not be NULL");
        const gpt::DeviceMemory device = gpt::device_memory(model->impl->device());
        *out_stats = {model->impl->weights_bytes(), device.allocated, device.peak, device.reserved,
                      gpt::host_peak_rss()};
    });
}

gpt_status gpt_model_reset_peak_memory(const struct gpt_model *model) {
    return guarded(__func__, [&] {
        require(model != nullptr, "model must not be NULL");
        gpt::reset_device_peak(model->impl->device());
    });
}

gpt_status gpt_artifact_select(const char *model_dir, uint32_t flags, char *out_dir, size_t capacity,
                               size_t *out_size) {
    return guarded(__func__, [&] {
        require(model_dir != nullptr && out_size != nullptr, "model_dir and out_size must not be NULL");
        copy_out(gpt::select_artifact(model_dir, flags & GPT_ARTIFACT_ALLOW_CPU_FALLBACK).dir, out_dir, capacity,
                 out_size);
    });
}

gpt_status gpt_artifact_describe(const char *path, uint32_t flags, char *json, size_t capacity, size_t *out_size) {
    return guarded(__func__, [&] {
        require(path != nullptr && out_size != nullptr, "path and out_size must not be NULL");
        copy_out(
            gpt::describe_targets(path, flags & GPT_ARTIFACT_ALLOW_CPU_FALLBACK, flags & GPT_ARTIFACT_CHECK_HASHES),
            json, capacity, out_size);
    });
}

gpt_status gpt_tokenize(const struct gpt_model *model, const char *text, gpt_token *tokens, int32_t capacity,
                        int32_t *out_count) {
    return guarded(__func__, [&] {
        require(model != nullptr && text != nullptr && out_count != nullptr,
                "model, text and out_count must not be NULL");
        require(capacity >= 0 && (tokens != nullptr || capacity == 0), "tokens must hold capacity entries");
        const auto ids = model->impl->tokenizer().encode(text);
        *out_count = static_cast<int32_t>(ids.size());
        if (ids.size() > static_cast<size_t>(capacity))
            gpt::fail(GPT_ERR_BUFFER_TOO_SMALL,
                      "text needs " + std::to_string(ids.size()) + " tokens, capacity is " + std::to_string(capacity));
        std::copy(ids.begin(), ids.end(), tokens);
    });
}

gpt_status gpt_detokenize(const struct gpt_model *model, const gpt_token *tokens, int32_t n_tokens, char *text,
                          size_t capacity, size_t *out_size) {
    return guarded(__func__, [&] {
        require(model != nullptr && out_size != nullptr, "model and out_size must not be NULL");
        require(n_tokens >= 0 && (tokens != nullptr || n_tokens == 0), "tokens must hold n_tokens entries");
        require(text != nullptr || capacity == 0, "text must hold capacity bytes");
        copy_out(model->impl->tokenizer().decode(tokens, static_cast<size_t>(n_tokens)), text, capacity, out_size);
    });
}

gpt_status gpt_session_create(struct gpt_model *model, struct gpt_session **out_session) {
    return gpt_session_create_batch(model, 1, out_session);
}

gpt_status gpt_session_create_batch(struct gpt_model *model, int32_t n_seq, struct gpt_session **out_session) {
    return guarded(__func__, [&] {
        require(model != nullptr && out_session != nullptr, "model and out_session must not be NULL");
        *out_session = new gpt_session(*model->impl, n_seq);
    });
}

void gpt_session_free(struct gpt_session *session) { delete session; }

gpt_status gpt_session_reset(struct gpt_session *session) {
    return guarded(__func__, [&] {
        require(session != nullptr, "session must not be NULL");
        session->impl.reset();
    });
}

gpt_status gpt_session_position(const struct gpt_session *session, int32_t *out_position) {
    return gpt_session_position_seq(session, 0, out_position);
}

gpt_status gpt_session_position_seq(const struct gpt_session *session, int32_t seq, int32_t *out_position) {
    return guarded(__func__, [&] {
        require(session != nullptr && out_position != nullptr, "session and out_position must not be NULL");
        *out_position = session->impl.position(seq);
    });
}

gpt_status gpt_session_prefill(struct gpt_session *session, const gpt_token *tokens, int32_t n_tokens, float *logits) {
    return gpt_session_prefill_seq(session, 0, tokens, n_tokens, logits);
}

gpt_status gpt_session_prefill_seq(struct gpt_session *session, int32_t seq, const gpt_token *tokens, int32_t n_tokens,
                                   float *logits) {
    return guarded(__func__, [&] {
        require(session != nullptr && tokens != nullptr && logits != nullptr,
                "session, tokens and logits must not be NULL");
        session->impl.prefill(seq, tokens, n_tokens, logits);
    });
}

gpt_status gpt_session_decode(struct gpt_session *session, gpt_token token, float *logits) {
    return guarded(__func__, [&] {
        require(session != nullptr && logits != nullptr, "session and logits must not be NULL");
        session->impl.decode(token, logits);
    });
}

gpt_status gpt_session_decode_batch(struct gpt_session *session, const gpt_token *tokens, float *logits) {
    return guarded(__func__, [&] {
        require(session != nullptr && tokens != nullptr && logits != nullptr,
                "session, tokens and logits must not be NULL");
        session->impl.decode_batch(tokens, logits);
    });
}

struct gpt_generate_params gpt_generate_default_params(void) {
    gpt_generate_params p{};
    p.max_new_tokens = 64;
    p.temperature = 1.0f;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.seed = 0;
    p.stop_token = -1;
    p.on_token = nullptr;
    p.user_data = nullptr;
    return p;
}

gpt_status gpt_session_generate(struct gpt_session *session, const gpt_token *prompt, int32_t n_prompt,
                                const struct gpt_generate_params *params, gpt_token *out_tokens, int32_t capacity,
                                int32_t *out_count) {
    return guarded(__func__, [&] {
        require(session != nullptr && prompt != nullptr && params != nullptr && out_tokens != nullptr &&
                    out_count != nullptr,
                "session, prompt, params, out_tokens and out_count must not be NULL");
        if (params->max_new_tokens <= 0) gpt::fail(GPT_ERR_INVALID_ARGUMENT, "max_new_tokens must be > 0");
        if (capacity < params->max_new_tokens)
            gpt::fail(GPT_ERR_BUFFER_TOO_SMALL, "out_tokens holds " + std::to_string(capacity) +
                                                    " tokens, max_new_tokens is " +
                                                    std::to_string(params->max_new_tokens));
        const std::vector<gpt_token> generated = session->impl.generate(prompt, n_prompt, *params);
        std::copy(generated.begin(), generated.end(), out_tokens);
        *out_count = static_cast<int32_t>(generated.size());
    });
}

struct gpt_trainer_params gpt_trainer_default_params(void) {
    gpt_trainer_params p{};
    p.learning_rate = 6e-4f;
    p.min_lr = 6e-5f;
    p.warmup_iters = 2000;
    p.lr_decay_iters = 600000;
    p.decay_lr = true;
    p.seed = 1337;
    return p;
}

gpt_status gpt_trainer_create(struct gpt_model *model, const struct gpt_trainer_params *params,
                              struct gpt_trainer **out_trainer) {
    return guarded(__func__, [&] {
        require(model != nullptr && out_trainer != nullptr, "model and out_trainer must not be NULL");
        const gpt_trainer_params p = params ? *params : gpt_trainer_default_params();
        *out_trainer = new gpt_trainer(*model->impl, p, nullptr);
    });
}

struct gpt_dist_params gpt_dist_default_params(void) {
    gpt_dist_params p{};
    p.world_size = 1;
    p.rank = 0;
    p.master_addr = "127.0.0.1";
    p.master_port = 29500;
    p.timeout_ms = 300000;
    p.bucket_mb = 25;
    return p;
}

gpt_status gpt_dist_params_from_env(struct gpt_dist_params *params) {
    return guarded(__func__, [&] {
        require(params != nullptr, "params must not be NULL");
        gpt_dist_params p = *params;
        auto number = [](const char *name, int32_t *out) {
            const char *value = std::getenv(name);
            if (value == nullptr) return;
            char *end = nullptr;
            const long n = std::strtol(value, &end, 10);
            if (end == value || *end != '\0' || n < 0 || n > INT32_MAX)
                gpt::fail(GPT_ERR_INVALID_ARGUMENT, std::string(name) + "='" + value + "' is not a number");
            *out = static_cast<int32_t>(n);
        };
        number("WORLD_SIZE", &p.world_size);
        number("RANK", &p.rank);
        number("MASTER_PORT", &p.master_port);
        if (const char *addr = std::getenv("MASTER_ADDR")) p.master_addr = addr;
        *params = p;
    });
}

gpt_status gpt_trainer_create_distributed(struct gpt_model *model, const struct gpt_trainer_params *params,
                                          const struct gpt_dist_params *dist, struct gpt_trainer **out_trainer) {
    return guarded(__func__, [&] {
        require(model != nullptr && dist != nullptr && out_trainer != nullptr,
                "model, dist and out_trainer must not be NULL");
        const gpt_trainer_params p = params ? *params : gpt_trainer_default_params();
        const gpt::DistConfig config = gpt::validate_dist_params(*dist);
        *out_trainer = new gpt_trainer(*model->impl, p, &config);
    });
}

void gpt_trainer_free(struct gpt_trainer *trainer) { delete trainer; }

gpt_status gpt_trainer_step(struct gpt_trainer *trainer, const gpt_token *x, const gpt_token *y, int32_t batch,
                            int32_t seq, int32_t grad_accum_steps, float *out_loss) {
    return guarded(__func__, [&] {
        require(trainer != nullptr && x != nullptr && y != nullptr && out_loss != nullptr,
                "trainer, x, y and out_loss must not be NULL");
        *out_loss = trainer->impl.step(x, y, batch, seq, grad_accum_steps);
    });
}

gpt_status gpt_trainer_eval(struct gpt_trainer *trainer, const gpt_token *x, const gpt_token *y, int32_t batch,
                            int32_t seq, float *out_loss) {
    return guarded(__func__, [&] {
        require(trainer != nullptr && x != nullptr && y != nullptr && out_loss != nullptr,
                "trainer, x, y and out_loss must not be NULL");
        *out_loss = trainer->impl.eval(x, y, batch, seq);
    });
}

gpt_status gpt_trainer_get_state(const struct gpt_trainer *trainer, struct gpt_trainer_state *out_state) {
    return guarded(__func__, [&] {
        require(trainer != nullptr && out_state != nullptr, "trainer and out_state must not be NULL");
        *out_state = trainer->impl.state();
    });
}

gpt_status gpt_trainer_save(const struct gpt_trainer *trainer, const char *path) {
    return guarded(__func__, [&] {
        require(trainer != nullptr && path != nullptr, "trainer and path must not be NULL");
        trainer->impl.save(path);
    });
}

gpt_status gpt_trainer_load(struct gpt_trainer *trainer, const char *path) {
    return guarded(__func__, [&] {
        require(trainer != nullptr && path != nullptr, "trainer and path must not be NULL");
        trainer->impl.load(path);
    });
}

}  // extern "C"
