// fuzz_checkpoint.cpp — a trainer checkpoint file into the checks that
// gpt_trainer_load makes before it touches tensors: the safetensors layout, then
// the metadata (runtime/formats/checkpoint_format.cpp).
#include <cstdint>

#include "base/error.h"
#include "formats/checkpoint_format.h"
#include "formats/safetensors_layout.h"
#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    gpt::SafetensorsLayout layout;
    try {
        layout = gpt::parse_safetensors_layout(data, size, "fuzz.ckpt");
    } catch (const gpt::Error &) {
        return 0;
    }
    // The model the checkpoint claims to be for, so the metadata checks get past the shape comparison.
    gpt::StringMap model;
    for (const auto &[key, value] : layout.metadata)
        if (key.rfind("model.", 0) == 0) model[key] = value;
    try {
        const int64_t iteration = gpt::check_checkpoint_metadata(layout.metadata, model, "fuzz.ckpt");
        FUZZ_CHECK(iteration >= 0);
        FUZZ_CHECK(layout.metadata.at("format") == gpt::kCheckpointFormat);
    } catch (const gpt::Error &e) {
        FUZZ_CHECK(e.status() == GPT_ERR_ARTIFACT_INVALID || e.status() == GPT_ERR_ARTIFACT_VERSION);
    }
    // A model of another shape is always refused.
    model["model.n_layer"] = "not a layer count";
    try {
        gpt::check_checkpoint_metadata(layout.metadata, model, "fuzz.ckpt");
        FUZZ_CHECK(false);
    } catch (const gpt::Error &e) {
        FUZZ_CHECK(e.status() != GPT_OK);
    }
    return 0;
}
