"""AOTInductor: compile one exported program into a .pt2 package, and prove
the package calls the attention kernel it was compiled with."""

from pathlib import Path

import torch

from gpt_aot.compiler import isa, torch_patches
from gpt_aot.compiler.packages import kernel_operators, wrapper_source
from gpt_aot.compiler.target import Target
from gpt_aot.model import kernels
from gpt_aot.model.attention import attention_context

# One copy of the weights for all graphs: nothing is baked into the .so, every
# parameter stays a named constant bound by the runtime, and nothing is folded
# into derived copies that would go stale when weights change.
INDUCTOR_CONFIGS = {
    "aot_inductor.package_constants_in_so": False,
    "always_keep_tensor_constants": True,
    "aot_inductor.use_runtime_constant_folding": False,
    "freezing": False,
    # CPU kernels ask OpenMP for the thread count when they run (omp_get_max_threads) instead of
    # hard-coding the build host's core count: the runtime sets it per model and call (num_threads).
    "cpp.dynamic_threads": True,
}

# The kernel call each backend leaves in AOTInductor's generated wrapper.
KERNEL_SYMBOLS = {
    ("cpu", "flash"): "_scaled_dot_product_flash_attention_for_cpu",
    ("cuda", "flash"): "_scaled_dot_product_flash_attention",
    ("cuda", "efficient"): "_scaled_dot_product_efficient_attention",
    ("cuda", "cudnn"): "_scaled_dot_product_cudnn_attention",
}
# The kernel library's attention operators (packages.kernel_operators): decode's, and the mixed graph's (tokens of
# any sequences).
OWN_KERNEL_OPERATORS = {("cpu", "chunked"): ("gpt_kernels::decode_attention", "gpt_kernels::decode_attention_rows")}


def check_kernel(package: Path, device: str, kind: str) -> None:
    """Prove the compiled graph calls the chosen attention kernel, not a fallback."""
    code, operators = wrapper_source(package), kernel_operators(package)
    symbol = KERNEL_SYMBOLS.get((device, kind))
    expected = {symbol} if symbol else set(OWN_KERNEL_OPERATORS.get((device, kind), ()))
    called = {s for s in KERNEL_SYMBOLS.values() if s + "(" in code or s + "_" in code}
    called |= operators & {op for ops in OWN_KERNEL_OPERATORS.values() for op in ops}
    ok = bool(expected & called) if expected else not called
    if not ok:
        wanted = " or ".join(sorted(expected)) or "no SDPA kernel"
        raise RuntimeError(f"{package.name}: expected attention {kind} ({wanted}), found {called}")


def compile_package(program, package: Path, target: Target, attention: str) -> None:
    """AOTInductor-compile one exported program with the attention backend pinned, for the target's ISA level."""
    level = target.isa_level if target.device == "cpu" else isa.NATIVE
    configs = dict(INDUCTOR_CONFIGS)
    if target.device == "cpu" and kernels.available():
        # The kernel library's operators called as C functions, not through the proxy executor (kernels/c_shims.h).
        configs["aot_inductor.custom_ops_to_c_shims"] = kernels.c_shims()
    with attention_context(attention), torch_patches.compiling_for(level):
        torch._inductor.aoti_compile_and_package(program, package_path=str(package), inductor_configs=configs)
    check_kernel(package, target.device, attention)
