// lr_schedule.h — nanoGPT's learning-rate schedule: linear warm-up, cosine decay to min_lr.
#pragma once

#include <cstdint>

#include "gpt_runtime.h"

namespace gpt {

double learning_rate_at(int64_t iteration, const gpt_trainer_params &p);

}  // namespace gpt
