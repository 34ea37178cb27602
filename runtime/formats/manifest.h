// manifest.h — the artifact's manifest.json, parsed and checked for shape.
// Written by aot/gpt_aot/artifact/manifest.py; the format is described in docs/ARCHITECTURE.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "formats/files.h"
#include "formats/signature.h"

namespace gpt {

inline constexpr const char *kManifestFile = "manifest.json";
inline constexpr const char *kFormatName = "gpt-aot";
// 14: "kernels", the kernel library's operators the graphs call; 15: int4 (scale, zero) pairs stored block by block;
// 16: "kv_cache", an int8 KV cache (history: aot/gpt_aot/artifact/manifest.py).
inline constexpr int kFormatVersion = 16;
inline constexpr int kKvCacheFormatVersion = 16;
// An int8 KV cache's position: head_dim int8 values, then their fp32 scale (kernels/cpu/kv_row_q8.h).
inline constexpr int kKvInt8ScaleBytes = 4;
// int4 artifacts before 15 store their pairs group by group, a layout this runtime no longer reads.
inline constexpr int kInt4PairBlocksFormatVersion = 15;
// Also read: 12 is 13 without training.master_dtype, whose adamw graph takes the model's dtype.
inline constexpr int kOldestFormatVersion = 12;

struct FileEntry {
    std::string sha256;  // lowercase hex
    uint64_t size = 0;
};

// Bounds on every size a manifest gives, far above any real model's (GPT-3 175B: 96 layers and heads, width
// 12 288; vocabularies of a few 100 000 tokens, contexts of 10^6) and checked as the manifest is parsed,
// before anything is sized from them: the loader lists every weight's name per layer before it compares the
// weights file with them, and sessions size caches and logits from them (a manifest's n_layer of 2^31 - 1
// once grew the loader by ~340 MB/s until it was killed).
constexpr int32_t kMaxLayers = 4096;
constexpr int32_t kMaxHeads = 4096;
constexpr int32_t kMaxEmbd = 1 << 17;       // n_embd
constexpr int32_t kMaxBlockSize = 1 << 24;  // positions
constexpr int32_t kMaxVocab = 1 << 24;      // vocab_size and padded_vocab_size
constexpr int32_t kMaxBatch = 4096;         // every graph's max_batch

struct ModelConfig {
    int32_t block_size = 0;
    int32_t vocab_size = 0;         // ids the tokenizer produces
    int32_t padded_vocab_size = 0;  // rows of the logits
    int32_t n_layer = 0;
    int32_t n_head = 0;
    int32_t n_embd = 0;
    bool bias = false;
    std::string gelu = "exact";  // the MLP's GELU the graphs compute: "exact" or "tanh" (informative)
    int32_t head_dim() const { return n_embd / n_head; }
};

struct TargetSpec {
    std::string device;  // "cpu" | "cuda"
    std::string arch;    // "x86_64" | "sm_90" | ...
    // CPU only:
    std::string isa;                          // Inductor's vector ISA, e.g. "avx2" (informative)
    std::string isa_level;                    // "native" or an x86-64 psABI level, e.g. "x86-64-v3"
    std::vector<std::string> isa_extensions;  // /proc/cpuinfo flags the code may need, sorted: "avx2", "fma", ...
    std::vector<std::string> isa_flags;       // the compiler's -march/-m flags they were derived from
    // CUDA only: the CUDA version of the torch that compiled the artifact, e.g. "13.0" ("" if not recorded).
    std::string cuda_version;
};

// Bounds on the CPU target's lists: a real one holds some dozens of short words.
constexpr size_t kMaxIsaEntries = 256;
constexpr size_t kMaxIsaWordBytes = 64;

struct GraphSpec {
    std::string file;
    int32_t max_batch = 0;
    // inference graphs: their linears' form, "mm", "reduction", "onednn", "kernel" (the kernel library's linear),
    // "panels" (the same on bf16 weights packed in panels), "int8pack", "blocked", "int4pack", "q8" (the kernel
    // library's int8 linear with the activations rounded to int8 blocks), "q8panels" (the same on int8 weights
    // packed in q8 panels) or "int4panels" (the kernel library's int4 linear on weights packed in u4 panels)
    std::string linear;
    // onednn, panels, q8panels, int4panels and int4pack forms: the weights bound packed for the form's kernel
    // (exec/packed_weights.h)
    std::set<std::string> packed;
};

struct OptimizerSpec {
    double weight_decay = 0, beta1 = 0, beta2 = 0, eps = 0, grad_clip = 0;
};

// Present when the artifact was compiled with --train.
struct TrainingSpec {
    std::string attention;                 // kernel in train_step (may differ from inference)
    std::vector<std::string> param_names;  // order of train_step's gradients and adamw's tensors
    // adamw's tensors (master weights, gradients, moments): "float32"; the model's dtype for version 12
    // (a bf16 artifact then trains its bf16 weights in place)
    std::string master_dtype;
    OptimizerSpec optimizer;
    GraphSpec train_step;
    GraphSpec eval_loss;
    GraphSpec adamw;
};

// The project's kernel library (kernels/kernels.h) as an artifact needs it: its graphs call these operators (as
// the C functions of kernels/c_shims.h), as the library of `version` defines them.
struct KernelsSpec {
    int64_t version = 0;
    std::vector<std::string> operators;  // "gpt_kernels::<name>"
};
constexpr size_t kMaxKernelOperators = 64;

struct Manifest {
    int format_version = 0;
    std::string name;
    std::string torch_version;
    std::string dtype;
    std::string attention;         // the prefill's kernel
    std::string decode_attention;  // picked apart: one query over the cache favours other kernels
    TargetSpec target;
    ModelConfig model;
    std::string weights_file;
    // "" when the weights are in `dtype`; "int8": every linear's weight is int8 with a per-row
    // `<name>_scale` in `dtype` (exec/weights.cpp), inference only, laid out as `weight_layout`:
    // "rows" ([rows, cols]) or "blocks32" ([ceil(rows / 32), cols, 32]: 32 rows' weights of one
    // input side by side, for the blocked linear form). "int4": every linear's weight is two int4
    // values a byte in "blocks64" (aten's CPU packing: [ceil(rows / 64) * 64, cols / 2]) with
    // `<name>_scale_zero` ([padded rows / 64, cols / group, 64, 2] in `dtype`) and `<name>_group_size`.
    std::string quantization;
    std::string weight_layout;  // "" for float weights
    int64_t int4_group_size = 0;
    std::map<std::string, std::string> tied;  // alias name -> stored name
    GraphSpec prefill;
    GraphSpec decode;
    GraphSpec decode_one;  // batch 1: what a step of one sequence runs
    // Several tokens appended to each row's cache at its own position; absent from artifacts compiled before it.
    std::optional<GraphSpec> extend;
    // Tokens of any sequences in one forward, each to its own cache row and position (decode steps beside prompt
    // pieces); only where decode's attention reads each row's cache in place. Optional, as extend.
    std::optional<GraphSpec> mixed;
    std::string tokenizer_kind;
    std::string tokenizer_file;
    std::string golden_file;
    double golden_atol = 0;
    double golden_rtol = 0;
    std::optional<TrainingSpec> training;
    std::optional<KernelsSpec> kernels;  // from format 14, where a graph calls the kernel library
    // "" for a KV cache in `dtype`; "int8" (format 16): each position head_dim int8 values and their fp32 scale.
    std::string kv_cache_dtype;
    std::map<std::string, FileEntry> files;
};

// A manifest is a few KiB; anything near this is hostile.
constexpr uint64_t kMaxManifestBytes = 16u << 20;
// The format nests 6 levels deep (graphs.<name>.inputs[i].shape[j]); deeper is refused while parsing.
constexpr int kMaxManifestDepth = 16;

// Reads `dir/manifest.json` once; with trusted keys, checks manifest.sig over
// those exact bytes (GPT_ERR_ARTIFACT_SIGNATURE) before parsing them. Without
// keys it logs that signatures are off. Both must be regular files in `dir`, not
// links (what they are is named). Throws gpt::Error with
// GPT_ERR_ARTIFACT_NOT_FOUND, _INVALID, _VERSION or _SIGNATURE.
Manifest read_manifest(const std::filesystem::path &dir, const std::vector<PublicKey> &trusted_keys);

// manifest.json's bytes as a JSON object: more than kMaxManifestBytes, nesting deeper than
// kMaxManifestDepth (refused as soon as the parser gets there), invalid JSON or another top level
// is GPT_ERR_ARTIFACT_INVALID. The one way the runtime parses a manifest.
nlohmann::json parse_manifest_json(const Bytes &text);

// Parses and validates manifest.json's bytes (no file access; fuzz/fuzz_manifest.cpp).
Manifest parse_manifest(const Bytes &text);

}  // namespace gpt
