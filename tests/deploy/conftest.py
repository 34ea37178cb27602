"""Fixtures of the gpt-server tests."""

from pathlib import Path

import pytest
from server_process import Server


@pytest.fixture
def serve(tmp_path):
    """Starts servers (model, *flags, env=extra environment) that are killed when the test ends."""
    servers = []

    def start(model: Path, *flags: str, env: dict | None = None) -> Server:
        server = Server(tmp_path, model, *flags, env=env)
        servers.append(server)
        return server

    yield start
    for s in servers:
        s.stop()
