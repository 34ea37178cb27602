"""compiler/torch_patches.py: torch's private functions are replaced inside a compiling_for block only, and the
module refuses a torch whose release or private names are not those the replacements were written for."""

import contextlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch._inductor import codecache, config, cpp_builder, cpu_vec_isa
from torch._inductor.codegen import cpp as cpp_codegen
from torch._inductor.utils import run_and_get_cpp_code

import gpt_aot
from gpt_aot.compiler import torch_patches


def replaced_functions() -> tuple:
    return cpp_builder._get_optimization_cflags, cpu_vec_isa.pick_vec_isa, codecache.pick_vec_isa


def test_the_torch_here_is_the_release_the_patches_were_written_for():
    assert torch_patches.problems(torch.__version__) == []


def test_importing_the_module_replaces_nothing():
    cflags, pick, codecache_pick = replaced_functions()
    assert cflags.__module__ == "torch._inductor.cpp_builder"
    assert pick.__module__ == "torch._inductor.cpu_vec_isa" and codecache_pick is pick


def test_the_replacements_last_as_long_as_the_block_even_when_it_fails():
    before = replaced_functions()
    with pytest.raises(RuntimeError, match="the compile failed"), torch_patches.compiling_for("x86-64-v3"):
        assert replaced_functions()[0] is not before[0]
        assert str(cpu_vec_isa.pick_vec_isa()) == str(codecache.pick_vec_isa()) == "avx2"
        raise RuntimeError("the compile failed")
    assert replaced_functions() == before


def parallel_regions(rows: int, width: int, *, level: str | None, dynamic_rows: bool = False) -> int:
    """OpenMP regions in the C++ Inductor writes for a layer norm and a GELU of (rows, width), as the artifacts are
    compiled (threads asked of OpenMP at run time), inside a compiling_for(level) block or outside any."""

    def norm_gelu(x):
        return torch.nn.functional.gelu(torch.nn.functional.layer_norm(x, (x.shape[-1],)), approximate="tanh")

    x = torch.randn(rows, width)
    if dynamic_rows:
        torch._dynamo.mark_dynamic(x, 0)
    torch._dynamo.reset()
    with config.patch({"cpp.dynamic_threads": True, "fx_graph_cache": False}):
        with torch_patches.compiling_for(level) if level else contextlib.nullcontext():
            _, code = run_and_get_cpp_code(torch.compile(norm_gelu), x)
    return code.count("#pragma omp parallel")


def test_inside_the_block_only_small_loops_of_known_sizes_run_without_a_parallel_region():
    decide = cpp_codegen.CppKernel.decide_parallel_depth
    # A decode step's row of GPT-2 (768): every loop nest under SERIAL_BELOW elements, where Inductor alone forks
    assert 768 * 4 < torch_patches.SERIAL_BELOW
    assert parallel_regions(1, 768, level=None) > 0
    assert parallel_regions(1, 768, level="x86-64-v3") == 0
    # larger loops, and loops sized by a symbol (decode's rows), keep Inductor's regions
    assert 8 * 3072 >= torch_patches.SERIAL_BELOW
    assert parallel_regions(8, 3072, level="x86-64-v3") > 0
    assert parallel_regions(2, 768, level="x86-64-v3", dynamic_rows=True) > 0
    assert cpp_codegen.CppKernel.decide_parallel_depth is decide


def test_another_torch_release_is_refused_with_what_to_update():
    (found,) = torch_patches.problems("2.12.0+cu130")
    assert "torch 2.12.0+cu130 is not 2.11.x" in found
    assert "PRIVATE" in found and "WRITTEN_FOR" in found


@pytest.mark.parametrize("name", torch_patches.PRIVATE)
def test_a_private_name_gone_from_torch_is_named(monkeypatch, name: str):
    *path, last = name.split(".")
    owner = torch._inductor
    for part in path:
        owner = getattr(owner, part)
    monkeypatch.delattr(owner, last)
    (found,) = torch_patches.problems(torch.__version__)
    assert f"torch {torch.__version__} has no torch._inductor.{name}:" in found


def test_the_import_itself_fails_under_another_release():
    script = "import gpt_aot, torch\ntorch.__version__ = '2.12.0'\nimport gpt_aot.compiler.torch_patches\n"
    aot = str(Path(gpt_aot.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [aot, os.environ.get("PYTHONPATH")]))}
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env)
    assert result.returncode != 0
    assert "RuntimeError: torch 2.12.0 is not 2.11.x" in result.stderr


def run_cli_under_another_release(*args: str) -> subprocess.CompletedProcess:
    """`python -m gpt_aot ARGS` in a process whose torch says it is 2.12.0."""
    script = (
        "import runpy, sys, torch\ntorch.__version__ = '2.12.0'\n"
        f"sys.argv = ['gpt_aot', *{list(args)!r}]\nrunpy.run_module('gpt_aot', run_name='__main__')\n"
    )
    aot = str(Path(gpt_aot.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [aot, os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env)


def test_only_the_compile_refuses_another_release(tmp_path):
    keygen = run_cli_under_another_release("keygen", "-o", str(tmp_path / "k"))
    assert keygen.returncode == 0, keygen.stderr
    assert (tmp_path / "k.key").exists() and (tmp_path / "k.pub").exists()
    compile_ = run_cli_under_another_release("compile", "--config", "tiny", "-o", str(tmp_path / "m"))
    assert compile_.returncode != 0
    assert "gpt_aot: error: torch 2.12.0 is not 2.11.x" in compile_.stderr  # a message, not a traceback
    assert not (tmp_path / "m").exists()
