// kernels_check.cpp — the artifact's kernel-library version and operators against this process's.
#include "artifact/kernels_check.h"

#include <ATen/core/dispatch/Dispatcher.h>

#include "base/error.h"
#include "kernels.h"

namespace gpt {

int64_t runtime_kernels_version() { return GPT_KERNELS_VERSION; }

void check_kernels(const std::optional<KernelsSpec> &kernels) {
    if (!kernels) return;
    const std::string advice =
        ": load it with a runtime of the gpt-aot release that compiled it, or recompile it "
        "with this release (or with --decode-attention math, which needs no kernel library)";
    if (kernels->version != GPT_KERNELS_VERSION)
        fail(GPT_ERR_ARTIFACT_VERSION, "the artifact's graphs call kernel library version " +
                                           std::to_string(kernels->version) + ", this runtime has version " +
                                           std::to_string(GPT_KERNELS_VERSION) + advice);
    for (const std::string &op : kernels->operators)
        if (!c10::Dispatcher::singleton().findOp(c10::OperatorName(op, "")))
            fail(GPT_ERR_ARTIFACT_VERSION, "the artifact's graphs call " + op + ", which this runtime's kernel " +
                                               "library (version " + std::to_string(GPT_KERNELS_VERSION) +
                                               ") does not register" + advice);
}

}  // namespace gpt
