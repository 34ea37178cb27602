// default_params.cpp — the defaults of every params struct, written down once:
// gpt_*_default_params hand them out, and params from a caller whose header
// predates a field take them for it (versioned_struct.h).
#include "abi/c_api_guard.h"
#include "abi/versioned_struct.h"

namespace gpt::c_api {

// Each struct's fields in order, so that a field added to the header without a default here fails to compile
// (-Wmissing-field-initializers).
gpt_model_params Versioned<gpt_model_params>::defaults() {
    return {sizeof(gpt_model_params), /*num_threads=*/0,   /*num_runners=*/1, /*verify_golden=*/false,
            /*trusted_keys=*/nullptr, /*device_index=*/-1, /*flags=*/0};
}

gpt_generate_params Versioned<gpt_generate_params>::defaults() {
    return {sizeof(gpt_generate_params),
            /*max_new_tokens=*/64,
            /*temperature=*/1.0f,
            /*top_k=*/0,
            /*top_p=*/1.0f,
            /*seed=*/0,
            /*stop_token=*/-1,
            /*on_token=*/nullptr,
            /*user_data=*/nullptr,
            /*stop_at_eos=*/true,
            /*stop_strings=*/nullptr,
            /*n_stop_strings=*/0,
            /*token_logprobs=*/nullptr};
}

gpt_sampler_params Versioned<gpt_sampler_params>::defaults() {
    return {sizeof(gpt_sampler_params),
            /*temperature=*/1.0f,
            /*top_k=*/0,
            /*top_p=*/1.0f,
            /*seed=*/0,
            /*logit_bias=*/nullptr,
            /*n_logit_bias=*/0,
            /*presence_penalty=*/0.0f,
            /*frequency_penalty=*/0.0f};
}

gpt_trainer_params Versioned<gpt_trainer_params>::defaults() {
    return {sizeof(gpt_trainer_params), /*learning_rate=*/6e-4f, /*min_lr=*/6e-5f, /*warmup_iters=*/2000,
            /*lr_decay_iters=*/600000,  /*decay_lr=*/true,       /*seed=*/1337};
}

gpt_dist_params Versioned<gpt_dist_params>::defaults() {
    return {sizeof(gpt_dist_params), /*world_size=*/1,      /*rank=*/0,      /*master_addr=*/"127.0.0.1",
            /*master_port=*/29500,   /*timeout_ms=*/300000, /*bucket_mb=*/25};
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

gpt_status gpt_sampler_default_params(struct gpt_sampler_params *params, size_t struct_size) {
    return hand_out_defaults(__func__, params, struct_size);
}

}  // extern "C"
