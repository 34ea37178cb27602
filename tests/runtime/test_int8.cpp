// Weight-only int8 artifacts through the C ABI (tiny-int8: tiny-math's model compiled with
// --quantize int8, weights as rows; tiny-int8-blocks: the same in blocks of 32 rows; tiny-int8-kernel:
// rows, every linear the kernel library's int8 linear; tiny-int8-q8: the same with int8 activations): they load
// and match their golden vector, say what they are, hold fewer bytes, refuse a trainer, and a
// damaged or reshaped scale or weight never reaches the graphs.
#include <ATen/core/Tensor.h>
#include <ATen/ops/equal.h>
#include <catch2/catch.hpp>

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "test_support.h"

namespace {

using nlohmann::json;

const std::string kScale = "transformer.h.0.attn.c_attn.weight_scale";

// Where a tensor's bytes start in a safetensors file: after the 8-byte header length and the header.
std::streamoff tensor_offset(const std::filesystem::path &file, const std::string &name) {
    std::ifstream in(file, std::ios::binary);
    uint64_t header_len = 0;
    in.read(reinterpret_cast<char *>(&header_len), sizeof header_len);
    std::string header(header_len, '\0');
    in.read(header.data(), static_cast<std::streamsize>(header_len));
    const json offsets = json::parse(header).at(name).at("data_offsets");
    return static_cast<std::streamoff>(8 + header_len + offsets.at(0).get<uint64_t>());
}

// Both models sample the same 12 tokens after one prompt with one seed: their logits lie within rounding.
void check_same_samples(gpt_model *a, gpt_model *b) {
    const std::vector<gpt_token> prompt = {1, 5, 9, 2};
    gpt_status status_a = GPT_OK, status_b = GPT_OK;
    const auto tokens = test::try_generate(a, prompt, 7, 12, &status_a);
    CHECK(status_a == GPT_OK);
    CHECK(tokens.size() == 12);
    CHECK(tokens == test::try_generate(b, prompt, 7, 12, &status_b));
    CHECK(status_b == GPT_OK);
}

}  // namespace

TEST_CASE("an int8 or int4 artifact loads, matches its golden vector and says its weights' scheme", "[int8][int4]") {
    const std::string scheme = GENERATE("int8", "int4");
    INFO(scheme);
    test::Model model(test::artifact(scheme));
    REQUIRE(model.status == GPT_OK);
    CHECK(model.info.weights == scheme);
    CHECK(std::string(model.info.dtype) == "float32");    // the activations' dtype
    const double err = test::golden_error(model.handle);  // prefill, decode_one and the batched decode
    CHECK(err >= 0);
    CHECK(err < 1e-4);

    test::Model unquantized(test::artifact("math"));
    REQUIRE(unquantized.status == GPT_OK);
    CHECK(std::string(unquantized.info.weights) == "unquantized");
}

TEST_CASE(
    "an int8 artifact whose graphs call the kernel library's int8 linear matches its golden vector and the "
    "rows artifact's tokens",
    "[int8]") {
    test::Model model(test::artifact("int8-kernel"));
    REQUIRE(model.status == GPT_OK);
    CHECK(std::string(model.info.weights) == "int8");
    const double err = test::golden_error(model.handle);  // prefill, decode_one and the batched decode
    CHECK(err >= 0);
    CHECK(err < 1e-4);
    test::Model rows(test::artifact("int8"));  // the same int8 weights through aten's kernel and the reduction
    REQUIRE(rows.status == GPT_OK);
    check_same_samples(model.handle, rows.handle);
}

TEST_CASE(
    "an int8 artifact whose graphs round their activations to int8 blocks (q8) matches its golden vector within "
    "the atol its compile widened, and samples the kernel artifact's tokens",
    "[int8]") {
    const auto dir = test::artifact("int8-q8");
    test::Model model(dir);
    REQUIRE(model.status == GPT_OK);
    CHECK(std::string(model.info.weights) == "int8");
    // The golden vector is the dequantised model's; the compile widened atol to 2.5 times q8's distance from it
    // (aot/gpt_aot/artifact/golden.py).
    const auto [manifest, weights, stored] = test::stored_weights(dir);
    const double atol = manifest["golden"]["atol"].get<double>(), err = test::golden_error(model.handle);
    CHECK(atol > 1e-4);
    CHECK(err > 1e-5);  // the rounding is there: not the exact kernel's few 1e-7
    CHECK(err <= atol);
    test::Model exact(test::artifact("int8-kernel"));
    REQUIRE(exact.status == GPT_OK);
    check_same_samples(model.handle, exact.handle);
    // Its batched graphs read every linear's weight packed in q8 panels (a copy of as many bytes), decode_one the
    // rows as stored: both held.
    const uint64_t linear_bytes = test::linear_weight_bytes(weights, at::kChar);
    CHECK(linear_bytes > 0);
    CHECK(test::loaded_weights_bytes(dir) == stored + linear_bytes);
}

TEST_CASE("an int8 artifact in blocks of 32 rows loads and matches its golden vector", "[int8]") {
    const auto dir = test::artifact("int8-blocks");
    test::Model model(dir);
    REQUIRE(model.status == GPT_OK);
    CHECK(std::string(model.info.weights) == "int8");
    const double err = test::golden_error(model.handle);  // every graph's linears are the blocked form
    CHECK(err >= 0);
    CHECK(err < 1e-4);
    // c_attn's 96 rows are 3 blocks of 32 rows of the 32 inputs; the rows artifact holds the same numbers.
    const auto blocks = test::read_safetensors(dir / "weights.safetensors");
    const auto rows = test::read_safetensors(test::artifact("int8") / "weights.safetensors");
    const at::Tensor blocked = blocks.at("transformer.h.0.attn.c_attn.weight");
    CHECK(blocked.sizes() == at::IntArrayRef({3, 32, 32}));
    CHECK(at::equal(blocked.transpose(1, 2).reshape({96, 32}), rows.at("transformer.h.0.attn.c_attn.weight")));
    const uint64_t blocks_bytes = test::loaded_weights_bytes(dir);
    CHECK(blocks_bytes > 0);
    CHECK(blocks_bytes == test::loaded_weights_bytes(test::artifact("int8")));
}

TEST_CASE("an int8 model's weights are the int8 tensors and scales of its file, under a third of fp32's",
          "[int8][memory]") {
    const auto dir = test::artifact("int8");
    const auto [manifest, weights, stored] = test::stored_weights(dir);
    // lm_head's int8 table, stored once under the embedding's name (tied), with lm_head's scales.
    CHECK(manifest["weights"]["tied"]["lm_head.weight"] == "transformer.wte.weight");
    CHECK(weights.count("lm_head.weight") == 0);
    CHECK(weights.at("transformer.wte.weight").scalar_type() == at::kChar);
    CHECK(weights.at("lm_head.weight_scale").sizes() == at::IntArrayRef({128}));
    CHECK(weights.at(kScale).scalar_type() == at::kFloat);
    const uint64_t int8_bytes = test::loaded_weights_bytes(dir);
    CHECK(int8_bytes == stored);  // int8 graphs pack nothing
    CHECK(int8_bytes == manifest["weights"]["quantization"]["weight_bytes"].get<uint64_t>());
    // tiny-other has the same config in fp32 with mm linears (nothing packed). The tiny model's
    // position embedding and norms stay fp32; GPT-2 124M's bf16 halves (tests/aot/test_quantize.py).
    const uint64_t fp32_bytes = test::loaded_weights_bytes(test::artifact("other"));
    CHECK(fp32_bytes == manifest["weights"]["quantization"]["unquantized_weight_bytes"].get<uint64_t>());
    CHECK(int8_bytes * 3 < fp32_bytes);
}

TEST_CASE("a trainer on an int8 artifact is refused: quantized weights are for inference only", "[int8][train]") {
    test::Model model(test::artifact("int8"));
    REQUIRE(model.status == GPT_OK);
    gpt_trainer *trainer = reinterpret_cast<gpt_trainer *>(0x1);
    const gpt_trainer_params params = test::default_trainer_params();
    CHECK(gpt_trainer_create(model.handle, &params, &trainer) == GPT_ERR_INVALID_ARGUMENT);
    CHECK(trainer == reinterpret_cast<gpt_trainer *>(0x1));
    CHECK(test::error_mentions("inference only"));
}

TEST_CASE("a flipped byte in an int8 artifact's scales is refused by its hash", "[int8][artifact]") {
    test::ScratchArtifact art(test::artifact("int8"));
    test::flip_byte(art.file("weights.safetensors"), tensor_offset(art.file("weights.safetensors"), kScale) + 1);
    gpt_model *model = nullptr;
    CHECK(gpt_model_load(art.dir().c_str(), nullptr, &model) == GPT_ERR_ARTIFACT_HASH);
    CHECK(model == nullptr);
    CHECK(test::error_mentions("weights.safetensors"));
}

TEST_CASE("scales or weights that do not fit the quantization are refused by the loader", "[int8][artifact]") {
    const auto source = test::artifact("int8");
    const auto original = test::read_safetensors(source / "weights.safetensors");
    struct Case {
        std::string what, name, expected;
        std::function<at::Tensor(const at::Tensor &)> change;
    };
    const std::vector<Case> cases = {
        {"a scale short of a row", kScale, "expected [96] Float",
         [](const at::Tensor &t) { return t.narrow(0, 0, t.size(0) - 1).contiguous(); }},
        {"a scale per element", kScale, "expected [96] Float",
         [](const at::Tensor &t) {
             return t.unsqueeze(1).expand({t.size(0), 32}).contiguous();
         }},
        {"a scale in another dtype", kScale, "expected [96] Float",
         [](const at::Tensor &t) { return t.to(at::kDouble); }},
        {"a float weight where int8 is expected", "transformer.h.1.mlp.c_fc.weight", "expected [128, 32] Char",
         [](const at::Tensor &t) { return t.to(at::kFloat); }},
    };
    for (const Case &c : cases) {
        DYNAMIC_SECTION(c.what) {
            test::ScratchArtifact art(source);
            auto changed = original;
            changed[c.name] = c.change(original.at(c.name));
            test::write_safetensors(art.file("weights.safetensors"), changed);
            art.rehash("weights.safetensors");  // the hash matches: only the loader's checks stand in the way
            gpt_model *model = nullptr;
            CHECK(gpt_model_load(art.dir().c_str(), nullptr, &model) == GPT_ERR_ARTIFACT_INVALID);
            CHECK(model == nullptr);
            CHECK(test::error_mentions(c.name));
            CHECK(test::error_mentions(c.expected));
        }
    }
    SECTION("a weight in rows where the artifact says blocks of 32 rows") {
        test::ScratchArtifact art(test::artifact("int8-blocks"));
        auto changed = test::read_safetensors(art.file("weights.safetensors"));
        const std::string name = "transformer.h.1.mlp.c_fc.weight";
        changed[name] = changed.at(name).transpose(1, 2).reshape({128, 32}).contiguous();
        test::write_safetensors(art.file("weights.safetensors"), changed);
        art.rehash("weights.safetensors");
        gpt_model *model = nullptr;
        CHECK(gpt_model_load(art.dir().c_str(), nullptr, &model) == GPT_ERR_ARTIFACT_INVALID);
        CHECK(test::error_mentions(name));
        CHECK(test::error_mentions("expected [4, 32, 32] Char"));
    }
    SECTION("a missing scale") {
        test::ScratchArtifact art(source);
        auto changed = original;
        changed.erase(kScale);
        test::write_safetensors(art.file("weights.safetensors"), changed);
        art.rehash("weights.safetensors");
        gpt_model *model = nullptr;
        CHECK(gpt_model_load(art.dir().c_str(), nullptr, &model) == GPT_ERR_ARTIFACT_INVALID);
        CHECK(test::error_mentions("lacks '" + kScale + "'"));
    }
}

TEST_CASE("a manifest's quantization and linear forms must agree", "[int8][artifact]") {
    test::ScratchArtifact art(test::artifact("int8"));
    auto m = art.manifest();
    SECTION("an unknown scheme") { m["weights"]["quantization"]["scheme"] = "int3"; }
    SECTION("int4 over int8 rows") { m["weights"]["quantization"]["scheme"] = "int4"; }
    SECTION("oneDNN's float form over int8 weights") { m["graphs"]["decode"]["linear"]["form"] = "onednn"; }
    SECTION("int8 weights read as float ones") { m["weights"].erase("quantization"); }
    SECTION("no layout") { m["weights"]["quantization"].erase("layout"); }
    SECTION("an unknown layout") { m["weights"]["quantization"]["layout"] = "columns"; }
    SECTION("the blocked form over rows") { m["graphs"]["decode_one"]["linear"]["form"] = "blocked"; }
    SECTION("rows read as blocks: the loader then finds every weight's shape wrong") {
        m["weights"]["quantization"]["layout"] = "blocks32";
        m["graphs"]["prefill"]["linear"]["form"] = "mm";
        m["graphs"]["decode"]["linear"]["form"] = "mm";
        m["graphs"]["decode_one"]["linear"]["form"] = "blocked";
    }
    art.write_manifest(m);
    gpt_model *model = nullptr;
    CHECK(gpt_model_load(art.dir().c_str(), nullptr, &model) == GPT_ERR_ARTIFACT_INVALID);
    CHECK(model == nullptr);
}

TEST_CASE("aten's int8 kernel cannot read weights in blocks of 32 rows", "[int8][artifact]") {
    test::ScratchArtifact art(test::artifact("int8-blocks"));
    auto m = art.manifest();
    m["graphs"]["decode"]["linear"]["form"] = "int8pack";
    art.write_manifest(m);
    gpt_model *model = nullptr;
    CHECK(gpt_model_load(art.dir().c_str(), nullptr, &model) == GPT_ERR_ARTIFACT_INVALID);
    CHECK(test::error_mentions("must be mm or blocked (the weights are int8 blocks of 32 rows)"));
}
