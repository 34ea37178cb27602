"""An artifact as a service user finds it: the files a compile writes are
readable by other users, and a file that exists but cannot be read is reported
as a permission problem, not as missing. As root the CLI runs as `nobody`
(setpriv), since root reads any file."""

import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CLI = Path(os.environ.get("GPT_CLI", ROOT / "build" / "cli" / "gpt"))
NOBODY = 65534

pytestmark = pytest.mark.skipif(not CLI.exists(), reason=f"gpt CLI not built at {CLI}")


def as_service_user(args: list[str]) -> subprocess.CompletedProcess:
    prefix = []
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("running as root without setpriv: cannot act as another user")
        prefix = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    return subprocess.run(prefix + args, capture_output=True, text=True, timeout=120)


@pytest.fixture
def shared_copy(artifacts):
    """A copy of the flash artifact in a directory every user may enter."""
    top = Path(tempfile.mkdtemp(prefix="gpt-perm-"))
    try:
        top.chmod(0o755)
        copy = top / "cpu"
        shutil.copytree(artifacts / "tiny-flash" / "cpu", copy)
        yield copy
    finally:
        shutil.rmtree(top, ignore_errors=True)


def test_compiled_artifacts_have_the_modes_the_umask_gives(artifacts):
    # tests/fixtures/build_artifacts.py compiles under the default umask 022.
    for artifact in sorted(artifacts.glob("tiny-*/cpu")):
        assert stat.S_IMODE(artifact.stat().st_mode) == 0o755, artifact
        for file in artifact.iterdir():
            assert stat.S_IMODE(file.stat().st_mode) == 0o644, file


def test_a_service_user_loads_an_artifact_it_may_read(shared_copy):
    result = as_service_user([str(CLI), "verify", str(shared_copy)])
    assert result.returncode == 0, result.stderr


def test_an_unreadable_file_is_a_permission_problem_not_a_missing_one(shared_copy):
    weights = shared_copy / "weights.safetensors"
    weights.chmod(0o600 if os.geteuid() == 0 else 0o000)  # root owns it: 0600 shuts out nobody
    result = as_service_user([str(CLI), "verify", str(shared_copy)])
    assert result.returncode != 0
    assert "may not read it" in result.stderr and "Permission denied" in result.stderr, result.stderr
    assert "weights.safetensors" in result.stderr
    assert "missing" not in result.stderr


def test_an_unreadable_manifest_is_a_permission_problem_not_no_artifact(shared_copy):
    (shared_copy / "manifest.json").chmod(0o600 if os.geteuid() == 0 else 0o000)
    result = as_service_user([str(CLI), "verify", str(shared_copy)])
    assert result.returncode != 0
    assert "manifest.json' exists but this process" in result.stderr, result.stderr
    assert "no manifest.json" not in result.stderr
