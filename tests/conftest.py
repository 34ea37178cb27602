"""Shared fixtures: the test artifacts are compiled once per run.

scripts/test.sh builds them before pytest and passes GPT_TEST_ARTIFACTS; run
alone, pytest builds them into a temporary directory.
"""

import os
import sys
from pathlib import Path

import pytest

import gpt_aot  # noqa: F401  before torch: it binds torch's std::filesystem calls to libstdc++ (see there)

sys.path.insert(0, str(Path(__file__).resolve().parent / "fixtures"))

import build_artifacts  # noqa: E402


def pytest_configure(config):
    # pytest-xdist's mark (tests/aot/test_cuda.py), known also where xdist is not installed.
    config.addinivalue_line("markers", "xdist_group(name): run in one xdist worker with the rest of its group")
    config.addinivalue_line("markers", "full: runs only in the full suite (scripts/test.sh --full, GPT_FULL=1)")


def pytest_collection_modifyitems(config, items):
    """The per-submission run leaves out the `full` tests: each measures a property of code that other,
    faster tests cover (e.g. what quantization costs a trained model's loss), at minutes apiece."""
    if os.environ.get("GPT_FULL"):
        return
    skip = pytest.mark.skip(reason="full suite only: scripts/test.sh --full runs it")
    for item in items:
        if "full" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def artifacts(tmp_path_factory) -> Path:
    given = os.environ.get("GPT_TEST_ARTIFACTS")
    if given and (Path(given) / "reference.safetensors").exists():
        return Path(given)
    out = tmp_path_factory.mktemp("artifacts")
    build_artifacts.build(out)
    return out


@pytest.fixture(scope="session")
def fixtures():
    return build_artifacts
