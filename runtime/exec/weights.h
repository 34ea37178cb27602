// weights.h — the model's parameters: loaded once from weights.safetensors,
// checked against the config, placed on the target device and shared by all graphs.
#pragma once

#include <ATen/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <set>
#include <string>

#include "formats/manifest.h"

namespace gpt {

// Output rows per block of the int4 "blocks64" layout (aot/gpt_aot/model/linear.py's to_int4_blocks).
constexpr int64_t kInt4BlockRows = 64;

// Reads the artifact's weights file straight into its tensors, checking its sha256 on the way (integrity.h).
// Name -> tensor on `device`, tied aliases included (they share storage). On a CPU they share one arena of huge
// pages (host_pages.h), but for those named in `apart`: weights the caller frees early (packed into copies).
std::map<std::string, at::Tensor> load_weights(const std::filesystem::path &dir, const Manifest &manifest,
                                               c10::Device device, const std::set<std::string> &apart = {});

}  // namespace gpt
