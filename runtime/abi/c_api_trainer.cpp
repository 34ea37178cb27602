// c_api_trainer.cpp — the C ABI of training: trainers (single process or
// distributed), steps, evaluation, checkpoints.
#include <cstdlib>
#include <mutex>
#include <set>
#include <string>

#include "abi/c_api_guard.h"
#include "abi/versioned_struct.h"
#include "exec/model.h"
#include "train/collectives.h"
#include "train/trainer.h"

using gpt::c_api::fill_versioned;
using gpt::c_api::guarded;
using gpt::c_api::read_versioned;
using gpt::c_api::require;

namespace {

// A copy of `value` that lives until the process ends, one per distinct value: the environment's own
// storage is not the caller's to keep (a later setenv may free it), and no free call would say when a
// copy given out is done with.
const char *kept_for_the_process(const char *value) {
    static std::mutex mutex;
    static std::set<std::string> *const kept = new std::set<std::string>;  // never destroyed: see above
    const std::lock_guard<std::mutex> lock(mutex);
    return kept->insert(value).first->c_str();
}

}  // namespace

extern "C" {

gpt_status gpt_trainer_create(struct gpt_model *model, const struct gpt_trainer_params *params,
                              struct gpt_trainer **out_trainer) {
    return guarded(__func__, [&] {
        require(model != nullptr && out_trainer != nullptr, "model and out_trainer must not be NULL");
        const gpt_trainer_params p = read_versioned(params);
        *out_trainer = new gpt_trainer(model->impl, p, nullptr);
    });
}

gpt_status gpt_dist_params_from_env(struct gpt_dist_params *params) {
    return guarded(__func__, [&] {
        require(params != nullptr, "params must not be NULL");
        gpt_dist_params p = read_versioned(params);
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
        if (const char *addr = std::getenv("MASTER_ADDR")) p.master_addr = kept_for_the_process(addr);
        fill_versioned(p, params, params->struct_size);
    });
}

gpt_status gpt_trainer_create_distributed(struct gpt_model *model, const struct gpt_trainer_params *params,
                                          const struct gpt_dist_params *dist, struct gpt_trainer **out_trainer) {
    return guarded(__func__, [&] {
        require(model != nullptr && dist != nullptr && out_trainer != nullptr,
                "model, dist and out_trainer must not be NULL");
        const gpt_trainer_params p = read_versioned(params);
        const gpt::DistConfig config = gpt::validate_dist_params(read_versioned(dist));
        *out_trainer = new gpt_trainer(model->impl, p, &config);
    });
}

gpt_status gpt_trainer_free(struct gpt_trainer *trainer) {
    return guarded(__func__, [&] { delete trainer; });
}

gpt_status gpt_trainer_step(struct gpt_trainer *trainer, const gpt_token *x, const gpt_token *y, int32_t batch,
                            int32_t seq, int32_t grad_accum_steps, float *out_loss) {
    return guarded(__func__, [&] {
        require(trainer != nullptr, "trainer must not be NULL");
        trainer->impl.step(x, y, batch, seq, grad_accum_steps, out_loss);  // checks the rest, on every rank
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

gpt_status gpt_trainer_get_state(const struct gpt_trainer *trainer, struct gpt_trainer_state *out_state,
                                 size_t struct_size) {
    return guarded(__func__, [&] {
        require(trainer != nullptr && out_state != nullptr, "trainer and out_state must not be NULL");
        fill_versioned(trainer->impl.state(), out_state, struct_size);
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
