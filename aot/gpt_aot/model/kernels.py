"""The project's kernel library (kernels/ at the repository's root), built for this Python and loaded into torch's
dispatcher: the compile traces and measures the `gpt_kernels` operators as the runtime, which compiles the same
sources in, runs them.

Built once per source change by torch's extension builder (cached under its build directory), on first use.
The compiled graphs call the operators through C functions (kernels/c_shims.h; c_shims() declares them to
AOTInductor), defined in a small library of their own, libgpt_kernel_shims, that forwards each to this library and
is the only one made global: as where libgpt_runtime runs an artifact.
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


def _build(name: str, sources: tuple[str, ...], cflags: list[str], ldflags: list[str]) -> Path:
    """One library built by torch's extension builder (again only when its sources or flags change) and loaded."""
    from torch.utils import cpp_extension

    build = Path(cpp_extension.get_default_build_root()) / name
    build.mkdir(parents=True, exist_ok=True)
    cpp_extension.load(
        name=name,
        sources=[str(SOURCE / s) for s in sources],
        extra_include_paths=[str(SOURCE)],
        extra_cflags=cflags,
        extra_ldflags=ldflags,
        build_directory=str(build),
        is_python_module=False,
        verbose=False,
    )
    return build / f"{name}.so"


@functools.cache
def load() -> int:
    """Registers the operators in this process (building them where needed); returns the library's version."""
    if not (SOURCE / "kernels.h").is_file():
        raise RuntimeError(f"the kernel library's sources are not at {SOURCE}: gpt_aot runs from its repository")
    # The C functions the graphs bind to. The builder links torch's libraries into every library it builds;
    # --as-needed (before them on its command line) drops them, since this one calls none: its only dependency
    # is libc.
    shims = _build("gpt_kernel_shims", ("c_shim_exports.cpp",), ["-O2"], ["-Wl,--as-needed"])
    # A graph package (loaded to measure it, or to check the golden vector) binds its calls of the C functions in
    # the process's global scope. Only the shim library goes there: the kernel library made global would take
    # libtorch_cpu with it, whose MKL and oneDNN symbols a library loaded later (CTranslate2) would bind to.
    ctypes.CDLL(str(shims), mode=ctypes.RTLD_GLOBAL)
    _build(
        "gpt_kernels",
        SOURCES,
        # OpenMP, or at::parallel_for runs every kernel on one thread (kernels/cpu/threads.h).
        ["-O3", "-fopenmp"],
        # Linked by its path: the kernel library installs its definitions in that very library when it loads.
        ["-fopenmp", str(shims)],
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
