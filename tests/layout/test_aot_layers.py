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


# (module, the lines planted at its end, what the check says of the last of them)
PLANTED = {
    "a higher layer": (
        "model/gpt.py",
        "from gpt_aot.compiler.target import Target",
        "model/ may import base/, not compiler/ (gpt_aot.compiler.target)",
    ),
    "inside a function": (
        "base/files.py",
        "def later():\n    from gpt_aot.model import gpt",
        "base/ may import no other folder, not model/ (gpt_aot.model.gpt)",
    ),
    "a sibling, relatively": (
        "text/tokenizer.py",
        "from ..model import config",
        "text/ may import base/, not model/ (gpt_aot.model.config)",
    ),
    "the compiler's sibling, the importers": (
        "compiler/pipeline.py",
        "import gpt_aot.importers.weights",
        "compiler/ may import base/, model/, text/, artifact/, not importers/",
    ),
    "the CLI": (
        "artifact/signing.py",
        "from gpt_aot.__main__ import main",
        "artifact/ imports gpt_aot.__main__, above every layer",
    ),
}


@pytest.mark.parametrize("case", PLANTED)
def test_a_planted_import_fails_at_its_line(package_copy: Path, case: str):
    module, planted, message = PLANTED[case]
    bad = package_copy / module
    number = append(bad, planted)
    result = run_check(package_copy)
    assert result.returncode == 1
    assert f"{bad}:{number}: {message}" in result.stdout


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
