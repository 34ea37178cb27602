// c_api.cpp — the C ABI: library version, status strings and logging, models and
// artifact selection. The tokenizer is in c_api_tokenizer.cpp, sessions in
// c_api_session.cpp, training in c_api_trainer.cpp; c_api_guard.h maps
// exceptions to statuses.
#include "abi/c_api_guard.h"
#include "abi/versioned_struct.h"
#include "artifact/artifact_select.h"
#include "artifact/device.h"
#include "exec/memory.h"
#include "exec/model.h"

#define GPT_RUNTIME_VERSION "0.1.0"

using gpt::c_api::copy_out;
using gpt::c_api::fill_versioned;
using gpt::c_api::guarded;
using gpt::c_api::read_versioned;
using gpt::c_api::require;

namespace {

// The first calls ignore bits they do not know, and keep doing so; the _v2 calls refuse them.
void require_known_artifact_flags(uint32_t flags) {
    constexpr uint32_t known = GPT_ARTIFACT_ALLOW_CPU_FALLBACK | GPT_ARTIFACT_CHECK_HASHES;
    if ((flags & ~known) != 0)
        gpt::fail(GPT_ERR_INVALID_ARGUMENT, "flags holds a bit this library does not know: " + std::to_string(flags));
}

gpt_status select_with_keys(const char *function, const char *model_dir, uint32_t flags, const char *trusted_keys,
                            char *out_dir, size_t capacity, size_t *out_size) {
    return guarded(function, [&] {
        require(model_dir != nullptr && out_size != nullptr, "model_dir and out_size must not be NULL");
        const auto keys = gpt::load_trusted_keys(trusted_keys);  // NULL: GPT_TRUSTED_KEYS
        copy_out(gpt::select_artifact(model_dir, flags & GPT_ARTIFACT_ALLOW_CPU_FALLBACK, keys).dir, out_dir, capacity,
                 out_size);
    });
}

gpt_status describe_with_keys(const char *function, const char *path, uint32_t flags, const char *trusted_keys,
                              char *json, size_t capacity, size_t *out_size) {
    return guarded(function, [&] {
        require(path != nullptr && out_size != nullptr, "path and out_size must not be NULL");
        const auto keys = gpt::load_trusted_keys(trusted_keys);  // NULL: GPT_TRUSTED_KEYS
        copy_out(gpt::describe_targets(path, flags & GPT_ARTIFACT_ALLOW_CPU_FALLBACK, flags & GPT_ARTIFACT_CHECK_HASHES,
                                       keys),
                 json, capacity, out_size);
    });
}

}  // namespace

extern "C" {

uint32_t gpt_runtime_abi_version(void) { return GPT_RUNTIME_ABI_VERSION; }

const char *gpt_runtime_version(void) {
    static const std::string version = GPT_RUNTIME_VERSION " (torch " + gpt::runtime_torch_version() + ")";
    return version.c_str();
}

const char *gpt_status_to_string(gpt_status status) { return gpt::status_name(status); }

const char *gpt_runtime_last_error(void) { return gpt::last_error(); }

void gpt_log_set_callback(gpt_log_callback callback, void *user_data) {
    try {
        gpt::set_log_callback(callback, user_data);
    } catch (...) {
    }
}

gpt_status gpt_model_load(const char *artifact_dir, const struct gpt_model_params *params,
                          struct gpt_model **out_model) {
    return guarded(__func__, [&] {
        require(artifact_dir != nullptr && out_model != nullptr, "artifact_dir and out_model must not be NULL");
        const gpt_model_params p = read_versioned(params);
        require(p.num_threads >= 0 && p.num_runners >= 0, "num_threads and num_runners must be >= 0");
        require(p.device_index >= -1, "device_index must be -1 (LOCAL_RANK, else 0) or a CUDA device index");
        if ((p.flags & ~static_cast<uint64_t>(GPT_MODEL_NO_CUDA_GRAPHS)) != 0)
            gpt::fail(GPT_ERR_INVALID_ARGUMENT,
                      "flags holds a bit this library does not know: " + std::to_string(p.flags));
        const std::string dir = gpt::resolve_artifact_dir(artifact_dir, false, gpt::load_trusted_keys(p.trusted_keys));
        auto model = std::make_unique<gpt_model>(std::make_shared<gpt::Model>(dir, p));
        const gpt::Manifest &m = model->impl->manifest();
        gpt_model_info &info = model->info;
        info.struct_size = sizeof info;
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
        info.eos_token = model->impl->tokenizer().eos() >= 0 ? model->impl->tokenizer().eos() : GPT_TOKEN_NONE;
        info.weights = m.quantization.empty() ? "unquantized" : m.quantization.c_str();
        info.extend_graph = model->impl->has_extend();
        info.mixed_graph = model->impl->has_mixed();
        info.kv_cache = m.kv_cache_dtype.empty() ? m.dtype.c_str() : m.kv_cache_dtype.c_str();
        *out_model = model.release();
    });
}

gpt_status gpt_model_free(struct gpt_model *model) {
    return guarded(__func__, [&] {
        delete model;  // the model itself goes with the last of its sessions and trainers
    });
}

gpt_status gpt_model_get_info(const struct gpt_model *model, struct gpt_model_info *out_info, size_t struct_size) {
    return guarded(__func__, [&] {
        require(model != nullptr && out_info != nullptr, "model and out_info must not be NULL");
        fill_versioned(model->info, out_info, struct_size);
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

gpt_status gpt_model_get_memory(const struct gpt_model *model, struct gpt_memory_stats *out_stats, size_t struct_size) {
    return guarded(__func__, [&] {
        require(model != nullptr && out_stats != nullptr, "model and out_stats must not be NULL");
        const gpt::DeviceMemory device = gpt::device_memory(model->impl->device());
        const gpt_memory_stats stats = {sizeof stats,    model->impl->weights_bytes(), device.allocated, device.peak,
                                        device.reserved, gpt::host_peak_rss()};
        fill_versioned(stats, out_stats, struct_size);
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
    return select_with_keys(__func__, model_dir, flags, nullptr, out_dir, capacity, out_size);
}

gpt_status gpt_artifact_select_v2(const char *model_dir, uint32_t flags, const char *trusted_keys, char *out_dir,
                                  size_t capacity, size_t *out_size) {
    const gpt_status refused = guarded(__func__, [&] { require_known_artifact_flags(flags); });
    if (refused != GPT_OK) return refused;
    return select_with_keys(__func__, model_dir, flags, trusted_keys, out_dir, capacity, out_size);
}

gpt_status gpt_artifact_describe(const char *path, uint32_t flags, char *json, size_t capacity, size_t *out_size) {
    return describe_with_keys(__func__, path, flags, nullptr, json, capacity, out_size);
}

gpt_status gpt_artifact_describe_v2(const char *path, uint32_t flags, const char *trusted_keys, char *json,
                                    size_t capacity, size_t *out_size) {
    const gpt_status refused = guarded(__func__, [&] { require_known_artifact_flags(flags); });
    if (refused != GPT_OK) return refused;
    return describe_with_keys(__func__, path, flags, trusted_keys, json, capacity, out_size);
}

}  // extern "C"
