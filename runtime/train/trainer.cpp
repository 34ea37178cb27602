// trainer.cpp — gradient accumulation, the all-reduce over ranks, non-finite
// checks, and the AdamW call over the master weights.
#include "train/trainer.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/_foreach_copy.h>
#include <ATen/ops/_foreach_norm.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/full.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/zeros_like.h>

#include <cmath>
#include <optional>

#include "base/error.h"
#include "exec/torch_dtype.h"
#include "train/lr_schedule.h"

namespace gpt {

namespace {

constexpr int64_t kDefaultBucketBytes = int64_t{25} << 20;

// The model's tensors in manifest training order; checks that the artifact can train.
std::vector<at::Tensor> training_weights(const Model &model) {
    model.require_training();
    std::vector<at::Tensor> weights;
    for (const auto &name : model.manifest().training->param_names) weights.push_back(model.weight(name));
    return weights;
}

at::ScalarType master_dtype_of(const Model &model) {
    const std::string &name = model.manifest().training->master_dtype;
    const Dtype *dtype = dtype_from_name(name);
    if (dtype == nullptr) fail(GPT_ERR_ARTIFACT_INVALID, "training.master_dtype '" + name + "' is not a known dtype");
    return scalar_type(*dtype);
}

// The weights themselves when they are in the master dtype, else copies in it (on their device).
std::vector<at::Tensor> master_weights(const std::vector<at::Tensor> &weights, at::ScalarType dtype) {
    std::vector<at::Tensor> masters;
    masters.reserve(weights.size());
    for (const at::Tensor &w : weights) masters.push_back(w.scalar_type() == dtype ? w : w.to(dtype).contiguous());
    return masters;
}

}  // namespace

Trainer::Trainer(Model &model, const gpt_trainer_params &params, const DistConfig *dist)
    : model_(model),
      params_(params),
      weights_(training_weights(model)),
      master_dtype_(master_dtype_of(model)),
      masters_(master_weights(weights_, master_dtype_)),
      grads_(masters_, dist ? dist->bucket_bytes : kDefaultBucketBytes),
      // each rank its own dropout masks
      rng_(model.device(), params.seed + (dist ? static_cast<uint64_t>(dist->rank) : 0)) {
    if (!(params.learning_rate >= 0.0f) || !(params.min_lr >= 0.0f) || params.warmup_iters < 0 ||
        (params.decay_lr && params.lr_decay_iters <= params.warmup_iters))
        fail(GPT_ERR_INVALID_ARGUMENT, "need learning_rate, min_lr >= 0 and lr_decay_iters > warmup_iters >= 0");
    for (const at::Tensor &m : masters_) {
        exp_avg_.push_back(at::zeros_like(m));
        exp_avg_sq_.push_back(at::zeros_like(m));
    }
    if (dist) {
        group_ = std::make_unique<ProcessGroup>(*dist, model.device());
        for (const at::Tensor &m : masters_) group_->start_broadcast(m, 0);
        group_->wait_all();
        masters_changed();
    }
}

Trainer::~Trainer() = default;

void Trainer::check_batch(const gpt_token *x, const gpt_token *y, int32_t batch, int32_t seq) const {
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
}

std::pair<at::Tensor, at::Tensor> Trainer::batch_tensors(const gpt_token *x, const gpt_token *y, int32_t batch,
                                                         int32_t seq) const {
    check_batch(x, y, batch, seq);
    auto to_tensor = [&](const gpt_token *ids) {
        return at::from_blob(const_cast<gpt_token *>(ids), {batch, seq}, at::kInt).to(model_.device(), at::kLong);
    };
    return {to_tensor(x), to_tensor(y)};
}

void Trainer::check_step_arguments(const gpt_token *x, const gpt_token *y, int32_t batch, int32_t seq, int32_t accum,
                                   const float *out_loss) const {
    if (x == nullptr || y == nullptr || out_loss == nullptr)
        fail(GPT_ERR_INVALID_ARGUMENT, "x, y and out_loss must not be NULL");
    if (accum < 1) fail(GPT_ERR_INVALID_ARGUMENT, "grad_accum_steps must be >= 1");
    const int64_t micro = static_cast<int64_t>(batch) * seq;
    for (int32_t k = 0; k < accum; ++k) check_batch(x + k * micro, y + k * micro, batch, seq);
}

void Trainer::agree_on_arguments(const std::optional<Error> &refused) {
    const int world = group_->world_size(), rank = group_->rank();
    at::Tensor statuses = at::zeros({world}, at::kInt);
    statuses[rank].fill_(static_cast<int>(refused ? refused->status() : GPT_OK));
    statuses = statuses.to(model_.device());
    group_->start_sum(statuses);
    group_->wait_all();
    statuses = statuses.cpu();
    for (int r = 0; r < world; ++r) {
        const auto status = static_cast<gpt_status>(statuses[r].item<int>());
        if (status == GPT_OK) continue;
        if (r == rank) throw *refused;
        fail(status, "rank " + std::to_string(r) + " of " + std::to_string(world) + " refused its arguments (" +
                         status_name(status) + "; that rank's error says why): no rank took the step" +
                         (refused ? "; this rank's own: " + std::string(refused->what()) : std::string()));
    }
}

void Trainer::step(const gpt_token *x, const gpt_token *y, int32_t batch, int32_t seq, int32_t accum, float *out_loss) {
    // Arguments are checked before any collective, and the ranks agree on the outcome, so a
    // rank refusing its shard never leaves its peers waiting in an all-reduce.
    std::optional<Error> refused;
    try {
        check_step_arguments(x, y, batch, seq, accum, out_loss);
    } catch (const Error &e) {
        if (!group_) throw;
        refused = e;
    }
    if (group_) agree_on_arguments(refused);
    const int world = group_ ? group_->world_size() : 1;
    // nanoGPT scales each micro-batch loss by 1/accum; dividing by the world size
    // too makes the all-reduced sum the average over ranks.
    const double scale = 1.0 / (static_cast<double>(accum) * world);
    const int64_t micro = static_cast<int64_t>(batch) * seq;
    const std::vector<at::Tensor> &grads = grads_.grads();
    double loss_sum = 0.0;
    for (int32_t k = 0; k < accum; ++k) {
        const auto xy = batch_tensors(x + k * micro, y + k * micro, batch, seq);
        std::vector<at::Tensor> out;  // {loss, grads...}
        {
            // The graph draws its dropout masks from torch's default generators.
            const TrainerRng::Lease lease = rng_.lend();
            out = model_.train_step(xy.first, xy.second);
        }
        loss_sum += out.at(0).item<double>();
        const bool last = k + 1 == accum;
        for (size_t b = 0; b < grads_.count(); ++b) {
            for (size_t i = grads_.first(b); i < grads_.end(b); ++i) {
                if (k == 0) {
                    at::Tensor grad = grads[i];  // a handle: mul_out writes into the bucket
                    // widened first: a bf16 product would be rounded to bf16 before it reached the fp32 bucket
                    at::mul_out(grad, out[i + 1].to(grad.scalar_type()), scale);
                } else {
                    grads[i].add_(out[i + 1], scale);
                }
            }
            // Only the last micro-batch communicates: bucket b's all-reduce runs
            // while the next bucket is accumulated.
            if (last && group_) group_->start_sum(grads_.bucket(b));
        }
    }
    double loss = loss_sum / accum;
    if (group_) {
        // Summed with the gradients' collectives, so a NaN on any rank stops every rank.
        at::Tensor total = at::full({1}, loss, at::TensorOptions().dtype(at::kDouble).device(model_.device()));
        group_->start_sum(total);
        group_->wait_all();
        loss = total.item<double>() / world;
    }
    if (!std::isfinite(loss))
        fail(GPT_ERR_NON_FINITE, "loss is " + std::to_string(loss) + " at iteration " + std::to_string(iteration_) +
                                     ": weights left unchanged");
    const double norm = at::stack(at::_foreach_norm(grads)).norm().item<double>();
    if (!std::isfinite(norm))
        fail(GPT_ERR_NON_FINITE, "gradient norm is " + std::to_string(norm) + " at iteration " +
                                     std::to_string(iteration_) + ": weights left unchanged");

    const auto opts = at::TensorOptions().dtype(at::kFloat).device(model_.device());
    std::vector<at::Tensor> inputs;
    inputs.reserve(4 * weights_.size() + 2);
    for (const auto *group :
         std::initializer_list<const std::vector<at::Tensor> *>{&masters_, &grads, &exp_avg_, &exp_avg_sq_})
        inputs.insert(inputs.end(), group->begin(), group->end());
    inputs.push_back(at::scalar_tensor(learning_rate_at(iteration_, params_), opts));
    inputs.push_back(at::scalar_tensor(static_cast<double>(iteration_ + 1), opts));
    grad_norm_ = model_.adamw(inputs).item<float>();
    masters_changed();
    ++iteration_;
    *out_loss = static_cast<float>(loss);
}

void Trainer::masters_changed() {
    // One copy per tensor on the device, rounding each master to the model's dtype.
    if (!masters_are_weights()) at::_foreach_copy_(weights_, masters_);
    model_.weights_changed();
}

float Trainer::eval(const gpt_token *x, const gpt_token *y, int32_t batch, int32_t seq) {
    const auto xy = batch_tensors(x, y, batch, seq);
    return model_.eval_loss(xy.first, xy.second).item<float>();
}

gpt_trainer_state Trainer::state() const {
    gpt_trainer_state s{};
    s.struct_size = sizeof s;
    s.iteration = iteration_;
    s.learning_rate = static_cast<float>(learning_rate_at(iteration_, params_));
    s.grad_norm = grad_norm_;
    return s;
}

}  // namespace gpt
