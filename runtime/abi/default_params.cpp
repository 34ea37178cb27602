// default_params.cpp — the defaults of every params struct, written down once:
// gpt_*_default_params hand them out, and params from a caller whose header
// predates a field take them for it (versioned_struct.h).
#include "abi/c_api_guard.h"
#include "abi/versioned_struct.h"

namespace gpt::c_api {

gpt_model_params Versioned<gpt_model_params>::defaults() {
    gpt_model_params p{};
    p.struct_size = sizeof p;
    p.num_threads = 0;
    p.num_runners = 1;
    p.verify_golden = false;
    p.trusted_keys = nullptr;
    return p;
}

gpt_generate_params Versioned<gpt_generate_params>::defaults() {
    gpt_generate_params p{};
    p.struct_size = sizeof p;
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

gpt_trainer_params Versioned<gpt_trainer_params>::defaults() {
    gpt_trainer_params p{};
    p.struct_size = sizeof p;
    p.learning_rate = 6e-4f;
    p.min_lr = 6e-5f;
    p.warmup_iters = 2000;
    p.lr_decay_iters = 600000;
    p.decay_lr = true;
    p.seed = 1337;
    return p;
}

gpt_dist_params Versioned<gpt_dist_params>::defaults() {
    gpt_dist_params p{};
    p.struct_size = sizeof p;
    p.world_size = 1;
    p.rank = 0;
    p.master_addr = "127.0.0.1";
    p.master_port = 29500;
    p.timeout_ms = 300000;
    p.bucket_mb = 25;
    return p;
}

namespace {

template <typename T>
gpt_status hand_out_defaults(const char *function, T *params, size_t struct_size) {
    return guarded(function, [&] {
        require(params != nullptr, "params must not be NULL");
        fill_versioned(Versioned<T>::defaults(), params, struct_size);
    });
}

}  // namespace

}  // namespace gpt::c_api

using gpt::c_api::hand_out_defaults;

extern "C" {

gpt_status gpt_model_default_params(struct gpt_model_params *params, size_t struct_size) {
    return hand_out_defaults(__func__, params, struct_size);
}

gpt_status gpt_generate_default_params(struct gpt_generate_params *params, size_t struct_size) {
    return hand_out_defaults(__func__, params, struct_size);
}

gpt_status gpt_trainer_default_params(struct gpt_trainer_params *params, size_t struct_size) {
    return hand_out_defaults(__func__, params, struct_size);
}

gpt_status gpt_dist_default_params(struct gpt_dist_params *params, size_t struct_size) {
    return hand_out_defaults(__func__, params, struct_size);
}

}  // extern "C"
