// trainer_checkpoint.cpp — the checkpoint format: one safetensors file holding
//   param.<name>, exp_avg.<name>, exp_avg_sq.<name>  (names from manifest training.param_names)
//   rng.cpu, and rng.cuda for a GPU trainer           (the trainer's generators, trainer_rng.h)
// and string metadata: format, format_version, iteration, the model's shape, the schedule.
// Loading checks everything before it changes anything.
#include <ATen/ATen.h>

#include "base/error.h"
#include "exec/safetensors.h"
#include "formats/checkpoint_format.h"
#include "formats/files.h"
#include "train/trainer.h"

namespace gpt {

namespace {

std::map<std::string, std::string> model_metadata(const Model &model) {
    const ModelConfig &c = model.config();
    return {{"model.name", model.manifest().name},
            {"model.dtype", model.manifest().dtype},
            {"model.n_layer", std::to_string(c.n_layer)},
            {"model.n_head", std::to_string(c.n_head)},
            {"model.n_embd", std::to_string(c.n_embd)},
            {"model.block_size", std::to_string(c.block_size)},
            {"model.vocab_size", std::to_string(c.vocab_size)}};
}

}  // namespace

void Trainer::save(const std::string &path) const {
    const auto &names = model_.manifest().training->param_names;
    std::map<std::string, at::Tensor> tensors;
    for (size_t i = 0; i < names.size(); ++i) {
        tensors["param." + names[i]] = weights_[i];
        tensors["exp_avg." + names[i]] = exp_avg_[i];
        tensors["exp_avg_sq." + names[i]] = exp_avg_sq_[i];
    }
    for (auto &[key, state] : rng_.states()) tensors[key] = state;
    auto metadata = model_metadata(model_);
    metadata["format"] = kCheckpointFormat;
    metadata["format_version"] = kCheckpointVersion;
    metadata["iteration"] = std::to_string(iteration_);
    metadata["trainer.learning_rate"] = std::to_string(params_.learning_rate);
    metadata["trainer.min_lr"] = std::to_string(params_.min_lr);
    metadata["trainer.warmup_iters"] = std::to_string(params_.warmup_iters);
    metadata["trainer.lr_decay_iters"] = std::to_string(params_.lr_decay_iters);
    write_file_atomically(path, [&](const ByteSink &put) { write_safetensors(tensors, metadata, put); });
}

void Trainer::load(const std::string &path) {
    if (!regular_file_size(path)) fail(GPT_ERR_INVALID_ARGUMENT, "no checkpoint at '" + path + "'");
    FileReader file(path, "checkpoint '" + path + "'", GPT_ERR_ARTIFACT_INVALID, Links::follow);
    std::map<std::string, std::string> metadata;
    auto tensors = read_safetensors(file, &metadata);
    const int64_t iteration = check_checkpoint_metadata(metadata, model_metadata(model_), path);

    const auto &names = model_.manifest().training->param_names;
    auto take = [&](const std::string &key, const at::Tensor &like) -> at::Tensor {
        auto it = tensors.find(key);
        if (it == tensors.end() || it->second.sizes() != like.sizes() || it->second.scalar_type() != like.scalar_type())
            fail(GPT_ERR_ARTIFACT_INVALID, "checkpoint '" + path + "' lacks '" + key + "' with the model's shape");
        return it->second;
    };
    std::vector<std::pair<at::Tensor, at::Tensor>> copies;  // (destination, source), applied after every check
    for (size_t i = 0; i < names.size(); ++i) {
        copies.emplace_back(weights_[i], take("param." + names[i], weights_[i]));
        copies.emplace_back(exp_avg_[i], take("exp_avg." + names[i], exp_avg_[i]));
        copies.emplace_back(exp_avg_sq_[i], take("exp_avg_sq." + names[i], exp_avg_sq_[i]));
    }
    TrainerRng rng = rng_.restored(tensors, group_ ? group_->rank() : 0, path);

    for (auto &[dst, src] : copies) dst.copy_(src);
    model_.weights_changed();
    rng_ = std::move(rng);
    iteration_ = iteration;
}

}  // namespace gpt
