// checkpoint_format.h — the metadata of a trainer checkpoint (format, version,
// iteration, the model's shape), checked without torch so the fuzzers cover it.
// The tensors themselves are in trainer_checkpoint.cpp.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace gpt {

inline constexpr const char *kCheckpointFormat = "gpt-aot-checkpoint";
// 2: param/exp_avg/exp_avg_sq in the artifact's training.master_dtype (fp32 master weights and moments of a
// bf16 model). Version 1 holds them in the model's dtype; it is still read (a bf16 one is widened exactly).
inline constexpr const char *kCheckpointVersion = "2";
inline constexpr const char *kOldestCheckpointVersion = "1";

using StringMap = std::map<std::string, std::string>;

// Checks a checkpoint's `metadata` against `model` (the model.* keys the trainer
// writes; model.name may differ) and returns the iteration it was saved at.
// GPT_ERR_ARTIFACT_INVALID / _VERSION for a foreign or damaged file,
// GPT_ERR_INVALID_ARGUMENT for a checkpoint of another model shape.
int64_t check_checkpoint_metadata(const StringMap &metadata, const StringMap &model, const std::string &path);

}  // namespace gpt
