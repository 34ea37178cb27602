"""Fixtures of the gpt-server tests."""

from pathlib import Path

import pytest
from server_process import Server


@pytest.fixture
def serve(tmp_path):
    """Starts servers (model, *flags) that are killed when the test ends."""
    servers = []

    def start(model: Path, *flags: str) -> Server:
        server = Server(tmp_path, model, *flags)
        servers.append(server)
        return server

    yield start
    for s in servers:
        s.stop()
