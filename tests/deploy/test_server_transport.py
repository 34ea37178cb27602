"""gpt-server's HTTP transport (deploy/server/transport/) against slow and
malformed clients, over loopback with raw sockets: whole-request deadlines for a
request's head and body (408 while other clients are answered), request smuggling
shapes refused (400), the connection cap, /readyz when the main port is saturated,
a client that hangs up mid-generation, and the request checks on seed and top_k.
Connection counts and times are bounded; every server is killed at the end of its test.
"""

import http.client
import json
import select
import shutil
import socket
import threading
import time

import pytest
from server_process import SERVER, Server, admin_flags
from test_server_hardening import call, exchange, health_port, read_response

pytestmark = pytest.mark.skipif(not SERVER.exists(), reason=f"gpt-server not built at {SERVER}")

DEADLINE = 2.0  # --header-timeout and --body-timeout of the slow-client test, seconds


@pytest.fixture(scope="module")
def flash(artifacts):
    return artifacts / "tiny-flash"


class Trickle:
    """Sends one more byte to each connection every `period` seconds, from one thread, until stopped or
    until the server closes that connection."""

    def __init__(self, conns: list[socket.socket], payloads: list[bytes], period: float = 0.5):
        self.conns, self.payloads, self.period = conns, payloads, period
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run)

    def __enter__(self):
        self._thread.start()
        return self

    def _run(self):
        sent = [0] * len(self.conns)
        while not self._stop.wait(self.period):
            for i, sock in enumerate(self.conns):
                if sent[i] < len(self.payloads[i]):
                    try:
                        sock.send(self.payloads[i][sent[i] : sent[i] + 1])
                        sent[i] += 1
                    except OSError:  # answered and closed: nothing more to send there
                        sent[i] = len(self.payloads[i])

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def completion(port: int, timeout: float = 10) -> tuple[int, float]:
    """A short completion on a fresh connection: its status and how long it took, in seconds."""
    started = time.monotonic()
    status, _, body = call(port, "POST", "/v1/completions", {"prompt": "a", "max_tokens": 4}, timeout=timeout)
    assert status != 200 or body["usage"]["completion_tokens"] >= 1, body
    return status, time.monotonic() - started


def responses_as_they_come(conns: list[socket.socket], limit: float) -> dict[int, tuple[float, int, bytes]]:
    """For each connection (by index), when its response arrived, its status and body; waits up to `limit`."""
    arrived, pending = {}, dict(enumerate(conns))
    end = time.monotonic() + limit
    while pending and time.monotonic() < end:
        readable, _, _ = select.select(list(pending.values()), [], [], 0.1)
        now = time.monotonic()
        for sock in readable:
            index = next(i for i, s in pending.items() if s is sock)
            del pending[index]
            try:
                status, _, body = read_response(sock, timeout=5)
            except (AssertionError, OSError) as e:  # closed without an answer
                status, body = 0, repr(e).encode()
            arrived[index] = (now, status, body)
    return arrived


def test_slow_bodies_and_heads_get_408_by_their_deadline_while_completions_are_answered(serve, flash):
    # One model thread: on a shared 2-core host OpenMP's barriers can make a decode step wait for a
    # descheduled thread, which is not what this test measures.
    server = serve(flash, "--header-timeout", str(DEADLINE), "--body-timeout", str(DEADLINE), "--threads", "1")
    assert completion(server.port)[0] == 200  # warm: the first generation is not the one timed
    conns, payloads, started = [], [], []
    body_head = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    body_head += b"Content-Length: 60000\r\n\r\n"
    for _ in range(30):  # a complete head, then the body one byte at a time
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        sock.sendall(body_head + b"{")
        conns.append(sock), payloads.append(b'"prompt": "' + b"a" * 100), started.append(time.monotonic())
    for _ in range(50):  # the head itself one byte at a time, its first byte now
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        head = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 100
        sock.sendall(head[:1])
        conns.append(sock), payloads.append(head[1:]), started.append(time.monotonic())
    try:
        with Trickle(conns, payloads):
            for _ in range(3):  # another client, while all 80 are open and sending
                status, took = completion(server.port)
                assert status == 200 and took < 1.0, f"completion took {took:.2f} s"
            status, _, _ = exchange(server.port, b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            assert status == 200
            arrived = responses_as_they_come(conns, limit=DEADLINE + 10)
    finally:
        for sock in conns:
            sock.close()
    assert len(arrived) == len(conns), f"{len(conns) - len(arrived)} slow connections got no answer"
    for index, (when, status, body) in arrived.items():
        kind = "body" if index < 30 else "head"
        assert status == 408, (kind, status, body)
        assert json.loads(body)["error"]["message"].startswith(f"request {'body' if kind == 'body' else 'line'}")
        waited = when - started[index]
        assert DEADLINE - 0.1 <= waited < DEADLINE + 3, f"{kind} connection answered after {waited:.2f} s"


@pytest.mark.parametrize(
    "head, needle",
    [
        (b"Content-Length: 14\r\nContent-Length: 15\r\n", "conflicting Content-Length"),
        (b"Content-Length: 14\r\nTransfer-Encoding: chunked\r\n", "not both"),
        (b"Transfer-Encoding: chunked\r\nContent-Length: 14\r\n", "not both"),
        (b"Transfer-Encoding: gzip\r\n", "only Transfer-Encoding taken is 'chunked'"),
    ],
    ids=["two-lengths", "length-then-chunked", "chunked-then-length", "not-chunked"],
)
def test_ambiguous_body_framing_is_400(shared_server, head, needle):
    # Two parsers in a chain (a proxy and this server) could read these as different requests.
    body = b'{"prompt":"a"}'
    raw = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n" + head + b"\r\ne\r\n" + body + b"\r\n0\r\n\r\n"
    status, headers, payload = exchange(shared_server.port, raw)
    assert status == 400 and headers.get("connection") == "close", payload
    assert needle in json.loads(payload)["error"]["message"]


def test_a_nul_in_an_admin_reload_path_is_400_and_loads_nothing(serve, flash, artifacts, tmp_path):
    root = tmp_path / "models"
    shutil.copytree(artifacts / "tiny-other", root / "other")  # the prefix before the NUL exists
    flags, auth = admin_flags(tmp_path, root)
    server = serve(flash, *flags)
    status, _, body = call(server.port, "POST", "/admin/reload", {"path": "other\u0000/junk"}, headers=auth)
    assert status == 400 and "NUL" in body["error"]["message"], body
    assert server.generate(prompt="a", max_tokens=2)[1]["model"] == "tiny-flash"


@pytest.mark.parametrize("path", ["/v1/completions", "/v1/generate"])
def test_seed_and_top_k_ranges(shared_server, path):
    port = shared_server.port
    for field, value, needle in [
        ("seed", -1, "'seed' must be an integer in [0, 2^63 - 1]"),
        ("seed", 2**63, "'seed' must be an integer in [0, 2^63 - 1]"),
        ("seed", 2**64 - 1, "'seed' must be an integer in [0, 2^63 - 1]"),
        ("top_k", -1, "'top_k'"),
    ]:
        status, _, body = call(port, "POST", path, {"prompt": "a", "max_tokens": 2, field: value})
        assert status == 400, (field, value, body)
        error = body["error"]
        assert needle in error["message"] and error["type"] == "invalid_request_error", error
        assert error["param"] == field, error
    status, _, body = call(port, "POST", path, {"prompt": "a", "max_tokens": 2, "seed": 2**63 - 1, "top_k": 0})
    assert status == 200 and body["seed"] == 2**63 - 1, body


def test_generate_errors_have_the_openai_shape(shared_server):
    status, _, body = call(shared_server.port, "POST", "/v1/generate", {"prompt": "a", "max_tokens": 0})
    assert status == 400
    assert set(body["error"]) == {"message", "type", "param", "code"}, body
    assert body["error"]["type"] == "invalid_request_error"


def readyz(port: int) -> tuple[int, bytes]:
    status, _, body = exchange(port, b"GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    return status, body


def wait_for_readyz(port: int, expected: int, limit: float = 10) -> bytes:
    end = time.monotonic() + limit
    while True:
        status, body = readyz(port)
        if status == expected:
            return body
        assert time.monotonic() < end, f"/readyz stayed {status} ({body!r}) for {limit} s"
        time.sleep(0.05)


def test_readyz_is_503_while_every_slot_and_queue_place_is_taken(serve, flash):
    server = serve(flash, "--parallel", "1", "--max-queue", "0", "--max-tokens", "100000", "--health-port", "0")
    ports = (server.port, health_port(server))
    assert all(readyz(p)[0] == 200 for p in ports)
    conn, _, events = server.stream(prompt="a", max_tokens=100000)
    next(events)  # generating: the only slot is taken and no request may queue
    try:
        for port in ports:
            status, body = readyz(port)
            assert status == 503 and body.startswith(b"saturated"), body
    finally:
        conn.close()  # the client leaves: its generation ends and the slot frees
    for port in ports:
        wait_for_readyz(port, 200)


def test_a_client_that_hangs_up_on_a_plain_completion_frees_its_slot(serve, flash):
    server = serve(flash, "--parallel", "1", "--max-queue", "0", "--max-tokens", "100000")
    body = json.dumps({"prompt": "a", "max_tokens": 100000, "ignore_eos": True}).encode()
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
    wait_for_readyz(server.port, 503)  # it holds the slot
    sock.close()  # before any byte of the reply: only the socket says the client is gone
    wait_for_readyz(server.port, 200)
    assert "finish=cancelled" in server.log_text()


def test_a_queued_request_whose_client_hangs_up_frees_its_queue_place(serve, flash):
    server = serve(flash, "--parallel", "1", "--max-queue", "1", "--max-tokens", "100000")
    conn, _, events = server.stream(prompt="a", max_tokens=100000)
    next(events)  # the only slot is taken
    try:
        body = json.dumps({"prompt": "a", "max_tokens": 2}).encode()
        queued = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        queued.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
        wait_for_readyz(server.port, 503)  # it waits in the queue: every place is taken
        queued.close()
        wait_for_readyz(server.port, 200)  # its place is free again while the stream still runs
        assert "finish=cancelled" in server.log_text()
        assert next(events)[0] == "token"
    finally:
        conn.close()


def test_connections_beyond_the_cap_are_closed_and_readyz_says_so(serve, flash):
    server = serve(flash, "--max-connections", "8", "--health-port", "0")
    held = [socket.create_connection(("127.0.0.1", server.port), timeout=10) for _ in range(8)]
    try:
        for sock in held:
            sock.sendall(b"G")  # a request begun: these are not idle, so none is closed for a newcomer
        wait_for_readyz(health_port(server), 503)
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as extra:
            assert extra.recv(1) == b""  # closed before a byte is read
    finally:
        for sock in held:
            sock.close()
    wait_for_readyz(health_port(server), 200)
    assert completion(server.port)[0] == 200


def test_at_the_cap_the_longest_idle_connection_makes_room(serve, flash):
    server = serve(flash, "--max-connections", "8")
    idle = [socket.create_connection(("127.0.0.1", server.port), timeout=10) for _ in range(8)]
    newcomers = []
    try:
        started = time.monotonic()
        for _ in range(3):  # each newcomer, kept open after its answer, closes one of the first 8 to get in
            conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
            conn.request("POST", "/v1/completions", json.dumps({"prompt": "a", "max_tokens": 2}))
            response = conn.getresponse()
            assert response.status == 200, response.read()
            response.read()
            newcomers.append(conn)
        closed = set()
        while len(closed) < 3 and time.monotonic() - started < 3:  # before the 5 s idle timeout closes them all
            for sock in select.select([s for s in idle if s not in closed], [], [], 0.2)[0]:
                if sock.recv(1) == b"":
                    closed.add(sock)
        assert len(closed) == 3, f"{len(closed)} idle connections closed for 3 newcomers"
    finally:
        for sock in idle:
            sock.close()
        for conn in newcomers:
            conn.close()


@pytest.fixture(scope="module")
def shared_server(artifacts, tmp_path_factory):
    server = Server(tmp_path_factory.mktemp("server"), artifacts / "tiny-flash")
    yield server
    server.stop()
