// c_api_trainer.cpp — the C ABI of training: trainers (single process or
// distributed), steps, evaluation, checkpoints.
#include <cstdlib>

#include "c_api_guard.h"
#include "collectives.h"
#include "model.h"
#include "trainer.h"

using gpt::c_api::guarded;
using gpt::c_api::require;

extern "C" {

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
