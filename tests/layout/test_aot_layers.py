"""scripts/check_aot_layers.py: gpt_aot's subpackages import only the layers below them, and no module imports
itself back round a cycle. Each case breaks a copy of the real aot/gpt_aot tree in one place and expects the
check to name that place."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHECK = ROOT / "scripts" / "check_aot_layers.py"


def run_check(package: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(CHECK), str(package)], capture_output=True, text=True)


@pytest.fixture
def package_copy(tmp_path: Path) -> Path:
    copy = tmp_path / "gpt_aot"
    shutil.copytree(ROOT / "aot" / "gpt_aot", copy, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


def append(path: Path, text: str) -> int:
    """Appends `text` (one or more lines) to a module; returns the 1-based number of its last line."""
    lines = path.read_text().splitlines() + text.splitlines()
    path.write_text("\n".join(lines) + "\n")
    return len(lines)


def test_the_aot_tree_is_layered():
    result = run_check(ROOT / "aot" / "gpt_aot")
    assert result.returncode == 0, result.stdout


def test_an_import_from_a_higher_layer_fails(package_copy: Path):
    bad = package_copy / "model" / "gpt.py"
    number = append(bad, "from gpt_aot.compiler.target import Target")
    result = run_check(package_copy)
    assert result.returncode == 1
    assert f"{bad}:{number}: model/ may import base/, not compiler/ (gpt_aot.compiler.target)" in result.stdout


def test_an_import_inside_a_function_counts(package_copy: Path):
    bad = package_copy / "base" / "files.py"
    number = append(bad, "def later():\n    from gpt_aot.model import gpt")
    result = run_check(package_copy)
    assert result.returncode == 1
    assert f"{bad}:{number}: base/ may import no other folder, not model/ (gpt_aot.model.gpt)" in result.stdout


def test_a_relative_import_from_a_sibling_fails(package_copy: Path):
    bad = package_copy / "text" / "tokenizer.py"
    number = append(bad, "from ..model import config")
    result = run_check(package_copy)
    assert result.returncode == 1
    assert f"{bad}:{number}: text/ may import base/, not model/ (gpt_aot.model.config)" in result.stdout


def test_the_compiler_may_not_import_its_sibling_the_importers(package_copy: Path):
    bad = package_copy / "compiler" / "pipeline.py"
    number = append(bad, "import gpt_aot.importers.weights")
    result = run_check(package_copy)
    assert result.returncode == 1
    assert f"{bad}:{number}: compiler/ may import base/, model/, text/, artifact/, not importers/" in result.stdout


def test_a_layer_importing_the_cli_fails(package_copy: Path):
    bad = package_copy / "artifact" / "signing.py"
    number = append(bad, "from gpt_aot.__main__ import main")
    result = run_check(package_copy)
    assert result.returncode == 1
    assert f"{bad}:{number}: artifact/ imports gpt_aot.__main__, above every layer" in result.stdout


def test_an_import_cycle_fails_even_inside_one_layer(package_copy: Path):
    # The cycle this layout ended: isa read the packages through inductor, which compiles with isa.
    bad = package_copy / "compiler" / "isa.py"
    number = append(bad, "def compile_commands(package):\n    from gpt_aot.compiler.inductor import compile_package")
    result = run_check(package_copy)
    assert result.returncode == 1
    inductor = package_copy / "compiler" / "inductor.py"
    line = next(i for i, text in enumerate(inductor.read_text().splitlines(), 1) if "compiler import isa" in text)
    assert result.stdout == (
        f"{inductor}:{line}: import cycle: gpt_aot.compiler.inductor (line {line}) -> "
        f"gpt_aot.compiler.isa (line {number}) -> gpt_aot.compiler.inductor\n"
    )


def test_a_module_outside_the_layer_folders_fails(package_copy: Path):
    (package_copy / "stray.py").write_text("STRAY = 1\n")
    result = run_check(package_copy)
    assert result.returncode == 1
    assert "stray.py: not in a layer folder" in result.stdout
