"""CPU instruction sets: what a CPU artifact's kernels are compiled for, and
which extensions its compiled code may use.

Inductor compiles CPU kernels with -march=native plus the vector ISA flags it
picks for the build host, so an artifact built on a newer CPU can die with
SIGILL on an older one. `--isa` names an x86-64 psABI level instead (gcc's
-march values): the kernels get -march=<level> and a vector ISA inside it
(torch_patches.compiling_for makes Inductor do so; this module needs no torch).

What this CPU may run has one source, the kernel's: the flags line of
/proc/cpuinfo (or the file GPT_CPUINFO names), which the runtime reads too
(runtime/artifact/device.cpp). The compiler's -march=native asks CPUID instead,
which also reports extensions the kernel has disabled (Linux clears RDSEED on
some AMD CPUs): a native compile turns those off with -mno-<ext>, so its code
cannot use what the kernel refuses and the artifact loads where it was built.

The manifest's list of extensions is derived from the flags the packages were
actually compiled with (each .pt2 keeps its compile commands as comments in
its .cpp sources, which packages.py reads back), expanded by the same compiler
into its predefined ISA macros (`extensions`), so the list is what the compiler
was allowed to emit, not a guess.
"""

import os
import re
import subprocess
from pathlib import Path

NATIVE = "native"
# psABI level → Inductor's vector width (config.cpp.simdlen) for it.
LEVELS = {"x86-64-v3": 256, "x86-64-v4": 512}
ISA_LEVELS = (NATIVE, *LEVELS)

# gcc's predefined ISA macro → the /proc/cpuinfo flag the CPU must show, or
# None for one that needs nothing of the CPU. The compile fails on an ISA-like
# macro missing here (unknown_macros), so a new compiler cannot drop one silently.
ISA_MACROS = {
    "__MMX__": "mmx",
    "__3dNOW__": "3dnow",
    "__3dNOW_A__": "3dnowext",
    "__FXSR__": "fxsr",
    "__SSE__": "sse",
    "__SSE2__": "sse2",
    "__SSE3__": "pni",  # the kernel calls SSE3 "Prescott New Instructions"
    "__SSSE3__": "ssse3",
    "__SSE4_1__": "sse4_1",
    "__SSE4_2__": "sse4_2",
    "__CRC32__": "sse4_2",  # the crc32 instruction is part of SSE4.2
    "__SSE4A__": "sse4a",
    "__POPCNT__": "popcnt",
    "__LAHF_SAHF__": "lahf_lm",
    "__GCC_HAVE_SYNC_COMPARE_AND_SWAP_16": "cx16",
    "__MOVBE__": "movbe",
    "__LZCNT__": "abm",  # lzcnt shows as "abm" on Intel and AMD alike
    "__ABM__": "abm",
    "__BMI__": "bmi1",
    "__BMI2__": "bmi2",
    "__TBM__": "tbm",
    "__ADX__": "adx",
    "__AES__": "aes",
    "__PCLMUL__": "pclmulqdq",
    "__VAES__": "vaes",
    "__VPCLMULQDQ__": "vpclmulqdq",
    "__GFNI__": "gfni",
    "__SHA__": "sha_ni",
    "__SHA512__": "sha512",
    "__SM3__": "sm3",
    "__SM4__": "sm4",
    "__RDRND__": "rdrand",
    "__RDSEED__": "rdseed",
    "__RDPID__": "rdpid",
    "__PRFCHW__": "3dnowprefetch",
    "__PREFETCHWT1__": "prefetchwt1",
    "__FSGSBASE__": "fsgsbase",
    "__XSAVE__": "xsave",
    "__XSAVEOPT__": "xsaveopt",
    "__XSAVEC__": "xsavec",
    "__XSAVES__": "xsaves",
    "__CLFLUSHOPT__": "clflushopt",
    "__CLWB__": "clwb",
    "__CLZERO__": "clzero",
    "__MWAITX__": "mwaitx",
    "__WBNOINVD__": "wbnoinvd",
    "__PKU__": "pku",
    "__RTM__": "rtm",
    "__HLE__": "hle",
    "__LWP__": "lwp",
    "__XOP__": "xop",
    "__FMA4__": "fma4",
    "__SGX__": "sgx",
    "__PCONFIG__": "pconfig",
    "__MOVDIRI__": "movdiri",
    "__MOVDIR64B__": "movdir64b",
    "__WAITPKG__": "waitpkg",
    "__CLDEMOTE__": "cldemote",
    "__ENQCMD__": "enqcmd",
    "__SERIALIZE__": "serialize",
    "__TSXLDTRK__": "tsxldtrk",
    "__UINTR__": "uintr",
    "__HRESET__": "hreset",
    "__PTWRITE__": "ptwrite",
    "__KL__": "keylocker",
    "__WIDEKL__": "keylocker",
    "__CMPCCXADD__": "cmpccxadd",
    "__RAOINT__": "raoint",
    "__PREFETCHI__": "prefetchi",
    "__USER_MSR__": "user_msr",
    # Shadow-stack instructions sit in the hint-NOP space: a CPU without CET runs them as NOPs,
    # and the compiler emits them only for explicit intrinsics.
    "__SHSTK__": None,
    "__AVX__": "avx",
    "__AVX2__": "avx2",
    "__FMA__": "fma",
    "__F16C__": "f16c",
    "__AVXVNNI__": "avx_vnni",
    "__AVXIFMA__": "avx_ifma",
    "__AVXVNNIINT8__": "avx_vnni_int8",
    "__AVXVNNIINT16__": "avx_vnni_int16",
    "__AVXNECONVERT__": "avx_ne_convert",
    "__AVX512F__": "avx512f",
    "__AVX512CD__": "avx512cd",
    "__AVX512DQ__": "avx512dq",
    "__AVX512BW__": "avx512bw",
    "__AVX512VL__": "avx512vl",
    "__AVX512ER__": "avx512er",
    "__AVX512PF__": "avx512pf",
    "__AVX512IFMA__": "avx512ifma",
    "__AVX512VBMI__": "avx512vbmi",
    "__AVX512VBMI2__": "avx512_vbmi2",
    "__AVX512VNNI__": "avx512_vnni",
    "__AVX512BITALG__": "avx512_bitalg",
    "__AVX512VPOPCNTDQ__": "avx512_vpopcntdq",
    "__AVX512BF16__": "avx512_bf16",
    "__AVX512FP16__": "avx512_fp16",
    "__AVX512VP2INTERSECT__": "avx512_vp2intersect",
    "__AVX5124FMAPS__": "avx512_4fmaps",
    "__AVX5124VNNIW__": "avx512_4vnniw",
    "__AMX_TILE__": "amx_tile",
    "__AMX_INT8__": "amx_int8",
    "__AMX_BF16__": "amx_bf16",
    "__AMX_FP16__": "amx_fp16",
    "__AMX_COMPLEX__": "amx_complex",
}
# gcc's -m option for a macro where it is not the macro's name in lower case (__AVX2__ -> -mavx2): how a
# native compile turns off what the kernel hides (-mno-<option>).
GCC_OPTIONS = {
    "__SSE4_1__": "sse4.1",
    "__SSE4_2__": "sse4.2",
    "__LAHF_SAHF__": "sahf",
    "__GCC_HAVE_SYNC_COMPARE_AND_SWAP_16": "cx16",
    "__3dNOW__": "3dnow",
    "__3dNOW_A__": "3dnowa",
    "__AMX_TILE__": "amx-tile",
    "__AMX_INT8__": "amx-int8",
    "__AMX_BF16__": "amx-bf16",
    "__AMX_FP16__": "amx-fp16",
    "__AMX_COMPLEX__": "amx-complex",
    "__USER_MSR__": "usermsr",
}
# Uppercase macros that -m flags define and that name no instruction set.
NOT_ISA_MACROS = {"__SSE_MATH__", "__SSE2_MATH__", "__MMX_WITH_SSE__", "__EVEX512__", "__EVEX256__"}


# The file that describes this CPU as the kernel sees it; GPT_CPUINFO names another (tests, and containers
# whose /proc is masked). The runtime honours the same variable.
CPUINFO = "/proc/cpuinfo"
CPUINFO_ENV = "GPT_CPUINFO"


def cpuinfo_path() -> Path:
    return Path(os.environ.get(CPUINFO_ENV) or CPUINFO)


def cpu_flags(cpuinfo: str | None = None) -> set[str]:
    """The extensions this CPU may run: the flags that every processor in cpuinfo shows (x86's "flags",
    Arm's "Features"), as runtime/artifact/device.cpp reads them."""
    text = cpuinfo if cpuinfo is not None else cpuinfo_path().read_text()
    common = None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            flags = set(value.split())
            common = flags if common is None else common & flags
    return common or set()


def compiler_macros(compiler: str, flags: list[str]) -> dict[str, str]:
    """What `compiler <flags>` predefines for C++."""
    cmd = [compiler, *flags, "-dM", "-E", "-x", "c++", "/dev/null"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    macros = {}
    for line in out.splitlines():
        parts = line.split(maxsplit=2)
        if len(parts) >= 2 and parts[0] == "#define":
            macros[parts[1]] = parts[2] if len(parts) == 3 else ""
    return macros


def unknown_macros(compiler: str, flags: list[str]) -> list[str]:
    """ISA-like macros the flags add over the compiler's defaults that ISA_MACROS does not know."""
    added = set(compiler_macros(compiler, flags)) - set(compiler_macros(compiler, []))
    isa_like = {m for m in added if re.fullmatch(r"__[A-Z][A-Z0-9_]*__", m)}
    return sorted(isa_like - set(ISA_MACROS) - NOT_ISA_MACROS)


def extensions(compiler: str, flags: list[str]) -> list[str]:
    """The cpuinfo flags a CPU needs to run code `compiler <flags>` may emit."""
    unknown = unknown_macros(compiler, flags)
    if unknown:
        raise RuntimeError(f"{compiler} {' '.join(flags)} defines ISA macros with no cpuinfo flag known: {unknown}")
    macros = compiler_macros(compiler, flags)
    return sorted({ISA_MACROS[m] for m in macros if ISA_MACROS.get(m)})


def gcc_option(macro: str) -> str:
    """The -m option (without -m) that enables the extension behind an ISA macro."""
    return GCC_OPTIONS.get(macro) or macro.strip("_").lower()


def hidden_by_kernel(compiler: str, host: set[str] | None = None) -> list[str]:
    """Extensions -march=native enables (the CPU's CPUID says so) that the kernel does not show in cpuinfo."""
    have = cpu_flags() if host is None else host
    return [e for e in extensions(compiler, ["-march=native"]) if e not in have]


def native_flags(compiler: str, host: set[str] | None = None) -> list[str]:
    """A native compile's machine flags: -march=native, then -mno-<option> for each extension the kernel hides,
    so the compiled code uses only what this host may run."""
    hidden = set(hidden_by_kernel(compiler, host))
    macros = compiler_macros(compiler, ["-march=native"])
    flags = ["-march=native", *sorted({f"-mno-{gcc_option(m)}" for m in macros if ISA_MACROS.get(m) in hidden})]
    still = hidden & set(extensions(compiler, flags))
    if still:
        raise RuntimeError(f"{compiler} {' '.join(flags)} still allows {sorted(still)}, which the kernel hides")
    return flags


def missing_for_level(level: str, host: set[str] | None = None, compiler: str = "g++") -> list[str]:
    """The extensions of `level` this machine lacks (empty for native)."""
    if level == NATIVE:
        return []
    have = cpu_flags() if host is None else host
    return [e for e in extensions(compiler, [f"-march={level}"]) if e not in have]


def check_level(level: str) -> None:
    """Refuse a level this machine cannot run: its graphs could not be validated or timed here."""
    if level not in ISA_LEVELS:
        raise ValueError(f"unknown --isa {level!r}: choose from {', '.join(ISA_LEVELS)}")
    missing = missing_for_level(level)
    if missing:
        raise ValueError(
            f"--isa {level} needs {', '.join(missing)}, which this CPU lacks: the compile runs every graph "
            f"to check and time it, so compile on a machine that has them, or choose a lower level"
        )
