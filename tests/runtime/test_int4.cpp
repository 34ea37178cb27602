// Weight-only int4 artifacts through the C ABI (tiny-int4: tiny-math's model compiled with
// --quantize int4, groups of 32 inputs, every graph aten's CPU int4 kernel): it loads and matches
// its golden vector, says what it is, holds its file's bytes plus the embedding's stored table (the
// linears read copies packed for the host's kernel), refuses a trainer, a damaged or reshaped scale,
// weight or group size never reaches the kernel, and graphs that read the stored packing run only
// where the kernel reads it. The other ATen CPU capabilities: tests/aot/test_int4.py runs `gpt verify`
// under each. tiny-int4-kernel: every graph the kernel library's int4 linear, decode_one's on the stored blocks,
// the batched graphs' on copies packed in u4 panels.
#include <ATen/TensorOperators.h>
#include <ATen/Version.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/cat.h>
#include <catch2/catch.hpp>

#include <cstdint>
#include <fstream>
#include <functional>
#include <string>

#include "test_support.h"

namespace {

using nlohmann::json;

const std::string kScaleZero = "transformer.h.0.attn.c_attn.weight_scale_zero";
const std::string kGroupSize = "transformer.h.0.attn.c_attn.weight_group_size";

// Loads `art` after its weights file was rewritten (and rehashed): only the loader's checks stand between
// the changed tensors and the kernel.
void expect_refused_by_loader(test::ScratchArtifact &art, const std::map<std::string, at::Tensor> &weights,
                              const std::string &mention) {
    test::write_safetensors(art.file("weights.safetensors"), weights);
    art.rehash("weights.safetensors");
    gpt_model *model = nullptr;
    CHECK(gpt_model_load(art.dir().c_str(), nullptr, &model) == GPT_ERR_ARTIFACT_INVALID);
    CHECK(model == nullptr);
    CHECK(test::error_mentions(mention));
}

}  // namespace

TEST_CASE("an int4 model holds its file's bytes, each linear packed for the host, and the embedding's table",
          "[int4][memory]") {
    const auto dir = test::artifact("int4");
    const auto [manifest, weights, stored] = test::stored_weights(dir);
    // lm_head's table, stored once under the embedding's name (tied): 128 rows, two weights a byte.
    CHECK(manifest["weights"]["tied"]["lm_head.weight"] == "transformer.wte.weight");
    CHECK(weights.at("transformer.wte.weight").scalar_type() == at::kByte);
    CHECK(weights.at("transformer.wte.weight").sizes() == at::IntArrayRef({128, 16}));
    // c_attn's 96 rows padded to 128: 2 blocks of 64 rows' pairs, one group of 32 inputs
    CHECK(weights.at(kScaleZero).sizes() == at::IntArrayRef({2, 1, 64, 2}));
    CHECK(weights.at(kGroupSize).item<int64_t>() == 32);
    CHECK(stored == manifest["weights"]["quantization"]["weight_bytes"].get<uint64_t>());
    CHECK(stored < test::loaded_weights_bytes(test::artifact("int8")));
    // Every graph's linears read copies packed for this host's int4 kernel, as large as the stored weights,
    // which are freed: only lm_head's stays, the table the embedding gathers from.
    CHECK(test::loaded_weights_bytes(dir) == stored + weights.at("transformer.wte.weight").nbytes());
}

TEST_CASE(
    "an int4 artifact whose graphs call the kernel library's int4 linear reads the blocks as stored and in u4 "
    "panels, and matches its golden vector within the rounding its manifest allows",
    "[int4][memory]") {
    const auto dir = test::artifact("int4-kernel");
    test::Model model(dir);
    REQUIRE(model.status == GPT_OK);
    CHECK(std::string(model.info.weights) == "int4");
    const auto [manifest, weights, stored] = test::stored_weights(dir);
    // The golden vector is the dequantised model's; the kernel rounds the activations to int8 blocks, and the
    // compile widened atol to 2.5 times that distance (aot/gpt_aot/artifact/golden.py).
    const double atol = manifest["golden"]["atol"].get<double>(), err = test::golden_error(model.handle);
    CHECK(atol > 1e-4);
    CHECK(err >= 0);
    CHECK(err <= atol);
    // decode_one reads the stored blocks, the batched graphs copies in u4 panels of every linear's (as many bytes):
    // both held.
    const uint64_t linear_bytes = test::linear_weight_bytes(weights, at::kByte);
    CHECK(linear_bytes > 0);
    CHECK(test::loaded_weights_bytes(dir) == stored + linear_bytes);
}

TEST_CASE("a trainer on an int4 artifact is refused: quantized weights are for inference only", "[int4][train]") {
    test::Model model(test::artifact("int4"));
    REQUIRE(model.status == GPT_OK);
    gpt_trainer *trainer = nullptr;
    const gpt_trainer_params params = test::default_trainer_params();
    CHECK(gpt_trainer_create(model.handle, &params, &trainer) == GPT_ERR_INVALID_ARGUMENT);
    CHECK(trainer == nullptr);
    CHECK(test::error_mentions("int4, quantized for inference only"));
}

TEST_CASE("int4 scales, weights or group sizes that do not fit the quantization are refused by the loader",
          "[int4][artifact]") {
    const auto source = test::artifact("int4");
    const auto original = test::read_safetensors(source / "weights.safetensors");
    struct Case {
        std::string what, name, expected;
        std::function<at::Tensor(const at::Tensor &)> change;
    };
    const std::vector<Case> cases = {
        // Format 12 to 14's layout, group by group: the same values, another shape.
        {"scales and zeros group by group", kScaleZero, "expected [2, 1, 64, 2] Float",
         [](const at::Tensor &t) {
             return t.transpose(0, 1).reshape({1, 128, 2});
         }},
        {"the first block's scales and zeros alone", kScaleZero, "expected [2, 1, 64, 2] Float",
         [](const at::Tensor &t) { return t.narrow(0, 0, 1).contiguous(); }},
        {"scales without zeros", kScaleZero, "expected [2, 1, 64, 2] Float",
         [](const at::Tensor &t) { return t.select(3, 0).contiguous(); }},
        {"scales in another dtype", kScaleZero, "expected [2, 1, 64, 2] Float",
         [](const at::Tensor &t) { return t.to(at::kBFloat16); }},
        {"unpacked int4 weights", "transformer.h.1.mlp.c_fc.weight", "expected [128, 16] Byte",
         [](const at::Tensor &t) {
             return at::cat({t, t}, 1);
         }},
        {"a group size as a vector", kGroupSize, "expected [] Long",
         [](const at::Tensor &t) { return t.reshape({1}); }},
        {"another group size", kGroupSize, "the manifest's group size is 32",
         [](const at::Tensor &t) { return t * 2; }},
    };
    for (const Case &c : cases) {
        DYNAMIC_SECTION(c.what) {
            test::ScratchArtifact art(source);
            auto changed = original;
            changed[c.name] = c.change(original.at(c.name));
            expect_refused_by_loader(art, changed, c.name);
            CHECK(test::error_mentions(c.expected));
        }
    }
    SECTION("a missing group size") {
        test::ScratchArtifact art(source);
        auto changed = original;
        changed.erase(kGroupSize);
        expect_refused_by_loader(art, changed, "lacks '" + kGroupSize + "'");
    }
}

TEST_CASE("int4pack graphs that bind no packed copies load only where the kernel reads the stored packing",
          "[int4][artifact]") {
    // As an artifact compiled before the runtime packed int4 weights for the host: "blocks64" is the packing
    // of ATen's AVX-512 int4 kernel; the others read another (tests/aot/test_int4.py checks which).
    test::ScratchArtifact art(test::artifact("int4"));
    auto m = art.manifest();
    for (const char *graph : {"prefill", "decode", "decode_one", "extend"})
        m["graphs"][graph]["linear"].erase("packed");
    art.write_manifest(m);
    gpt_model *model = nullptr;
    if (at::get_cpu_capability() == "AVX512") {
        CHECK(gpt_model_load(art.dir().c_str(), nullptr, &model) == GPT_OK);
        CHECK(test::golden_error(model) < 1e-4);
        CHECK(gpt_model_free(model) == GPT_OK);
        return;
    }
    CHECK(gpt_model_load(art.dir().c_str(), nullptr, &model) == GPT_ERR_DEVICE_MISMATCH);
    CHECK(model == nullptr);
    CHECK(test::error_mentions("reads its int4 weights as stored"));
    CHECK(test::error_mentions("ATen CPU capability " + at::get_cpu_capability()));
    CHECK(test::error_mentions("recompile the artifact"));
}

TEST_CASE("an int4 artifact of a format before its pairs were stored block by block is refused: compile it again",
          "[int4][artifact]") {
    test::ScratchArtifact art(test::artifact("int4"));
    auto m = art.manifest();
    REQUIRE(m["format_version"] == 15);
    m["format_version"] = 14;
    art.write_manifest(m);
    gpt_model *model = nullptr;
    CHECK(gpt_model_load(art.dir().c_str(), nullptr, &model) == GPT_ERR_ARTIFACT_VERSION);
    CHECK(model == nullptr);
    CHECK(test::error_mentions("int4 artifact of format version 14 stores its (scale, zero) pairs group by group"));
    CHECK(test::error_mentions("recompile the artifact"));
}

TEST_CASE("a manifest's int4 quantization must be whole and agree with the linear forms", "[int4][artifact]") {
    test::ScratchArtifact art(test::artifact("int4"));
    auto m = art.manifest();
    std::string mention;
    SECTION("no group size") {
        m["weights"]["quantization"].erase("group_size");
        mention = "group_size";
    }
    SECTION("a group size the kernel has not") {
        m["weights"]["quantization"]["group_size"] = 16;
        mention = "must be 32, 64, 128 or 256";
    }
    SECTION("a larger group than the shapes were written for: every scale's shape is wrong") {
        m["weights"]["quantization"]["group_size"] = 64;
        mention = "inputs, not a whole number of int4 groups of 64";  // tiny's linears read 32 inputs
    }
    SECTION("a packed int4 weight that is no int4 weight") {
        m["graphs"]["decode"]["linear"]["packed"].push_back("transformer.wpe.weight");
        mention = "packs 'transformer.wpe.weight' for the int4 kernel, which is no int4 weight";
    }
    SECTION("int8's layout") {
        m["weights"]["quantization"]["layout"] = "rows";
        mention = "layout' of int4 weights must be 'blocks64'";
    }
    SECTION("aten's int8 kernel over int4 weights") {
        m["graphs"]["decode"]["linear"]["form"] = "int8pack";
        mention = "must be mm, int4pack, kernel or int4panels (the weights are int4 blocks of 64 rows)";
    }
    SECTION("the int4 kernel over float weights") {
        m["weights"].erase("quantization");
        mention = "must be mm, reduction, onednn, kernel or panels";
    }
    art.write_manifest(m);
    gpt_model *model = nullptr;
    CHECK(gpt_model_load(art.dir().c_str(), nullptr, &model) == GPT_ERR_ARTIFACT_INVALID);
    CHECK(model == nullptr);
    CHECK(test::error_mentions(mention));
}
