// packed_weights.cpp — each packing is its kernel's own (mkldnn::_reorder_linear_weight,
// gpt_kernels::pack_linear_panels, pack_linear_q8_panels and pack_linear_int4_panels,
// aten::_convert_weight_to_int4pack_for_cpu, as aot/gpt_aot/model/linear.py's pack_for_onednn, pack_for_panels,
// pack_for_q8_panels, pack_for_int4_panels and pack_for_int4pack), so the compile measured the layout run here.
#include "exec/packed_weights.h"

#include <ATen/Version.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/_convert_weight_to_int4pack_for_cpu.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/bitwise_right_shift.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/stack.h>

#include <iterator>
#include <vector>

#include "base/error.h"
#include "base/log.h"
#include "exec/host_pages.h"
#include "exec/weights.h"

namespace gpt {

namespace {

at::Tensor pack_for_onednn(const at::Tensor &weight) {
    static const auto op = c10::Dispatcher::singleton()
                               .findSchemaOrThrow("mkldnn::_reorder_linear_weight", "")
                               .typed<at::Tensor(const at::Tensor &, std::optional<int64_t>)>();
    return op.call(weight, std::nullopt);
}

// The (rows, cols) int values of a "blocks64" weight, (rows, cols / 2) bytes with rows a multiple of 64, as
// aot/gpt_aot/model/linear.py's from_int4_blocks: block b's (cols, 32) bytes hold row 64b + j in the low four
// bits of byte (k, j) and row 64b + 32 + j in its high four.
at::Tensor int4_values(const at::Tensor &stored) {
    const int64_t cols = stored.size(1) * 2;
    const at::Tensor blocks = stored.reshape({-1, cols, kInt4BlockRows / 2});  // (B, cols, 32)
    const at::Tensor halves =
        at::stack({blocks.bitwise_and(15), at::bitwise_right_shift(blocks, 4)}, 1);  // (B, 2, cols, 32)
    return halves.transpose(2, 3).reshape({-1, cols}).to(at::kInt);
}

// The same shape and padding rows, in the packing this host's int4 kernel reads (innerKTiles is unused on CPU).
at::Tensor pack_for_int4pack(const at::Tensor &stored) {
    return at::_convert_weight_to_int4pack_for_cpu(int4_values(stored), 1);
}

// One of the kernel library's packings (kernels/cpu/linear.h: gpt_kernels::pack_linear_<name>), registered with the
// dispatcher where this library loads; looked up once a weight, at load.
at::Tensor kernel_library_pack(const char *name, const at::Tensor &weight) {
    return c10::Dispatcher::singleton().findSchemaOrThrow(name, "").typed<at::Tensor(const at::Tensor &)>().call(
        weight);
}

at::Tensor pack_for_panels(const at::Tensor &weight) {
    return kernel_library_pack("gpt_kernels::pack_linear_panels", weight);
}
at::Tensor pack_for_q8_panels(const at::Tensor &weight) {
    return kernel_library_pack("gpt_kernels::pack_linear_q8_panels", weight);
}
at::Tensor pack_for_int4_panels(const at::Tensor &weight) {
    return kernel_library_pack("gpt_kernels::pack_linear_int4_panels", weight);
}

bool fits_panels(const at::Tensor &t) { return t.scalar_type() == at::kBFloat16 && t.size(0) % 16 == 0; }
// The activations' blocks of 32 inputs (kernels/cpu/linear_tile.h's Q8_BLOCK) must tile K.
bool fits_q8_panels(const at::Tensor &t) { return t.scalar_type() == at::kChar && t.size(1) % 32 == 0; }

at::Tensor pack(Packing packing, const at::Tensor &weight) {
    switch (packing) {
        case Packing::panels: return pack_for_panels(weight);
        case Packing::q8_panels: return pack_for_q8_panels(weight);
        case Packing::int4_panels: return pack_for_int4_panels(weight);
        case Packing::onednn: return pack_for_onednn(weight);
        case Packing::int4_for_host: return pack_for_int4pack(weight);
    }
    return weight;
}

bool is_int4_weight(const at::Tensor &t) {
    return t.scalar_type() == at::kByte && t.dim() == 2 && t.size(0) % kInt4BlockRows == 0 && t.device().is_cpu();
}

// What the kernels' packings read (every packing but oneDNN's), and the load's refusal of another weight.
struct KernelPacking {
    bool (*reads)(const at::Tensor &);
    const char *refusal;
};

KernelPacking kernel_packing(Packing packing) {
    switch (packing) {
        case Packing::int4_for_host:
            return {is_int4_weight, "for the int4 kernel, which is no int4 weight of this model"};
        case Packing::panels:
            return {fits_panels, "in panels, which is no bf16 weight of this model with rows a multiple of 16"};
        case Packing::q8_panels:
            return {fits_q8_panels,
                    "in q8 panels, which is no int8 weight of this model with columns a multiple of 32"};
        case Packing::int4_panels:
            return {[](const at::Tensor &t) { return is_int4_weight(t) && t.size(1) * 2 % 32 == 0; },
                    "in u4 panels, which is no int4 weight of this model with columns a multiple of 32"};
        case Packing::onednn: break;
    }
    return {[](const at::Tensor &) { return true; }, ""};
}

}  // namespace

std::optional<Packing> packing_of(const std::string &linear_form) {
    if (linear_form == "onednn") return Packing::onednn;
    if (linear_form == "panels") return Packing::panels;
    if (linear_form == "q8panels") return Packing::q8_panels;
    if (linear_form == "int4panels") return Packing::int4_panels;
    if (linear_form == "int4pack") return Packing::int4_for_host;
    return std::nullopt;
}

PackedWeights::PackedWeights(std::map<std::string, at::Tensor> &weights,
                             const std::set<std::pair<std::string, Packing>> &wanted, bool weights_change,
                             const std::set<std::string> &release) {
    bool onednn_failed = false;
    for (auto entry = wanted.begin(); entry != wanted.end(); ++entry) {
        const auto &[name, packing] = *entry;
        auto it = weights.find(name);
        const bool found = it != weights.end() && it->second.dim() == 2 && it->second.device().is_cpu();
        if (packing != Packing::onednn) {
            const KernelPacking rule = kernel_packing(packing);
            if (!found || !rule.reads(it->second))
                fail(GPT_ERR_ARTIFACT_INVALID, "the manifest packs '" + name + "' " + rule.refusal);
            // Quantized weights never change (inference only): only float ones keep their stored weight for repack.
            const bool follows = weights_change && packing == Packing::panels;
            packed_.emplace(std::make_pair(name, packing),
                            std::make_pair(follows ? it->second : at::Tensor(), pack(packing, it->second)));
        } else {
            if (!found)
                fail(GPT_ERR_ARTIFACT_INVALID,
                     "the manifest packs '" + name + "' for oneDNN, which is no 2-D CPU weight of this model");
            if (!onednn_failed) {
                try {
                    packed_.emplace(std::make_pair(name, packing),
                                    std::make_pair(it->second, pack_for_onednn(it->second)));
                } catch (const std::exception &e) {
                    log(GPT_LOG_WARN, std::string("cannot pack linear weights for oneDNN here, the graphs read them "
                                                  "plain: ") +
                                          e.what());
                    onednn_failed = true;
                }
            }
        }
        // `wanted` is ordered by name: after a name's last packing, its stored weight can go.
        const auto next = std::next(entry);
        if ((next == wanted.end() || next->first != name) && release.count(name) > 0) weights.erase(name);
    }
    if (onednn_failed)  // all or none: the onednn graphs read plain weights
        for (auto it = packed_.begin(); it != packed_.end();)
            it = it->first.second == Packing::onednn ? packed_.erase(it) : std::next(it);
    std::vector<at::Tensor *> copies;  // each step reads them all: into huge pages, side by side
    for (auto &entry : packed_) copies.push_back(&entry.second.second);
    gather_in_host_pages(copies);
    size_t int4 = 0;
    for (const auto &entry : packed_) int4 += entry.first.second == Packing::int4_for_host ? 1 : 0;
    if (int4 > 0)
        log(GPT_LOG_DEBUG, "packed " + std::to_string(int4) +
                               " int4 weights for the int4 kernel of ATen CPU capability " + at::get_cpu_capability());
}

std::map<std::string, at::Tensor> PackedWeights::bound(const std::map<std::string, at::Tensor> &weights,
                                                       const std::set<std::string> &names, Packing packing) const {
    std::map<std::string, at::Tensor> out = weights;
    for (const std::string &name : names)
        if (auto it = packed_.find({name, packing}); it != packed_.end()) out[name] = it->second.second;
    return out;
}

uint64_t PackedWeights::bytes() const {
    uint64_t total = 0;
    for (const auto &[key, pair] : packed_)
        total += static_cast<uint64_t>(pair.second.numel()) * static_cast<uint64_t>(pair.second.element_size());
    return total;
}

void PackedWeights::repack() {
    for (auto &[key, pair] : packed_) {
        if (!pair.first.defined()) continue;
        pair.second.copy_(pack(key.second, pair.first));
    }
}

bool host_reads_int4_blocks64() {
    // Bytes that are no packing's fixed point unless the packing is blocks64 itself.
    const at::Tensor probe =
        at::arange(kInt4BlockRows * 4, at::kInt).mul(37).add(11).remainder(256).to(at::kByte).view({kInt4BlockRows, 4});
    return at::equal(pack_for_int4pack(probe), probe);
}

}  // namespace gpt
