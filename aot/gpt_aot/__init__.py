"""gpt_aot: compile a nanoGPT model into AOTInductor artifacts for libgpt_runtime.

One subpackage per layer, bottom to top: base; model and text; artifact; importers and compiler; then the
command line (__main__). Each imports only the layers below it, never a sibling (scripts/check_aot_layers.py,
docs/ARCHITECTURE.md).
"""

import ctypes

# libtorch exports a static copy of libstdc++'s std::filesystem (pytorch#133437) whose remove_all
# crashes with a newer libstdc++ (seen: torch 2.11 on Ubuntu 24.04, in aoti_load_package). Inside
# torch's own libraries a call binds to the first definition in the process's global scope, then in
# the library's own dependencies, where libtorch's copy comes before libstdc++. Loading libstdc++
# into the global scope before torch makes every such call bind to libstdc++'s. It only takes
# effect when gpt_aot is imported before torch (`python -m gpt_aot` always is; tests/conftest.py).
try:
    ctypes.CDLL("libstdc++.so.6", mode=ctypes.RTLD_GLOBAL)
except OSError:  # no libstdc++ here: nothing of torch's would load either
    pass
