// fuzz_manifest.cpp — manifest.json bytes into parse_manifest (runtime/formats/manifest.cpp).
#include <nlohmann/json.hpp>

#include <cstdint>

#include "base/error.h"
#include "formats/manifest.h"
#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    gpt::Manifest m;
    try {
        m = gpt::parse_manifest(gpt::Bytes(data, data + size));
    } catch (const gpt::Error &) {
        return 0;
    }
    // What the loader relies on once the manifest is accepted.
    const auto j = nlohmann::json::parse(data, data + size);  // valid: parse_manifest accepted it
    FUZZ_CHECK(j.at("format") == gpt::kFormatName && j.at("format_version") >= gpt::kOldestFormatVersion &&
               j.at("format_version") <= gpt::kFormatVersion && m.format_version == j.at("format_version"));
    const gpt::ModelConfig &c = m.model;
    FUZZ_CHECK(c.n_head > 0 && c.n_embd % c.n_head == 0 && c.head_dim() > 0);
    FUZZ_CHECK(c.vocab_size > 0 && c.vocab_size <= c.padded_vocab_size && c.block_size > 0 && c.n_layer > 0);
    FUZZ_CHECK(m.prefill.max_batch > 0 && m.decode.max_batch > 0);
    // Every size bounded before anything is sized from it (the loader lists names per layer, sessions size caches).
    FUZZ_CHECK(c.n_layer <= gpt::kMaxLayers && c.n_head <= gpt::kMaxHeads && c.n_embd <= gpt::kMaxEmbd &&
               c.block_size <= gpt::kMaxBlockSize && c.padded_vocab_size <= gpt::kMaxVocab);
    for (const gpt::GraphSpec *g : {&m.prefill, &m.decode, &m.decode_one}) FUZZ_CHECK(g->max_batch <= gpt::kMaxBatch);
    for (const std::string *f : {&m.weights_file, &m.prefill.file, &m.decode.file, &m.tokenizer_file, &m.golden_file})
        FUZZ_CHECK(m.files.count(*f) == 1);
    for (const auto &[name, entry] : m.files) {
        FUZZ_CHECK(!name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos);
        FUZZ_CHECK(entry.sha256.size() == 64);
    }
    return 0;
}
