// safetensors.cpp — tensors from a checked safetensors layout, and the writer.
#include "exec/safetensors.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "base/error.h"
#include "exec/host_pages.h"
#include "exec/torch_dtype.h"
#include "formats/safetensors_layout.h"

namespace gpt {

std::map<std::string, at::Tensor> parse_safetensors(const unsigned char *data, size_t size, const std::string &what,
                                                    std::map<std::string, std::string> *metadata) {
    SafetensorsLayout layout = parse_safetensors_layout(data, size, what);
    if (metadata != nullptr) *metadata = std::move(layout.metadata);
    std::map<std::string, at::Tensor> tensors;
    for (const auto &e : layout.entries) {
        at::Tensor t = at::empty(e.shape, at::TensorOptions().dtype(scalar_type(*e.dtype)));
        if (e.end > e.begin) std::memcpy(t.data_ptr(), layout.data + e.begin, e.end - e.begin);
        tensors.emplace(e.name, std::move(t));
    }
    return tensors;
}

namespace {

// The entries of `file` read into the tensors `place` makes of (entries, entry), front to back; see
// read_safetensors.
template <typename Place>
std::map<std::string, at::Tensor> read_entries(FileReader &file, std::map<std::string, std::string> *metadata,
                                               const Place &place) {
    std::map<std::string, at::Tensor> tensors;
    try {
        unsigned char first8[8] = {};
        file.read(first8, std::min<uint64_t>(file.size(), sizeof first8));
        const uint64_t header_len = safetensors_header_length(first8, file.size(), file.what());
        std::vector<unsigned char> header(header_len);
        file.read(header.data(), header_len);
        SafetensorsLayout layout = parse_safetensors_header(header.data(), header_len, file.remaining(), file.what());
        if (metadata != nullptr) *metadata = std::move(layout.metadata);
        auto make = place(layout.entries);
        for (const auto &e : layout.entries) {  // in file order: the reads go front to back
            at::Tensor t = make(e);
            file.read(static_cast<unsigned char *>(t.data_ptr()), e.end - e.begin);
            tensors.emplace(e.name, std::move(t));
        }
    } catch (...) {
        // Whatever stopped the reading (bytes that do not parse, a tensor that cannot be made), a listed
        // file's hash says first whether they are corrupt or foreign.
        file.finish();
        throw;
    }
    file.finish();
    return tensors;
}

}  // namespace

std::map<std::string, at::Tensor> read_safetensors(FileReader &file, std::map<std::string, std::string> *metadata) {
    return read_entries(file, metadata, [](const auto &) {
        return [](const SafetensorsEntry &e) { return empty_in_host_pages(e.shape, scalar_type(*e.dtype)); };
    });
}

std::map<std::string, at::Tensor> read_safetensors_in_arena(FileReader &file, const std::set<std::string> &apart) {
    std::unique_ptr<HostArena> arena;
    return read_entries(file, nullptr, [&](const std::vector<SafetensorsEntry> &entries) {
        uint64_t bytes = 0;
        for (const auto &e : entries)
            if (apart.count(e.name) == 0) bytes += HostArena::slot_bytes(e.shape, scalar_type(*e.dtype));
        arena = std::make_unique<HostArena>(bytes);
        return [&](const SafetensorsEntry &e) {
            const at::ScalarType dtype = scalar_type(*e.dtype);
            return apart.count(e.name) > 0 ? empty_in_host_pages(e.shape, dtype) : arena->take(e.shape, dtype);
        };
    });
}

void write_safetensors(const std::map<std::string, at::Tensor> &tensors,
                       const std::map<std::string, std::string> &metadata, const ByteSink &put) {
    nlohmann::json header = nlohmann::json::object();
    if (!metadata.empty()) header["__metadata__"] = metadata;
    uint64_t offset = 0;
    for (const auto &[name, tensor] : tensors) {
        const Dtype *dtype = dtype_of(tensor.scalar_type());
        if (dtype == nullptr) fail(GPT_ERR_INTERNAL, "no safetensors dtype for tensor '" + name + "'");
        const uint64_t bytes = tensor.numel() * tensor.element_size();
        header[name] = {{"dtype", dtype->safetensors_name},
                        {"shape", tensor.sizes().vec()},
                        {"data_offsets", {offset, offset + bytes}}};
        offset += bytes;
    }
    std::string text = header.dump();
    text.resize((text.size() + 7) / 8 * 8, ' ');  // keep the data 8-byte aligned, as the reference writer
    unsigned char length[8];
    for (int i = 0; i < 8; ++i) length[i] = static_cast<unsigned char>((uint64_t{text.size()} >> (8 * i)) & 0xff);
    put(length, sizeof length);
    put(reinterpret_cast<const unsigned char *>(text.data()), text.size());
    for (const auto &[name, tensor] : tensors) {  // one host copy at a time, where one is needed at all
        const at::Tensor t = tensor.to(at::kCPU).contiguous();
        put(static_cast<const unsigned char *>(t.data_ptr()), t.nbytes());
    }
}

}  // namespace gpt
