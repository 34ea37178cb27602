"""nanoGPT (GPT-2 architecture) with a static KV cache and selectable attention.

The module layout and parameter names follow nanoGPT exactly so its checkpoints
load unchanged. Four entry points share one set of weights:
  forward(idx, targets)      full-sequence logits (+ loss), as nanoGPT trains
  prefill(idx, kv)           fills the KV cache for positions [0, T), last logits
  decode(idx, pos, kv)       one token per row b at position pos[b], its logits
  extend(idx, start, kv)     T tokens per row b at positions [start[b], start[b] + T), last logits
  mixed(idx, pos, seq, last, kv)  tokens of any sequences (decode steps, prompt pieces), chosen logits
Rows of a batch are independent sequences, each at its own position. Every
linear layer can run as aten's matrix product, oneDNN's (CPU) or, for one row,
as a reduction (`set_linear_form`); with int8 or int4 weights (quantize.py)
as the matrix product over the dequantised weight or a quantized kernel
(linear.py).
The KV cache is one tensor (n_layer, 2, B, n_head, block_size + 1, head_dim), and
the compiled graphs take it as 2 * n_layer inputs, each layer's K and V a view
of it (`layer_caches`). A cache each graph writes once is one Inductor updates
in place; writing several views of one input makes it copy the whole cache on
every step. Decode takes views of the first `span` positions only (span > every
row's pos), so a step reads the context it attends to, not the whole block.
"""

import math
from dataclasses import asdict, dataclass

import torch
import torch.nn as nn
from torch.nn import functional as F

from gpt_aot.model import kernels, kv_q8
from gpt_aot.model.attention import attend, attend_decoding, prepare_attention, several_queries_kind
from gpt_aot.model.linear import BLOCK_ROWS, LAYOUT_LINEAR_FORMS, Linear, int4_embedding

VOCAB_MULTIPLE = 64
# The MLP's activation: "exact" is the erf GELU nanoGPT trains with (nn.GELU()); "tanh" is the
# approximation GPT-2 was trained with (Hugging Face's gelu_new, nn.GELU(approximate="tanh")).
GELU_FORMS = {"exact": "none", "tanh": "tanh"}  # ours -> torch's `approximate`


# The KV cache's dtypes besides the activations' own: "int8", each position's head_dim values rounded to int8
# against its own scale (largest magnitude / 127), that scale's fp32 bytes after them (kv_q8.py,
# kernels/cpu/kv_row_q8.h): head_dim + 4 bytes a position, 68 against bf16's 128 at GPT-2's head size. Decode's
# steps read it with the kernel library's attention, on the CPU; a prompt's tokens attend to its values with SDPA.
KV_DTYPES = ("int8",)


def padded_vocab_size(vocab_size: int) -> int:
    """Round up so the embedding/lm_head GEMMs hit efficient tile sizes."""
    return -(-vocab_size // VOCAB_MULTIPLE) * VOCAB_MULTIPLE


@dataclass(frozen=True)
class GPTConfig:
    block_size: int = 1024
    vocab_size: int = 50304  # tokens the tokenizer can produce; rows are padded to a multiple of 64
    n_layer: int = 12
    n_head: int = 12
    n_embd: int = 768
    dropout: float = 0.0
    bias: bool = True
    gelu: str = "exact"  # GELU_FORMS: nanoGPT's exact GELU; GPT-2 weights imported from Hugging Face get "tanh"

    def __post_init__(self):
        if self.gelu not in GELU_FORMS:
            raise ValueError(f"gelu must be one of {', '.join(GELU_FORMS)}, not {self.gelu!r}")
        if self.n_embd % self.n_head:
            raise ValueError(f"n_embd ({self.n_embd}) must be divisible by n_head ({self.n_head})")
        for name in ("block_size", "vocab_size", "n_layer", "n_head", "n_embd"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive")

    @property
    def padded_vocab_size(self) -> int:
        return padded_vocab_size(self.vocab_size)

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head

    def to_dict(self) -> dict:
        return asdict(self)

    @staticmethod
    def from_dict(d: dict) -> "GPTConfig":
        fields = GPTConfig.__dataclass_fields__
        return GPTConfig(**{k: v for k, v in d.items() if k in fields})


def layer_caches(kv: torch.Tensor, span: int) -> list[torch.Tensor]:
    """Views of the KV cache's positions [0, span), k and v of each layer in turn: the graphs' cache inputs."""
    return [kv[layer, i, :, :, :span] for layer in range(kv.shape[0]) for i in (0, 1)]


class LayerNorm(nn.Module):
    """LayerNorm with an optional bias (PyTorch's has no bias=False before 2.1)."""

    def __init__(self, ndim: int, bias: bool):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(ndim))
        self.bias = nn.Parameter(torch.zeros(ndim)) if bias else None

    def forward(self, x):
        return F.layer_norm(x, self.weight.shape, self.weight, self.bias, 1e-5)


class CausalSelfAttention(nn.Module):
    def __init__(self, config: GPTConfig, layer: int, attention: str):
        super().__init__()
        self.layer = layer
        self.n_head = config.n_head
        self.n_embd = config.n_embd
        self.attention = attention
        self.dropout = config.dropout
        self.c_attn = Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        self.c_proj = Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.resid_dropout = nn.Dropout(config.dropout)

    def _qkv(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        shape = (B, T, self.n_head, C // self.n_head)
        return (t.view(shape).transpose(1, 2) for t in (q, k, v))  # each (B, nh, T, hs)

    def _out(self, y):
        B, nh, T, hs = y.shape
        # An explicit copy: each SDPA kernel returns its own memory layout, and the
        # graph must not bake in the one seen while tracing.
        y = y.transpose(1, 2).clone(memory_format=torch.contiguous_format).view(B, T, nh * hs)
        return self.resid_dropout(self.c_proj(y))

    def forward(self, x):
        q, k, v = self._qkv(x)
        drop = self.dropout if self.training else 0.0
        return self._out(attend(self.attention, q, k, v, mask=None, dropout_p=drop))

    # k_cache, v_cache: this layer's (B, n_head, S, head_dim), S at least the
    # positions written (head_dim + kv_q8.SCALE_BYTES bytes for an int8 cache).
    # Indexed assignment (index_put_) is what Inductor knows how to do in place.
    # A prompt attends with SDPA to the values the cache holds (an int8 cache's
    # rounded ones: no logit sees a key the cache does not hold); "chunked", decode's
    # one-query kernel, leaves it to math (several_queries_kind).
    def prefill(self, x, k_cache, v_cache):
        q, k, v = self._qkv(x)
        positions = torch.arange(x.shape[1], device=x.device)
        k_stored, k = _cache_form(k, k_cache)
        v_stored, v = _cache_form(v, v_cache)
        k_cache[:, :, positions] = k_stored
        v_cache[:, :, positions] = v_stored
        return self._out(attend(several_queries_kind(self.attention), q, k, v, mask=None))

    # pos (B,): row b's token goes to cache position pos[b] and sees positions <= pos[b];
    # every pos[b] < S, the span of positions the cache views hold. With seq (B,), the cache
    # row of each token (mixed): several tokens of one sequence see each other as a prompt's do.
    def decode(self, x, pos, k_cache, v_cache, seq=None):
        q, k, v = self._qkv(x)  # T == 1
        return self._out(attend_decoding(self.attention, q, k, v, k_cache, v_cache, pos, seq))

    # start (B,): row b's T tokens go to cache positions [start[b], start[b] + T), each seeing
    # the positions up to its own (what the row held before, then its earlier new tokens);
    # every start[b] + T <= S. Decode is the case T == 1, kept as its own graph for its kernels.
    def extend(self, x, start, k_cache, v_cache):
        q, k, v = self._qkv(x)  # each (B, nh, T, hs)
        B, T = x.shape[0], x.shape[1]
        positions = start.view(-1, 1) + torch.arange(T, device=x.device).view(1, T)  # (B, T)
        rows = torch.arange(B, device=x.device).view(-1, 1)
        # advanced indices first: (B, T, nh, ·)
        k_cache[rows, :, positions] = _cache_form(k, k_cache)[0].transpose(1, 2)
        v_cache[rows, :, positions] = _cache_form(v, v_cache)[0].transpose(1, 2)
        span = k_cache.shape[2]
        visible = torch.arange(span, device=x.device).view(1, 1, span) <= positions.view(B, T, 1)  # (B, T, S)
        mask = visible.view(B, 1, T, span)
        keys, values = _cache_values(k_cache, q.dtype), _cache_values(v_cache, q.dtype)
        return self._out(attend(several_queries_kind(self.attention), q, keys, values, mask=mask))


def _cache_form(x, cache):
    """x (keys or values) as `cache` stores it, and the values that holds: x itself for a cache of x's dtype."""
    return kv_q8.store(x) if cache.dtype == torch.int8 else (x, x)


def _cache_values(cache, dtype):
    """The keys or values `cache` holds, in the activations' dtype."""
    return kv_q8.values(cache, dtype) if cache.dtype == torch.int8 else cache


class MLP(nn.Module):
    def __init__(self, config: GPTConfig):
        super().__init__()
        self.c_fc = Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
        self.gelu = nn.GELU(approximate=GELU_FORMS[config.gelu])
        self.c_proj = Linear(4 * config.n_embd, config.n_embd, bias=config.bias)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x):
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self, config: GPTConfig, layer: int, attention: str):
        super().__init__()
        self.ln_1 = LayerNorm(config.n_embd, bias=config.bias)
        self.attn = CausalSelfAttention(config, layer, attention)
        self.ln_2 = LayerNorm(config.n_embd, bias=config.bias)
        self.mlp = MLP(config)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))

    def prefill(self, x, k_cache, v_cache):
        x = x + self.attn.prefill(self.ln_1(x), k_cache, v_cache)
        return x + self.mlp(self.ln_2(x))

    def decode(self, x, pos, k_cache, v_cache, seq=None):
        x = x + self.attn.decode(self.ln_1(x), pos, k_cache, v_cache, seq)
        return x + self.mlp(self.ln_2(x))

    def extend(self, x, start, k_cache, v_cache):
        x = x + self.attn.extend(self.ln_1(x), start, k_cache, v_cache)
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    embedding_untied = False
    quantization = None  # "int8" or "int4" once quantize.py has run
    kv_dtype = None  # the KV cache's: None for the activations' dtype, or one of KV_DTYPES (set_kv_dtype)

    def __init__(self, config: GPTConfig, attention: str = "math"):
        super().__init__()
        prepare_attention(attention)
        self.config = config
        self.transformer = nn.ModuleDict(
            dict(
                wte=nn.Embedding(config.padded_vocab_size, config.n_embd),
                wpe=nn.Embedding(config.block_size, config.n_embd),
                drop=nn.Dropout(config.dropout),
                h=nn.ModuleList([Block(config, i, attention) for i in range(config.n_layer)]),
                ln_f=LayerNorm(config.n_embd, bias=config.bias),
            )
        )
        self.lm_head = Linear(config.n_embd, config.padded_vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # weight tying, as GPT-2

    def init_weights(self, seed: int):
        """nanoGPT's initialisation, deterministic for a seed."""
        gen = torch.Generator().manual_seed(seed)
        std_proj = 0.02 / math.sqrt(2 * self.config.n_layer)
        with torch.no_grad():
            for name, p in self.named_parameters():
                if name.endswith("c_proj.weight"):
                    p.normal_(0.0, std_proj, generator=gen)
                elif p.dim() >= 2:
                    p.normal_(0.0, 0.02, generator=gen)
                elif name.endswith("weight"):  # LayerNorm gain
                    p.fill_(1.0)
                else:
                    p.zero_()
        return self

    @property
    def dtype(self) -> torch.dtype:
        """The activations' (and KV cache's) dtype: the float weights', whether or not the linears are int8."""
        return self.transformer.wpe.weight.dtype

    @property
    def attention(self) -> str:
        return self.transformer.h[0].attn.attention

    def set_attention(self, attention: str):
        prepare_attention(attention)
        for block in self.transformer.h:
            block.attn.attention = attention

    def set_kv_dtype(self, kv_dtype: str | None):
        """The KV cache new_kv_cache makes: None, the activations' dtype, or one of KV_DTYPES, which decode must
        then attend to with the kernel library's "chunked" attention."""
        if kv_dtype not in (None, *KV_DTYPES):
            raise ValueError(f"KV cache dtype {kv_dtype!r} is not one of {', '.join(KV_DTYPES)}")
        if kv_dtype:
            kernels.load()
        self.kv_dtype = kv_dtype

    @property
    def linear_form(self) -> str:
        return self.lm_head.form

    @property
    def weight_layout(self) -> str | None:
        """How the linears' weights are laid out (linear.WEIGHT_LAYOUTS): None for
        float weights, int8 "rows" or "blocks32" (quantize.set_int8_layout), int4 "blocks64"."""
        weight = self.lm_head.weight
        if weight.dtype == torch.uint8:
            return "blocks64"
        if weight.dtype == torch.int8:
            return "blocks32" if weight.dim() == 3 else "rows"
        return None

    @property
    def int8_layout(self) -> str | None:
        """The int8 weights' layout; None for any other weights."""
        return self.weight_layout if self.quantization == "int8" else None

    @property
    def linear_forms(self) -> tuple:
        """The linear forms these weights allow."""
        return LAYOUT_LINEAR_FORMS[self.weight_layout]

    def set_linear_form(self, form: str):
        if form not in self.linear_forms:
            raise ValueError(f"linear form {form!r} is not one of {self.linear_forms}")
        if form in ("kernel", "panels", "q8", "q8panels", "int4panels"):
            kernels.load()  # the form calls the library's operators: registered here before any forward
        for module in self.modules():
            if isinstance(module, Linear):
                module.form = form
        if form == "panels" and self.lm_head.weight is self.transformer.wte.weight:
            # A tied head reads the embedding's rows as stored: a packed copy would add the head's bytes again.
            self.lm_head.form = "kernel"

    # One position more than the context, never used: a graph's cache views hold
    # positions [0, span), and with the spare their stride, (block_size + 1) *
    # head_dim, can never equal span * head_dim. So torch.export proves a view
    # is never contiguous and keeps span a dynamic size; without the spare it
    # guards span != block_size and refuses to export.
    # An int8 cache's positions hold their scales too (KV_DTYPES).
    def new_kv_cache(self, batch: int, device=None):
        c = self.config
        device = device or self.lm_head.weight.device
        dtype, position = self.dtype, c.head_dim
        if self.kv_dtype == "int8":
            dtype, position = torch.int8, c.head_dim + kv_q8.SCALE_BYTES
        shape = (c.n_layer, 2, batch, c.n_head, c.block_size + 1, position)
        return torch.zeros(shape, dtype=dtype, device=device)

    def _embed(self, idx, pos):
        # wte is tied to lm_head; reading it through lm_head lets exported graphs see
        # one parameter (and one gradient) for the shared tensor, unless export gave
        # wte its own copy (compiler/graphs.py's untied_lm_head).
        table = self.transformer.wte.weight if self.embedding_untied else self.lm_head.weight
        if self.quantization == "int4":  # the gathered rows dequantised (quantize.py)
            tok = int4_embedding(table, self.lm_head.weight_scale_zero, idx, self.dtype)
        elif table.dim() == 3:  # int8 row blocks: token t is column t % 32 of block t // 32
            tok = table[idx // BLOCK_ROWS, :, idx % BLOCK_ROWS]
        else:
            tok = F.embedding(idx, table)
        if self.quantization == "int8":  # the gathered int8 rows times their rows' scales (quantize.py)
            tok = tok.to(self.dtype) * F.embedding(idx, self.lm_head.weight_scale.unsqueeze(-1))
        return self.transformer.drop(tok + self.transformer.wpe(pos))

    def forward(self, idx, targets=None):
        T = idx.shape[1]
        x = self._embed(idx, torch.arange(T, device=idx.device))
        for block in self.transformer.h:
            x = block(x)
        logits = self.lm_head(self.transformer.ln_f(x))  # (B, T, Vp)
        if targets is None:
            return logits, None
        # Over the tokenizer's tokens only: the padding rows stand for no token, and an imported checkpoint's
        # zero-filled ones would otherwise put logits of 0 beside GPT-2's far lower real ones in every softmax.
        vocab = self.config.vocab_size
        real = logits if vocab == logits.size(-1) else logits[..., :vocab]
        loss = F.cross_entropy(real.reshape(-1, vocab), targets.view(-1), ignore_index=-1)
        return logits, loss

    # `kv` is the cache tensor (read whole) or its layer_caches views (what the graphs take).
    def prefill(self, idx, kv):
        """idx (B, T) → logits of the last position (B, Vp); writes cache positions [0, T)."""
        caches = layer_caches(kv, self.config.block_size) if isinstance(kv, torch.Tensor) else kv
        T = idx.shape[1]
        x = self._embed(idx, torch.arange(T, device=idx.device))
        for i, block in enumerate(self.transformer.h):
            x = block.prefill(x, caches[2 * i], caches[2 * i + 1])
        return self.lm_head(self.transformer.ln_f(x[:, -1, :]))

    def decode(self, idx, pos, kv):
        """idx (B, 1), pos (B,) int64 → logits (B, Vp); writes row b's cache at pos[b]."""
        caches = layer_caches(kv, self.config.block_size) if isinstance(kv, torch.Tensor) else kv
        x = self._embed(idx, pos.view(-1, 1))
        for i, block in enumerate(self.transformer.h):
            x = block.decode(x, pos, caches[2 * i], caches[2 * i + 1])
        return self.lm_head(self.transformer.ln_f(x[:, -1, :]))

    def extend(self, idx, start, kv):
        """idx (B, T), start (B,) int64 → logits of the last position (B, Vp); writes row b's cache at
        [start[b], start[b] + T), attending to what it held before: a sequence's prompt in pieces, or a
        shared prefix's cache continued with the rest of a prompt."""
        caches = layer_caches(kv, self.config.block_size) if isinstance(kv, torch.Tensor) else kv
        T = idx.shape[1]
        positions = start.view(-1, 1) + torch.arange(T, device=idx.device).view(1, T)
        x = self._embed(idx, positions)
        for i, block in enumerate(self.transformer.h):
            x = block.extend(x, start, caches[2 * i], caches[2 * i + 1])
        return self.lm_head(self.transformer.ln_f(x[:, -1, :]))

    def mixed(self, idx, pos, seq, last, kv):
        """idx (N, 1), pos (N,), seq (N,) int64 → logits (R, Vp) of the tokens last (R,) int64 names: token n
        goes to cache row seq[n] at position pos[n] and sees that row's positions <= pos[n], its sequence's
        earlier tokens of this call included. Decode steps of some sequences and prompt pieces of others in one
        forward, which reads every weight once for all of them; logits only where a token is drawn."""
        caches = layer_caches(kv, self.config.block_size) if isinstance(kv, torch.Tensor) else kv
        x = self._embed(idx, pos.view(-1, 1))
        for i, block in enumerate(self.transformer.h):
            x = block.decode(x, pos, caches[2 * i], caches[2 * i + 1], seq)
        return self.lm_head(self.transformer.ln_f(x[last, -1, :]))
