"""gpt-server's prompt cache and chunked prefill over real HTTP: a prompt whose prefix a slot holds reuses its
cache (usage.prompt_tokens_details.cached_tokens) and completes as a whole prefill does, greedy and seeded; a
long prompt prefilled in pieces while another stream runs (each piece in the stream's decode step with the
artifact's mixed graph, an extend call between two steps without it) completes as one prefilled whole, and with
no stream running it is prefilled whole; a prompt extended after a cached prefix or in pieces has its last token
stepped with the decode (gpt_prompt_tokens_total counts each way); and a warm 900-token prefix answers its first
token at least 5 times sooner than a cold one."""

import contextlib
import http.client
import json
import random
import re
import shutil
import statistics
import string
import time
from pathlib import Path

import pytest
from server_process import SERVER

pytestmark = pytest.mark.skipif(not SERVER.exists(), reason=f"gpt-server not built at {SERVER}")

LETTERS = string.ascii_letters + string.digits + " .,;\n"


def text(seed: int, n: int) -> str:
    """n characters of the fixtures' char vocabulary (one token each), different for each seed."""
    rng = random.Random(seed)
    return "".join(rng.choice(LETTERS) for _ in range(n))


@pytest.fixture(scope="module")
def long_context(artifacts):
    return artifacts / "long-context"


def complete(server, **body):
    status, payload = server.request("POST", "/v1/completions", {"model": "long-context", **body}, timeout=120)
    assert status == 200, payload
    reply = json.loads(payload)
    return reply["choices"][0]["text"], reply["usage"]


def prompt_tokens(server) -> dict[str, int]:
    """gpt_prompt_tokens_total by how the tokens entered the cache (cached, prefill, extend, step)."""
    status, text_ = server.request("GET", "/metrics")
    assert status == 200
    found = dict(re.findall(r'^gpt_prompt_tokens_total\{how="(\w+)"\} (\d+)$', text_, re.MULTILINE))
    assert set(found) == {"cached", "prefill", "extend", "step"}, text_
    return {how: int(n) for how, n in found.items()}


@contextlib.contextmanager
def running_stream(server, prompt: str):
    """A streamed greedy completion of 400 tokens, running (its first chunk read) until the block ends."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=120)
    body = {"model": "long-context", "prompt": prompt, "max_tokens": 400, "stream": True, "ignore_eos": True}
    conn.request("POST", "/v1/completions", body=json.dumps(body), headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    assert resp.status == 200 and resp.readline()
    try:
        yield
    finally:
        conn.close()


def first_token_seconds(server, prompt: str) -> float:
    """Seconds from sending a streamed completion to reading its first chunk with text, over loopback."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=120)
    body = json.dumps({"model": "long-context", "prompt": prompt, "max_tokens": 2, "stream": True, "ignore_eos": True})
    start = time.perf_counter()
    conn.request("POST", "/v1/completions", body=body, headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    assert resp.status == 200
    elapsed = None
    while (line := resp.readline()) and elapsed is None:
        if line.startswith(b"data: {") and json.loads(line[6:]).get("choices"):
            elapsed = time.perf_counter() - start
    resp.read()
    conn.close()
    assert elapsed is not None, "no chunk with a choice came"
    return elapsed


@pytest.mark.parametrize("sampling", [dict(temperature=0.0), dict(temperature=1.0, seed=11, top_k=40)])
def test_a_reused_prefix_completes_as_a_whole_prefill_does(serve, long_context, sampling):
    shared = text(1, 300)
    prompts = [shared + text(2, 40), shared + text(3, 25), shared + text(3, 25)]  # the last is the second again
    params = dict(max_tokens=24, ignore_eos=True, **sampling)
    cached = serve(long_context, "--parallel", "2")
    whole = serve(long_context, "--parallel", "2", "--no-prefix-cache")
    with_reuse = [complete(cached, prompt=p, **params) for p in prompts]
    without = [complete(whole, prompt=p, **params) for p in prompts]
    assert [t for t, _ in with_reuse] == [t for t, _ in without]
    assert all(u["prompt_tokens_details"]["cached_tokens"] == 0 for _, u in without)
    assert with_reuse[0][1]["prompt_tokens_details"]["cached_tokens"] == 0  # nothing was cached yet
    assert with_reuse[1][1]["prompt_tokens_details"]["cached_tokens"] == len(shared)
    assert with_reuse[2][1]["prompt_tokens_details"]["cached_tokens"] == len(prompts[2]) - 1  # all but the last
    assert "event=prefix_reused" in cached.log_text() and "event=prefix_reused" not in whole.log_text()
    # The first prompt is prefilled whole; the second extends what follows the shared prefix but its last token,
    # which is stepped with the decode; the third (the second again) reuses all but its last token: no call.
    rest = len(prompts[1]) - len(shared)
    assert prompt_tokens(cached) == {
        "cached": len(shared) + len(prompts[2]) - 1,
        "prefill": len(prompts[0]),
        "extend": rest - 1,
        "step": 2,
    }
    assert prompt_tokens(whole) == {"cached": 0, "prefill": sum(map(len, prompts)), "extend": 0, "step": 0}


def test_a_prefix_held_by_a_busy_slot_is_copied_into_a_free_one(serve, long_context):
    shared = text(4, 200)
    server = serve(long_context, "--parallel", "2")
    complete(server, prompt=shared + "a", max_tokens=2)  # slot 0 now holds the shared prefix
    greedy = dict(max_tokens=16, temperature=0.0, ignore_eos=True)
    # A long generation keeps slot 0 busy while a second prompt with the same prefix arrives.
    with running_stream(server, shared + "b"):
        got, usage = complete(server, prompt=shared + "c", **greedy)
    assert usage["prompt_tokens_details"]["cached_tokens"] == len(shared)
    assert "event=prefix_reused seq=1 source=0" in server.log_text()  # copied from the running slot
    whole = serve(long_context, "--parallel", "2", "--no-prefix-cache")
    assert complete(whole, prompt=shared + "c", **greedy)[0] == got


def without_mixed_graph(artifact: Path, into: Path) -> Path:
    """A copy of `artifact` as an artifact compiled without the mixed graph would be: its prompt pieces are
    extend calls of their own between the decode steps."""
    copy = into / "without-mixed" / artifact.name
    shutil.copytree(artifact, copy)
    manifest_path = copy / "cpu" / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    mixed = manifest["graphs"].pop("mixed")
    del manifest["files"][mixed["file"]]
    (copy / "cpu" / mixed["file"]).unlink()
    manifest_path.write_text(json.dumps(manifest))
    return copy


@pytest.mark.parametrize("graph", ["mixed", "extend"])
@pytest.mark.parametrize("sampling", [dict(temperature=0.0), dict(temperature=1.0, seed=5)])
def test_a_long_prompt_prefilled_in_pieces_beside_a_stream_completes_as_one_prefilled_whole(
    serve, long_context, tmp_path, sampling, graph
):
    """With the mixed graph each piece rides in the stream's decode step (counted "step"); without it each is
    an extend call between two steps and the prompt's last token is stepped."""
    prompt, running = text(6, 700), text(7, 30)
    params = dict(prompt=prompt, max_tokens=20, ignore_eos=True, **sampling)
    artifact = long_context if graph == "mixed" else without_mixed_graph(long_context, tmp_path)
    pieces = serve(artifact, "--parallel", "2", "--no-prefix-cache", "--prefill-budget", "96")
    with running_stream(pieces, running):  # a stream waits for its next token in every round: 96 tokens a round
        in_pieces = complete(pieces, **params)[0]
    # With no stream running, nobody waits: the same budget prefills the prompt whole, in one call.
    alone = serve(artifact, "--no-prefix-cache", "--prefill-budget", "96")
    assert in_pieces == complete(alone, **params)[0]
    folded = {"extend": 0, "step": len(prompt)} if graph == "mixed" else {"extend": len(prompt) - 1, "step": 1}
    assert prompt_tokens(pieces) == {"cached": 0, "prefill": len(running), **folded}
    assert prompt_tokens(alone) == {"cached": 0, "prefill": len(prompt), "extend": 0, "step": 0}


def test_a_warm_900_token_prefix_answers_5_times_sooner_than_a_cold_one(serve, long_context):
    server = serve(long_context, "--parallel", "1")
    first_token_seconds(server, text(0, 50))  # the graphs' first runs, out of the timing
    cold, warm = [], []
    for seed in range(10, 15):
        prefix = text(seed, 900)  # a different prefix each time: nothing of it is cached
        cold.append(first_token_seconds(server, prefix + text(100 + seed, 12)))
        warm.append(first_token_seconds(server, prefix + text(200 + seed, 12)))
    cold_s, warm_s = statistics.median(cold), statistics.median(warm)
    print(f"time to first token over HTTP, 900-token prefix: cold {cold_s * 1e3:.1f} ms, warm {warm_s * 1e3:.1f} ms")
    assert warm_s * 5 <= cold_s, f"cold {cold}, warm {warm}"
