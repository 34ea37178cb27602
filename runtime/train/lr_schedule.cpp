// lr_schedule.cpp — the same formula as nanoGPT's train.py get_lr().
#include "train/lr_schedule.h"

#include <cmath>

namespace gpt {

double learning_rate_at(int64_t it, const gpt_trainer_params &p) {
    if (!p.decay_lr) return p.learning_rate;
    if (it < p.warmup_iters) return p.learning_rate * static_cast<double>(it + 1) / (p.warmup_iters + 1);
    if (it > p.lr_decay_iters) return p.min_lr;
    const double ratio = static_cast<double>(it - p.warmup_iters) / (p.lr_decay_iters - p.warmup_iters);
    const double coeff = 0.5 * (1.0 + std::cos(M_PI * ratio));
    return p.min_lr + coeff * (p.learning_rate - p.min_lr);
}

}  // namespace gpt
