// trainer.cpp — gradient accumulation, non-finite checks, and the AdamW call.
#include "trainer.h"

#include <ATen/ATen.h>

#include <cmath>

#include "error.h"
#include "lr_schedule.h"

namespace gpt {

Trainer::Trainer(Model &model, const gpt_trainer_params &params) : model_(model), params_(params) {
    const auto &training = model.manifest().training;
    if (!training)
        fail(GPT_ERR_INVALID_ARGUMENT,
             "this artifact has no training graphs: compile it with `python -m gpt_aot compile --train`");
    if (!(params.learning_rate >= 0.0f) || !(params.min_lr >= 0.0f) || params.warmup_iters < 0 ||
        (params.decay_lr && params.lr_decay_iters <= params.warmup_iters))
        fail(GPT_ERR_INVALID_ARGUMENT, "need learning_rate, min_lr >= 0 and lr_decay_iters > warmup_iters >= 0");
    for (const auto &name : training->param_names) {
        const at::Tensor &w = model.weight(name);
        weights_.push_back(w);
        grads_.push_back(at::zeros_like(w));
        exp_avg_.push_back(at::zeros_like(w));
        exp_avg_sq_.push_back(at::zeros_like(w));
    }
    at::manual_seed(params.seed);  // dropout in train_step draws from the default generator
    ++model_.live_sessions();
}

Trainer::~Trainer() { --model_.live_sessions(); }

std::pair<at::Tensor, at::Tensor> Trainer::batch_tensors(const gpt_token *x, const gpt_token *y, int32_t batch,
                                                         int32_t seq) const {
    const ModelConfig &c = model_.config();
    const int32_t max_batch = model_.manifest().training->train_step.max_batch;
    if (batch < 1 || batch > max_batch)
        fail(GPT_ERR_INVALID_ARGUMENT,
             "batch " + std::to_string(batch) + " is outside [1, " + std::to_string(max_batch) + "]");
    if (seq < 2 || seq > c.block_size)
        fail(GPT_ERR_OUT_OF_RANGE,
             "sequence length " + std::to_string(seq) + " is outside [2, " + std::to_string(c.block_size) + "]");
    const int64_t n = static_cast<int64_t>(batch) * seq;
    for (int64_t i = 0; i < n; ++i) {
        if (x[i] < 0 || x[i] >= c.vocab_size)
            fail(GPT_ERR_OUT_OF_RANGE, "input token " + std::to_string(x[i]) + " is outside the vocabulary");
        if (y[i] < -1 || y[i] >= c.vocab_size)
            fail(GPT_ERR_OUT_OF_RANGE, "target token " + std::to_string(y[i]) + " is outside the vocabulary (or -1)");
    }
    auto to_tensor = [&](const gpt_token *ids) {
        return at::from_blob(const_cast<gpt_token *>(ids), {batch, seq}, at::kInt).to(model_.device(), at::kLong);
    };
    return {to_tensor(x), to_tensor(y)};
}

float Trainer::step(const gpt_token *x, const gpt_token *y, int32_t batch, int32_t seq, int32_t accum) {
    if (accum < 1) fail(GPT_ERR_INVALID_ARGUMENT, "grad_accum_steps must be >= 1");
    const int64_t micro = static_cast<int64_t>(batch) * seq;
    double loss_sum = 0.0;
    for (int32_t k = 0; k < accum; ++k) {
        const auto xy = batch_tensors(x + k * micro, y + k * micro, batch, seq);
        const std::vector<at::Tensor> out = model_.train_step(xy.first, xy.second);  // {loss, grads...}
        const double loss = out.at(0).item<double>();
        if (!std::isfinite(loss))
            fail(GPT_ERR_NON_FINITE, "loss is " + std::to_string(loss) + " at iteration " + std::to_string(iteration_) +
                                         ": weights left unchanged");
        loss_sum += loss;
        // nanoGPT scales each micro-batch loss by 1/accum: the same as averaging gradients.
        for (size_t i = 0; i < grads_.size(); ++i) {
            if (k == 0) {
                at::mul_out(grads_[i], out[i + 1], 1.0 / accum);
            } else {
                grads_[i].add_(out[i + 1], 1.0 / accum);
            }
        }
    }
    const double norm = at::stack(at::_foreach_norm(grads_)).norm().item<double>();
    if (!std::isfinite(norm))
        fail(GPT_ERR_NON_FINITE, "gradient norm is " + std::to_string(norm) + " at iteration " +
                                     std::to_string(iteration_) + ": weights left unchanged");

    const auto opts = at::TensorOptions().dtype(at::kFloat).device(model_.device());
    std::vector<at::Tensor> inputs;
    inputs.reserve(4 * weights_.size() + 2);
    for (const auto *group : {&weights_, &grads_, &exp_avg_, &exp_avg_sq_})
        inputs.insert(inputs.end(), group->begin(), group->end());
    inputs.push_back(at::scalar_tensor(learning_rate_at(iteration_, params_), opts));
    inputs.push_back(at::scalar_tensor(static_cast<double>(iteration_ + 1), opts));
    grad_norm_ = model_.adamw(inputs).item<float>();
    ++iteration_;
    return static_cast<float>(loss_sum / accum);
}

float Trainer::eval(const gpt_token *x, const gpt_token *y, int32_t batch, int32_t seq) {
    const auto xy = batch_tensors(x, y, batch, seq);
    return model_.eval_loss(xy.first, xy.second).item<float>();
}

gpt_trainer_state Trainer::state() const {
    gpt_trainer_state s{};
    s.iteration = iteration_;
    s.learning_rate = static_cast<float>(learning_rate_at(iteration_, params_));
    s.grad_norm = grad_norm_;
    return s;
}

}  // namespace gpt
