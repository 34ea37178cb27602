// packed_weights.h — copies of linear weights in the layout their graphs' kernel reads, bound in place of
// the stored weights for the graphs whose linears are a packed form (the manifest's `packed` list):
//   onednn   oneDNN's product over float weights reads oneDNN's blocked layout; on a plain weight it
//            reorders the weight on every call.
//   int4pack aten's CPU int4 kernel reads a packing that depends on the host's ATen CPU capability at run
//            time (AVX-512: blocks of 64 rows, the stored "blocks64" itself; AVX2: blocks of 32 rows;
//            default: another), so the stored layout is packed again here, by aten's own packer.
// The copies follow the runtime's weights only through repack().
#pragma once

#include <ATen/Tensor.h>

#include <cstdint>
#include <map>
#include <set>
#include <string>

namespace gpt {

enum class Packing {
    onednn,         // float weights, for the onednn form
    int4_for_host,  // int4 "blocks64" weights, for the int4pack form on this host
};

class PackedWeights {
public:
    PackedWeights() = default;
    // Packs each of `names` (each a 2-D weight of `weights`) as `packing` says. Where oneDNN cannot pack
    // here, none is packed and the graphs read the plain weights (slower, same result); the int4 kernel
    // reads the stored layout only on AVX-512, so an int4 weight that cannot be packed fails the load.
    // int4 copies keep no reference to the stored weights: those never change (a quantized model has no
    // trainer), and the model frees a stored weight that no graph reads.
    PackedWeights(const std::map<std::string, at::Tensor> &weights, const std::set<std::string> &names,
                  Packing packing);

    // `weights` with the packed copies in place of the weights they pack, for `names` only.
    std::map<std::string, at::Tensor> bound(const std::map<std::string, at::Tensor> &weights,
                                            const std::set<std::string> &names) const;

    // Packs the current plain weights again into the same tensors (the graphs hold
    // them): after the weights change in place. oneDNN's copies only (int4 weights never change).
    void repack();

    size_t size() const { return packed_.size(); }
    // Bytes of the packed copies, counted by their elements (oneDNN may pad a blocked layout a little).
    uint64_t bytes() const;

private:
    std::map<std::string, std::pair<at::Tensor, at::Tensor>> packed_;  // name -> (plain or undefined, packed)
};

// Whether this host's aten CPU int4 kernel reads "blocks64" weights as stored: its packing of a weight's
// values gives the stored bytes (ATen's AVX-512 kernels). Only there do int4pack graphs that bind no
// packed copies (compiled before the runtime packed them) compute right.
bool host_reads_int4_blocks64();

}  // namespace gpt
