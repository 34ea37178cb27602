// device_sampling.cpp — Sampler's rule as tensor operations over all sampled rows at once:
// the walk that sampler.cpp makes token by token becomes a cumulative sum and a search.
// Rows whose settings truncate (top-k, top-p) walk the distribution most likely first (a
// stable sort keeps equal logits in id order); the others walk it in id order, as the host does.
#include "exec/device_sampling.h"

#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/exp.h>
#include <ATen/ops/ones_like.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>

#include <cmath>

#include "base/error.h"

namespace gpt {

namespace {

// Index of the first true entry of each row of `mask`, and whether there is one.
std::pair<at::Tensor, at::Tensor> first_true(const at::Tensor &mask) {
    return {mask.to(at::kByte).argmax(1), mask.any(1)};
}

}  // namespace

at::Tensor greedy_choice(const at::Tensor &logits, int32_t vocab_size) {
    const auto [max, first] = logits.slice(1, 0, vocab_size).max(1);  // the first largest, NaN propagating
    return at::stack({first, max.isfinite().to(at::kLong)});
}

SampledRows sample_on_device(const at::Tensor &logits, int32_t vocab_size, const std::vector<Sampler *> &samplers,
                             const at::Tensor &greedy) {
    const int64_t rows = logits.size(0);
    if (static_cast<int64_t>(samplers.size()) != rows)
        fail(GPT_ERR_INTERNAL, "sample_on_device needs one sampler (or none) per row");
    SampledRows out{std::vector<gpt_token>(static_cast<size_t>(rows), GPT_TOKEN_NONE), {}};
    const int64_t vocab = vocab_size;
    const c10::Device device = logits.device();
    for (Sampler *s : samplers)
        if (s != nullptr) s->check_vocab(vocab_size);

    // Every row is computed (a decode step has at most max_batch), rows without a sampler as greedy
    // ones whose outcome is dropped: no gather of the sampled rows. The uniform draws come from each
    // sampler's own stream, on the host, exactly as sample() makes them; the settings and draws go
    // to the device in one copy.
    std::vector<Sampler::Stream> saved(static_cast<size_t>(rows));
    // In pageable memory, as the ids coming back: a pinned block in flight when a step faults would
    // record a CUDA event as it is freed, which throws where nothing can catch it.
    at::Tensor settings = at::zeros({4, rows}, at::kDouble);
    double *temperature = settings.data_ptr<double>(), *top_p = temperature + rows, *kept = top_p + rows;
    double *uniform = kept + rows;
    bool any_sampled = false, any_random = false, any_truncated = false;
    // Each sampler's logit bias and penalties, as (row, token, addition) for one scatter on the device.
    std::vector<int64_t> added_rows, added_tokens;
    std::vector<float> added;
    for (int64_t row = 0; row < rows; ++row) {
        top_p[row] = 1.0;
        kept[row] = static_cast<double>(vocab);  // top-k off: the whole vocabulary
        Sampler *s = samplers[static_cast<size_t>(row)];
        if (s == nullptr) continue;
        any_sampled = true;
        saved[static_cast<size_t>(row)] = s->stream();
        for (const auto &[token, add] : s->additions()) {
            added_rows.push_back(row);
            added_tokens.push_back(token);
            added.push_back(add);
        }
        if (s->temperature() <= 0.0f) continue;  // greedy draws nothing
        temperature[row] = s->temperature();
        top_p[row] = s->top_p();
        if (s->top_k() > 0 && s->top_k() < vocab_size) kept[row] = s->top_k();
        uniform[row] = s->draw();
        any_random = true;
        any_truncated = any_truncated || kept[row] < static_cast<double>(vocab) || s->top_p() < 1.0f;
    }
    if (!any_sampled) return out;

    // Anything failing from here on (memory, a device fault) leaves every sampler as it was.
    const auto choose = [&]() -> at::Tensor {
        // Greedy: the first largest. NaN or +inf is a model that overflowed, and all -inf leaves nothing
        // to draw (check_logits): the row's largest value is then not finite.
        if (!any_random && added.empty())
            return (greedy.defined() ? greedy : greedy_choice(logits, vocab_size)).to(at::kCPU);
        at::Tensor l = logits.slice(1, 0, vocab);  // (rows, vocab), the padding's columns left out
        if (!added.empty()) {  // in float, as the host adds them (-inf, a token ruled out, stays -inf)
            l = l.to(at::kFloat, /*non_blocking=*/false, /*copy=*/true);
            const auto on_device = [&](const auto &values, c10::ScalarType type) {
                return at::tensor(values, type).to(device);
            };
            l.index_put_({on_device(added_rows, at::kLong), on_device(added_tokens, at::kLong)},
                         on_device(added, at::kFloat), /*accumulate=*/true);
        }
        auto [max, chosen] = l.max(1);
        const at::Tensor drawable = max.isfinite();
        const at::Tensor per_row = settings.to(device).unsqueeze(2);  // (4, rows, 1)
        const at::Tensor t = per_row[0].to(at::kFloat);
        const at::Tensor lf = l.to(at::kFloat);
        // Scaled in float after subtracting the largest, as the host does (greedy rows: by 1, unused).
        const at::Tensor scaled = (lf - max.to(at::kFloat).unsqueeze(1)) / at::where(t > 0, t, at::ones_like(t));
        const at::Tensor position = at::arange(vocab, at::TensorOptions().dtype(at::kLong).device(device)).unsqueeze(0);
        const at::Tensor k = per_row[2].to(at::kLong);
        const at::Tensor p = per_row[1];
        at::Tensor order = position.expand({rows, vocab});
        if (any_truncated) {
            const at::Tensor by_likelihood = std::get<1>(scaled.sort(/*stable=*/true, /*dim=*/1, /*descending=*/true));
            order = at::where((k < vocab) | (p < 1.0), by_likelihood, order);
        }
        const at::Tensor in_k = position < k;
        const at::Tensor weight = at::exp(scaled.gather(1, order).to(at::kDouble)) * in_k;  // walk order
        const at::Tensor mass_upto = weight.cumsum(1);
        const at::Tensor total = mass_upto.gather(1, k - 1);
        // top-p: the shortest prefix holding top_p of the top-k mass (all of it when top-p is off).
        const auto [first_reaching, reaches] = first_true((mass_upto / total >= p) & in_k);
        const at::Tensor count =
            at::where((p.squeeze(1) < 1.0) & reaches, first_reaching + 1, k.squeeze(1)).unsqueeze(1);
        const at::Tensor in_prefix = position < count;
        const at::Tensor r = per_row[3] * mass_upto.gather(1, count - 1);
        // The first token whose running mass passes r; if rounding leaves r above them all, the last one possible.
        const auto [first_past, passes] = first_true((mass_upto > r) & in_prefix);
        const at::Tensor last_possible = (vocab - 1) - ((weight > 0) & in_prefix).flip(1).to(at::kByte).argmax(1);
        const at::Tensor walked = order.gather(1, at::where(passes, first_past, last_possible).unsqueeze(1)).squeeze(1);
        chosen = at::where(t.squeeze(1) > 0, walked, chosen);

        return at::stack({chosen, drawable.to(at::kLong)}).to(at::kCPU);  // waits for the step, on its stream
    };
    at::Tensor host;
    try {
        host = choose();
    } catch (...) {
        for (int64_t row = 0; row < rows; ++row)
            if (samplers[static_cast<size_t>(row)] != nullptr)
                samplers[static_cast<size_t>(row)]->restore(saved[static_cast<size_t>(row)]);
        throw;
    }
    const auto *values = host.data_ptr<int64_t>();
    for (int64_t row = 0; row < rows; ++row) {
        Sampler *s = samplers[static_cast<size_t>(row)];
        if (s == nullptr) continue;
        if (values[rows + row] == 0) {  // drawn for nothing: that sampler goes on as if never asked
            s->restore(saved[static_cast<size_t>(row)]);
            out.refused.push_back(static_cast<int32_t>(row));
        } else {
            out.tokens[static_cast<size_t>(row)] = static_cast<gpt_token>(values[row]);
            s->count(out.tokens[static_cast<size_t>(row)]);  // for its penalties, as sample() counts
        }
    }
    return out;
}

}  // namespace gpt
