// model.h — a loaded artifact: verified files, weights on the device, the
// prefill and decode graphs bound to them, tokenizer and golden vector.
#pragma once

#include <ATen/Tensor.h>

#include <atomic>
#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "exec/graph.h"
#include "exec/packed_weights.h"
#include "formats/manifest.h"
#include "gpt_runtime.h"
#include "text/tokenizer.h"

namespace gpt {

struct VerifyResult {
    double max_abs_err = 0.0;
    std::string failure;  // empty when every logit is within tolerance
};

class Model {
public:
    // Load order: signature (with trusted keys) -> manifest -> torch version and target checks -> sha256 of every
    // other file -> weights (hashed as they are read) -> graphs (the first compiled code to run) -> binding.
    Model(const std::filesystem::path &dir, const gpt_model_params &params);
    // Logs the unload at debug level: the one sign, outside the library, of when shared ownership ended.
    ~Model();
    Model(const Model &) = delete;
    Model &operator=(const Model &) = delete;

    const Manifest &manifest() const { return manifest_; }
    const ModelConfig &config() const { return manifest_.model; }
    const Tokenizer &tokenizer() const { return *tokenizer_; }
    // Shared with whatever must outlive the model (a streaming detokenizer).
    std::shared_ptr<const Tokenizer> shared_tokenizer() const { return tokenizer_; }
    c10::Device device() const { return device_; }
    // Whether sessions run their decode steps as CUDA graphs (a GPU model, unless GPT_MODEL_NO_CUDA_GRAPHS,
    // or until a capture failed: capture_failed() turns them off for every session).
    bool cuda_graphs() const { return cuda_graphs_ && !capture_failed_.load(std::memory_order_relaxed); }
    void capture_failed() const { capture_failed_.store(true, std::memory_order_relaxed); }
    // Whether the model's GPU failed with a sticky CUDA error (the graphs record it; every later run fails).
    DeviceHealth &device_health() const { return health_; }

    at::Tensor new_kv_cache(int64_t batch) const;  // (n_layer, 2, B, n_head, block_size + 1, head_dim)
    // The logits of both calls are -inf at the ids without text (Tokenizer::textless_ids: padding past the
    // tokenizer's ids, gaps among them), set here, where every sampling path (host, device, the greedy choice
    // inside a captured step) and every caller's copy of the logits gets them: none can pick those ids.
    // idx (B, T) int64 -> logits (B, padded_vocab); writes kv[..., :T, :].
    at::Tensor prefill(const at::Tensor &idx, const at::Tensor &kv) const;
    // idx (B, 1) int64, pos (B,) int64 -> logits (B, padded_vocab); writes row b of kv at pos[b].
    // Reads cache positions [0, span) only: span must exceed every pos[b].
    // One row runs decode_one (its own linear form), more run the batched decode.
    at::Tensor decode(const at::Tensor &idx, const at::Tensor &pos, const at::Tensor &kv, int64_t span) const;
    // Whether the artifact has the extend graph (artifacts compiled before it have not).
    bool has_extend() const { return extend_ != nullptr; }
    // idx (B, T) int64, start (B,) int64 -> logits (B, padded_vocab) of each row's last token; writes row b of
    // kv at [start[b], start[b] + T), attending to what it held before. Reads cache positions [0, span) only:
    // span must be at least every start[b] + T. Needs has_extend().
    at::Tensor extend(const at::Tensor &idx, const at::Tensor &start, const at::Tensor &kv, int64_t span) const;
    // Whether the artifact has the mixed graph (CPU artifacts whose decode attention is the kernel library's).
    bool has_mixed() const { return mixed_ != nullptr; }
    // idx (N, 1), pos (N,), seq (N,) int64, last (R,) int64 -> logits (R, padded_vocab) of the tokens `last`
    // names: token n goes to row seq[n] of kv at pos[n] and sees that row's positions up to pos[n], its
    // sequence's earlier tokens of this call included. Reads positions [0, span) only: span must exceed every
    // pos[n]. Needs has_mixed().
    at::Tensor mixed(const at::Tensor &idx, const at::Tensor &pos, const at::Tensor &seq, const at::Tensor &last,
                     const at::Tensor &kv, int64_t span) const;

    // Training graphs, present when manifest().training is (compiled with --train).
    // Throws GPT_ERR_INVALID_ARGUMENT saying how to compile them when they are not.
    void require_training() const;
    // train_step: x, y (B, T) int64 -> {loss, grad per training param}.
    std::vector<at::Tensor> train_step(const at::Tensor &x, const at::Tensor &y) const;
    at::Tensor eval_loss(const at::Tensor &x, const at::Tensor &y) const;
    // adamw: params, grads, exp_avgs, exp_avg_sqs, lr, step -> grad_norm; updates in place.
    at::Tensor adamw(const std::vector<at::Tensor> &inputs) const;
    // The tensor bound to the graphs under `name` (shared: in-place updates reach every graph).
    const at::Tensor &weight(const std::string &name) const;
    // Bytes of the weights, each storage once (tied weights share one), and of their packed copies.
    uint64_t weights_bytes() const;

    // Runs the golden vector (prefill + one decode step) against the eager logits
    // recorded at compile time, within the manifest's tolerance: as one sequence
    // (decode_one) and as a batch of two (the batched decode); the decode step also
    // through extend and mixed, where the artifact has them.
    VerifyResult verify() const;

    // After the weights changed in place (a training step, a loaded checkpoint):
    // brings the graphs' packed copies of them up to date.
    void weights_changed() { packed_.repack(); }

private:
    // The graphs' own logits, which verify() compares with the golden vector; prefill() and decode() mask them.
    at::Tensor graph_prefill(const at::Tensor &idx, const at::Tensor &kv) const;
    at::Tensor graph_decode(const at::Tensor &idx, const at::Tensor &pos, const at::Tensor &kv, int64_t span) const;
    at::Tensor graph_extend(const at::Tensor &idx, const at::Tensor &start, const at::Tensor &kv, int64_t span) const;
    at::Tensor graph_mixed(const at::Tensor &idx, const at::Tensor &pos, const at::Tensor &seq, const at::Tensor &last,
                           const at::Tensor &kv, int64_t span) const;
    at::Tensor without_textless(at::Tensor logits) const;
    // prefill, decode, decode_one, extend, mixed: the weights, packed copies where they read them
    void bind_inference_graphs(const PackingPlan &plan);

    Manifest manifest_;
    c10::Device device_;
    bool cuda_graphs_ = false;
    mutable std::atomic<bool> capture_failed_{false};
    mutable DeviceHealth health_;
    std::map<std::string, at::Tensor> weights_;
    PackedWeights packed_;  // copies of the linear weights that onednn- and int4pack-form graphs read
    std::map<std::string, at::Tensor> golden_;
    std::shared_ptr<const Tokenizer> tokenizer_;
    at::Tensor textless_;  // (padded_vocab,) bool on the device, true at the ids without text; undefined if none
    std::unique_ptr<Graph> prefill_;
    std::unique_ptr<Graph> decode_;
    std::unique_ptr<Graph> decode_one_;
    std::unique_ptr<Graph> extend_;  // null when the artifact has none
    std::unique_ptr<Graph> mixed_;   // null when the artifact has none
    std::unique_ptr<Graph> train_step_;
    std::unique_ptr<Graph> eval_loss_;
    std::unique_ptr<Graph> adamw_;
};

}  // namespace gpt

// The caller's handle. Sessions and trainers hold `impl` too, so the model lives until the handle and the last
// of them are freed: gpt_model_free never has to refuse, and a caller that ignores its status leaks nothing.
struct gpt_model {
    explicit gpt_model(std::shared_ptr<gpt::Model> m) : impl(std::move(m)) {}
    std::shared_ptr<gpt::Model> impl;
    gpt_model_info info{};
    std::string attention;  // info.attention's text
};
