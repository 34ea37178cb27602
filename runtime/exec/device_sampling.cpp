// device_sampling.cpp — Sampler's rule as tensor operations over all sampled rows at once:
// the walk that sampler.cpp makes token by token becomes a cumulative sum and a search.
// Rows whose settings truncate (top-k, top-p) walk the distribution most likely first (a
// stable sort keeps equal logits in id order); the others walk it in id order, as the host does.
#include "exec/device_sampling.h"

#include <ATen/ATen.h>
#include <c10/core/impl/VirtualGuardImpl.h>

#include <cmath>

#include "base/error.h"

namespace gpt {

namespace {

// Index of the first true entry of each row of `mask`, and whether there is one.
std::pair<at::Tensor, at::Tensor> first_true(const at::Tensor &mask) {
    return {mask.to(at::kByte).argmax(1), mask.any(1)};
}

// The ids back on the host through pinned memory: the only bytes a sampled step moves.
at::Tensor to_host(const at::Tensor &values) {
    const c10::Device device = values.device();
    if (!device.is_cuda()) return values.contiguous();
    at::Tensor host = at::empty(values.sizes(), values.options().device(at::kCPU).pinned_memory(true));
    host.copy_(values, /*non_blocking=*/true);
    c10::impl::VirtualGuardImpl(device.type()).getStream(device).synchronize();
    return host;
}

}  // namespace

SampledRows sample_on_device(const at::Tensor &logits, int32_t vocab_size, const std::vector<Sampler *> &samplers) {
    const int64_t rows = logits.size(0);
    if (static_cast<int64_t>(samplers.size()) != rows)
        fail(GPT_ERR_INTERNAL, "sample_on_device needs one sampler (or none) per row");
    SampledRows out{std::vector<gpt_token>(static_cast<size_t>(rows), GPT_TOKEN_NONE), {}};
    std::vector<int64_t> sampled;  // the rows with a sampler
    for (int64_t row = 0; row < rows; ++row)
        if (samplers[static_cast<size_t>(row)] != nullptr) sampled.push_back(row);
    if (sampled.empty()) return out;
    const auto n = static_cast<int64_t>(sampled.size());
    const int64_t vocab = vocab_size;

    // The uniform draws come from each sampler's own stream, on the host, exactly as sample() makes them.
    std::vector<Sampler::Stream> saved;
    std::vector<double> temperature, top_p, uniform;
    std::vector<int64_t> kept;  // top-k, or the whole vocabulary when top-k is off
    bool any_random = false, any_truncated = false;
    for (const int64_t row : sampled) {
        Sampler &s = *samplers[static_cast<size_t>(row)];
        saved.push_back(s.stream());
        temperature.push_back(s.temperature());
        top_p.push_back(s.top_p());
        kept.push_back(s.top_k() > 0 && s.top_k() < vocab_size ? s.top_k() : vocab);
        uniform.push_back(s.temperature() > 0.0f ? s.draw() : 0.0);
        any_random = any_random || s.temperature() > 0.0f;
        any_truncated = any_truncated || (s.temperature() > 0.0f && (kept.back() < vocab || s.top_p() < 1.0f));
    }

    const c10::Device device = logits.device();
    const auto on_device = [&](const auto &values, at::ScalarType type) {
        return at::tensor(values, at::TensorOptions().dtype(type)).to(device).unsqueeze(1);  // (n, 1)
    };
    const at::Tensor index = at::tensor(sampled, at::kLong).to(device);
    const at::Tensor l = logits.index_select(0, index).slice(1, 0, vocab).to(at::kFloat);  // (n, vocab)
    const at::Tensor max = l.amax(1, /*keepdim=*/true);
    // NaN or +inf is a model that overflowed; all -inf leaves nothing to draw (check_logits).
    const at::Tensor refused = (l.isnan() | l.eq(INFINITY)).any(1) | max.squeeze(1).eq(-INFINITY);
    at::Tensor chosen = l.argmax(1);  // greedy: the first largest

    if (any_random) {
        const at::Tensor t = on_device(temperature, at::kFloat);
        // Scaled in float after subtracting the largest, as the host does; greedy rows divide by 1 and are not used.
        const at::Tensor scaled = (l - max) / at::where(t > 0, t, at::ones_like(t));
        const at::Tensor position = at::arange(vocab, at::TensorOptions().dtype(at::kLong).device(device)).unsqueeze(0);
        at::Tensor order = position.expand({n, vocab});
        if (any_truncated) {
            const at::Tensor by_likelihood = std::get<1>(scaled.sort(/*stable=*/true, /*dim=*/1, /*descending=*/true));
            const at::Tensor truncated = (on_device(kept, at::kLong) < vocab) | (on_device(top_p, at::kDouble) < 1.0);
            order = at::where(truncated, by_likelihood, order);
        }
        const at::Tensor k = on_device(kept, at::kLong);
        const at::Tensor in_k = position < k;
        const at::Tensor weight = at::exp(scaled.gather(1, order).to(at::kDouble)) * in_k;  // walk order
        const at::Tensor mass_upto = weight.cumsum(1);
        const at::Tensor total = mass_upto.gather(1, k - 1);
        // top-p: the shortest prefix holding top_p of the top-k mass (all of it when top-p is off).
        const at::Tensor p = on_device(top_p, at::kDouble);
        const auto [first_reaching, reaches] = first_true((mass_upto / total >= p) & in_k);
        const at::Tensor count =
            at::where((p.squeeze(1) < 1.0) & reaches, first_reaching + 1, k.squeeze(1)).unsqueeze(1);
        const at::Tensor in_prefix = position < count;
        const at::Tensor r = on_device(uniform, at::kDouble) * mass_upto.gather(1, count - 1);
        // The first token whose running mass passes r; if rounding leaves r above them all, the last one possible.
        const auto [first_past, passes] = first_true((mass_upto > r) & in_prefix);
        const at::Tensor last_possible = (vocab - 1) - ((weight > 0) & in_prefix).flip(1).to(at::kByte).argmax(1);
        const at::Tensor walked = order.gather(1, at::where(passes, first_past, last_possible).unsqueeze(1)).squeeze(1);
        chosen = at::where(t.squeeze(1) > 0, walked, chosen);
    }

    const at::Tensor host = to_host(at::stack({chosen, refused.to(at::kLong)}));
    const auto *values = host.data_ptr<int64_t>();
    for (int64_t i = 0; i < n; ++i) {
        const int64_t row = sampled[static_cast<size_t>(i)];
        if (values[n + i] != 0) {  // drawn for nothing: that sampler goes on as if never asked
            samplers[static_cast<size_t>(row)]->restore(saved[static_cast<size_t>(i)]);
            out.refused.push_back(static_cast<int32_t>(row));
        } else {
            out.tokens[static_cast<size_t>(row)] = static_cast<gpt_token>(values[i]);
        }
    }
    return out;
}

}  // namespace gpt
