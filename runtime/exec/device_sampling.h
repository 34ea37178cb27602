// device_sampling.h — the Sampler's choice made where the logits are (a GPU), so that a
// decode step sends back one id per sequence instead of vocab_size floats per sequence.
#pragma once

#include <ATen/Tensor.h>

#include <vector>

#include "exec/sampler.h"
#include "gpt_runtime.h"

namespace gpt {

// One token for each row of `logits` ((rows, >= vocab_size), any device and float dtype), drawn
// by samplers[row] (nullptr: the row is left out, GPT_TOKEN_NONE). The same tokens as
// Sampler::sample on the same logits: the same rule (greedy, temperature, top-k, top-p, ties by
// smaller id) and the same uniform draw from the sampler's stream, with sums in double. Only
// the ids (and a flag per row) are copied back, through pinned memory; NaN, +inf or all -inf
// in a sampled row is GPT_ERR_NON_FINITE, and then no sampler's stream has moved.
std::vector<gpt_token> sample_on_device(const at::Tensor &logits, int32_t vocab_size,
                                        const std::vector<Sampler *> &samplers);

}  // namespace gpt
