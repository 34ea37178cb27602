// bf16 artifacts whose graphs run the panels linear form (tiny-bf16-panels: tiny-math's model in bf16, every
// graph's linears the kernel library's linear on weights packed in panels at load, the tied head on its rows):
// it loads and matches its golden vector, samples what the same weights under PyTorch's own linear
// (tiny-bf16-train) sample, holds its file's bytes (each packed copy replaces its stored weight, the tied head is
// not copied), and a manifest that packs a weight the form cannot read is refused before any graph runs.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "test_support.h"

TEST_CASE("a panels artifact matches its golden vector and holds its file's bytes, the stored linears replaced",
          "[panels][memory]") {
    const auto dir = test::artifact("bf16-panels");
    test::Model model(dir);
    REQUIRE(model.status == GPT_OK);
    const auto [manifest, weights, stored] = test::stored_weights(dir);
    CHECK(manifest["graphs"]["decode_one"]["linear"]["form"] == "panels");
    CHECK(manifest["weights"]["tied"]["lm_head.weight"] == "transformer.wte.weight");
    const double err = test::golden_error(model.handle);
    CHECK(err >= 0);
    CHECK(err <= manifest["golden"]["atol"].get<double>());
    // Packed copies as large as the weights they replace, which are freed (no training graphs to keep them for).
    CHECK(test::loaded_weights_bytes(dir) == stored);
}

TEST_CASE("a panels artifact samples what the same bf16 weights sample under PyTorch's linear", "[panels]") {
    test::Model panels(test::artifact("bf16-panels")), plain(test::artifact("bf16-train"));
    REQUIRE(panels.status == GPT_OK);
    REQUIRE(plain.status == GPT_OK);
    const std::vector<gpt_token> prompt = {1, 2, 3, 4, 5};
    for (const uint64_t seed : {1u, 2u, 3u}) {
        gpt_status a = GPT_OK, b = GPT_OK;
        const auto got = test::try_generate(panels.handle, prompt, seed, 12, &a);
        const auto want = test::try_generate(plain.handle, prompt, seed, 12, &b);
        REQUIRE(a == GPT_OK);
        REQUIRE(b == GPT_OK);
        CAPTURE(seed);
        CHECK(got == want);
    }
}

TEST_CASE("a manifest that packs in panels a weight the form cannot read is refused, naming it", "[panels][artifact]") {
    test::ScratchArtifact art(test::artifact("bf16-panels"));
    auto manifest = art.manifest();
    // A LayerNorm gain is no 2-D weight: no panel holds it.
    manifest["graphs"]["prefill"]["linear"]["packed"].push_back("transformer.ln_f.weight");
    art.write_manifest(manifest);
    gpt_model *model = nullptr;
    CHECK(gpt_model_load(art.dir().c_str(), nullptr, &model) == GPT_ERR_ARTIFACT_INVALID);
    CHECK(model == nullptr);
    CHECK(test::error_mentions("packs 'transformer.ln_f.weight' in panels"));
}
