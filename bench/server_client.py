"""The server benchmark's HTTP client (bench/server_bench.py): one streaming `POST /v1/completions` on a
kept-alive connection, its SSE chunks timed as they arrive. The same for both servers."""

import http.client
import json
import time

# What a kept-alive connection that the server has closed since its last response raises.
STALE_CONNECTION = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError)


def stream_completion(conn: http.client.HTTPConnection, body: dict) -> dict:
    """One streaming request on a kept-alive connection: its chunks' arrival times, text and usage; a
    failure is returned as `error`, naming the phase it happened in (send, resend or stream)."""
    sent, reused = time.perf_counter(), conn.sock is not None
    out = {"sent": sent, "chunk_times": [], "resent": False}
    payload, headers = json.dumps(body), {"Content-Type": "application/json"}
    phase = "send"
    try:
        try:
            conn.request("POST", "/v1/completions", payload, headers)
            resp = conn.getresponse()
        except STALE_CONNECTION:
            if not reused:
                raise
            # The server closed the connection after the previous response (llama-server does after every
            # stream, while its headers say keep-alive): send again on a new one, as HTTP clients do.
            conn.close()
            out["resent"], phase = True, "resend"
            conn.request("POST", "/v1/completions", payload, headers)
            resp = conn.getresponse()
        if resp.status != 200:
            return out | {"error": f"HTTP {resp.status}: {resp.read()[:300].decode(errors='replace')}"}
        phase = "stream"
        read_stream(resp, out)
    except (OSError, http.client.HTTPException, json.JSONDecodeError) as e:
        conn.close()
        return out | {"error": f"{phase}: {type(e).__name__}: {e}"}
    if "error" not in out and not out["chunk_times"]:
        out["error"] = "no token chunk"
    return out


def read_stream(resp: http.client.HTTPResponse, out: dict) -> None:
    """The SSE chunks of one response into `out`: chunk_times, text, finish_reason, usage, tokens."""
    times, texts, usage, finish = out["chunk_times"], [], None, None
    while line := resp.readline():
        if not line.startswith(b"data:"):
            continue
        data = line[5:].strip()
        if data == b"[DONE]":
            break
        now = time.perf_counter()
        chunk = json.loads(data)
        if "error" in chunk:
            out["error"] = json.dumps(chunk["error"])[:300]
            break
        usage = chunk.get("usage") or usage
        for choice in chunk.get("choices") or ():
            text, finish = choice.get("text") or "", choice.get("finish_reason") or finish
            # A token chunk: text, or none yet (a byte of an unfinished UTF-8 character); the final
            # chunk with only finish_reason (and usage) is not a token.
            if text or choice.get("finish_reason") is None:
                times.append(now)
                texts.append(text)
    resp.read()  # the rest of the chunked body, so the connection can be reused
    out |= {"text": "".join(texts), "finish_reason": finish, "usage": usage}
    out["tokens"] = usage["completion_tokens"] if usage and "completion_tokens" in usage else len(times)


def request_body(prompt, args, max_tokens: int | None = None) -> dict:
    body = {"prompt": prompt, "max_tokens": max_tokens or args.max_tokens, "stream": True}
    return body | {"stream_options": {"include_usage": True}, "temperature": 0, "ignore_eos": True}
