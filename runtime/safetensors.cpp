// safetensors.cpp — every size and offset is checked with overflow-safe arithmetic.
#include "safetensors.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <vector>

#include "error.h"

namespace gpt {

namespace {

constexpr uint64_t kMaxHeaderBytes = 100u << 20;  // as the reference implementation

struct DtypeInfo {
    const char *name;
    at::ScalarType type;
    uint64_t bytes;
};

constexpr DtypeInfo kDtypes[] = {
    {"F64", at::kDouble, 8}, {"F32", at::kFloat, 4}, {"F16", at::kHalf, 2},  {"BF16", at::kBFloat16, 2},
    {"I64", at::kLong, 8},   {"I32", at::kInt, 4},   {"I16", at::kShort, 2}, {"I8", at::kChar, 1},
    {"U8", at::kByte, 1},    {"BOOL", at::kBool, 1},
};

struct Entry {
    std::string name;
    const DtypeInfo *dtype;
    std::vector<int64_t> shape;
    uint64_t begin, end;
};

const DtypeInfo *find_dtype(const std::string &name) {
    for (const auto &d : kDtypes)
        if (name == d.name) return &d;
    return nullptr;
}

// Multiplies without overflow; false if the product would not fit.
bool checked_mul(uint64_t a, uint64_t b, uint64_t *out) {
    if (a != 0 && b > UINT64_MAX / a) return false;
    *out = a * b;
    return true;
}

[[noreturn]] void invalid_file(const std::string &what, const std::string &why) {
    fail(GPT_ERR_ARTIFACT_INVALID, what + ": invalid safetensors (" + why + ")");
}

}  // namespace

std::map<std::string, at::Tensor> parse_safetensors(const unsigned char *data, size_t size, const std::string &what,
                                                    std::map<std::string, std::string> *metadata) {
    if (size < 8) invalid_file(what, "shorter than its 8-byte header length");
    uint64_t header_len = 0;
    for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | data[i];  // little-endian
    if (header_len > kMaxHeaderBytes) invalid_file(what, "header larger than 100 MiB");
    if (header_len > size - 8) invalid_file(what, "header runs past the end of the file");

    const char *header_text = reinterpret_cast<const char *>(data + 8);
    auto header = nlohmann::json::parse(header_text, header_text + header_len, nullptr, false);
    if (header.is_discarded() || !header.is_object()) invalid_file(what, "header is not a JSON object");

    const uint64_t data_size = size - 8 - header_len;
    const unsigned char *region = data + 8 + header_len;
    std::vector<Entry> entries;
    for (const auto &[name, spec] : header.items()) {
        if (name == "__metadata__") {
            if (!spec.is_object()) invalid_file(what, "__metadata__ is not an object");
            for (const auto &[key, value] : spec.items()) {
                if (!value.is_string()) invalid_file(what, "__metadata__ values must be strings");
                if (metadata != nullptr) (*metadata)[key] = value.get<std::string>();
            }
            continue;
        }
        if (!spec.is_object() || !spec.contains("dtype") || !spec.contains("shape") || !spec.contains("data_offsets"))
            invalid_file(what, "entry '" + name + "' lacks dtype, shape or data_offsets");
        const auto &dtype_name = spec["dtype"];
        const DtypeInfo *dtype = dtype_name.is_string() ? find_dtype(dtype_name.get<std::string>()) : nullptr;
        if (dtype == nullptr) invalid_file(what, "entry '" + name + "' has an unsupported dtype");
        const auto &shape_json = spec["shape"];
        const auto &offsets = spec["data_offsets"];
        if (!shape_json.is_array() || shape_json.size() > 8) invalid_file(what, "entry '" + name + "' has a bad shape");
        if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
            !offsets[1].is_number_unsigned())
            invalid_file(what, "entry '" + name + "' has bad data_offsets");
        Entry e{name, dtype, {}, offsets[0].get<uint64_t>(), offsets[1].get<uint64_t>()};
        uint64_t bytes = dtype->bytes;
        for (const auto &dim : shape_json) {
            if (!dim.is_number_unsigned() || dim.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
                invalid_file(what, "entry '" + name + "' has a negative or huge dimension");
            if (!checked_mul(bytes, dim.get<uint64_t>(), &bytes))
                invalid_file(what, "entry '" + name + "' size overflows");
            e.shape.push_back(static_cast<int64_t>(dim.get<uint64_t>()));
        }
        if (e.begin > e.end || e.end > data_size) invalid_file(what, "entry '" + name + "' lies outside the data");
        if (e.end - e.begin != bytes)
            invalid_file(what, "entry '" + name + "' byte length disagrees with its shape and dtype");
        entries.push_back(std::move(e));
    }

    // The entries must tile the data region exactly: no overlap, no gap, no tail.
    std::vector<const Entry *> by_offset;
    by_offset.reserve(entries.size());
    for (const auto &e : entries) by_offset.push_back(&e);
    std::sort(by_offset.begin(), by_offset.end(), [](const Entry *a, const Entry *b) { return a->begin < b->begin; });
    uint64_t cursor = 0;
    for (const Entry *e : by_offset) {
        if (e->begin != cursor) invalid_file(what, "entry '" + e->name + "' overlaps another or leaves a gap");
        cursor = e->end;
    }
    if (cursor != data_size) invalid_file(what, "data region has trailing bytes");

    std::map<std::string, at::Tensor> tensors;
    for (const auto &e : entries) {
        at::Tensor t = at::empty(e.shape, at::TensorOptions().dtype(e.dtype->type));
        if (e.end > e.begin) std::memcpy(t.data_ptr(), region + e.begin, e.end - e.begin);
        tensors.emplace(e.name, std::move(t));
    }
    return tensors;
}

std::vector<unsigned char> serialize_safetensors(const std::map<std::string, at::Tensor> &tensors,
                                                 const std::map<std::string, std::string> &metadata) {
    nlohmann::json header = nlohmann::json::object();
    if (!metadata.empty()) header["__metadata__"] = metadata;
    std::vector<at::Tensor> contiguous;
    uint64_t offset = 0;
    for (const auto &[name, tensor] : tensors) {
        const DtypeInfo *dtype = nullptr;
        for (const auto &d : kDtypes)
            if (d.type == tensor.scalar_type()) dtype = &d;
        if (dtype == nullptr) fail(GPT_ERR_INTERNAL, "no safetensors dtype for tensor '" + name + "'");
        contiguous.push_back(tensor.to(at::kCPU).contiguous());
        const uint64_t bytes = contiguous.back().nbytes();
        header[name] = {
            {"dtype", dtype->name}, {"shape", tensor.sizes().vec()}, {"data_offsets", {offset, offset + bytes}}};
        offset += bytes;
    }
    std::string text = header.dump();
    text.resize((text.size() + 7) / 8 * 8, ' ');  // keep the data 8-byte aligned, as the reference writer
    std::vector<unsigned char> out;
    out.reserve(8 + text.size() + offset);
    for (int i = 0; i < 8; ++i) out.push_back(static_cast<unsigned char>((uint64_t{text.size()} >> (8 * i)) & 0xff));
    out.insert(out.end(), text.begin(), text.end());
    for (const at::Tensor &t : contiguous) {
        const auto *p = static_cast<const unsigned char *>(t.data_ptr());
        out.insert(out.end(), p, p + t.nbytes());
    }
    return out;
}

}  // namespace gpt
