// weights.cpp — every tensor's shape and dtype must be the one the config and the
// quantization imply: the compiled graphs index into these buffers without checking them.
#include "exec/weights.h"

#include <ATen/core/Tensor.h>

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

struct ExpectedTensor {
    std::vector<int64_t> shape;
    at::ScalarType dtype;
};

constexpr int64_t kBlockRows = 32;  // the int8 "blocks32" layout's rows per block

int64_t round_up(int64_t n, int64_t multiple) { return (n + multiple - 1) / multiple * multiple; }

// Every parameter nanoGPT has for this config, with its shape and dtype. With int8 quantization
// the linears' weights (lm_head's, and so the tied embedding's) are int8, as rows or in blocks of
// 32 rows (the last padded), and each has a `<weight>_scale` of one value per output row in the
// model's dtype. With int4, each is two values a byte in blocks of 64 rows (the last padded), with
// `<weight>_scale_zero` (a scale and a zero per group of inputs and padded row, in the model's
// dtype, block by block: [blocks, groups, 64, 2]) and `<weight>_group_size`, a scalar
// (aot/gpt_aot/model/quantize.py).
std::map<std::string, ExpectedTensor> expected_parameters(const Manifest &manifest, at::ScalarType dtype) {
    const ModelConfig &c = manifest.model;
    const int64_t C = c.n_embd;
    std::map<std::string, ExpectedTensor> p;
    const auto add = [&](const std::string &name, std::vector<int64_t> shape) { p[name] = {std::move(shape), dtype}; };
    const auto add_linear = [&](const std::string &name, int64_t rows, int64_t cols) {
        if (manifest.weight_layout.empty()) return add(name, {rows, cols});
        if (manifest.quantization == "int4") {
            const int64_t group = manifest.int4_group_size;
            if (cols % group != 0)
                fail(GPT_ERR_ARTIFACT_INVALID, "'" + name + "' has " + std::to_string(cols) +
                                                   " inputs, not a whole number of int4 groups of " +
                                                   std::to_string(group));
            const int64_t padded = round_up(rows, kInt4BlockRows);
            p[name] = {{padded, cols / 2}, at::kByte};
            add(name + "_scale_zero", {padded / kInt4BlockRows, cols / group, kInt4BlockRows, 2});
            p[name + "_group_size"] = {{}, at::kLong};
            return;
        }
        if (manifest.weight_layout == "blocks32")
            p[name] = {{round_up(rows, kBlockRows) / kBlockRows, cols, kBlockRows}, at::kChar};
        else
            p[name] = {{rows, cols}, at::kChar};
        add(name + "_scale", {rows});
    };
    add_linear("lm_head.weight", c.padded_vocab_size, C);
    p["transformer.wte.weight"] = p.at("lm_head.weight");  // tied: the embedding reads lm_head's rows
    add("transformer.wpe.weight", {c.block_size, C});
    add("transformer.ln_f.weight", {C});
    if (c.bias) add("transformer.ln_f.bias", {C});
    for (int32_t i = 0; i < c.n_layer; ++i) {
        const std::string h = "transformer.h." + std::to_string(i) + ".";
        add(h + "ln_1.weight", {C});
        add(h + "ln_2.weight", {C});
        add_linear(h + "attn.c_attn.weight", 3 * C, C);
        add_linear(h + "attn.c_proj.weight", C, C);
        add_linear(h + "mlp.c_fc.weight", 4 * C, C);
        add_linear(h + "mlp.c_proj.weight", C, 4 * C);
        if (!c.bias) continue;
        add(h + "ln_1.bias", {C});
        add(h + "ln_2.bias", {C});
        add(h + "attn.c_attn.bias", {3 * C});
        add(h + "attn.c_proj.bias", {C});
        add(h + "mlp.c_fc.bias", {4 * C});
        add(h + "mlp.c_proj.bias", {C});
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
                                               c10::Device device, const std::set<std::string> &apart) {
    const auto expected = expected_parameters(manifest, model_scalar_type(manifest.dtype));
    ListedFileReader file(dir, manifest, manifest.weights_file);
    auto tensors = device.is_cpu() ? read_safetensors_in_arena(file, apart) : read_safetensors(file);
    std::map<std::string, at::Tensor> weights;
    for (auto &[name, tensor] : tensors) {
        auto it = expected.find(name);
        if (it == expected.end())
            fail(GPT_ERR_ARTIFACT_INVALID, manifest.weights_file + ": unexpected tensor '" + name + "' for this model");
        const ExpectedTensor &want = it->second;
        if (tensor.sizes() != at::IntArrayRef(want.shape) || tensor.scalar_type() != want.dtype)
            fail(GPT_ERR_ARTIFACT_INVALID, manifest.weights_file + ": '" + name + "' is " +
                                               shape_string(tensor.sizes()) + " " +
                                               std::string(c10::toString(tensor.scalar_type())) + ", expected " +
                                               shape_string(want.shape) + " " + std::string(c10::toString(want.dtype)));
        // The int4 kernel indexes the scales by it: it must be the group the shapes were checked with.
        if (want.dtype == at::kLong && tensor.item<int64_t>() != manifest.int4_group_size)
            fail(GPT_ERR_ARTIFACT_INVALID,
                 manifest.weights_file + ": '" + name + "' is " + std::to_string(tensor.item<int64_t>()) +
                     ", the manifest's group size is " + std::to_string(manifest.int4_group_size));
        weights.emplace(name, tensor.to(device));
    }
    for (const auto &[alias, stored] : manifest.tied) {
        auto it = weights.find(stored);
        if (it == weights.end() || expected.count(alias) == 0 || weights.count(alias) != 0 ||
            expected.at(alias).shape != expected.at(stored).shape ||
            expected.at(alias).dtype != expected.at(stored).dtype)
            fail(GPT_ERR_ARTIFACT_INVALID,
                 "manifest ties '" + alias + "' to '" + stored + "', which does not fit the model");
        weights.emplace(alias, it->second);
    }
    for (const auto &[name, want] : expected)
        if (weights.count(name) == 0)
            fail(GPT_ERR_ARTIFACT_INVALID,
                 manifest.weights_file + " lacks '" + name + "' (shape " + shape_string(want.shape) + ")");
    return weights;
}

}  // namespace gpt
