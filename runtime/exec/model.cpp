// model.cpp — verify-then-load of an artifact, and the calls into its graphs: prefill,
// decode (decode_one for one row), the training graphs and the golden-vector check.
#include "exec/model.h"

#include <ATen/TensorOperators.h>
#include <ATen/Version.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/full.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/zeros.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <limits>
#include <set>

#include "artifact/device.h"
#include "artifact/kernels_check.h"
#include "base/error.h"
#include "base/log.h"
#include "exec/host_pages.h"
#include "exec/safetensors.h"
#include "exec/weights.h"
#include "formats/integrity.h"
#include "formats/signature.h"

namespace gpt {

namespace {

// The graphs take the cache as views of its first `positions`, each layer's k and
// v in turn: a cache input that a graph writes once is updated in place
// (aot/gpt_aot/model/gpt.py, layer_caches). kv is (layers, 2, rows, heads, S, head
// size); each view one as_strided, where select, select and narrow made three
// dispatched operators a view, 72 a GPT-2 step.
std::vector<at::Tensor> graph_inputs(std::initializer_list<at::Tensor> leading, const at::Tensor &kv,
                                     int64_t positions) {
    std::vector<at::Tensor> inputs(leading);
    inputs.reserve(inputs.size() + static_cast<size_t>(2 * kv.size(0)));
    const std::array<int64_t, 4> sizes{kv.size(2), kv.size(3), positions, kv.size(5)};
    const std::array<int64_t, 4> strides{kv.stride(2), kv.stride(3), kv.stride(4), kv.stride(5)};
    for (int64_t layer = 0; layer < kv.size(0); ++layer)
        for (int64_t kind = 0; kind < 2; ++kind)
            inputs.push_back(
                kv.as_strided(sizes, strides, kv.storage_offset() + layer * kv.stride(0) + kind * kv.stride(1)));
    return inputs;
}

std::string as_string(const Bytes &b) { return std::string(b.begin(), b.end()); }

// Checks |actual - expected| <= atol + rtol * |expected| elementwise; folds the
// largest difference into `result` and records the first failure.
void compare(const at::Tensor &actual, const at::Tensor &expected, double atol, double rtol, const char *what,
             VerifyResult *result) {
    if (actual.sizes() != expected.sizes()) {
        result->max_abs_err = std::numeric_limits<double>::infinity();
        result->failure = std::string("golden ") + what + " logits have the wrong shape";
        return;
    }
    const at::Tensor diff = (actual.to(at::kCPU, at::kFloat) - expected).abs();
    const double max_err = diff.max().item<double>();
    result->max_abs_err = std::max(result->max_abs_err, max_err);
    const bool ok = (diff <= atol + rtol * expected.abs()).all().item<bool>();
    if (!ok && result->failure.empty())
        result->failure = std::string("golden ") + what + " logits differ by up to " + std::to_string(max_err) +
                          " (tolerance atol " + std::to_string(atol) + ", rtol " + std::to_string(rtol) +
                          "): the artifact does not run correctly here; do not serve it";
}

// Float weights are packed for the onednn form's graphs, bf16 ones for the panels form's, int8 ones for the
// q8panels form's, int4 ones for the int4pack and int4panels forms' (each a copy as large as the stored weight; the
// stored one is freed, as soon as it is packed, where every graph reads a copy that needs no stored weight: int4's,
// and panels' and q8 panels' of a model without training graphs). Known before the weights are read, so that those
// freed early are read apart from the others' arena.
PackingPlan packing_plan(const Manifest &manifest) {
    std::vector<std::pair<const char *, const GraphSpec *>> specs = {
        {"prefill", &manifest.prefill}, {"decode", &manifest.decode}, {"decode_one", &manifest.decode_one}};
    if (manifest.extend) specs.emplace_back("extend", &*manifest.extend);
    if (manifest.mixed) specs.emplace_back("mixed", &*manifest.mixed);
    PackingPlan plan;
    for (const auto &[name, spec] : specs) {
        if (const std::optional<Packing> packing = packing_of(spec->linear))
            for (const std::string &weight : spec->packed) plan.wanted.emplace(weight, *packing);
        if (spec->linear == "int4pack" && spec->packed.empty() && !host_reads_int4_blocks64())
            fail(GPT_ERR_DEVICE_MISMATCH,
                 std::string("graph '") + name +
                     "' reads its int4 weights as stored, in the packing of aten's AVX-512 int4 kernel, and this "
                     "host's (ATen CPU capability " +
                     at::get_cpu_capability() +
                     ") reads another: recompile the artifact with a gpt-aot that lists its packed weights");
    }
    const bool trains = manifest.training.has_value();
    const auto needs_no_stored = [trains](Packing p) {
        return p == Packing::int4_for_host || p == Packing::int4_panels ||
               ((p == Packing::panels || p == Packing::q8_panels) && !trains);
    };
    for (const auto &entry : plan.wanted) {
        const std::string &name = entry.first;  // a lambda cannot capture a structured binding before C++20
        const bool every_graph = std::all_of(specs.begin(), specs.end(), [&](const auto &named) {
            const std::optional<Packing> reads = packing_of(named.second->linear);
            return reads && needs_no_stored(*reads) && named.second->packed.count(name) > 0;
        });
        if (every_graph) plan.release.insert(name);
    }
    return plan;
}

}  // namespace

Model::Model(const std::filesystem::path &dir, const gpt_model_params &params)
    : manifest_(read_manifest(dir, load_trusted_keys(params.trusted_keys))), device_(c10::kCPU) {
    check_torch_version(manifest_.torch_version);
    check_kernels(manifest_.kernels);
    const Host host = detect_host();
    check_target(manifest_.target, host);
    const bool cuda = manifest_.target.device == "cuda";
    device_ = torch_device(manifest_.target,
                           cuda ? cuda_device_index(params.device_index, std::getenv("LOCAL_RANK")) : -1, host);
    cuda_graphs_ = device_.is_cuda() && (params.flags & GPT_MODEL_NO_CUDA_GRAPHS) == 0;
    const int runners = params.num_runners > 0 ? params.num_runners : 1;
    const int threads = params.num_threads;

    // The weights, the bulk of the bytes, are read straight into their tensors and hashed on the way.
    auto files = read_verified_files(dir, manifest_, {manifest_.weights_file});
    const PackingPlan packing = packing_plan(manifest_);
    weights_ = load_weights(dir, manifest_, device_, packing.release);
    const Bytes &golden = files.at(manifest_.golden_file);
    golden_ = parse_safetensors(golden.data(), golden.size(), manifest_.golden_file);
    for (const char *key : {"tokens", "prefill_logits", "decode_token", "decode_logits"})
        if (golden_.count(key) == 0) fail(GPT_ERR_ARTIFACT_INVALID, manifest_.golden_file + " lacks '" + key + "'");
    tokenizer_ = std::make_shared<const Tokenizer>(as_string(files.at(manifest_.tokenizer_file)),
                                                   manifest_.tokenizer_kind, manifest_.model.vocab_size);
    if (const std::vector<gpt_token> textless = tokenizer_->textless_ids(); !textless.empty()) {
        const std::vector<int64_t> ids(textless.begin(), textless.end());
        textless_ = at::zeros({manifest_.model.padded_vocab_size}, at::kBool)
                        .index_fill_(0, at::tensor(ids, at::kLong), true)
                        .to(device_);
        log(GPT_LOG_INFO, std::to_string(ids.size()) + " of the model's " + std::to_string(manifest_.model.vocab_size) +
                              " token ids have no text (vocabulary padding, gaps in the tokenizer's ids): "
                              "their logits are -inf, never sampled");
    }

    prefill_ = std::make_unique<Graph>("prefill", files.at(manifest_.prefill.file), device_, health_, runners, threads);
    // Captured decode steps replay without the graphs' runners; the runs they capture take turns.
    decode_ = std::make_unique<Graph>("decode", files.at(manifest_.decode.file), device_, health_, runners, threads,
                                      cuda_graphs_);
    decode_one_ = std::make_unique<Graph>("decode_one", files.at(manifest_.decode_one.file), device_, health_, runners,
                                          threads, cuda_graphs_);
    if (manifest_.extend)
        extend_ =
            std::make_unique<Graph>("extend", files.at(manifest_.extend->file), device_, health_, runners, threads);
    if (manifest_.mixed)
        mixed_ = std::make_unique<Graph>("mixed", files.at(manifest_.mixed->file), device_, health_, runners, threads);
    bind_inference_graphs(packing);
    if (const auto &t = manifest_.training) {
        for (const auto &name : t->param_names)
            if (weights_.count(name) == 0)
                fail(GPT_ERR_ARTIFACT_INVALID, "training parameter '" + name + "' is no weight");
        train_step_ =
            std::make_unique<Graph>("train_step", files.at(t->train_step.file), device_, health_, runners, threads);
        eval_loss_ =
            std::make_unique<Graph>("eval_loss", files.at(t->eval_loss.file), device_, health_, runners, threads);
        adamw_ = std::make_unique<Graph>("adamw", files.at(t->adamw.file), device_, health_, 1, threads);
        for (Graph *g : {train_step_.get(), eval_loss_.get(), adamw_.get()}) g->bind(weights_);
    }
    log(GPT_LOG_INFO, "loaded " + manifest_.name + " (" + manifest_.target.device + " " + manifest_.target.arch + " " +
                          manifest_.dtype + ", attention " + manifest_.attention + ", decode attention " +
                          manifest_.decode_attention + ", linears: prefill " + manifest_.prefill.linear + ", decode " +
                          manifest_.decode.linear + ", single-sequence decode " + manifest_.decode_one.linear +
                          (extend_ ? ", extend " + manifest_.extend->linear : ", no extend graph") +
                          (mixed_ ? ", mixed " + manifest_.mixed->linear : "") +
                          (cuda_graphs_ ? ", decode steps as CUDA graphs" : "") + ") from " + dir.string());
    if (params.verify_golden) {
        const VerifyResult result = verify();
        if (!result.failure.empty()) fail(GPT_ERR_VERIFY_FAILED, result.failure);
    }
}

Model::~Model() {
    try {
        log(GPT_LOG_DEBUG, "freeing model " + manifest_.name + " (its handle and every session and trainer are gone)");
    } catch (...) {  // the line is information only; a destructor must not throw
    }
}

void Model::bind_inference_graphs(const PackingPlan &plan) {
    packed_ = PackedWeights(weights_, plan.wanted, manifest_.training.has_value(), plan.release);
    if (packed_.size() > 0) log(GPT_LOG_DEBUG, "packed " + std::to_string(packed_.size()) + " linear weights");
    const auto bind = [&](Graph &graph, const GraphSpec &spec) {
        const std::optional<Packing> packing = packing_of(spec.linear);
        graph.bind(packing ? packed_.bound(weights_, spec.packed, *packing) : weights_);
    };
    bind(*prefill_, manifest_.prefill);
    bind(*decode_, manifest_.decode);
    bind(*decode_one_, manifest_.decode_one);
    if (extend_) bind(*extend_, *manifest_.extend);
    if (mixed_) bind(*mixed_, *manifest_.mixed);
}

// The spare position is never read or written: it makes every view's stride differ
// from a contiguous one's, as in the graphs' export (GPT.new_kv_cache).
at::Tensor Model::new_kv_cache(int64_t batch) const {
    const ModelConfig &c = config();
    // The activations' dtype, also for int8 linears; or int8, each position its values and their scale.
    at::TensorOptions options = weight("transformer.wpe.weight").options();
    int64_t position = c.head_dim();
    if (manifest_.kv_cache_dtype == "int8") {
        options = options.dtype(at::kChar);
        position += kKvInt8ScaleBytes;
    }
    const std::vector<int64_t> shape = {c.n_layer, 2, batch, c.n_head, c.block_size + 1, position};
    // The manifest bounds each size (formats/manifest.h), not their product: counted so it cannot wrap.
    int64_t bytes = static_cast<int64_t>(options.dtype().itemsize());
    for (const int64_t size : shape)
        if (size < 0 || __builtin_mul_overflow(bytes, size, &bytes))
            fail(GPT_ERR_OUT_OF_MEMORY, "a KV cache of " + std::to_string(batch) + " sequences exceeds 2^63 bytes");
    if (!options.device().is_cpu()) return at::zeros(shape, options);
    at::Tensor kv = empty_in_host_pages(shape, options.dtype().toScalarType());  // each step walks it, as the weights
    kv.zero_();
    return kv;
}

at::Tensor Model::prefill(const at::Tensor &idx, const at::Tensor &kv) const {
    return without_textless(graph_prefill(idx, kv));
}

at::Tensor Model::decode(const at::Tensor &idx, const at::Tensor &pos, const at::Tensor &kv, int64_t span) const {
    return without_textless(graph_decode(idx, pos, kv, span));
}

at::Tensor Model::extend(const at::Tensor &idx, const at::Tensor &start, const at::Tensor &kv, int64_t span) const {
    return without_textless(graph_extend(idx, start, kv, span));
}

at::Tensor Model::graph_prefill(const at::Tensor &idx, const at::Tensor &kv) const {
    return prefill_->run(graph_inputs({idx}, kv, config().block_size)).at(0);
}

at::Tensor Model::graph_decode(const at::Tensor &idx, const at::Tensor &pos, const at::Tensor &kv, int64_t span) const {
    const Graph &graph = idx.size(0) == 1 ? *decode_one_ : *decode_;
    // The graphs take 2 to block_size positions; a wider span than needed only reads masked positions.
    span = std::clamp<int64_t>(span, 2, config().block_size);
    return graph.run(graph_inputs({idx, pos}, kv, span)).at(0);
}

at::Tensor Model::graph_extend(const at::Tensor &idx, const at::Tensor &start, const at::Tensor &kv,
                               int64_t span) const {
    if (!extend_) fail(GPT_ERR_INTERNAL, "this artifact has no extend graph");
    span = std::clamp<int64_t>(span, 2, config().block_size);  // as decode's
    return extend_->run(graph_inputs({idx, start}, kv, span)).at(0);
}

at::Tensor Model::mixed(const at::Tensor &idx, const at::Tensor &pos, const at::Tensor &seq, const at::Tensor &last,
                        const at::Tensor &kv, int64_t span) const {
    return without_textless(graph_mixed(idx, pos, seq, last, kv, span));
}

at::Tensor Model::graph_mixed(const at::Tensor &idx, const at::Tensor &pos, const at::Tensor &seq,
                              const at::Tensor &last, const at::Tensor &kv, int64_t span) const {
    if (!mixed_) fail(GPT_ERR_INTERNAL, "this artifact has no mixed graph");
    span = std::clamp<int64_t>(span, 2, config().block_size);  // as decode's
    return mixed_->run(graph_inputs({idx, pos, seq, last}, kv, span)).at(0);
}

// In place, on the logits' device and stream: one kernel, captured with the step it follows.
at::Tensor Model::without_textless(at::Tensor logits) const {
    if (textless_.defined()) logits.masked_fill_(textless_, -std::numeric_limits<double>::infinity());
    return logits;
}

void Model::require_training() const {
    if (!manifest_.quantization.empty())
        fail(GPT_ERR_INVALID_ARGUMENT, "this artifact's weights are " + manifest_.quantization +
                                           ", quantized for inference only: train on an unquantized artifact");
    if (!manifest_.training || !train_step_ || !eval_loss_ || !adamw_)
        fail(GPT_ERR_INVALID_ARGUMENT,
             "this artifact has no training graphs: compile it with `python -m gpt_aot compile --train`");
}

std::vector<at::Tensor> Model::train_step(const at::Tensor &x, const at::Tensor &y) const {
    require_training();
    return train_step_->run({x, y});
}

at::Tensor Model::eval_loss(const at::Tensor &x, const at::Tensor &y) const {
    require_training();
    return eval_loss_->run({x, y}).at(0);
}

at::Tensor Model::adamw(const std::vector<at::Tensor> &inputs) const {
    require_training();
    return adamw_->run(inputs).at(0);
}

const at::Tensor &Model::weight(const std::string &name) const {
    auto it = weights_.find(name);
    if (it == weights_.end()) fail(GPT_ERR_INTERNAL, "no weight named '" + name + "'");
    return it->second;
}

uint64_t Model::weights_bytes() const {
    std::set<const void *> counted;
    uint64_t bytes = 0;
    for (const auto &[name, tensor] : weights_)  // tied weights are one tensor; many share the arena's storage
        if (counted.insert(tensor.data_ptr()).second) bytes += tensor.nbytes();
    return bytes + packed_.bytes();
}

VerifyResult Model::verify() const {
    const auto opts = at::TensorOptions().dtype(at::kLong).device(device_);
    const double atol = manifest_.golden_atol, rtol = manifest_.golden_rtol;
    VerifyResult result;
    for (const int64_t batch : {1, 2}) {  // decode_one, then the batched decode: every row is the golden sequence
        if (batch > manifest_.decode.max_batch) break;
        const at::Tensor tokens = golden_.at("tokens").to(opts).expand({batch, -1}).contiguous();
        const at::Tensor kv = new_kv_cache(batch);
        compare(graph_prefill(tokens, kv), golden_.at("prefill_logits").expand({batch, -1}), atol, rtol, "prefill",
                &result);
        const at::Tensor token = golden_.at("decode_token").to(opts).expand({batch, 1}).contiguous();
        const at::Tensor pos = at::full({batch}, tokens.size(1), opts);
        compare(graph_decode(token, pos, kv, tokens.size(1) + 1), golden_.at("decode_logits").expand({batch, -1}), atol,
                rtol, batch == 1 ? "decode_one" : "decode", &result);
        if (extend_)  // the same token at the same position again, through extend: it writes what decode wrote
            compare(graph_extend(token, pos, kv, tokens.size(1) + 1), golden_.at("decode_logits").expand({batch, -1}),
                    atol, rtol, "extend", &result);
        if (mixed_) {  // once more through mixed: every row at the same position of its own cache row
            const at::Tensor rows = at::arange(batch, opts);
            compare(graph_mixed(token, pos, rows, rows, kv, tokens.size(1) + 1),
                    golden_.at("decode_logits").expand({batch, -1}), atol, rtol, "mixed", &result);
        }
    }
    if (result.failure.empty()) {
        log(GPT_LOG_INFO, "golden vector matches (max abs error " + std::to_string(result.max_abs_err) + ")");
    } else {
        log(GPT_LOG_ERROR, result.failure);
    }
    return result;
}

}  // namespace gpt
