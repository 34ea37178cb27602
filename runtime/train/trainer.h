// trainer.h — the training loop's state over a model: master weights, gradients,
// AdamW moments, iteration and schedule, alone or as one rank of data-parallel
// training. The compiled train_step and adamw graphs do the math.
#pragma once

#include <ATen/Tensor.h>
#include <c10/core/ScalarType.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "exec/model.h"
#include "gpt_runtime.h"
#include "train/collectives.h"
#include "train/grad_buckets.h"
#include "train/trainer_rng.h"

namespace gpt {

class Trainer {
public:
    // With `dist`, joins the job (blocking until every rank has) and takes rank 0's weights.
    Trainer(Model &model, const gpt_trainer_params &params, const DistConfig *dist = nullptr);
    ~Trainer();
    Trainer(const Trainer &) = delete;
    Trainer &operator=(const Trainer &) = delete;

    // x, y: accum * batch * seq ids; *out_loss = the mean micro-batch loss (over all ranks).
    // Distributed, the arguments of every rank are checked and agreed on before any
    // collective: a rank's refusal fails the step on every rank with its status.
    void step(const gpt_token *x, const gpt_token *y, int32_t batch, int32_t seq, int32_t accum, float *out_loss);
    float eval(const gpt_token *x, const gpt_token *y, int32_t batch, int32_t seq);
    gpt_trainer_state state() const;

    // Checkpoints (trainer_checkpoint.cpp): master weights, AdamW moments, iteration
    // and the trainer's generators in one safetensors file, replaced atomically.
    void save(const std::string &path) const;
    void load(const std::string &path);

private:
    // Throws what step() refuses: NULL pointers, grad_accum_steps, each micro-batch's check_batch.
    void check_step_arguments(const gpt_token *x, const gpt_token *y, int32_t batch, int32_t seq, int32_t accum,
                              const float *out_loss) const;
    // One all-reduce of every rank's check outcome; throws the lowest refusing rank's status on every rank.
    void agree_on_arguments(const std::optional<Error> &refused);
    // Batch and sequence length against the manifest; token ids against the vocabulary.
    void check_batch(const gpt_token *x, const gpt_token *y, int32_t batch, int32_t seq) const;
    // (batch, seq) int64 tensors on the device, after check_batch.
    std::pair<at::Tensor, at::Tensor> batch_tensors(const gpt_token *x, const gpt_token *y, int32_t batch,
                                                    int32_t seq) const;

    // After adamw changed the masters: the model's weights from them, and the model told.
    void masters_changed();

    Model &model_;
    gpt_trainer_params params_;
    std::vector<at::Tensor> weights_;  // the model's own tensors, in manifest training order
    // What adamw updates, in the manifest's training.master_dtype (fp32), like the gradients and moments: for
    // a bf16 model, fp32 copies of its weights, which the weights follow rounded after each step (as nanoGPT's
    // fp32 parameters under bf16 autocast); for an fp32 model, weights_ themselves.
    at::ScalarType master_dtype_;
    std::vector<at::Tensor> masters_;
    bool masters_are_weights() const { return master_dtype_ == weights_.front().scalar_type(); }
    // In the master dtype too: a bf16 model's micro-batch gradients are summed (and all-reduced) in fp32, as
    // nanoGPT's land in its fp32 parameters' .grad under autocast. That costs 2 more bytes per parameter
    // (18 in all beside bf16 weights, fp32 masters and moments) and twice bf16's all-reduce bytes; summing k
    // micro-batches or ranks in bf16 would round each partial sum to 8 bits.
    GradBuckets grads_;
    std::unique_ptr<ProcessGroup> group_;  // null when training alone
    TrainerRng rng_;                       // dropout's generators, this trainer's alone
    std::vector<at::Tensor> exp_avg_;
    std::vector<at::Tensor> exp_avg_sq_;
    int64_t iteration_ = 0;
    float grad_norm_ = 0.0f;
};

}  // namespace gpt

struct gpt_trainer {
    gpt_trainer(std::shared_ptr<gpt::Model> m, const gpt_trainer_params &p, const gpt::DistConfig *dist)
        : model(std::move(m)), impl(*model, p, dist) {}
    std::shared_ptr<gpt::Model> model;  // declared first, so freed after impl, which uses it
    gpt::Trainer impl;
};
