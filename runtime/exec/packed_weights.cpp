// packed_weights.cpp — the packing is oneDNN's own (mkldnn::_reorder_linear_weight,
// as aot/gpt_aot/model.py's pack_for_onednn), so the compile measured the layout run here.
#include "exec/packed_weights.h"

#include <ATen/core/dispatch/Dispatcher.h>

#include "base/error.h"
#include "base/log.h"

namespace gpt {

namespace {

at::Tensor pack_for_onednn(const at::Tensor &weight) {
    static const auto op = c10::Dispatcher::singleton()
                               .findSchemaOrThrow("mkldnn::_reorder_linear_weight", "")
                               .typed<at::Tensor(const at::Tensor &, std::optional<int64_t>)>();
    return op.call(weight, std::nullopt);
}

}  // namespace

PackedWeights::PackedWeights(const std::map<std::string, at::Tensor> &weights, const std::set<std::string> &names) {
    for (const std::string &name : names) {
        auto it = weights.find(name);
        if (it == weights.end() || it->second.dim() != 2 || !it->second.device().is_cpu())
            fail(GPT_ERR_ARTIFACT_INVALID,
                 "the manifest packs '" + name + "' for oneDNN, which is no 2-D CPU weight of this model");
        try {
            packed_.emplace(name, std::make_pair(it->second, pack_for_onednn(it->second)));
        } catch (const std::exception &e) {
            log(GPT_LOG_WARN,
                std::string("cannot pack linear weights for oneDNN here, the graphs read them plain: ") + e.what());
            packed_.clear();
            return;
        }
    }
}

std::map<std::string, at::Tensor> PackedWeights::bound(const std::map<std::string, at::Tensor> &weights,
                                                       const std::set<std::string> &names) const {
    std::map<std::string, at::Tensor> out = weights;
    for (const std::string &name : names)
        if (auto it = packed_.find(name); it != packed_.end()) out[name] = it->second.second;
    return out;
}

uint64_t PackedWeights::bytes() const {
    uint64_t total = 0;
    for (const auto &[name, pair] : packed_)
        total += static_cast<uint64_t>(pair.second.numel()) * static_cast<uint64_t>(pair.second.element_size());
    return total;
}

void PackedWeights::repack() {
    for (auto &[name, pair] : packed_) pair.second.copy_(pack_for_onednn(pair.first));
}

}  // namespace gpt
