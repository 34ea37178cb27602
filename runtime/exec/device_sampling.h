// device_sampling.h — the Sampler's choice made where the logits are (a GPU), so that a
// decode step sends back one id per sequence instead of vocab_size floats per sequence.
#pragma once

#include <ATen/Tensor.h>

#include <vector>

#include "exec/sampler.h"

namespace gpt {

// One token for each row of `logits` ((rows, >= vocab_size), any device and float dtype), drawn
// by samplers[row] (nullptr: the row is left out; one sampler per row). The rule is
// Sampler::sample's (its logit bias and penalties added in float, then greedy, temperature, top-k,
// top-p, ties by smaller id; the token drawn counted for the penalties) with the same
// uniform draw from the sampler's stream and sums in double, so the tokens are the host's
// unless a draw falls within rounding (about 1e-15) of a boundary. Only the ids (and a flag
// per row) come back. A row with NaN, +inf or only -inf is refused alone (sample_rows): its
// sampler's stream is as it was before the call; any failure leaves every stream so.
// `greedy`: greedy_choice of these logits when the caller has it (a captured step computes it in
// its graph): then a step whose rows are all greedy launches nothing but the copy back.
// Ids without text come from the model at -inf (Model::prefill, Model::decode), so neither this
// nor the greedy choice ever picks one.
SampledRows sample_on_device(const at::Tensor &logits, int32_t vocab_size, const std::vector<Sampler *> &samplers,
                             const at::Tensor &greedy = at::Tensor());

// Each row's greedy choice, and whether anything can be drawn from it: (2, rows) int64 on the
// logits' device, the first largest logit's id, then 1 where the largest logit is finite (not
// NaN, +inf, or -inf for every token).
at::Tensor greedy_choice(const at::Tensor &logits, int32_t vocab_size);

}  // namespace gpt
