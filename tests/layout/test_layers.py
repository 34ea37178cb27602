"""scripts/check_layers.py: the runtime's folders include only the layers below
them, and the torch-free ones no torch header; gpt-server's transport/ includes
nothing of scheduling/ or api/, scheduling/ nothing of api/ or transport/, api/
may include both, and the top level's shared files no folder (main.cpp, which
wires them, any). Each case breaks a copy of the real runtime/ or deploy/server
tree in one place and expects the check to name that place."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHECK = ROOT / "scripts" / "check_layers.py"


def run_check(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(CHECK), *map(str, args)], capture_output=True, text=True)


@pytest.fixture
def runtime_copy(tmp_path: Path) -> Path:
    copy = tmp_path / "runtime"
    shutil.copytree(ROOT / "runtime", copy)
    return copy


@pytest.fixture
def server_copy(tmp_path: Path) -> Path:
    copy = tmp_path / "server"
    shutil.copytree(ROOT / "deploy" / "server", copy)
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


# ---- gpt-server -------------------------------------------------------------------------


def test_the_server_tree_is_layered():
    result = run_check("--server", str(ROOT / "deploy" / "server"))
    assert result.returncode == 0, result.stdout


def test_the_default_run_checks_the_runtime_and_the_server():
    result = run_check()
    assert result.returncode == 0, result.stdout


# (file, the include planted in it, what the check says of it)
PLANTED = {
    "transport includes api": (
        "transport/connection.cpp",
        '#include "api/http_server.h"',
        "transport/ may include no other folder, not api/",
    ),
    "transport includes scheduling": (
        "transport/router.h",
        '#include "scheduling/job.h"',
        "transport/ may include no other folder, not scheduling/",
    ),
    "transport includes the top level, unprefixed": (
        "transport/listener.cpp",
        '#include "metrics.h"',
        "transport/ may include no other folder, not the top level",
    ),
    "scheduling includes api": (
        "scheduling/scheduler.cpp",
        '#include "api/reply.h"',
        "scheduling/ may include the top level, not api/",
    ),
    "scheduling includes transport": (
        "scheduling/job.h",
        '#include "transport/http_message.h"',
        "scheduling/ may include the top level, not transport/",
    ),
    "the top level includes scheduling": (
        "metrics.cpp",
        '#include "scheduling/scheduler.h"',
        "the top level may include no other folder, not scheduling/",
    ),
    "a header that is not there yet": (
        "transport/worker_pool.h",
        '#include "api/not_written_yet.h"',
        "transport/ may include no other folder, not api/",
    ),
}


@pytest.mark.parametrize("case", PLANTED)
def test_an_include_across_the_rule_fails(server_copy: Path, case: str):
    file, include, message = PLANTED[case]
    bad = server_copy / file
    number = add_line_after_includes(bad, include)
    result = run_check("--server", str(server_copy))
    assert result.returncode == 1
    assert result.stdout.splitlines() == [f"{bad}:{number}: {message}"]


def test_main_may_include_every_folder(server_copy: Path):
    add_line_after_includes(server_copy / "main.cpp", '#include "transport/listener.h"')
    result = run_check("--server", str(server_copy))
    assert result.returncode == 0, result.stdout


def test_api_may_include_transport_and_scheduling(server_copy: Path):
    path = server_copy / "api" / "reply.cpp"
    add_line_after_includes(path, '#include "transport/router.h"')
    add_line_after_includes(path, '#include "scheduling/job.h"')
    result = run_check("--server", str(server_copy))
    assert result.returncode == 0, result.stdout


def test_a_server_file_outside_its_folders_fails(server_copy: Path):
    (server_copy / "misc").mkdir()
    (server_copy / "misc" / "stray.cpp").write_text("int stray;\n")
    result = run_check("--server", str(server_copy))
    assert result.returncode == 1
    assert "stray.cpp: not in a layer folder" in result.stdout
