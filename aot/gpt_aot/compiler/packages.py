"""A compiled .pt2 package read back: its generated C++ sources, and from the
comments in them the compile commands that built its code.

AOTInductor writes each compiler command line into the .cpp sources it packs
(`// <compiler> <source> ... -o <out>`), so what a package was compiled for is
read from the package itself, never from what the compile meant to ask for.
"""

import json
import zipfile
from pathlib import Path

from gpt_aot.compiler import isa
from gpt_aot.model import kernels


def package_sources(package: Path, suffix: str = ".cpp") -> str:
    """The generated C++ sources of a .pt2 package whose names end in `suffix`, concatenated."""
    with zipfile.ZipFile(package) as z:
        return "".join(z.read(n).decode() + "\n" for n in z.namelist() if n.endswith(suffix))


def wrapper_source(package: Path) -> str:
    """The generated C++ wrapper code of a .pt2 package."""
    return package_sources(package, "wrapper.cpp")


def extern_operators(package: Path) -> set[str]:
    """The operators a package calls through AOTInductor's proxy executor (those outside its C shim, such as the
    kernel library's `gpt_kernels::...`), as its wrapper's extern-node files name them."""
    with zipfile.ZipFile(package) as z:
        files = [json.loads(z.read(n)) for n in z.namelist() if n.endswith("wrapper.json")]
    return {node["node"]["target"] for f in files for node in f.get("nodes", [])}


def kernel_operators(package: Path) -> set[str]:
    """The kernel library's operators a package calls: as the C functions of kernels/c_shims.h (the generated wrapper
    checks each call's status: `AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_cpu_<operator>(`), or through the proxy
    executor where a package was compiled without their declarations."""
    code = wrapper_source(package)
    shims = kernels.c_shim_declarations()
    direct = {f"gpt_kernels::{name}" for name in shims if f"AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_cpu_{name}(" in code}
    return direct | {op for op in extern_operators(package) if op.startswith("gpt_kernels::")}


def kernel_sources(package: Path) -> str:
    """The generated C++ kernel code of a .pt2 package (CPU graphs; CUDA kernels are not C++)."""
    return package_sources(package, "kernel.cpp")


def compile_commands(package: Path) -> list[list[str]]:
    """Every compiler command line recorded in a .pt2's C++ sources: `// <compiler> <source> ... -o <out>`."""
    commands = []
    for line in package_sources(package).splitlines():
        words = line.removeprefix("// ").split()
        if line.startswith("// ") and "-o" in words and len(words) > 1 and words[1].endswith((".cpp", ".o")):
            commands.append(words)
    return commands


def machine_flags(command: list[str]) -> list[str]:
    """The -march/-m flags of one command line: everything that chooses instructions."""
    return [w for w in command[1:] if w.startswith("-m")]


def package_isa(packages: list[Path]) -> dict:
    """The manifest's record of what the packages' code was compiled for: flags and the extensions they allow."""
    compilers, flags = set(), []
    for package in packages:
        commands = compile_commands(package)
        if not commands:
            raise RuntimeError(f"{package.name}: no compile command recorded in its sources")
        for command in commands:
            compilers.add(command[0])
            flags += [f for f in machine_flags(command) if f not in flags]
    if len(compilers) != 1:
        raise RuntimeError(f"packages were compiled by several compilers: {sorted(compilers)}")
    compiler = compilers.pop()
    disabled = [f.removeprefix("-mno-") for f in flags if f.startswith("-mno-")]
    derivation = f"the ISA macros `{Path(compiler).name} -dM -E <isa_flags>` predefines, as cpuinfo flags"
    if disabled:
        derivation += f"; -mno-{', -mno-'.join(disabled)}: extensions this host's CPU reports but its kernel hides"
    return {"isa_flags": flags, "isa_extensions": isa.extensions(compiler, flags), "isa_derivation": derivation}
