// trainer_checkpoint.cpp — the checkpoint format: one safetensors file holding
//   param.<name>, exp_avg.<name>, exp_avg_sq.<name>  (names from manifest training.param_names, in its
//                                                     master_dtype: a bf16 model's fp32 masters and moments)
//   rng.cpu, and rng.cuda for a GPU trainer           (the trainer's generators, trainer_rng.h)
// and string metadata: format, format_version, iteration, the model's shape, the schedule.
// The model's weights are not stored: they are the masters rounded to its dtype.
// Loading checks everything before it changes anything.
#include <ATen/core/Tensor.h>

#include "base/error.h"
#include "exec/safetensors.h"
#include "exec/torch_dtype.h"
#include "formats/checkpoint_format.h"
#include "formats/files.h"
#include "train/trainer.h"

namespace gpt {

namespace {

std::string dtype_name(at::ScalarType type) {
    const Dtype *dtype = dtype_of(type);
    return dtype ? dtype->name : c10::toString(type);
}

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
        tensors["param." + names[i]] = masters_[i];
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
    const at::ScalarType model_dtype = weights_.front().scalar_type();
    // In the master dtype, or in the model's (version 1, or saved from an artifact of format 12, whose
    // optimizer state was in it): a bf16 tensor widens to fp32 exactly.
    auto take = [&](const std::string &key, const at::Tensor &like) -> at::Tensor {
        auto it = tensors.find(key);
        if (it == tensors.end() || it->second.sizes() != like.sizes())
            fail(GPT_ERR_ARTIFACT_INVALID, "checkpoint '" + path + "' lacks '" + key + "' with the model's shape");
        const at::ScalarType dtype = it->second.scalar_type();
        if (dtype != like.scalar_type() && dtype != model_dtype)
            fail(GPT_ERR_ARTIFACT_INVALID, "checkpoint '" + path + "' holds '" + key + "' in " + dtype_name(dtype) +
                                               ", this trainer keeps it in " + dtype_name(like.scalar_type()) +
                                               ": recompile the artifact with this runtime's gpt_aot");
        return it->second;
    };
    std::vector<std::pair<at::Tensor, at::Tensor>> copies;  // (destination, source), applied after every check
    for (size_t i = 0; i < names.size(); ++i) {
        copies.emplace_back(masters_[i], take("param." + names[i], masters_[i]));
        copies.emplace_back(exp_avg_[i], take("exp_avg." + names[i], exp_avg_[i]));
        copies.emplace_back(exp_avg_sq_[i], take("exp_avg_sq." + names[i], exp_avg_sq_[i]));
    }
    TrainerRng rng = rng_.restored(tensors, group_ ? group_->rank() : 0, path);

    for (auto &[dst, src] : copies) dst.copy_(src);
    masters_changed();
    rng_ = std::move(rng);
    iteration_ = iteration;
}

}  // namespace gpt
