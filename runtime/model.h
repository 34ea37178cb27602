// model.h — a loaded artifact: verified files, weights on the device, the
// prefill and decode graphs bound to them, tokenizer and golden vector.
#pragma once

#include <ATen/Tensor.h>

#include <atomic>
#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "gpt_runtime.h"
#include "graph.h"
#include "manifest.h"
#include "tokenizer.h"

namespace gpt {

struct VerifyResult {
    double max_abs_err = 0.0;
    std::string failure;  // empty when every logit is within tolerance
};

class Model {
public:
    // Load order: manifest -> torch version and target checks -> sha256 of every
    // file -> weights -> graphs (the first compiled code to run) -> binding.
    Model(const std::filesystem::path &dir, const gpt_model_params &params);

    const Manifest &manifest() const { return manifest_; }
    const ModelConfig &config() const { return manifest_.model; }
    const Tokenizer &tokenizer() const { return *tokenizer_; }
    c10::Device device() const { return device_; }

    at::Tensor new_kv_cache(int64_t batch) const;  // (n_layer, 2, B, n_head, block_size, head_dim)
    // idx (B, T) int64 -> logits (B, padded_vocab); writes kv[..., :T, :].
    at::Tensor prefill(const at::Tensor &idx, const at::Tensor &kv) const;
    // idx (B, 1) int64, pos (1,) int64 -> logits (B, padded_vocab); writes kv[..., pos, :].
    at::Tensor decode(const at::Tensor &idx, const at::Tensor &pos, const at::Tensor &kv) const;

    // Runs the golden vector (prefill + one decode step) against the eager logits
    // recorded at compile time, within the manifest's tolerance.
    VerifyResult verify() const;

    std::atomic<int> &live_sessions() { return live_sessions_; }

private:
    Manifest manifest_;
    c10::Device device_;
    std::map<std::string, at::Tensor> weights_;
    std::map<std::string, at::Tensor> golden_;
    std::unique_ptr<Tokenizer> tokenizer_;
    std::unique_ptr<Graph> prefill_;
    std::unique_ptr<Graph> decode_;
    std::atomic<int> live_sessions_{0};
};

}  // namespace gpt

struct gpt_model {
    explicit gpt_model(std::unique_ptr<gpt::Model> m) : impl(std::move(m)) {}
    std::unique_ptr<gpt::Model> impl;
    gpt_model_info info{};
};
