"""CPU instruction-set levels: the flags a level compiles with, the extensions the
manifest records from them, and the same logits from a portable artifact as from
a native one."""

import json

import pytest
import torch

from gpt_aot.artifact.golden import GOLDEN_TOLERANCE
from gpt_aot.artifact.loader import ArtifactGraphs
from gpt_aot.compiler import isa, packages, torch_patches
from gpt_aot.compiler.target import resolve
from gpt_aot.model import kernels

pytestmark = pytest.mark.skipif(
    isa.missing_for_level("x86-64-v3") != [], reason="this machine cannot run x86-64-v3 code"
)
AVX512_FLAG_PREFIXES = ("-mavx512", "-mamx", "-march=x86-64-v4")


@pytest.fixture(scope="module")
def compiled(artifacts):
    """tiny-naive, compiled for x86-64-v3 (tests/fixtures/build_artifacts.py), beside tiny-math, compiled natively
    from the same weights with the same linear forms; the attention kernels differ, which the logits' tolerance
    covers (both are also compared with eager PyTorch)."""

    def read(name):
        directory = artifacts / name / "cpu"
        return directory, json.loads((directory / "manifest.json").read_text())

    return {"native": read("tiny-math"), "v3": read("tiny-naive")}


def test_v3_artifact_records_exactly_the_extensions_of_the_flags_in_its_packages(compiled):
    directory, manifest = compiled["v3"]
    pt2_files = sorted(directory.glob("*.pt2"))
    assert {p.stem for p in pt2_files} == {"prefill", "decode", "decode_one", "extend"}
    flags, compilers = [], set()
    for package in pt2_files:
        commands = packages.compile_commands(package)
        assert commands, package  # a compile (.o) and a link (.so) per package at least
        for command in commands:
            compilers.add(command[0])
            flags += [w for w in command if w.startswith("-m")]
            assert "-march=native" not in command, package
            assert "-march=x86-64-v3" in command, package
            assert not [w for w in command if w.startswith(AVX512_FLAG_PREFIXES)], package
    assert len(compilers) == 1
    expected = isa.extensions(compilers.pop(), sorted(set(flags)))
    target = manifest["target"]
    assert target["isa_level"] == "x86-64-v3" and target["isa"] == "avx2"
    # The kernel library ran the level's path while the compile measured and checked (kernels.running_for).
    assert target["kernels_path"] == "avx2"
    assert target["isa_extensions"] == expected
    assert set(target["isa_flags"]) == set(flags)
    # what x86-64-v3 is (psABI): AVX2, FMA, BMI1/2, F16C, LZCNT, MOVBE, XSAVE on top of v2; no AVX-512
    assert {"avx", "avx2", "fma", "bmi1", "bmi2", "f16c", "abm", "movbe", "xsave", "sse4_2", "popcnt"} <= set(expected)
    assert not [e for e in expected if e.startswith(("avx512", "amx"))]
    assert set(expected) <= isa.cpu_flags()  # compiled here: this machine runs it


def test_native_artifact_records_the_hosts_extensions(compiled):
    directory, manifest = compiled["native"]
    target = manifest["target"]
    assert target["isa_level"] == "native" and "-march=native" in target["isa_flags"]
    assert target["isa_extensions"] == isa.extensions("g++", target["isa_flags"])
    assert target["isa_extensions"] == packages.package_isa(sorted(directory.glob("*.pt2")))["isa_extensions"]
    # -march=native asks for more than the level: this host's extras (e.g. sha_ni, vaes) are what breaks old CPUs
    v3 = set(compiled["v3"][1]["target"]["isa_extensions"])
    assert v3 < set(target["isa_extensions"]) <= isa.cpu_flags()


def test_training_graphs_compile_commands_are_read_too(artifacts):
    directory = artifacts / "tiny-math" / "cpu"
    pt2_files = sorted(directory.glob("*.pt2"))
    assert {p.stem for p in pt2_files} >= {"train_step", "eval_loss", "adamw"}
    for package in pt2_files:  # every graph recorded its commands; the manifest's flags are all of theirs
        flags = {w for command in packages.compile_commands(package) for w in packages.machine_flags(command)}
        assert "-march=native" in flags, package
        assert flags <= set(json.loads((directory / "manifest.json").read_text())["target"]["isa_flags"])


def test_v3_artifact_gives_the_native_artifacts_logits(compiled, fixtures):
    native, portable = ArtifactGraphs(compiled["native"][0]), ArtifactGraphs(compiled["v3"][0])
    eager = fixtures.tiny_model("math")
    atol, rtol = GOLDEN_TOLERANCE[torch.float32]
    gen = torch.Generator().manual_seed(5)
    for rows in (2, 1):  # prefill, then the batched decode (2 rows) or decode_one (1 row)
        idx = torch.randint(0, fixtures.CONFIG.vocab_size, (rows, 7), generator=gen)
        tok, pos = torch.full((rows, 1), 3), torch.full((rows,), 7)
        kv_n, kv_p, kv_e = native.new_kv_cache(rows), portable.new_kv_cache(rows), eager.new_kv_cache(rows)
        with torch.no_grad():
            got, want = portable.prefill(idx, kv_p), native.prefill(idx, kv_n)
            torch.testing.assert_close(got, want, atol=atol, rtol=rtol)
            torch.testing.assert_close(got, eager.prefill(idx, kv_e), atol=atol, rtol=rtol)
            got, want = portable.decode(tok, pos, kv_p), native.decode(tok, pos, kv_n)
            torch.testing.assert_close(got, want, atol=atol, rtol=rtol)
            torch.testing.assert_close(got, eager.decode(tok, pos, kv_e), atol=atol, rtol=rtol)


def test_v4_compile_flags_are_the_level_and_plain_avx512_without_compiling():
    """x86-64-v4 cannot be compiled here without AVX-512, so the command Inductor would run is checked."""
    from torch._inductor import cpp_builder, cpu_vec_isa

    with torch_patches.compiling_for("x86-64-v4"):
        vec = cpu_vec_isa.pick_vec_isa()
        options = cpp_builder.CppTorchDeviceOptions(vec_isa=vec, device_type="cpu", aot_mode=True)
        command = cpp_builder.CppBuilder(name="o", sources="i", BuildOption=options).get_command_line().split()
    assert str(vec) == "avx512" and vec.bit_width() == 512
    assert "-march=x86-64-v4" in command and "-march=native" not in command
    machine = [w for w in command if w.startswith("-m")]
    assert not [w for w in machine if w.startswith(("-mavx512bf16", "-mavx512vnni", "-mamx"))]
    assert set(isa.extensions("g++", machine)) == set(isa.extensions("g++", ["-march=x86-64-v4"]))
    # the block restores Inductor: native flags and the host's own pick afterwards
    after = cpp_builder.CppTorchDeviceOptions(vec_isa=cpu_vec_isa.pick_vec_isa(), device_type="cpu", aot_mode=True)
    assert "-march=native" in cpp_builder.CppBuilder(name="o", sources="i", BuildOption=after).get_command_line()


def test_a_level_this_machine_cannot_run_is_refused_by_its_missing_extensions():
    missing = isa.missing_for_level("x86-64-v4", host=isa.cpu_flags() - {"avx512bw"} | {"avx512f"})
    assert "avx512bw" in missing and "avx512f" not in missing
    if isa.missing_for_level("x86-64-v4"):
        with pytest.raises(ValueError, match=r"--isa x86-64-v4 needs avx512"):
            resolve("cpu", "auto", "fp32", "x86-64-v4")
    with pytest.raises(ValueError, match="unknown --isa"):
        resolve("cpu", "auto", "fp32", "x86-64-v9")
    with pytest.raises(ValueError, match="for CPU targets"):
        resolve("cuda", "auto", "fp32", "x86-64-v3")


def test_every_isa_macro_the_compiler_knows_maps_to_a_cpuinfo_flag():
    # The richest -march values this compiler knows leave no ISA macro unmapped.
    for march in ("sapphirerapids", "znver3", "x86-64-v4", "native"):
        assert isa.unknown_macros("g++", [f"-march={march}"]) == [], march
    assert "avx512_bf16" in isa.extensions("g++", ["-march=x86-64-v4", "-mavx512bf16"])
    assert {"amx_tile", "amx_bf16"} <= set(isa.extensions("g++", ["-march=sapphirerapids"]))


def test_cpu_flags_reads_the_flags_line():
    text = "processor\t: 0\nflags\t\t: fpu sse2 avx2\nbugs\t\t: none\n"
    assert isa.cpu_flags(text) == {"fpu", "sse2", "avx2"}
    assert isa.cpu_flags("processor: 0\n") == set()


def test_cpu_flags_are_those_every_processor_shows_and_not_other_flag_lists():
    text = (
        "processor\t: 0\nflags\t\t: fpu sse2 avx2 rdseed\nvmx flags\t: vnmi ept\n\n"
        "processor\t: 1\nflags\t\t: fpu sse2 avx2\nvmx flags\t: vnmi\n"
    )
    assert isa.cpu_flags(text) == {"fpu", "sse2", "avx2"}
    assert isa.cpu_flags("processor: 0\nFeatures\t: fp asimd\n") == {"fp", "asimd"}  # Arm's name for the list


def test_gcc_option_turns_off_each_extension_the_compiler_can_enable():
    """native_flags disables a hidden extension with -mno-<gcc_option>: each option must exist and turn its macro
    off, for every ISA macro the richest -march values this compiler knows define."""
    macros = set()
    for march in ("sapphirerapids", "znver3", "native"):
        macros |= {m for m in isa.compiler_macros("g++", [f"-march={march}"]) if isa.ISA_MACROS.get(m)}
    assert {"__RDSEED__", "__AVX2__", "__SSE4_2__", "__LAHF_SAHF__"} <= macros
    for macro in sorted(macros):
        march = "sapphirerapids" if macro in isa.compiler_macros("g++", ["-march=sapphirerapids"]) else "znver3"
        off = isa.compiler_macros("g++", [f"-march={march}", f"-mno-{isa.gcc_option(macro)}"])
        assert macro not in off, (macro, isa.gcc_option(macro))


def test_a_native_compile_leaves_out_what_the_kernel_hides():
    """The host of the issue: CPUID (and so -march=native) reports rdseed, the kernel's cpuinfo does not."""
    native = isa.extensions("g++", ["-march=native"])
    here = isa.cpu_flags()
    assert isa.native_flags("g++", here | set(native)) == ["-march=native"]  # nothing hidden: Inductor's own flags
    hidden = next(e for e in ("rdseed", "adx", "sha_ni", "avx2") if e in native)
    host = (here | set(native)) - {hidden}
    flags = isa.native_flags("g++", host)
    assert flags[0] == "-march=native" and len(flags) > 1
    allowed = isa.extensions("g++", flags)
    assert hidden not in allowed and set(allowed) <= host
    assert isa.hidden_by_kernel("g++", host) == [hidden]


def test_the_fixture_compiled_on_a_host_hiding_an_extension_records_and_obeys_it(artifacts, fixtures):
    """tiny-other was compiled with GPT_CPUINFO naming a cpuinfo without one extension -march=native enables
    (tests/fixtures/build_artifacts.py): every package was compiled with it turned off, the manifest's list lacks
    it and says how it was derived."""
    cpuinfo = artifacts / fixtures.HIDDEN_CPUINFO
    host = isa.cpu_flags(cpuinfo.read_text())
    hidden = set(isa.extensions("g++", ["-march=native"])) & isa.cpu_flags() - host
    assert len(hidden) == 1
    (extension,) = hidden
    directory = artifacts / "tiny-other" / "cpu"
    target = json.loads((directory / "manifest.json").read_text())["target"]
    assert target["isa_level"] == "native"
    assert extension not in target["isa_extensions"] and set(target["isa_extensions"]) <= host
    assert "-march=native" in target["isa_flags"] and any(f.startswith("-mno-") for f in target["isa_flags"])
    assert "kernel hides" in target["isa_derivation"]
    for package in sorted(directory.glob("*.pt2")):
        for command in packages.compile_commands(package):
            assert extension not in isa.extensions(command[0], packages.machine_flags(command)), package
    # the other fixtures were compiled on this host as it is: they lack what its own kernel hides (Linux hides
    # rdseed on some AMD CPUs), and nothing else
    native = json.loads((artifacts / "tiny-math" / "cpu" / "manifest.json").read_text())["target"]
    assert extension in native["isa_extensions"]
    hidden_here = isa.hidden_by_kernel("g++", isa.cpu_flags())
    assert native["isa_derivation"].startswith("the ISA macros")
    assert ("kernel hides" in native["isa_derivation"]) == bool(hidden_here)
    assert not set(hidden_here) & set(native["isa_extensions"])


def test_a_native_compile_lowers_inductors_vector_isa_below_what_the_kernel_hides():
    """Inductor picks its vector ISA from CPUID as well: one whose flags need a hidden extension is passed over."""
    from torch._inductor import cpu_vec_isa

    picked = cpu_vec_isa.pick_vec_isa()
    ours = torch_patches.native_vec_isa("g++")
    if not picked or set(isa.extensions("g++", picked.build_arch_flags().split())) <= isa.cpu_flags():
        assert str(ours) == str(picked)  # nothing it needs is hidden: Inductor's own pick
    else:  # this host's kernel hides some of what Inductor's pick needs (an AVX2-only cpuinfo on an AVX-512 CPU)
        assert str(ours) != str(picked)
        assert not ours or set(isa.extensions("g++", ours.build_arch_flags().split())) <= isa.cpu_flags()
    if picked:
        needed = set(isa.extensions("g++", picked.build_arch_flags().split()))
        lowered = torch_patches.native_vec_isa("g++", isa.cpu_flags() - {max(needed)})
        assert str(lowered) != str(picked)
        assert not lowered or set(isa.extensions("g++", lowered.build_arch_flags().split())) <= isa.cpu_flags() - {
            max(needed)
        }


def test_the_kernels_run_a_levels_path_while_its_compile_measures_and_the_cpus_own_after():
    """kernels.running_for: x86-64-v3's floor is AVX2 + FMA, the library's avx2 path; a native compile leaves the
    choice to the CPU (and GPT_KERNELS_ISA); the override ends with the block, however it ends."""
    own = kernels.active_path()
    with kernels.running_for("x86-64-v3"):
        assert kernels.active_path() == "avx2"
    assert kernels.active_path() == own
    with kernels.running_for(isa.NATIVE):
        assert kernels.active_path() == own
    with pytest.raises(RuntimeError, match="stop"), kernels.running_for("x86-64-v3"):
        raise RuntimeError("stop")
    assert kernels.active_path() == own
