"""scripts/check_layers.py: the runtime's folders include only the layers below
them, and the torch-free ones no torch header. Each case breaks a copy of the
real runtime/ tree in one place and expects the check to name that place."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHECK = ROOT / "scripts" / "check_layers.py"


def run_check(runtime: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(CHECK), str(runtime)], capture_output=True, text=True)


@pytest.fixture
def runtime_copy(tmp_path: Path) -> Path:
    copy = tmp_path / "runtime"
    shutil.copytree(ROOT / "runtime", copy)
    return copy


def add_line_after_includes(path: Path, line: str) -> int:
    """Inserts `line` after the file's first #include; returns its 1-based line number."""
    lines = path.read_text().splitlines()
    at = next(i for i, text in enumerate(lines) if text.startswith("#include")) + 1
    lines.insert(at, line)
    path.write_text("\n".join(lines) + "\n")
    return at + 1


def test_the_runtime_tree_is_layered():
    result = run_check(ROOT / "runtime")
    assert result.returncode == 0, result.stdout


@pytest.mark.parametrize("header", ["<ATen/Tensor.h>", "<torch/torch.h>", "<c10/core/Device.h>"])
def test_a_torch_header_in_the_torch_free_readers_fails(runtime_copy: Path, header: str):
    bad = runtime_copy / "formats" / "manifest.cpp"
    number = add_line_after_includes(bad, f"#include {header}")
    result = run_check(runtime_copy)
    assert result.returncode == 1
    assert f"{bad}:{number}: formats/ is torch-free" in result.stdout
    assert header in result.stdout


def test_an_include_from_a_higher_layer_fails(runtime_copy: Path):
    bad = runtime_copy / "exec" / "session.cpp"
    number = add_line_after_includes(bad, '#include "train/trainer.h"')
    result = run_check(runtime_copy)
    assert result.returncode == 1
    assert f"{bad}:{number}: exec/ may include base/, formats/, text/, artifact/, not train/" in result.stdout


def test_a_file_outside_the_layer_folders_fails(runtime_copy: Path):
    (runtime_copy / "stray.cpp").write_text("int stray;\n")
    result = run_check(runtime_copy)
    assert result.returncode == 1
    assert "stray.cpp: not in a layer folder" in result.stdout
