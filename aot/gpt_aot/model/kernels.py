"""The project's kernel library (kernels/ at the repository's root), built for this Python and loaded into torch's
dispatcher: the compile traces and measures the `gpt_kernels` operators as the runtime, which compiles the same
sources in, runs them.

Built once per source change by torch's extension builder (cached under its build directory), on first use.
The compiled graphs call the operators through C functions (kernels/c_shims.h; c_shims() declares them to
AOTInductor), which the loaded library exports to the whole process, as libgpt_runtime does where an artifact runs.
"""

import ctypes
import functools
import re
import warnings
from contextlib import contextmanager
from pathlib import Path

import torch

SOURCE = Path(__file__).resolve().parents[3] / "kernels"
SOURCES = (
    "registration.cpp",
    "c_shims.cpp",
    "cpu/isa.cpp",
    "cpu/threads.cpp",
    "cpu/decode_attention.cpp",
    "cpu/linear.cpp",
    "cpu/linear_q8_activations.cpp",
    "cpu/attention_chunk_scalar.cpp",
    "cpu/attention_chunk_avx2.cpp",
    "cpu/attention_chunk_avx512.cpp",
    "cpu/linear_tile_scalar.cpp",
    "cpu/linear_tile_avx2.cpp",
    "cpu/linear_tile_avx512.cpp",
    "cpu/linear_tile_avx512_vnni.cpp",
    "cpu/linear_tile_avx512_bf16.cpp",
)


@functools.cache
def load() -> int:
    """Registers the operators in this process (building them where needed); returns the library's version."""
    from torch.utils import cpp_extension

    if not (SOURCE / "kernels.h").is_file():
        raise RuntimeError(f"the kernel library's sources are not at {SOURCE}: gpt_aot runs from its repository")
    build = Path(cpp_extension.get_default_build_root()) / "gpt_kernels"
    build.mkdir(parents=True, exist_ok=True)
    cpp_extension.load(
        name="gpt_kernels",
        sources=[str(SOURCE / s) for s in SOURCES],
        extra_include_paths=[str(SOURCE)],
        # OpenMP, or at::parallel_for runs every kernel on one thread (kernels/cpu/threads.h).
        extra_cflags=["-O3", "-fopenmp"],
        extra_ldflags=["-fopenmp"],
        build_directory=str(build),
        is_python_module=False,
        verbose=False,
    )
    # torch loads it into a local scope; a graph package (loaded to measure it, or to check the golden vector) binds
    # its calls of the C shims in the global one.
    ctypes.CDLL(str(build / "gpt_kernels.so"), mode=ctypes.RTLD_GLOBAL)
    if not torch.ops.gpt_kernels.threaded():
        raise RuntimeError("the kernel library was built without OpenMP: its kernels would run on one thread")
    return int(torch.ops.gpt_kernels.version())


@functools.cache
def available() -> bool:
    """Whether the library loads here; a build that fails is reported once and its kernels are not candidates."""
    try:
        load()
    except (RuntimeError, OSError) as e:
        warnings.warn(f"the kernel library did not build, its kernels are left out: {e}", stacklevel=2)
        return False
    return True


# The kernels' vector path (kernels/cpu/isa.h) at the floor of each portable ISA level: what its hosts run at least.
LEVEL_PATHS = {"x86-64-v3": "avx2", "x86-64-v4": "avx512"}


@contextmanager
def running_for(level: str):
    """The library's kernels run the path of ISA `level` inside this block (a level not in LEVEL_PATHS, "native":
    the CPU's own choice), so that a compile for a portable level measures its forms on the code of that level's
    hosts, as Inductor's own code there is compiled for the level (torch_patches.compiling_for)."""
    path = LEVEL_PATHS.get(level)
    if path is None or not available():
        yield
        return
    torch.ops.gpt_kernels.use_path(path)
    try:
        yield
    finally:
        torch.ops.gpt_kernels.use_path("")


def active_path() -> str | None:
    """The path the library's kernels run now ("avx512_bf16", "avx2", ...), None where it did not build."""
    return str(torch.ops.gpt_kernels.active_path()) if available() else None


# One declaration of kernels/c_shims.h: `GPT_KERNELS_SHIM AOTITorchError aoti_torch_cpu_<operator>(...);`
SHIM_DECLARATION = re.compile(r"^GPT_KERNELS_SHIM (AOTITorchError aoti_torch_cpu_(\w+)\(.*\));$", re.MULTILINE)


def c_shim_declarations() -> dict[str, str]:
    """Each operator's C function as kernels/c_shims.h declares it (operator name: declaration)."""
    found = {name: decl for decl, name in SHIM_DECLARATION.findall((SOURCE / "c_shims.h").read_text())}
    if not found:
        raise RuntimeError(f"no C shim declared in {SOURCE / 'c_shims.h'}")
    return found


def c_shims() -> dict:
    """AOTInductor's `aot_inductor.custom_ops_to_c_shims`: every operator of the library a graph calls, with the C
    function the generated wrapper calls instead of dispatching through its proxy executor."""
    load()
    return {getattr(torch.ops.gpt_kernels, name).default: [decl] for name, decl in c_shim_declarations().items()}
