// weights.cpp — every tensor's shape and dtype must be the one the config implies:
// the compiled graphs index into these buffers without checking them.
#include "exec/weights.h"

#include <ATen/ATen.h>

#include "base/error.h"
#include "exec/safetensors.h"
#include "exec/torch_dtype.h"
#include "formats/integrity.h"

namespace gpt {

namespace {

// The dtypes a model's weights may have.
at::ScalarType model_scalar_type(const std::string &name) {
    const Dtype *dtype = dtype_from_name(name);
    const at::ScalarType type = dtype != nullptr ? scalar_type(*dtype) : at::ScalarType::Undefined;
    if (type != at::kFloat && type != at::kBFloat16 && type != at::kHalf)
        fail(GPT_ERR_ARTIFACT_INVALID, "manifest dtype '" + name + "' is not float32, bfloat16 or float16");
    return type;
}

// Every parameter nanoGPT has for this config, with its shape.
std::map<std::string, std::vector<int64_t>> expected_parameters(const ModelConfig &c) {
    const int64_t C = c.n_embd;
    std::map<std::string, std::vector<int64_t>> p = {
        {"transformer.wte.weight", {c.padded_vocab_size, C}},
        {"lm_head.weight", {c.padded_vocab_size, C}},
        {"transformer.wpe.weight", {c.block_size, C}},
        {"transformer.ln_f.weight", {C}},
    };
    if (c.bias) p["transformer.ln_f.bias"] = {C};
    for (int32_t i = 0; i < c.n_layer; ++i) {
        const std::string h = "transformer.h." + std::to_string(i) + ".";
        p[h + "ln_1.weight"] = {C};
        p[h + "ln_2.weight"] = {C};
        p[h + "attn.c_attn.weight"] = {3 * C, C};
        p[h + "attn.c_proj.weight"] = {C, C};
        p[h + "mlp.c_fc.weight"] = {4 * C, C};
        p[h + "mlp.c_proj.weight"] = {C, 4 * C};
        if (!c.bias) continue;
        p[h + "ln_1.bias"] = {C};
        p[h + "ln_2.bias"] = {C};
        p[h + "attn.c_attn.bias"] = {3 * C};
        p[h + "attn.c_proj.bias"] = {C};
        p[h + "mlp.c_fc.bias"] = {4 * C};
        p[h + "mlp.c_proj.bias"] = {C};
    }
    return p;
}

std::string shape_string(at::IntArrayRef shape) {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
}

}  // namespace

std::map<std::string, at::Tensor> load_weights(const std::filesystem::path &dir, const Manifest &manifest,
                                               c10::Device device) {
    const at::ScalarType dtype = model_scalar_type(manifest.dtype);
    const auto expected = expected_parameters(manifest.model);
    ListedFileReader file(dir, manifest, manifest.weights_file);
    auto tensors = read_safetensors(file);
    std::map<std::string, at::Tensor> weights;
    for (auto &[name, tensor] : tensors) {
        auto it = expected.find(name);
        if (it == expected.end())
            fail(GPT_ERR_ARTIFACT_INVALID, manifest.weights_file + ": unexpected tensor '" + name + "' for this model");
        if (tensor.sizes() != at::IntArrayRef(it->second) || tensor.scalar_type() != dtype)
            fail(GPT_ERR_ARTIFACT_INVALID, manifest.weights_file + ": '" + name + "' is " +
                                               shape_string(tensor.sizes()) + " " +
                                               std::string(c10::toString(tensor.scalar_type())) + ", expected " +
                                               shape_string(it->second) + " " + manifest.dtype);
        weights.emplace(name, tensor.to(device));
    }
    for (const auto &[alias, stored] : manifest.tied) {
        auto it = weights.find(stored);
        if (it == weights.end() || expected.count(alias) == 0 || weights.count(alias) != 0 ||
            expected.at(alias) != expected.at(stored))
            fail(GPT_ERR_ARTIFACT_INVALID,
                 "manifest ties '" + alias + "' to '" + stored + "', which does not fit the model");
        weights.emplace(alias, it->second);
    }
    for (const auto &[name, shape] : expected)
        if (weights.count(name) == 0)
            fail(GPT_ERR_ARTIFACT_INVALID,
                 manifest.weights_file + " lacks '" + name + "' (shape " + shape_string(shape) + ")");
    return weights;
}

}  // namespace gpt
