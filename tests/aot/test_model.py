"""The eager model: vocab padding, attention kinds, KV-cache decoding, loss."""

import pytest
import torch
from torch.nn import functional as F

from gpt_aot.model.attention import attention_runs_on, several_queries_kind
from gpt_aot.model.gpt import GPT, GPTConfig, layer_caches, padded_vocab_size

CPU_KINDS = [k for k in ("naive", "math", "flash") if attention_runs_on(k, torch.device("cpu"), torch.float32)]
CONFIG = GPTConfig(block_size=24, vocab_size=50, n_layer=2, n_head=4, n_embd=32, bias=True)
TOL = 1e-5


def model(attention="math", config=CONFIG, seed=0):
    return GPT(config, attention).init_weights(seed).eval()


@pytest.mark.parametrize("vocab,padded", [(65, 128), (50257, 50304), (64, 64), (1, 64)])
def test_vocab_is_padded_to_a_multiple_of_64(vocab, padded):
    assert padded_vocab_size(vocab) == padded
    assert (
        GPT(GPTConfig(block_size=8, vocab_size=vocab, n_layer=1, n_head=1, n_embd=8)).lm_head.weight.shape[0] == padded
    )


def test_config_rejects_heads_that_do_not_divide_the_width():
    with pytest.raises(ValueError, match="divisible"):
        GPTConfig(n_embd=30, n_head=4)


def test_embedding_and_lm_head_are_tied():
    m = model()
    assert m.lm_head.weight.data_ptr() == m.transformer.wte.weight.data_ptr()


def test_same_seed_gives_same_weights_and_another_seed_does_not():
    a, b, c = model(seed=1), model(seed=1), model(seed=2)
    assert torch.equal(a.lm_head.weight, b.lm_head.weight)
    assert not torch.equal(a.lm_head.weight, c.lm_head.weight)


def test_attention_kinds_agree_with_naive():
    idx = torch.randint(0, CONFIG.vocab_size, (2, 17))
    with torch.no_grad():
        ref, _ = model("naive")(idx)
        for kind in CPU_KINDS:
            out, _ = model(kind)(idx)
            torch.testing.assert_close(out, ref, atol=TOL, rtol=TOL)


@pytest.mark.parametrize("kind", CPU_KINDS)
def test_decode_with_kv_cache_equals_full_recompute(kind):
    m = model(kind)
    idx = torch.randint(0, CONFIG.vocab_size, (3, 24))
    kv = m.new_kv_cache(3)
    with torch.no_grad():
        logits = m.prefill(idx[:, :5], kv)
        for t in range(5, 24):
            full, _ = m(idx[:, :t])
            torch.testing.assert_close(logits, full[:, -1], atol=TOL, rtol=TOL)
            logits = m.decode(idx[:, t : t + 1], torch.full((3,), t), kv)


@torch.no_grad()
def rows_prefilled_alone(m, idx, lengths):
    """A cache of len(lengths) rows, row r holding idx[r, :lengths[r]], each prefilled on its own."""
    kv = m.new_kv_cache(len(lengths))
    for row, n in enumerate(lengths):
        m.prefill(idx[row : row + 1, :n], kv[:, :, row : row + 1])
    return kv


@pytest.mark.parametrize("kind", CPU_KINDS)
def test_rows_of_a_decode_batch_are_sequences_at_their_own_positions(kind):
    """Each row is prefilled alone to its own length, then every row decodes in one call."""
    m = model(kind)
    lengths = [3, 9, 6]
    idx = torch.randint(0, CONFIG.vocab_size, (3, 24))
    kv = rows_prefilled_alone(m, idx, lengths)
    with torch.no_grad():
        pos = torch.tensor(lengths)
        for _ in range(5):
            logits = m.decode(idx.gather(1, pos.view(-1, 1)), pos, kv)
            for row, n in enumerate(pos.tolist()):
                full, _ = m(idx[row : row + 1, : n + 1])
                torch.testing.assert_close(logits[row], full[0, -1], atol=TOL, rtol=TOL)
            pos = pos + 1


@pytest.mark.parametrize("kind", CPU_KINDS)
def test_extend_appends_tokens_to_rows_at_their_own_positions_as_a_full_recompute(kind):
    """Each row prefilled alone to its own length, then 6 tokens appended to every row in one call,
    twice: the logits equal a full recompute's, and a decode step after them too."""
    m = model(kind)
    lengths = [3, 9, 1]
    idx = torch.randint(0, CONFIG.vocab_size, (3, 24))
    kv = rows_prefilled_alone(m, idx, lengths)
    with torch.no_grad():
        start = torch.tensor(lengths)
        for _ in range(2):
            new = idx.gather(1, start.view(-1, 1) + torch.arange(6).view(1, -1))
            logits = m.extend(new, start, kv)
            start = start + 6
            for row, n in enumerate(start.tolist()):
                full, _ = m(idx[row : row + 1, :n])
                torch.testing.assert_close(logits[row], full[0, -1], atol=TOL, rtol=TOL)
        logits = m.decode(idx.gather(1, start.view(-1, 1)), start, kv)
        for row, n in enumerate(start.tolist()):
            full, _ = m(idx[row : row + 1, : n + 1])
            torch.testing.assert_close(logits[row], full[0, -1], atol=TOL, rtol=TOL)


MASKED_KINDS = [
    k for k in (*CPU_KINDS, "chunked") if attention_runs_on(k, torch.device("cpu"), torch.float32, "masked")
]


@pytest.mark.parametrize("kind", MASKED_KINDS)
def test_mixed_appends_any_sequences_tokens_in_one_call_as_a_full_recompute(kind):
    """Rows prefilled alone to their own lengths; then one call appends a decode step to row 0, a piece of 4
    tokens to row 2 (its last token drawn) and 3 to row 1 (none drawn), ordered as a server mixes them: the
    drawn logits equal a full recompute's, and so do a decode step's after it (the cache holds every token)."""
    m = model(several_queries_kind(kind))  # prompts and the full recompute: several queries a row
    lengths = [5, 2, 9]
    idx = torch.randint(0, CONFIG.vocab_size, (3, 24))
    kv = rows_prefilled_alone(m, idx, lengths)
    m.set_attention(kind)
    seq = torch.tensor([0, 2, 2, 1, 1, 1, 2, 2])
    pos = torch.tensor([5, 9, 10, 2, 3, 4, 11, 12])
    with torch.no_grad():
        logits = m.mixed(idx[seq, pos].view(-1, 1), pos, seq, torch.tensor([0, 7]), kv)
        assert logits.shape == (2, m.config.padded_vocab_size)
        for drawn, (row, n) in enumerate([(0, 6), (2, 13)]):
            full, _ = model(several_queries_kind(kind))(idx[row : row + 1, :n])
            torch.testing.assert_close(logits[drawn], full[0, -1], atol=TOL, rtol=TOL)
        after = torch.tensor([6, 5, 13])
        logits = m.decode(idx.gather(1, after.view(-1, 1)), after, kv)
        m.set_attention(several_queries_kind(kind))
        for row, n in enumerate(after.tolist()):
            full, _ = m(idx[row : row + 1, : n + 1])
            torch.testing.assert_close(logits[row], full[0, -1], atol=TOL, rtol=TOL)


@pytest.mark.parametrize("kind", CPU_KINDS)
def test_decode_over_cache_views_reads_nothing_past_their_span(kind):
    """Decode given views of positions [0, span) (as the graphs take them) equals decode
    over the whole cache, and NaN past the span, spare position included, never reaches a logit."""
    m = model(kind)
    idx = torch.randint(0, CONFIG.vocab_size, (3, 12))
    kv = m.new_kv_cache(3)
    assert kv.shape[4] == CONFIG.block_size + 1  # the spare position that keeps views non-contiguous
    with torch.no_grad():
        m.prefill(idx, kv)
        whole = kv.clone()
        pos = torch.tensor([12, 7, 3])
        span = 13
        kv[..., span:, :] = float("nan")
        step = idx[:, :1]
        logits = m.decode(step, pos, layer_caches(kv, span))
        expected = m.decode(step, pos, whole)
    assert logits.isfinite().all()
    torch.testing.assert_close(logits, expected, atol=TOL, rtol=TOL)
    torch.testing.assert_close(kv[..., :span, :], whole[..., :span, :])  # the step's writes reached the cache


def test_loss_ignores_targets_of_minus_one():
    m = model()
    idx = torch.randint(0, CONFIG.vocab_size, (2, 10))
    targets = torch.randint(0, CONFIG.vocab_size, (2, 10))
    targets[:, :4] = -1
    with torch.no_grad():
        logits, loss = m(idx, targets)
        real = logits[..., : CONFIG.vocab_size]
        expected = F.cross_entropy(real[:, 4:].reshape(-1, CONFIG.vocab_size), targets[:, 4:].reshape(-1))
    torch.testing.assert_close(loss, expected)


def test_loss_is_over_the_tokenizers_tokens_not_the_padding_rows():
    assert CONFIG.padded_vocab_size > CONFIG.vocab_size  # the test needs padding rows
    m = model()
    idx = torch.randint(0, CONFIG.vocab_size, (2, 10))
    targets = torch.randint(0, CONFIG.vocab_size, (2, 10))
    gen = torch.Generator().manual_seed(5)
    with torch.no_grad():
        _, before = m(idx, targets)
        # Padding rows that would dominate a softmax over them (an imported checkpoint's zero rows do so beside
        # GPT-2's real logits, which lie far below 0). wte is tied to lm_head, but padding ids are never input.
        pad = m.lm_head.weight[CONFIG.vocab_size :]
        pad.copy_(torch.randn(pad.shape, generator=gen) * 10)
        logits, loss = m(idx, targets)
        expected = F.cross_entropy(logits[..., : CONFIG.vocab_size].reshape(-1, CONFIG.vocab_size), targets.view(-1))
        padded = F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.view(-1))
    torch.testing.assert_close(loss, before)  # the padding rows do not enter the loss
    torch.testing.assert_close(loss, expected)
    assert padded > loss + 1.0  # what counting them would have cost
