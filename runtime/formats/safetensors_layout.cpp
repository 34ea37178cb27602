// safetensors_layout.cpp — every size and offset is checked with overflow-safe arithmetic.
#include "formats/safetensors_layout.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <string>
#include <tuple>

#include "base/error.h"
#include "formats/dtype.h"

namespace gpt {

namespace {

// A header is parsed before the file's hash can be checked, so what parsing may cost is bounded: the
// runtime's own files hold about 100 bytes of header per tensor, and the schema nests three deep
// (file object, entry object, shape array), so 16 MiB and depth 3 leave room and refuse the rest.
constexpr uint64_t kMaxHeaderBytes = 16u << 20;
constexpr int kMaxDepth = 3;
constexpr size_t kMaxRank = 8;

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

uint64_t safetensors_header_length(const unsigned char *first8, uint64_t file_size, const std::string &what) {
    if (file_size < 8) invalid_file(what, "shorter than its 8-byte header length");
    uint64_t header_len = 0;
    for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | first8[i];  // little-endian
    if (header_len > kMaxHeaderBytes) invalid_file(what, "header larger than 16 MiB");
    if (header_len > file_size - 8) invalid_file(what, "header runs past the end of the file");
    return header_len;
}

SafetensorsLayout parse_safetensors_layout(const unsigned char *bytes, size_t size, const std::string &what) {
    const uint64_t header_len = safetensors_header_length(bytes, size, what);
    SafetensorsLayout layout = parse_safetensors_header(bytes + 8, header_len, size - 8 - header_len, what);
    layout.data = bytes + 8 + header_len;
    return layout;
}

SafetensorsLayout parse_safetensors_header(const unsigned char *header_bytes, uint64_t header_len, uint64_t data_size,
                                           const std::string &what) {
    const char *header_text = reinterpret_cast<const char *>(header_bytes);
    using json = nlohmann::json;
    const json::parser_callback_t limit_depth = [&](int depth, json::parse_event_t event, json &) {
        if ((event == json::parse_event_t::object_start || event == json::parse_event_t::array_start) &&
            depth >= kMaxDepth)
            invalid_file(what, "header nests deeper than " + std::to_string(kMaxDepth));
        return true;
    };
    auto header = json::parse(header_text, header_text + header_len, limit_depth, false);
    if (header.is_discarded() || !header.is_object()) invalid_file(what, "header is not a JSON object");

    SafetensorsLayout layout;
    layout.data_size = data_size;
    for (const auto &[name, spec] : header.items()) {
        if (name == "__metadata__") {
            if (!spec.is_object()) invalid_file(what, "__metadata__ is not an object");
            for (const auto &[key, value] : spec.items()) {
                if (!value.is_string()) invalid_file(what, "__metadata__ values must be strings");
                layout.metadata[key] = value.get<std::string>();
            }
            continue;
        }
        if (!spec.is_object() || !spec.contains("dtype") || !spec.contains("shape") || !spec.contains("data_offsets"))
            invalid_file(what, "entry '" + name + "' lacks dtype, shape or data_offsets");
        const Dtype *dtype = spec["dtype"].is_string() ? dtype_from_safetensors_name(spec["dtype"]) : nullptr;
        if (dtype == nullptr) invalid_file(what, "entry '" + name + "' has an unsupported dtype");
        const uint64_t element_bytes = dtype->bytes;
        const auto &shape = spec["shape"];
        const auto &offsets = spec["data_offsets"];
        if (!shape.is_array() || shape.size() > kMaxRank) invalid_file(what, "entry '" + name + "' has a bad shape");
        if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
            !offsets[1].is_number_unsigned())
            invalid_file(what, "entry '" + name + "' has bad data_offsets");
        SafetensorsEntry e{name, dtype, {}, offsets[0].get<uint64_t>(), offsets[1].get<uint64_t>()};
        // nbytes is what the data holds; extent, the same product with empty dimensions counted as 1, is
        // the largest stride a tensor of this shape has, which must fit an int64 for one to be made.
        uint64_t nbytes = element_bytes, extent = element_bytes;
        for (const auto &dim : shape) {
            if (!dim.is_number_unsigned() || dim.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
                invalid_file(what, "entry '" + name + "' has a negative or huge dimension");
            const uint64_t size = dim.get<uint64_t>();
            if (!checked_mul(nbytes, size, &nbytes) || !checked_mul(extent, std::max<uint64_t>(size, 1), &extent) ||
                extent > static_cast<uint64_t>(INT64_MAX))
                invalid_file(what, "entry '" + name + "' size overflows");
            e.shape.push_back(static_cast<int64_t>(size));
        }
        if (e.begin > e.end || e.end > layout.data_size)
            invalid_file(what, "entry '" + name + "' lies outside the data");
        if (e.end - e.begin != nbytes)
            invalid_file(what, "entry '" + name + "' byte length disagrees with its shape and dtype");
        layout.entries.push_back(std::move(e));
    }

    // The entries must tile the data region exactly: no overlap, no gap, no tail. Sorted by (begin, end), an
    // empty entry comes before the one that starts where it does; callers then read the file front to back.
    std::sort(layout.entries.begin(), layout.entries.end(), [](const SafetensorsEntry &a, const SafetensorsEntry &b) {
        return std::tie(a.begin, a.end) < std::tie(b.begin, b.end);
    });
    uint64_t cursor = 0;
    for (const SafetensorsEntry &e : layout.entries) {
        if (e.begin != cursor) invalid_file(what, "entry '" + e.name + "' overlaps another or leaves a gap");
        cursor = e.end;
    }
    if (cursor != layout.data_size) invalid_file(what, "data region has trailing bytes");
    return layout;
}

}  // namespace gpt
