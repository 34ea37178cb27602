// manifest.cpp — parse manifest.json; every field is checked, nothing is assumed.
#include "formats/manifest.h"

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/log.h"
#include "formats/files.h"

namespace gpt {

namespace {

using nlohmann::json;

constexpr uint64_t kMaxSignatureBytes = 4096;

[[noreturn]] void invalid(const std::string &what) {
    fail(GPT_ERR_ARTIFACT_INVALID,
         "manifest.json: " + what + "; rebuild the artifact with `python -m gpt_aot compile`");
}

const json &field(const json &obj, const char *key) {
    if (!obj.is_object() || !obj.contains(key)) invalid(std::string("missing field '") + key + "'");
    return obj.at(key);
}

std::string string_field(const json &obj, const char *key) {
    const json &v = field(obj, key);
    if (!v.is_string()) invalid(std::string("field '") + key + "' must be a string");
    return v.get<std::string>();
}

// An integer in [1, max]; compared as a JSON number, so no value narrows into the range.
int32_t bounded_int(const json &obj, const char *key, int32_t max) {
    const json &v = field(obj, key);
    if (!v.is_number_integer() || v < 1 || v > max)
        invalid(std::string("field '") + key + "' must be an integer from 1 to " + std::to_string(max));
    return v.get<int32_t>();
}

double non_negative_number(const json &obj, const char *key) {
    const json &v = field(obj, key);
    if (!v.is_number() || v.get<double>() < 0) invalid(std::string("field '") + key + "' must be a number >= 0");
    return v.get<double>();
}

// A file name inside the artifact directory: no separators, no "..".
const std::string &plain_name(const std::string &name) {
    if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos ||
        name.find('\\') != std::string::npos)
        invalid("file name '" + name + "' must be a plain name inside the artifact");
    return name;
}

std::string file_name(const json &obj, const char *key) { return plain_name(string_field(obj, key)); }

GraphSpec graph_spec(const json &graphs, const char *name) {
    const json &g = field(graphs, name);
    return GraphSpec{file_name(g, "file"), bounded_int(g, "max_batch", kMaxBatch), {}, {}};
}

// A non-empty list of strings.
std::vector<std::string> string_list(const json &obj, const char *key, const std::string &what) {
    const json &list = field(obj, key);
    if (!list.is_array() || list.empty()) invalid("'" + what + "' must be a non-empty list");
    std::vector<std::string> out;
    for (const auto &item : list) {
        if (!item.is_string()) invalid("'" + what + "' must hold strings");
        out.push_back(item.get<std::string>());
    }
    return out;
}

// The linear forms that read each layout of weights: float ones (""), int8 rows, int8 blocks of 32 rows,
// int4 blocks of 64 rows.
const char *linear_forms_for(const std::string &weight_layout) {
    if (weight_layout == "rows") return "mm, reduction, int8pack, kernel, q8 or q8panels (the weights are int8 rows)";
    if (weight_layout == "blocks32") return "mm or blocked (the weights are int8 blocks of 32 rows)";
    if (weight_layout == "blocks64")
        return "mm, int4pack, kernel or int4panels (the weights are int4 blocks of 64 rows)";
    return "mm, reduction, onednn, kernel or panels";
}

bool form_reads_weights(const std::string &form, const std::string &weight_layout) {
    if (weight_layout == "rows")
        return form == "mm" || form == "reduction" || form == "int8pack" || form == "kernel" || form == "q8" ||
               form == "q8panels";
    if (weight_layout == "blocks32") return form == "mm" || form == "blocked";
    if (weight_layout == "blocks64")
        return form == "mm" || form == "int4pack" || form == "kernel" || form == "int4panels";
    return form == "mm" || form == "reduction" || form == "onednn" || form == "kernel" || form == "panels";
}

GraphSpec inference_graph_spec(const json &graphs, const char *name, const std::string &weight_layout) {
    GraphSpec spec = graph_spec(graphs, name);
    const json &linear = field(field(graphs, name), "linear");
    spec.linear = string_field(linear, "form");
    if (!form_reads_weights(spec.linear, weight_layout))
        invalid("'graphs." + std::string(name) + ".linear.form' must be " + linear_forms_for(weight_layout));
    // onednn, panels, q8panels and int4panels list the weights they read packed; int4pack too, except in artifacts
    // compiled before the runtime packed them for the host (their graphs read the stored weights: exec/model.cpp
    // checks the host).
    if (spec.linear == "onednn" || spec.linear == "panels" || spec.linear == "q8panels" ||
        spec.linear == "int4panels" || (spec.linear == "int4pack" && linear.contains("packed"))) {
        const auto packed = string_list(linear, "packed", "graphs." + std::string(name) + ".linear.packed");
        spec.packed.insert(packed.begin(), packed.end());
    }
    return spec;
}

// The CPU target's word lists: bounded, and each word printable without spaces, so a message quoting one
// cannot carry control characters or another line.
std::string isa_word(const json &item, const std::string &what) {
    if (!item.is_string()) invalid("'" + what + "' must hold strings");
    std::string word = item.get<std::string>();
    bool printable = !word.empty() && word.size() <= kMaxIsaWordBytes;
    for (char c : word) printable = printable && c > ' ' && c < 0x7f;
    if (!printable) invalid("'" + what + "' words must be 1 to 64 printable characters without spaces");
    return word;
}

std::vector<std::string> isa_words(const json &target, const char *key) {
    const std::string what = std::string("target.") + key;
    const json &list = field(target, key);
    if (!list.is_array() || list.size() > kMaxIsaEntries)
        invalid("'" + what + "' must be a list of at most " + std::to_string(kMaxIsaEntries) + " strings");
    std::vector<std::string> out;
    for (const auto &item : list) out.push_back(isa_word(item, what));
    return out;
}

// "kernels": {"library": "gpt_kernels", "version": N, "operators": ["gpt_kernels::<name>", ...]}.
KernelsSpec kernels_spec(const json &k) {
    if (string_field(k, "library") != "gpt_kernels") invalid("'kernels.library' must be 'gpt_kernels'");
    const json &version = field(k, "version");
    if (!version.is_number_unsigned() || version < 1 || version > 1000000)
        invalid("'kernels.version' must be an integer from 1 to 1000000");
    KernelsSpec spec;
    spec.version = version.get<int64_t>();
    const json &operators = field(k, "operators");
    if (!operators.is_array() || operators.empty() || operators.size() > kMaxKernelOperators)
        invalid("'kernels.operators' must list 1 to " + std::to_string(kMaxKernelOperators) + " operators");
    for (const auto &item : operators) {
        const std::string name = isa_word(item, "kernels.operators");
        if (name.rfind("gpt_kernels::", 0) != 0 || name.size() == std::string("gpt_kernels::").size())
            invalid("'kernels.operators' entries must be 'gpt_kernels::<name>'");
        spec.operators.push_back(name);
    }
    return spec;
}

bool is_hex_sha256(const std::string &s) {
    if (s.size() != 64) return false;
    for (char c : s)
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
    return true;
}

TrainingSpec training_spec(const json &t, const std::string &dtype, int format_version) {
    TrainingSpec spec;
    spec.attention = string_field(t, "attention");
    spec.param_names = string_list(t, "param_names", "training.param_names");
    spec.master_dtype = format_version < 13 ? dtype : string_field(t, "master_dtype");
    if (format_version >= 13 && spec.master_dtype != "float32") invalid("'training.master_dtype' must be 'float32'");
    const json &opt = field(t, "optimizer");
    if (string_field(opt, "kind") != "adamw") invalid("'training.optimizer.kind' must be 'adamw'");
    spec.optimizer = {non_negative_number(opt, "weight_decay"), non_negative_number(opt, "beta1"),
                      non_negative_number(opt, "beta2"), non_negative_number(opt, "eps"),
                      non_negative_number(opt, "grad_clip")};
    spec.train_step = graph_spec(t, "train_step");
    spec.eval_loss = graph_spec(t, "eval_loss");
    spec.adamw = graph_spec(t, "adamw");
    return spec;
}

}  // namespace

Manifest read_manifest(const std::filesystem::path &dir, const std::vector<PublicKey> &trusted_keys) {
    const auto path = dir / kManifestFile;
    // manifest.json and manifest.sig are read as the artifact's other files are: regular files in `dir`, never links.
    const std::string reason = unreadable_reason(path.string(), Links::refuse);
    if (reason == "is missing")
        fail(GPT_ERR_ARTIFACT_NOT_FOUND, "no " + std::string(kManifestFile) + " in '" + dir.string() +
                                             "': point at an artifact directory such as "
                                             "model_artifacts/<name>/cpu");
    if (!reason.empty()) fail(GPT_ERR_ARTIFACT_INVALID, "'" + path.string() + "' " + reason);
    // Read once: the bytes whose signature is checked are the bytes parsed.
    const Bytes text = read_file(path.string(), kMaxManifestBytes, Links::refuse);
    if (text.size() > kMaxManifestBytes) invalid("file larger than 16 MiB");

    if (trusted_keys.empty()) {
        log(GPT_LOG_INFO, "signatures are off (no trusted keys configured): checking sha256 only");
    } else {
        const auto sig_path = dir / kSignatureFile;
        const std::string sig_reason = unreadable_reason(sig_path.string(), Links::refuse);
        if (sig_reason == "is missing")
            fail(GPT_ERR_ARTIFACT_SIGNATURE, "'" + dir.string() + "' is not signed (no " + kSignatureFile +
                                                 ") and trusted keys are configured: sign it with "
                                                 "`python -m gpt_aot sign`, or load it without trusted keys");
        if (!sig_reason.empty()) fail(GPT_ERR_ARTIFACT_SIGNATURE, "'" + sig_path.string() + "' " + sig_reason);
        const Bytes sig = read_file(sig_path.string(), kMaxSignatureBytes, Links::refuse);
        if (sig.size() > kMaxSignatureBytes)
            fail(GPT_ERR_ARTIFACT_SIGNATURE, std::string(kSignatureFile) + " is larger than 4 KiB");
        const std::string key_id = verify_manifest_signature(std::string(sig.begin(), sig.end()), text, trusted_keys);
        log(GPT_LOG_INFO, "manifest.json is signed by trusted key " + key_id);
    }
    return parse_manifest(text);
}

nlohmann::json parse_manifest_json(const Bytes &text) {
    if (text.size() > kMaxManifestBytes) invalid("file larger than 16 MiB");
    // Refused while parsing, before the nesting is built: 16 MiB of nested arrays would otherwise cost about 1 GB.
    const json::parser_callback_t limit_depth = [](int depth, json::parse_event_t event, json &) {
        if ((event == json::parse_event_t::object_start || event == json::parse_event_t::array_start) &&
            depth >= kMaxManifestDepth)
            invalid("nests deeper than " + std::to_string(kMaxManifestDepth) + " levels");
        return true;
    };
    json j = json::parse(text.begin(), text.end(), limit_depth, /*allow_exceptions=*/false);
    if (j.is_discarded()) invalid("not valid JSON");
    if (!j.is_object()) invalid("top level must be an object");
    return j;
}

Manifest parse_manifest(const Bytes &text) {
    const json j = parse_manifest_json(text);

    if (string_field(j, "format") != kFormatName) invalid("'format' is not '" + std::string(kFormatName) + "'");
    const json &version = field(j, "format_version");
    if (!version.is_number_integer()) invalid("'format_version' must be an integer");
    // Compared as JSON numbers: narrowing first would let 4294967297 pass for 1.
    if (version < kOldestFormatVersion || version > kFormatVersion)
        fail(GPT_ERR_ARTIFACT_VERSION, "artifact format version " + version.dump() + ", this runtime reads versions " +
                                           std::to_string(kOldestFormatVersion) + " to " +
                                           std::to_string(kFormatVersion) +
                                           ": recompile the artifact with a matching gpt_aot or upgrade the runtime");
    Manifest m;
    m.format_version = version.get<int>();

    m.name = string_field(j, "name");
    m.torch_version = string_field(j, "torch_version");
    m.dtype = string_field(j, "dtype");
    m.attention = string_field(field(j, "attention"), "backend");
    m.decode_attention = string_field(field(field(j, "attention"), "decode"), "backend");

    const json &target = field(j, "target");
    m.target.device = string_field(target, "device");
    m.target.arch = string_field(target, "arch");
    if (m.target.device == "cpu") {
        m.target.isa = string_field(target, "isa");
        m.target.isa_level = isa_word(field(target, "isa_level"), "target.isa_level");
        m.target.isa_extensions = isa_words(target, "isa_extensions");
        m.target.isa_flags = isa_words(target, "isa_flags");
    } else if (target.contains("cuda_version")) {
        m.target.cuda_version = isa_word(field(target, "cuda_version"), "target.cuda_version");
    }

    const json &model = field(j, "model");
    m.model.block_size = bounded_int(model, "block_size", kMaxBlockSize);
    m.model.vocab_size = bounded_int(model, "vocab_size", kMaxVocab);
    m.model.padded_vocab_size = bounded_int(model, "padded_vocab_size", kMaxVocab);
    m.model.n_layer = bounded_int(model, "n_layer", kMaxLayers);
    m.model.n_head = bounded_int(model, "n_head", kMaxHeads);
    m.model.n_embd = bounded_int(model, "n_embd", kMaxEmbd);
    if (!field(model, "bias").is_boolean()) invalid("field 'bias' must be true or false");
    m.model.bias = model.at("bias").get<bool>();
    // Optional: manifests written before the field ran nanoGPT's exact GELU.
    if (model.contains("gelu")) {
        m.model.gelu = string_field(model, "gelu");
        if (m.model.gelu != "exact" && m.model.gelu != "tanh") invalid("field 'gelu' must be 'exact' or 'tanh'");
    }
    if (m.model.n_embd % m.model.n_head != 0) invalid("n_embd must be divisible by n_head");
    if (m.model.vocab_size > m.model.padded_vocab_size) invalid("vocab_size exceeds padded_vocab_size");

    const json &weights = field(j, "weights");
    m.weights_file = file_name(weights, "file");
    const json &tied = field(weights, "tied");
    if (!tied.is_object()) invalid("'weights.tied' must be an object");
    for (const auto &[alias, target_name] : tied.items()) {
        if (!target_name.is_string()) invalid("'weights.tied' values must be strings");
        m.tied[alias] = target_name.get<std::string>();
    }
    if (weights.contains("quantization")) {
        const json &quantization = field(weights, "quantization");
        m.quantization = string_field(quantization, "scheme");
        m.weight_layout = string_field(quantization, "layout");
        if (m.quantization == "int8") {
            if (m.weight_layout != "rows" && m.weight_layout != "blocks32")
                invalid("'weights.quantization.layout' of int8 weights must be 'rows' or 'blocks32'");
        } else if (m.quantization == "int4") {
            if (m.weight_layout != "blocks64")
                invalid("'weights.quantization.layout' of int4 weights must be 'blocks64'");
            const json &group = field(quantization, "group_size");
            // The int4 kernel's group sizes; each linear's inputs must also split into whole groups (weights.cpp).
            if (group != 32 && group != 64 && group != 128 && group != 256)
                invalid("'weights.quantization.group_size' must be 32, 64, 128 or 256");
            m.int4_group_size = group.get<int64_t>();
            if (m.format_version < kInt4PairBlocksFormatVersion)
                fail(GPT_ERR_ARTIFACT_VERSION,
                     "int4 artifact of format version " + std::to_string(m.format_version) +
                         " stores its (scale, zero) pairs group by group; this runtime reads int4 artifacts of "
                         "version " +
                         std::to_string(kInt4PairBlocksFormatVersion) +
                         " (pairs block by block): recompile the artifact with a matching gpt_aot");
        } else {
            invalid("'weights.quantization.scheme' must be 'int8' or 'int4'");
        }
    }

    const json &graphs = field(j, "graphs");
    m.prefill = inference_graph_spec(graphs, "prefill", m.weight_layout);
    m.decode = inference_graph_spec(graphs, "decode", m.weight_layout);
    m.decode_one = inference_graph_spec(graphs, "decode_one", m.weight_layout);
    if (m.decode_one.max_batch != 1) invalid("'graphs.decode_one.max_batch' must be 1");
    // Optional: artifacts compiled before it append tokens by decode steps (exec/session.h).
    if (graphs.contains("extend")) m.extend = inference_graph_spec(graphs, "extend", m.weight_layout);
    if (graphs.contains("mixed")) m.mixed = inference_graph_spec(graphs, "mixed", m.weight_layout);

    const json &tokenizer = field(j, "tokenizer");
    m.tokenizer_kind = string_field(tokenizer, "kind");
    m.tokenizer_file = file_name(tokenizer, "file");

    const json &golden = field(j, "golden");
    m.golden_file = file_name(golden, "file");
    m.golden_atol = non_negative_number(golden, "atol");
    m.golden_rtol = non_negative_number(golden, "rtol");

    if (j.contains("training")) {
        if (!m.quantization.empty())
            invalid("a quantized artifact has no training graphs: its weights are " + m.quantization);
        m.training = training_spec(j.at("training"), m.dtype, m.format_version);
    }

    if (j.contains("kernels")) {
        if (m.format_version < 14) invalid("'kernels' needs format version 14 or later");
        m.kernels = kernels_spec(j.at("kernels"));
    }

    // Optional: the cache is in `dtype` without it.
    if (j.contains("kv_cache")) {
        if (m.format_version < kKvCacheFormatVersion)
            invalid("'kv_cache' needs format version " + std::to_string(kKvCacheFormatVersion) + " or later");
        const json &kv_cache = field(j, "kv_cache");
        m.kv_cache_dtype = string_field(kv_cache, "dtype");
        if (m.kv_cache_dtype != "int8") invalid("'kv_cache.dtype' must be 'int8'");
        if (field(kv_cache, "position_bytes") != m.model.head_dim() + kKvInt8ScaleBytes)
            invalid("'kv_cache.position_bytes' of an int8 cache must be head_dim + " +
                    std::to_string(kKvInt8ScaleBytes));
        if (m.target.device != "cpu") invalid("an int8 KV cache is read by the CPU kernel library alone");
        // Only the library's attention reads it: the graphs hold no other reader (pipeline.check_kv_dtype).
        if (!m.kernels) invalid("an int8 KV cache needs the kernel library's attention ('kernels')");
    }

    const json &files = field(j, "files");
    if (!files.is_object() || files.empty()) invalid("'files' must list every file with its sha256");
    for (const auto &[name, entry] : files.items()) {
        plain_name(name);
        FileEntry fe;
        fe.sha256 = string_field(entry, "sha256");
        if (!is_hex_sha256(fe.sha256)) invalid("sha256 of '" + name + "' is not 64 lowercase hex digits");
        const json &size = field(entry, "size");
        if (!size.is_number_unsigned()) invalid("size of '" + name + "' must be a non-negative integer");
        fe.size = size.get<uint64_t>();
        m.files[name] = fe;
    }
    std::vector<const std::string *> used = {&m.weights_file,    &m.prefill.file,   &m.decode.file,
                                             &m.decode_one.file, &m.tokenizer_file, &m.golden_file};
    if (m.extend) used.push_back(&m.extend->file);
    if (m.mixed) used.push_back(&m.mixed->file);
    if (m.training) {
        for (const GraphSpec *g : {&m.training->train_step, &m.training->eval_loss, &m.training->adamw})
            used.push_back(&g->file);
    }
    std::set<std::string> seen;
    for (const std::string *f : used) {
        if (m.files.count(*f) == 0) invalid("'" + *f + "' is used but has no entry in 'files'");
        if (!seen.insert(*f).second)
            invalid("'" + *f + "' is named for two parts of the artifact; each has its own file");
    }
    return m;
}

}  // namespace gpt
