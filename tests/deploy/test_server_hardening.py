"""gpt-server against hostile clients, over loopback with raw sockets: request
bodies over the cap refused in every transfer encoding without being buffered,
request heads bounded in size, count and time, /admin/* behind a bearer token and
a models root, and probes that answer while 200 idle keep-alive connections are
open. Every wait is bounded; every server is killed at the end of its test.
"""

import gzip
import json
import os
import select
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest
from server_process import SERVER, Server, admin_flags, vm_rss_bytes

pytestmark = pytest.mark.skipif(not SERVER.exists(), reason=f"gpt-server not built at {SERVER}")

MiB = 1 << 20


@pytest.fixture(scope="module")
def flash(artifacts) -> Path:
    return artifacts / "tiny-flash"


def health_port(server: Server) -> int:
    for line in server.log_text().splitlines():
        if "event=listening" in line:
            return int(line.split("health_port=")[1].split()[0])
    raise AssertionError("no event=listening line")


def read_response(sock: socket.socket, timeout: float = 10) -> tuple[int, dict, bytes]:
    """One HTTP response from `sock`: status, headers (lower-case names), body (by Content-Length)."""
    sock.settimeout(timeout)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise AssertionError(f"connection closed before a response: {data!r}")
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    while len(body) < int(headers.get("content-length", 0)):
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    return int(lines[0].split()[1]), headers, body


def exchange(port: int, raw: bytes, timeout: float = 10) -> tuple[int, dict, bytes]:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(raw)
        return read_response(sock, timeout)


def call(port: int, method: str, path: str, body=None, headers=None, timeout: float = 30) -> tuple[int, dict, dict]:
    """A request with a JSON body; the reply's status, headers and JSON body."""
    data = b"" if body is None else json.dumps(body).encode()
    head = f"{method} {path} HTTP/1.1\r\nHost: localhost\r\nContent-Length: {len(data)}\r\nConnection: close\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
    status, reply_headers, payload = exchange(port, head.encode() + b"\r\n" + data, timeout)
    return status, reply_headers, json.loads(payload) if payload else {}


class RssPeak:
    """The largest VmRSS of a process, sampled every few milliseconds while the block runs."""

    def __init__(self, pid: int):
        self.pid, self.peak, self._stop = pid, 0, threading.Event()

    def __enter__(self):
        self.before = vm_rss_bytes(self.pid)
        self._thread = threading.Thread(target=self._sample)
        self._thread.start()
        return self

    def _sample(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, vm_rss_bytes(self.pid))
            time.sleep(0.005)

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, vm_rss_bytes(self.pid))

    @property
    def growth(self) -> int:
        return self.peak - self.before


def send_chunked(port: int, head: bytes, total: int, chunk: int = MiB, timeout: float = 60) -> tuple[int, int]:
    """Sends `head`, then `total` bytes of spaces in chunks of `chunk`, while reading the reply. Returns
    the reply's status and how many body bytes were sent before the server closed or the body ended:
    the sender goes on after the reply as a hostile client would, until the server stops reading."""
    framed = b"%x\r\n" % chunk + b" " * chunk + b"\r\n"
    sent = [0]
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(head)

        def pump():
            try:
                for _ in range(total // chunk):
                    sock.sendall(framed)
                    sent[0] += chunk
                sock.sendall(b"0\r\n\r\n")
            except OSError:  # the server closed the connection: it stopped reading
                pass

        sender = threading.Thread(target=pump)
        sender.start()
        try:
            status, _, _ = read_response(sock, timeout)
        finally:
            sender.join(timeout)
        assert not sender.is_alive(), "the server neither read the body nor closed the connection"
        return status, sent[0]


def test_a_100_mib_chunked_body_is_413_and_never_buffered(serve, flash):
    server = serve(flash)
    assert server.generate(prompt="a", max_tokens=2)[0] == 200  # the allocator has seen a request
    head = b"POST /v1/generate HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
    with RssPeak(server.proc.pid) as rss:
        status, _ = send_chunked(server.port, head, 100 * MiB)
    assert status == 413
    assert rss.growth < 64 * MiB, f"resident memory grew by {rss.growth / MiB:.1f} MiB"
    assert server.generate(prompt="a", max_tokens=2)[0] == 200  # and the server is unharmed


@pytest.mark.parametrize("method, path", [("POST", "/nope"), ("PUT", "/v1/generate"), ("PATCH", "/healthz")])
def test_a_chunked_body_to_any_route_is_cut_off(serve, flash, method, path):
    # No route of these reads with a cap: the connection's own limit on body bytes stops them.
    server = serve(flash)
    head = f"{method} {path} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n".encode()
    with RssPeak(server.proc.pid) as rss:
        status, _ = send_chunked(server.port, head, 32 * MiB)
    assert status == 413
    assert rss.growth < 16 * MiB, f"resident memory grew by {rss.growth / MiB:.1f} MiB"


@pytest.mark.parametrize("path", ["/nope", "/v1/generate"])
def test_a_compressed_body_is_415_before_it_is_inflated(serve, flash, path):
    # httplib inflates gzip bodies as it reads them: 400 KB of gzip, 400 MiB inflated.
    server = serve(flash)
    bomb = gzip.compress(b"\0" * (400 * MiB), 9)
    head = f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n"
    with RssPeak(server.proc.pid) as rss:
        status, _, payload = exchange(server.port, head.encode() + b"%x\r\n%s\r\n0\r\n\r\n" % (len(bomb), bomb))
    assert status == 415 and b"no Content-Encoding" in payload, payload
    assert rss.growth < 16 * MiB, f"resident memory grew by {rss.growth / MiB:.1f} MiB"


def test_a_multipart_body_is_415(shared_hardened):
    body = b'--b\r\nContent-Disposition: form-data; name="prompt"\r\n\r\na\r\n--b--\r\n'
    head = "POST /v1/generate HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=b\r\n"
    status, _, payload = exchange(shared_hardened.port, f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body)
    assert status == 415, payload


def test_the_cap_is_exact_for_chunked_bodies(serve, flash):
    server = serve(flash, "--max-body-bytes", "4096")
    for size, expected in [(4096, 200), (4097, 413)]:
        body = json.dumps({"prompt": "a", "max_tokens": 2}).encode()
        body += b" " * (size - len(body))
        framed = b"".join(b"%x\r\n%s\r\n" % (len(body[i : i + 1000]), body[i : i + 1000]) for i in range(0, size, 1000))
        head = b"POST /v1/generate HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
        status, _, payload = exchange(server.port, head + framed + b"0\r\n\r\n")
        assert status == expected, payload
        if expected == 413:
            assert b"exceeds 4096 bytes" in payload


def test_a_declared_length_over_the_cap_is_413_before_the_body(serve, flash):
    server = serve(flash)
    head = b"POST /v1/generate HTTP/1.1\r\nHost: x\r\nContent-Length: 104857600\r\n\r\n"
    started = time.monotonic()
    status, headers, _ = exchange(server.port, head, timeout=5)  # no body byte is ever sent
    assert status == 413 and headers.get("connection") == "close"
    assert time.monotonic() - started < 5


@pytest.mark.parametrize(
    "head, statuses",
    [
        (b"GET /healthz HTTP/1.1\r\nX-Big: " + b"a" * 20000 + b"\r\n\r\n", (431, 400)),
        (b"GET /healthz HTTP/1.1\r\n" + b"".join(b"X-%d: %s\r\n" % (i, b"v" * 90) for i in range(1000)), (431,)),
        (b"GET /" + b"a" * 100000 + b" HTTP/1.1\r\n\r\n", (414, 431)),
    ],
    ids=["one-20-KiB-header", "1000-headers", "100-KB-request-line"],
)
def test_oversized_request_heads_are_refused(shared_hardened, head, statuses):
    status, headers, payload = exchange(shared_hardened.port, head)
    assert status in statuses, payload
    assert headers.get("connection") == "close"
    assert exchange(shared_hardened.port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")[0] == 200


def test_the_header_count_limit_is_exact(shared_hardened):
    for count, expected in [(100, 200), (101, 431)]:  # --max-headers 100
        head = b"GET /healthz HTTP/1.1\r\n" + b"".join(b"X-%d: 1\r\n" % i for i in range(count)) + b"\r\n"
        assert exchange(shared_hardened.port, head)[0] == expected, count


def test_an_endless_header_block_costs_bounded_memory(shared_hardened):
    server = shared_hardened
    line = b"X-Filler: " + b"v" * 88 + b"\r\n"  # 100 bytes
    with RssPeak(server.proc.pid) as rss, socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\n")
        try:
            for _ in range(1000):  # 10 MB of headers, 100 KB at a time, reading the reply when it comes
                sock.sendall(line * 1000)
                if select.select([sock], [], [], 0)[0]:
                    break
        except OSError:
            pass
        status, _, _ = read_response(sock)
    assert status == 431
    assert rss.growth < 16 * MiB, f"resident memory grew by {rss.growth / MiB:.1f} MiB"


def test_a_head_sent_too_slowly_is_408(serve, flash):
    server = serve(flash, "--header-timeout", "1")
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        started = time.monotonic()
        sock.sendall(b"GET /healthz HTTP/1.1\r\n")
        try:
            for i in range(40):  # one header line every 0.1 s: each read is quick, the head is not
                sock.sendall(b"X-%d: 1\r\n" % i)
                time.sleep(0.1)
                if select.select([sock], [], [], 0)[0]:
                    break
        except OSError:
            pass
        status, _, _ = read_response(sock)
    assert status == 408
    assert 1 <= time.monotonic() - started < 4


@pytest.fixture(scope="module")
def shared_hardened(artifacts, tmp_path_factory):
    server = Server(tmp_path_factory.mktemp("server"), artifacts / "tiny-flash")
    yield server
    server.stop()


# /admin/*


def start_refusal(flash: Path, *flags: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(SERVER), "--model", str(flash), "--port", "0", "--allow-unsigned", *flags],
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    "mode, content, needle",
    [
        (0o644, "t" * 32, "mode 0644"),
        (0o640, "t" * 32, "mode 0640"),
        (0o600, "", "is empty"),
        (0o600, "\n", "is empty"),
        (0o600, "short", "fewer than 16"),
        (0o600, "two words here, long enough", "space or control"),
    ],
)
def test_the_server_refuses_to_start_with_a_weak_token_file(flash, tmp_path, mode, content, needle):
    token = tmp_path / "token"
    token.write_text(content)
    token.chmod(mode)
    r = start_refusal(flash, "--admin", "--admin-token-file", str(token), "--models-root", str(tmp_path))
    assert r.returncode != 0 and needle in r.stderr, r.stderr


def test_admin_needs_a_token_file_and_a_models_root(flash, tmp_path):
    for flags in (["--admin"], ["--admin", "--models-root", str(tmp_path)]):
        r = start_refusal(flash, *flags)
        assert r.returncode != 0 and "needs --admin-token-file and --models-root" in r.stderr, r.stderr


def test_admin_takes_the_token_and_loads_inside_the_models_root_only(serve, flash, artifacts, tmp_path):
    root = tmp_path / "models"
    root.mkdir()
    os.symlink(artifacts / "tiny-other", root / "escape")  # a link inside the root to a model outside it
    shutil.copytree(artifacts / "tiny-other", root / "other")
    flags, auth = admin_flags(tmp_path, root)
    server = serve(flash, *flags)
    port = server.port

    status, headers, body = call(port, "POST", "/admin/reload", {})
    assert status == 401 and headers["www-authenticate"].startswith("Bearer"), body
    for wrong in ("Bearer " + "0" * 64, auth["Authorization"] + "0", auth["Authorization"][:-1], "Basic dXNlcjpwYXNz"):
        status, headers, body = call(port, "POST", "/admin/reload", {}, headers={"Authorization": wrong})
        assert status == 401 and 'error="invalid_token"' in headers["www-authenticate"], (wrong, body)
    assert server.generate(prompt="a", max_tokens=2)[1]["model"] == "tiny-flash"  # nothing was reloaded

    for path, code, needle in [
        (str(artifacts / "tiny-other"), 403, "outside the models root"),
        ("escape", 403, "outside the models root"),
        (str(root / "escape"), 403, "outside the models root"),
        ("../../", 403, "outside the models root"),
        (str(root / "other" / ".." / ".." / "x"), 400, "cannot resolve"),
        ("missing", 400, "cannot resolve"),
    ]:
        status, _, body = call(port, "POST", "/admin/reload", {"path": path}, headers=auth)
        assert status == code and needle in body["error"]["message"], (path, body)
    assert server.generate(prompt="a", max_tokens=2)[1]["model"] == "tiny-flash"

    status, _, body = call(port, "POST", "/admin/reload", {"path": "other"}, headers=auth)  # relative to the root
    assert status == 200 and body["model"] == "tiny-other" and body["artifact"] == str(root / "other" / "cpu"), body
    status, _, body = call(port, "POST", "/admin/reload", {}, headers=auth)  # the configured model
    assert status == 200 and body["model"] == "tiny-flash", body
    assert "event=admin_denied code=401" in server.log_text()


# Probes under a connection flood


def open_idle_connections(port: int, count: int) -> list[socket.socket]:
    """`count` keep-alive connections: half have made one request and wait for the next, half have sent
    nothing yet. Both kinds used to hold one of httplib's workers each."""
    conns = []
    for i in range(count):
        sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        if i % 2 == 0:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            assert read_response(sock)[0] == 200
        conns.append(sock)
    return conns


def still_open(sock: socket.socket) -> bool:
    sock.setblocking(False)  # with a timeout set, Python would wait for bytes or the end first
    try:
        return sock.recv(1, socket.MSG_PEEK) != b""
    except BlockingIOError:
        return True


@pytest.mark.parametrize("probe_port", ["health", "main"])
def test_probes_answer_within_a_second_while_200_idle_connections_are_open(serve, flash, probe_port):
    server = serve(flash, "--health-port", "0")
    port = health_port(server) if probe_port == "health" else server.port
    conns = open_idle_connections(server.port, 200)
    try:
        for path in ("/healthz", "/readyz"):
            started = time.monotonic()
            status, _, body = exchange(port, f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
            assert status == 200, body
            assert time.monotonic() - started < 1.0
        assert all(still_open(c) for c in conns)  # the flood was still there while the probes answered
    finally:
        for c in conns:
            c.close()
