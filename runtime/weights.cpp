// weights.cpp — every tensor's shape and dtype must be the one the config implies:
// the compiled graphs index into these buffers without checking them.
#include "weights.h"

#include <ATen/ATen.h>

#include <regex>

#include "error.h"
#include "safetensors.h"

namespace gpt {

namespace {

at::ScalarType scalar_type(const std::string &dtype) {
    if (dtype == "float32") return at::kFloat;
    if (dtype == "bfloat16") return at::kBFloat16;
    if (dtype == "float16") return at::kHalf;
    fail(GPT_ERR_ARTIFACT_INVALID, "manifest dtype '" + dtype + "' is not float32, bfloat16 or float16");
}

// The shape nanoGPT gives the parameter `name`, or empty if no such parameter exists.
std::vector<int64_t> expected_shape(const std::string &name, const ModelConfig &c) {
    const int64_t C = c.n_embd;
    if (name == "transformer.wte.weight" || name == "lm_head.weight") return {c.padded_vocab_size, C};
    if (name == "transformer.wpe.weight") return {c.block_size, C};
    if (name == "transformer.ln_f.weight" || name == "transformer.ln_f.bias") return {C};
    static const std::regex layer(R"(transformer\.h\.(\d+)\.(.+))");
    std::smatch m;
    if (!std::regex_match(name, m, layer) || std::stol(m[1].str()) >= c.n_layer) return {};
    const std::string p = m[2].str();
    if (p == "ln_1.weight" || p == "ln_1.bias" || p == "ln_2.weight" || p == "ln_2.bias") return {C};
    if (p == "attn.c_attn.weight") return {3 * C, C};
    if (p == "attn.c_attn.bias") return {3 * C};
    if (p == "attn.c_proj.weight") return {C, C};
    if (p == "attn.c_proj.bias" || p == "mlp.c_proj.bias") return {C};
    if (p == "mlp.c_fc.weight") return {4 * C, C};
    if (p == "mlp.c_fc.bias") return {4 * C};
    if (p == "mlp.c_proj.weight") return {C, 4 * C};
    return {};
}

std::string shape_string(at::IntArrayRef shape) {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
}

}  // namespace

std::map<std::string, at::Tensor> load_weights(const Bytes &file, const Manifest &manifest, c10::Device device) {
    const at::ScalarType dtype = scalar_type(manifest.dtype);
    auto tensors = parse_safetensors(file.data(), file.size(), manifest.weights_file);
    std::map<std::string, at::Tensor> weights;
    for (auto &[name, tensor] : tensors) {
        const auto shape = expected_shape(name, manifest.model);
        if (shape.empty())
            fail(GPT_ERR_ARTIFACT_INVALID, manifest.weights_file + ": unexpected tensor '" + name + "' for this model");
        if (tensor.sizes() != at::IntArrayRef(shape) || tensor.scalar_type() != dtype)
            fail(GPT_ERR_ARTIFACT_INVALID, manifest.weights_file + ": '" + name + "' is " + shape_string(tensor.sizes()) +
                                               " " + std::string(c10::toString(tensor.scalar_type())) + ", expected " +
                                               shape_string(shape) + " " + manifest.dtype);
        weights.emplace(name, tensor.to(device));
    }
    for (const auto &[alias, stored] : manifest.tied) {
        auto it = weights.find(stored);
        if (it == weights.end() || expected_shape(alias, manifest.model).empty())
            fail(GPT_ERR_ARTIFACT_INVALID, "manifest ties '" + alias + "' to '" + stored + "', which is not a weight");
        weights.emplace(alias, it->second);
    }
    return weights;
}

}  // namespace gpt
