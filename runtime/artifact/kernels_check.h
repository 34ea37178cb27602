// kernels_check.h — whether this runtime has the kernel library an artifact's graphs call (kernels/kernels.h).
#pragma once

#include <optional>

#include "formats/manifest.h"

namespace gpt {

// An artifact compiled against another version of the kernel library, or calling an operator this process has
// not registered, is refused before its graphs load: GPT_ERR_ARTIFACT_VERSION, saying what each side has and
// what to do. No "kernels" section: nothing to check.
void check_kernels(const std::optional<KernelsSpec> &kernels);

// The version of the library compiled into this runtime (GPT_KERNELS_VERSION).
int64_t runtime_kernels_version();

}  // namespace gpt
