// weights.h — the model's parameters: loaded once from weights.safetensors,
// checked against the config, placed on the target device and shared by all graphs.
#pragma once

#include <ATen/Tensor.h>
#include <c10/core/Device.h>

#include <map>
#include <string>

#include "integrity.h"
#include "manifest.h"

namespace gpt {

// Name -> tensor on `device`, tied aliases included (they share storage).
std::map<std::string, at::Tensor> load_weights(const Bytes &file, const Manifest &manifest, c10::Device device);

}  // namespace gpt
