"""The project's kernel library (kernels/ at the repository's root), built for this Python and loaded into torch's
dispatcher: the compile traces and measures the `gpt_kernels` operators as the runtime, which compiles the same
sources in, runs them.

Built once per source change by torch's extension builder (cached under its build directory), on first use.
"""

import functools
import warnings
from pathlib import Path

import torch

SOURCE = Path(__file__).resolve().parents[3] / "kernels"
SOURCES = (
    "registration.cpp",
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
    cpp_extension.load(
        name="gpt_kernels",
        sources=[str(SOURCE / s) for s in SOURCES],
        extra_include_paths=[str(SOURCE)],
        # OpenMP, or at::parallel_for runs every kernel on one thread (kernels/cpu/threads.h).
        extra_cflags=["-O3", "-fopenmp"],
        extra_ldflags=["-fopenmp"],
        is_python_module=False,
        verbose=False,
    )
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
