"""Every private torch function the compile replaces, in this one module, written
for one torch release (WRITTEN_FOR) and checked against the torch present when
it is imported.

Inductor compiles CPU kernels for the build host: -march=native and the vector
ISA its CPUID reports (isa.py says why an artifact needs better). For the length
of one `compiling_for(level)` block, and nowhere else, Inductor compiles for an
ISA level instead, through these replacements:
  cpp_builder._get_optimization_cflags  its -march=native becomes the level's
      -march, or for a native compile -march=native less what the kernel hides;
  cpu_vec_isa.pick_vec_isa, and codecache.pick_vec_isa (the same function,
      imported by name): the level's vector ISA instead of the host's;
and config.cpp.simdlen, public configuration, set to the level's vector width.
level_vec_isa and native_vec_isa build those vector ISAs from cpu_vec_isa's
classes. Whatever the level, one more:
  codegen.cpp.CppKernel.decide_parallel_depth  a loop nest whose sizes are all
      known and whose elements are fewer than SERIAL_BELOW gets no OpenMP region
      (serial_when_small says why).
The block puts every original back when it ends, however it ends.

All of these are torch's private code and change without notice. Importing this
module refuses a torch of another release, or one that lacks a name in PRIVATE,
and says which name to look at; what a replaced function returns is checked
where it is used (level_cflags), and tests/aot/test_isa.py checks what comes out.
"""

from contextlib import contextmanager, nullcontext

import sympy
import torch
from torch._inductor import codecache, config, cpp_builder, cpu_vec_isa
from torch._inductor.codegen import cpp as cpp_codegen

from gpt_aot.compiler import isa

WRITTEN_FOR = "2.11"  # the torch release (major.minor) whose private functions this module replaces
# Every name of torch._inductor (torch's private compiler) this module replaces, overrides or reads.
PRIVATE = (
    "cpp_builder._get_optimization_cflags",
    "cpu_vec_isa.pick_vec_isa",
    "codecache.pick_vec_isa",
    "cpu_vec_isa.VecISA.build_arch_flags",
    "cpu_vec_isa.VecAVX512.is_avx512_bf16_supported",
    "cpu_vec_isa.VecAVX512._arch_flags",
    "cpu_vec_isa.VecAVX2",
    "cpu_vec_isa.valid_vec_isa_list",
    "cpu_vec_isa.invalid_vec_isa",
    "cpp_builder.get_cpp_compiler",
    "config.cpp.simdlen",
    "codegen.cpp.CppKernel.decide_parallel_depth",
    "codegen.cpp.ParallelDepth",
)


def problems(version: str) -> list[str]:
    """Why the replacements here may not fit the torch present: another release, or a private name gone."""
    found = []
    if version.split("+")[0].split(".")[:2] != WRITTEN_FOR.split("."):
        found.append(
            f"torch {version} is not {WRITTEN_FOR}.x, the release {__name__} was written for: check each name in "
            f"its PRIVATE against torch {version}'s source, update the replacements to match, then WRITTEN_FOR"
        )
    gone = object()  # not None: config.cpp.simdlen is None by default
    for name in PRIVATE:
        owner = torch._inductor
        for part in name.split("."):
            owner = getattr(owner, part, gone)
        if owner is gone:
            found.append(
                f"torch {version} has no torch._inductor.{name}: find what took its place, then update "
                f"{__name__} and its tests (tests/aot/test_torch_patches.py, tests/aot/test_isa.py)"
            )
    return found


_found = problems(torch.__version__)
if _found:
    raise RuntimeError("\n".join(_found))


def level_vec_isa(level: str):
    """Inductor's vector ISA for a level: AVX2 inside v3; for v4 AVX-512 F/BW/DQ/VL with FMA, and none of
    the additions (BF16, VNNI, AMX) Inductor would take from a newer host."""

    class VecAVX512Level(cpu_vec_isa.VecAVX512):
        def build_arch_flags(self) -> str:
            return cpu_vec_isa.VecAVX512._arch_flags

        def is_avx512_bf16_supported(self) -> bool:
            return False

    return {"x86-64-v3": cpu_vec_isa.VecAVX2, "x86-64-v4": VecAVX512Level}[level]()


def native_vec_isa(compiler: str, host: set[str] | None = None):
    """Inductor's own pick for this host, or the best one below it whose flags ask only for what the kernel shows
    (its pick reads CPUID too)."""
    have = isa.cpu_flags() if host is None else host
    candidates = [cpu_vec_isa.pick_vec_isa(), *cpu_vec_isa.valid_vec_isa_list()]
    for vec_isa in candidates:
        if vec_isa and set(isa.extensions(compiler, vec_isa.build_arch_flags().split())) <= have:
            return vec_isa
    return cpu_vec_isa.invalid_vec_isa


def build_for(level: str) -> tuple | None:
    """(-march flags, vector ISA, vector width) Inductor must compile `level` with; None where its own native
    build already is that."""
    if level == isa.NATIVE:
        compiler = cpp_builder.get_cpp_compiler()
        march = isa.native_flags(compiler)
        if len(march) == 1:  # the kernel hides nothing: Inductor's own native build, untouched
            return None
        return march, native_vec_isa(compiler), None
    return [f"-march={level}"], level_vec_isa(level), isa.LEVELS[level]


@contextmanager
def _replaced(march: list[str], vec_isa, simdlen: int | None):
    """The replacements installed for one block; the originals back after it, whatever happens inside."""
    optimization_cflags = cpp_builder._get_optimization_cflags
    picks = (cpu_vec_isa.pick_vec_isa, codecache.pick_vec_isa)

    def level_cflags(*args, **kwargs):
        cflags, ldflags = optimization_cflags(*args, **kwargs)
        if "march=native" not in cflags:
            raise RuntimeError(f"Inductor's compile flags no longer hold -march=native: {cflags} ({__name__})")
        at = cflags.index("march=native")
        return [*cflags[:at], *(f.removeprefix("-") for f in march), *cflags[at + 1 :]], ldflags

    cpp_builder._get_optimization_cflags = level_cflags
    cpu_vec_isa.pick_vec_isa = codecache.pick_vec_isa = lambda: vec_isa
    try:
        with config.patch({"cpp.simdlen": simdlen}):
            yield
    finally:
        cpp_builder._get_optimization_cflags = optimization_cflags
        cpu_vec_isa.pick_vec_isa, codecache.pick_vec_isa = picks


# A loop nest of fewer elements than this, its sizes all known when compiled, runs on the calling thread. The artifacts
# ask OpenMP for the thread count when they run (inductor.py: cpp.dynamic_threads), and with that setting Inductor gives
# every loop nest a parallel region, however small: a batch-1 GPT-2 decode step ran ~75 of them around 768 to 3072
# elements (layer norms in two regions each, GELU, a copy), each a fork and a join of the team that cost more than its
# loop. Loops sized by the span or the rows (symbols) keep Inductor's choice.
SERIAL_BELOW = 16384


def serial_when_small(decide):
    """Inductor's decide_parallel_depth, with no parallel depth for a small loop nest of known sizes."""

    def decide_parallel_depth(self, max_parallel_depth, threads):
        depth = decide(self, max_parallel_depth, threads)
        work = sympy.Mul(*(sympy.sympify(size) for size in self.call_ranges))
        if depth.parallel_depth and not work.free_symbols and int(work) < SERIAL_BELOW:
            return cpp_codegen.ParallelDepth(parallel_depth=0, start_depth=depth.start_depth)
        return depth

    return decide_parallel_depth


@contextmanager
def _serial_small_loops():
    decide = cpp_codegen.CppKernel.decide_parallel_depth
    cpp_codegen.CppKernel.decide_parallel_depth = serial_when_small(decide)
    try:
        # torch.compile's graph cache keys on Inductor's source and settings, not on this replacement: code
        # generated without it must not be read back inside the block, nor this code outside it
        with config.patch({"fx_graph_cache": False}):
            yield
    finally:
        cpp_codegen.CppKernel.decide_parallel_depth = decide


_active_level = None  # the level compiling_for has set Inductor up for; blocks nest


@contextmanager
def compiling_for(level: str):
    """Inductor compiles CPU code for `level` inside this block: -march=<level> in place of -march=native and the
    level's vector ISA; for native, -march=native less what the kernel hides (isa.native_flags).
    packages.package_isa reads the flags back from what was compiled."""
    global _active_level
    if _active_level is not None:
        if level != _active_level:
            raise RuntimeError(f"already compiling for {_active_level}, asked for {level}")
        yield
        return
    build = build_for(level)
    _active_level = level
    try:
        with _replaced(*build) if build else nullcontext(), _serial_small_loops():
            yield
    finally:
        _active_level = None


def vec_isa_name(level: str) -> str:
    """Inductor's vector ISA for the level, as it names it ("avx2", "avx512", ...), or "scalar"."""
    with compiling_for(level):
        vec_isa = cpu_vec_isa.pick_vec_isa()
    return str(vec_isa) if vec_isa else "scalar"
