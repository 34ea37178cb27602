// packed_weights.h — linear weights in oneDNN's blocked layout, for the graphs
// whose linears are oneDNN's product (the "onednn" form). On a plain weight
// oneDNN reorders it on every call; packed once here, the graphs read it as is.
// The copies follow the runtime's weights only through repack().
#pragma once

#include <ATen/Tensor.h>

#include <cstdint>
#include <map>
#include <set>
#include <string>

namespace gpt {

class PackedWeights {
public:
    PackedWeights() = default;
    // Packs each of `names` (each a 2-D weight of `weights`); where oneDNN cannot
    // pack here, none is packed and the graphs read the plain weights (slower, same result).
    PackedWeights(const std::map<std::string, at::Tensor> &weights, const std::set<std::string> &names);

    // `weights` with the packed copies in place of the weights they pack, for `names` only.
    std::map<std::string, at::Tensor> bound(const std::map<std::string, at::Tensor> &weights,
                                            const std::set<std::string> &names) const;

    // Packs the current plain weights again into the same tensors (the graphs hold
    // them): after the weights change in place.
    void repack();

    size_t size() const { return packed_.size(); }
    // Bytes of the packed copies, counted by their elements (oneDNN may pad a blocked layout a little).
    uint64_t bytes() const;

private:
    std::map<std::string, std::pair<at::Tensor, at::Tensor>> packed_;  // name -> (plain, packed)
};

}  // namespace gpt
