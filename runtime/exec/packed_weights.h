// packed_weights.h — copies of linear weights in the layout their graphs' kernel reads, bound in place of
// the stored weights for the graphs whose linears are a packed form (the manifest's `packed` list):
//   onednn   oneDNN's product over float weights reads oneDNN's blocked layout; on a plain weight it
//            reorders the weight on every call.
//   panels   the kernel library's product over bf16 weights reads them in panels of 16 outputs
//            (kernels/cpu/linear.h's pack_linear_panels): the same shape and bytes, reordered.
//   q8_panels its product of int8 weights and int8 activations reads them in q8 panels of 16 outputs
//            (pack_linear_q8_panels): the same shape and size, uint8, reordered and offset by 128.
//   int4_panels its int4 product reads "blocks64" in u4 panels of 16 outputs (pack_linear_int4_panels): the
//            same shape and bytes, reordered.
//   int4pack aten's CPU int4 kernel reads a packing that depends on the host's ATen CPU capability at run
//            time (AVX-512: blocks of 64 rows, the stored "blocks64" itself; AVX2: blocks of 32 rows;
//            default: another), so the stored layout is packed again here, by aten's own packer.
// The copies follow the runtime's weights only through repack().
#pragma once

#include <ATen/Tensor.h>

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>

namespace gpt {

enum class Packing {
    onednn,         // float weights, for the onednn form
    panels,         // bf16 weights, for the panels form
    q8_panels,      // int8 weights, for the q8panels form
    int4_panels,    // int4 "blocks64" weights, for the int4panels form
    int4_for_host,  // int4 "blocks64" weights, for the int4pack form on this host
};

// The packing a graph's linear form reads, if any.
std::optional<Packing> packing_of(const std::string &linear_form);

// What a model's graphs read packed, and which stored weights no graph reads once packed (freed then).
struct PackingPlan {
    std::set<std::pair<std::string, Packing>> wanted;
    std::set<std::string> release;
};

class PackedWeights {
public:
    PackedWeights() = default;
    // Packs each (name, packing) of `wanted` (each name a 2-D weight of `weights`). Where oneDNN cannot pack
    // here, no weight is packed for it and its graphs read the plain weights (slower, same result); the int4
    // kernel reads the stored layout only on AVX-512, so an int4 weight that cannot be packed fails the load,
    // as does a weight the panels, q8panels or int4panels form cannot read.
    // Copies keep a reference to their stored weight for repack() where those can change (`weights_change`: the
    // model trains; oneDNN's always, as before); otherwise none. Each weight named in `release` (one that no
    // graph reads once packed) leaves `weights` as soon as its last copy is made, so that a load holds one
    // weight twice at a time, not every packed one.
    PackedWeights(std::map<std::string, at::Tensor> &weights, const std::set<std::pair<std::string, Packing>> &wanted,
                  bool weights_change, const std::set<std::string> &release = {});

    // `weights` with the copies packed as `packing` in place of the weights they pack, for `names` only.
    std::map<std::string, at::Tensor> bound(const std::map<std::string, at::Tensor> &weights,
                                            const std::set<std::string> &names, Packing packing) const;

    // Packs the current plain weights again into the same tensors (the graphs hold them): after the weights
    // change in place. Copies without a stored weight (int4's, panels' and q8 panels' of a model that never trains)
    // stay.
    void repack();

    size_t size() const { return packed_.size(); }
    // Bytes of the packed copies, counted by their elements (oneDNN may pad a blocked layout a little).
    uint64_t bytes() const;

private:
    // (name, packing) -> (the stored weight, or undefined where it never changes; the packed copy)
    std::map<std::pair<std::string, Packing>, std::pair<at::Tensor, at::Tensor>> packed_;
};

// Whether this host's aten CPU int4 kernel reads "blocks64" weights as stored: its packing of a weight's
// values gives the stored bytes (ATen's AVX-512 kernels). Only there do int4pack graphs that bind no
// packed copies (compiled before the runtime packed them) compute right.
bool host_reads_int4_blocks64();

}  // namespace gpt
