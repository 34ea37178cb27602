"""gpt-server's OpenAI-compatible API through the official `openai` client, over loopback:
completions (plain and streamed), stop strings, log-probabilities against the artifact's own
graphs, seeds, max_tokens, echo, token-id prompts, /v1/models, /tokenize and /detokenize, and
errors as the client's typed exceptions. Then continuous batching: concurrent requests return
exactly what each returns alone, admission answers 429 by its rules, and a cancelled stream frees
its slot.

The model is the fixtures' tiny-bpe (byte-level BPE, 1024 tokens, context 32, max batch 8).
"""

import codecs
import http.client
import json
import shutil
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import openai
import pytest
import torch
from prometheus_client.parser import text_string_to_metric_families
from server_process import SERVER, Server

from gpt_aot.artifact.loader import ArtifactGraphs
from gpt_aot.artifact.manifest import sha256_file
from gpt_aot.text.tokenizer import to_tiktoken

pytestmark = pytest.mark.skipif(not SERVER.exists(), reason=f"gpt-server not built at {SERVER}")

PROMPT = "In the beginning"
PROMPTS = [
    "In the beginning",
    "And God said",
    "The LORD is my shepherd",
    "and the earth",
    "Blessed are",
    "For God so loved",
    "Let there be light",
    "In my Father's house",
]


@pytest.fixture(scope="module")
def bpe(artifacts):
    return artifacts / "tiny-bpe"


@pytest.fixture(scope="module")
def tokenizer(bpe):
    return to_tiktoken(json.loads((bpe / "cpu" / "tokenizer.json").read_text()))


@pytest.fixture(scope="module")
def server(bpe, tmp_path_factory):
    s = Server(tmp_path_factory.mktemp("openai"), bpe, "--parallel", "8", "--max-queue", "16")
    yield s
    s.stop()


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=f"http://127.0.0.1:{server.port}/v1", api_key="unused", max_retries=0, timeout=60)


def complete(client, **kwargs):
    return client.completions.create(model="tiny-bpe", **kwargs)


def streamed(client, **kwargs):
    """(text, finish_reason, usage, chunks) of a streamed completion."""
    chunks = list(complete(client, stream=True, stream_options={"include_usage": True}, **kwargs))
    text = "".join(c.choices[0].text for c in chunks if c.choices)
    finish = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert len(finish) == 1, "exactly one chunk carries the finish reason"
    assert chunks[-1].choices == [] and chunks[-1].usage is not None, "the usage chunk comes last"
    return text, finish[0], chunks[-1].usage, chunks


def test_completion_plain_and_streamed_agree(client, tokenizer):
    params = dict(prompt=PROMPT, max_tokens=12, temperature=0.8, seed=7, extra_body={"ignore_eos": True})
    r = complete(client, **params)
    assert r.object == "text_completion" and r.model == "tiny-bpe"
    assert r.choices[0].finish_reason == "length"
    assert r.usage.prompt_tokens == len(tokenizer.encode_ordinary(PROMPT))
    assert r.usage.completion_tokens == 12 and r.usage.total_tokens == r.usage.prompt_tokens + 12
    text, finish, usage, chunks = streamed(client, **params)
    assert text == r.choices[0].text and finish == "length" and usage.completion_tokens == 12
    assert len([c for c in chunks if c.choices and c.choices[0].text]) <= 12  # a chunk per token at most


def test_seed_is_reproducible_and_drawn_when_absent(client):
    params = dict(prompt=PROMPT, max_tokens=16, temperature=1.0, extra_body={"ignore_eos": True})
    a, b = complete(client, seed=123, **params), complete(client, seed=123, **params)
    assert a.choices[0].text == b.choices[0].text and a.model_extra["seed"] == 123
    # Unseeded requests differ (each gets its own seed), and the seed a reply names reproduces it.
    unseeded = [complete(client, **params) for _ in range(3)]
    assert len({r.model_extra["seed"] for r in unseeded}) == 3
    assert len({r.choices[0].text for r in unseeded}) > 1
    again = complete(client, seed=unseeded[0].model_extra["seed"], **params)
    assert again.choices[0].text == unseeded[0].choices[0].text


def test_max_tokens_and_token_id_prompts(client, tokenizer):
    ids = tokenizer.encode_ordinary(PROMPT)
    by_text = complete(client, prompt=PROMPT, max_tokens=5, temperature=0, extra_body={"ignore_eos": True})
    by_ids = complete(client, prompt=ids, max_tokens=5, temperature=0, extra_body={"ignore_eos": True})
    assert by_text.usage.completion_tokens == 5 and by_text.choices[0].finish_reason == "length"
    assert by_ids.choices[0].text == by_text.choices[0].text
    assert complete(client, prompt=PROMPT).usage.completion_tokens <= 16  # OpenAI's default max_tokens


def test_echo_puts_the_prompt_before_the_completion(client):
    params = dict(prompt=PROMPT, max_tokens=6, temperature=0, extra_body={"ignore_eos": True})
    plain = complete(client, **params).choices[0].text
    assert complete(client, echo=True, **params).choices[0].text == PROMPT + plain
    text, _, _, _ = streamed(client, echo=True, **params)
    assert text == PROMPT + plain


@pytest.mark.parametrize("stream", [False, True])
def test_stop_string_ends_the_text_before_it(client, stream):
    params = dict(prompt=PROMPT, max_tokens=24, temperature=1.0, seed=3, extra_body={"ignore_eos": True})
    free = complete(client, **params).choices[0].text
    assert len(free) > 12, free
    stop = free[8:11]  # three characters from the middle; the text must end where they first appear
    cut = free[: free.index(stop)]
    if stream:
        text, finish, _, _ = streamed(client, stop=[stop, "\u2603never"], **params)
    else:
        r = complete(client, stop=[stop, "\u2603never"], **params)
        text, finish = r.choices[0].text, r.choices[0].finish_reason
    assert text == cut and finish == "stop"


def test_logprobs_are_the_log_softmax_of_the_graphs_logits(client, bpe, tokenizer):
    # Sampled (temperature 0.9): log-probabilities are the model's, before the temperature. Tokens are named by
    # id (vLLM's return_tokens_as_token_ids), then replayed through the artifact's graphs as the runtime runs them.
    params = dict(prompt=PROMPT, max_tokens=8, temperature=0.9, seed=5, logprobs=3)
    r = complete(client, **params, extra_body={"ignore_eos": True, "return_tokens_as_token_ids": True})
    lp = r.choices[0].logprobs
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == len(lp.text_offset) == 8
    tokens = [int(t.removeprefix("token_id:")) for t in lp.tokens]
    assert tokenizer.decode(tokens) == r.choices[0].text
    by_text = complete(client, **params, extra_body={"ignore_eos": True}).choices[0].logprobs
    assert by_text.tokens == [tokenizer.decode([t]) for t in tokens]  # the same tokens, named by their text
    assert by_text.token_logprobs == lp.token_logprobs
    graphs = ArtifactGraphs(bpe / "cpu")
    vocab = graphs.manifest["model"]["vocab_size"]
    prompt = tokenizer.encode_ordinary(PROMPT)
    kv = graphs.new_kv_cache(1)
    token_bytes = [tokenizer.decode_single_token_bytes(t) for t in tokens]
    with torch.no_grad():
        logits = graphs.prefill(torch.tensor([prompt]), kv)
        for i, token in enumerate(tokens):
            stream = codecs.getincrementaldecoder("utf-8")("replace")
            reference = torch.log_softmax(logits[0, :vocab].double(), dim=0)
            assert abs(lp.token_logprobs[i] - float(reference[token])) < 1e-4
            top = reference.topk(3)
            expected = {f"token_id:{int(t)}": float(v) for v, t in zip(top.values, top.indices, strict=True)}
            assert lp.top_logprobs[i].keys() == expected.keys()
            for key, value in expected.items():
                assert abs(lp.top_logprobs[i][key] - value) < 1e-4
            # In characters of the text given out before the token (a split character waits for its last byte).
            assert lp.text_offset[i] == len(stream.decode(b"".join(token_bytes[:i])))
            logits = graphs.decode(torch.tensor([[token]]), torch.tensor([len(prompt) + i]), kv)


def token_ids(completion) -> list[int]:
    """The ids of a completion asked for with logprobs and return_tokens_as_token_ids."""
    return [int(t.removeprefix("token_id:")) for t in completion.choices[0].logprobs.tokens]


BY_ID = {"ignore_eos": True, "return_tokens_as_token_ids": True}


def test_n_completions_are_what_as_many_seeded_requests_return_and_share_the_prefill(client, server, tokenizer):
    # A prompt no earlier request began with: only the request's own first completion can hold its cache.
    prompt = "Zebulun shall dwell at the haven of the sea"
    params = dict(prompt=prompt, max_tokens=10, temperature=1.0, extra_body={"ignore_eos": True})
    log_before = len(server.log_text())
    r = complete(client, n=4, seed=40, **params)
    reuse = [line for line in server.log_text()[log_before:].splitlines() if "event=prefix_reused" in line]
    n_prompt = len(tokenizer.encode_ordinary(prompt))
    # The first completion computed the prompt; each other one copied all of it but the last token (which runs
    # for its logits).
    assert len(reuse) == 3 and all(f"reused={n_prompt - 1} prompt={n_prompt}" in line for line in reuse), reuse
    assert [c.index for c in r.choices] == [0, 1, 2, 3]
    alone = [complete(client, seed=40 + i, **params).choices[0].text for i in range(4)]
    assert [c.text for c in r.choices] == alone
    assert len(set(alone)) > 1, "the four seeds drew four texts"
    assert r.usage.prompt_tokens == n_prompt and r.usage.completion_tokens == 40
    assert all(c.finish_reason == "length" for c in r.choices)
    chunks = list(complete(client, n=4, seed=40, stream=True, stream_options={"include_usage": True}, **params))
    texts, finish = [""] * 4, [None] * 4
    for chunk in chunks:
        for c in chunk.choices:
            texts[c.index] += c.text
            finish[c.index] = c.finish_reason or finish[c.index]
    assert texts == alone and finish == ["length"] * 4
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 40


def test_logit_bias_forces_and_bans_tokens(client):
    params = dict(prompt=PROMPT, max_tokens=6, logprobs=0, extra_body=BY_ID)
    greedy = token_ids(complete(client, temperature=0, **params))
    assert token_ids(complete(client, temperature=1.0, seed=1, logit_bias={"17": 100}, **params)) == [17] * 6
    banned = token_ids(complete(client, temperature=0, logit_bias={str(greedy[0]): -100}, **params))
    assert greedy[0] not in banned
    # Log-probabilities stay the model's: the forced token is listed with its own (low) probability.
    forced = complete(client, temperature=0, logit_bias={"17": 100}, **params).choices[0].logprobs
    assert forced.token_logprobs[0] < -1.0


def test_penalties_are_openais_over_the_graphs_logits(client, bpe, tokenizer):
    # Greedy with OpenAI's penalties, replayed here through the artifact's graphs: each step's logit of a token
    # drawn c times so far loses c * frequency_penalty + presence_penalty.
    presence, frequency, steps = 0.8, 0.6, 14
    params = dict(prompt=PROMPT, max_tokens=steps, temperature=0, logprobs=0, extra_body=BY_ID)
    plain = token_ids(complete(client, **params))
    got = token_ids(complete(client, presence_penalty=presence, frequency_penalty=frequency, **params))
    graphs = ArtifactGraphs(bpe / "cpu")
    vocab = graphs.manifest["model"]["vocab_size"]
    prompt = tokenizer.encode_ordinary(PROMPT)
    kv = graphs.new_kv_cache(1)
    counts: dict[int, int] = {}
    expected = []
    with torch.no_grad():
        logits = graphs.prefill(torch.tensor([prompt]), kv)
        for i in range(steps):
            row = logits[0, :vocab].float().clone()
            for token, c in counts.items():
                row[token] -= torch.tensor(c, dtype=torch.float32) * frequency + presence
            token = int(row.argmax())
            expected.append(token)
            counts[token] = counts.get(token, 0) + 1
            logits = graphs.decode(torch.tensor([[token]]), torch.tensor([len(prompt) + i]), kv)
    assert got == expected
    assert got != plain and len(set(got)) > len(set(plain)), "the penalties spread the greedy choice"


def test_ids_without_text_are_never_sampled_nor_listed(serve, artifacts, tmp_path):
    # nanoGPT pads vocab_size past its tokenizer's (50304 over GPT-2's 50257): here tiny-flash's 96 ids, with text
    # for the first 80 only. The padding ids' logits are the model's own; before the runtime masked them, they were
    # sampled (no text in the reply, /detokenize 400) and listed among the top log-probabilities.
    with_text = 80
    model = tmp_path / "padded"
    shutil.copytree(artifacts / "tiny-flash", model)
    tokenizer_json = model / "cpu" / "tokenizer.json"
    stored = json.loads(tokenizer_json.read_text())
    stored["itos"] = stored["itos"][:with_text]
    tokenizer_json.write_text(json.dumps(stored))
    manifest = json.loads((model / "cpu" / "manifest.json").read_text())
    manifest["files"]["tokenizer.json"] = {"sha256": sha256_file(tokenizer_json), "size": tokenizer_json.stat().st_size}
    (model / "cpu" / "manifest.json").write_text(json.dumps(manifest))
    server = serve(model)
    for seed in range(4):
        body = {"prompt": "Hell", "max_tokens": 24, "temperature": 1.5, "seed": seed, "logprobs": 5}
        status, reply = server.request("POST", "/v1/completions", {**body, "return_tokens_as_token_ids": True})
        assert status == 200, reply
        choice = json.loads(reply)["choices"][0]
        tokens = [int(t.removeprefix("token_id:")) for t in choice["logprobs"]["tokens"]]
        listed = [int(t.removeprefix("token_id:")) for top in choice["logprobs"]["top_logprobs"] for t in top]
        assert len(tokens) == 24 and len(listed) == 24 * 5
        assert [t for t in tokens + listed if t >= with_text] == []
        status, reply = server.request("POST", "/detokenize", {"tokens": tokens})
        assert status == 200 and json.loads(reply)["prompt"] == choice["text"] == "".join(
            stored["itos"][t] for t in tokens
        )
        status, reply = server.request("POST", "/v1/completions", body)  # the same, tokens named by their text
        assert status == 200 and json.loads(reply)["choices"][0]["logprobs"]["tokens"] == [
            stored["itos"][t] for t in tokens
        ]


def test_models_tokenize_and_detokenize(client, server, tokenizer):
    assert [m.id for m in client.models.list().data] == ["tiny-bpe"]
    text = "In the beginning 😀 was"
    status, body = server.request("POST", "/tokenize", {"prompt": text})
    assert status == 200 and json.loads(body)["tokens"] == tokenizer.encode_ordinary(text)
    status, body = server.request("POST", "/detokenize", {"tokens": tokenizer.encode_ordinary(text)})
    assert status == 200 and json.loads(body)["prompt"] == text


def test_a_nul_in_the_prompt_is_a_character_of_it(client, server, tokenizer):
    # JSON's "\u0000" is U+0000: the runtime gets the prompt with its length (gpt_model_tokenize_n), so the NUL
    # byte is a token of it, not the prompt's end nor a reason to refuse it (issue 41).
    text = "In the\u0000beginning"
    ids = tokenizer.encode_ordinary(text)
    assert tokenizer.encode_single_token(b"\x00") in ids and tokenizer.decode(ids) == text
    status, body = server.request("POST", "/tokenize", {"prompt": text})
    assert status == 200, body
    assert json.loads(body)["tokens"] == ids
    r = complete(client, prompt=text, max_tokens=2, temperature=0, echo=True, extra_body={"ignore_eos": True})
    assert r.usage.prompt_tokens == len(ids)
    assert r.choices[0].text.startswith(text)
    status, body = server.request("POST", "/v1/generate", {"prompt": "\u0000", "max_tokens": 1})
    assert status == 200, body
    assert json.loads(body)["prompt_tokens"] == 1


def test_errors_surface_as_the_clients_typed_exceptions(client, server):
    with pytest.raises(openai.BadRequestError) as e:
        complete(client, prompt=PROMPT, n=17)
    assert e.value.body["param"] == "n"
    for bias in ({"5000": 1}, {"abc": 1}, {"07": 1}, {"1": 101}, {"1": "x"}):  # 5000: outside the vocabulary
        with pytest.raises(openai.BadRequestError) as e:
            complete(client, prompt=PROMPT, logit_bias=bias)
        assert e.value.body["param"] == "logit_bias", bias
    with pytest.raises(openai.BadRequestError) as e:
        complete(client, prompt=PROMPT, logit_bias={str(i): 1 for i in range(1025)})
    assert e.value.body["param"] == "logit_bias" and "at most 1024" in e.value.message
    with pytest.raises(openai.BadRequestError) as e:
        complete(client, prompt=PROMPT, presence_penalty=2.5)
    assert e.value.body["param"] == "presence_penalty"
    with pytest.raises(openai.BadRequestError) as e:
        complete(client, prompt=PROMPT, n=2, best_of=3)
    assert e.value.body["param"] == "best_of"
    with pytest.raises(openai.BadRequestError):
        complete(client, prompt=PROMPT, temperature=3.5)
    with pytest.raises(openai.BadRequestError) as e:
        complete(client, prompt=PROMPT, extra_body={"frobnicate": 1})
    assert e.value.body["param"] == "frobnicate" and "frobnicate" in e.value.message
    with pytest.raises(openai.BadRequestError):
        complete(client, prompt=[5000])  # outside the 1024-token vocabulary
    with pytest.raises(openai.BadRequestError):
        complete(client, prompt="word " * 100)  # longer than the context
    with pytest.raises(openai.BadRequestError):
        complete(client, prompt=PROMPT, logprobs=3, echo=True)
    with pytest.raises(openai.NotFoundError):
        client.completions.create(model="gpt-4", prompt=PROMPT)
    status, body = server.request("POST", "/v1/completions", "{not json")
    error = json.loads(body)["error"]
    assert status == 400 and set(error) == {"message", "type", "param", "code"}


def metric(server, name):
    status, text = server.request("GET", "/metrics")
    assert status == 200
    return {
        s.name + json.dumps(s.labels, sort_keys=True): s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
        if s.name.startswith(name)
    }


def run_requests(client, requests, concurrently: bool):
    def one(kwargs):
        r = complete(client, **kwargs)
        return r.choices[0].text, r.usage.completion_tokens, r.choices[0].finish_reason

    if not concurrently:
        return [one(kwargs) for kwargs in requests]
    start = threading.Barrier(len(requests))

    def together(kwargs):
        start.wait(timeout=30)
        return one(kwargs)

    with ThreadPoolExecutor(len(requests)) as pool:
        return list(pool.map(together, requests))


@pytest.mark.parametrize("temperature", [1.0, 0.0])
def test_sixteen_concurrent_requests_return_what_each_returns_alone(client, server, temperature):
    # 16 requests, 8 slots: half wait and join the batch as slots free up (different lengths end at
    # different steps), prompts of different lengths are prefilled together, and the context (32) fills
    # and slides for the longer ones.
    requests = [
        dict(
            prompt=PROMPTS[i % 8],
            max_tokens=10 + 3 * i,
            temperature=temperature,
            seed=100 + i,
            top_k=50 if i % 2 else 0,
        )
        for i in range(16)
    ]
    for r in requests:
        r["extra_body"] = {"top_k": r.pop("top_k")}
    before = metric(server, "gpt_batch_size")
    together = run_requests(client, requests, concurrently=True)
    after = metric(server, "gpt_batch_size")
    alone = run_requests(client, requests, concurrently=False)
    assert together == alone
    # The concurrent run did batch: some steps stepped more than 4 sequences at once.
    le4 = 'gpt_batch_size_bucket{"le": "4"}'
    count = "gpt_batch_size_count{}"
    assert (after[count] - before[count]) - (after[le4] - before[le4]) > 0


def test_concurrent_clients_beyond_slots_and_queue_get_429_then_all_succeed(serve, bpe):
    server = serve(bpe, "--parallel", "2", "--max-queue", "2")
    start = threading.Barrier(8)

    def client_call(i):
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        body = json.dumps({"prompt": PROMPTS[i % 8], "max_tokens": 1000, "ignore_eos": True, "seed": i})
        start.wait(timeout=30)
        conn.request("POST", "/v1/completions", body=body, headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        payload = json.loads(resp.read())
        conn.close()
        return resp.status, resp.getheader("Retry-After"), payload

    began = time.monotonic()
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(client_call, range(8)))
    assert time.monotonic() - began < 60
    ok = [p for s, _, p in results if s == 200]
    busy = [(s, retry, p) for s, retry, p in results if s == 429]
    assert len(ok) + len(busy) == 8, results  # nothing else: no 5xx, no dropped connection
    assert len(ok) >= 4 and len(busy) >= 1  # 2 slots + 2 queued always get in; 8 at once overflow
    assert all(p["usage"]["completion_tokens"] == 1000 for p in ok)
    assert all(retry == "1" and p["error"]["type"] for _, retry, p in busy)


def test_a_cancelled_stream_frees_its_slot(serve, bpe):
    server = serve(bpe, "--parallel", "1", "--max-queue", "0")
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    body = {"prompt": PROMPT, "max_tokens": 1000, "ignore_eos": True, "stream": True}
    conn.request("POST", "/v1/completions", body=json.dumps(body), headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    assert resp.status == 200
    assert resp.readline().startswith(b"data: ")  # it is generating, holding the only slot
    status, _ = server.request("POST", "/v1/completions", {"prompt": PROMPT, "max_tokens": 1})
    assert status == 429
    conn.close()  # the client goes away mid-stream
    deadline = time.monotonic() + 10
    while True:
        status, body = server.request("POST", "/v1/completions", {"prompt": PROMPT, "max_tokens": 1})
        if status == 200 or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert status == 200, body
    assert "finish=cancelled" in server.log_text()
    assert metric(server, "gpt_slots_in_use")["gpt_slots_in_use{}"] == 0
