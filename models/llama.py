"""LLaMA (Touvron et al., 2023), self-contained (no transformers).

Pre-RMSNorm decoder blocks with hand-written RMSNorm (pow -> mean -> rsqrt -> mul, statistics in
fp32), rotary position embeddings in the half-split (NeoX / HF LLaMA) layout, causal attention
through ``F.scaled_dot_product_attention`` and a SwiGLU MLP ``w2(silu(w1 x) * w3 x)``.

RoPE tables: the cos/sin tables are real fp32 tensors recomputed per (device, length) from
Python floats and never stored as module buffers. A complex ``freqs_cis`` buffer (Meta's
original code) is cast by ``model.half()`` and loses its imaginary part (a public bug); fp32
buffers would still be rounded to fp16 by ``.half()``. Here ``.half()`` cannot touch them, and
the rotation is computed in fp32 and rounded once to the activation dtype.

Configurations (``--model-args '{"config": "7b"}'``, any field may be overridden too):
``small`` (default): dim 512, 8 layers, 8 heads, FFN 1408, vocab 32000 (~50M parameters);
``7b``: dim 4096, 32 layers, 32 heads, FFN 11008, vocab 32000 (LLaMA-7B, ~6.7B parameters).
Input: token ids ``[B, S]`` int64 in ``[0, vocab_size)``; output: logits ``[B, S, vocab_size]``.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

CONFIGS = {
    "small": dict(dim=512, n_layers=8, n_heads=8, ffn_hidden=1408, vocab_size=32000, max_seq_len=2048),
    "7b": dict(dim=4096, n_layers=32, n_heads=32, ffn_hidden=11008, vocab_size=32000, max_seq_len=4096),
}


class RMSNorm(nn.Module):
    """x / sqrt(mean(x^2) + eps) * weight, statistics in fp32 (as HF LlamaRMSNorm)."""

    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * xf.to(x.dtype)


class RotaryEmbedding(nn.Module):
    """Half-split RoPE: y = [x1 c - x2 s, x2 c + x1 s] with angle(s, i) = s * base^(-2i/D)."""

    def __init__(self, head_dim: int, base: float = 10000.0):
        super().__init__()
        if head_dim % 2:
            raise ValueError(f"head_dim {head_dim} must be even for RoPE")
        self.head_dim, self.base = head_dim, base
        self._tables = {}

    def tables(self, seq_len: int, device):
        """cos, sin as real fp32 [seq_len, head_dim/2] tensors (cached per device and length)."""
        key = (str(device), seq_len)
        if key not in self._tables:
            half = self.head_dim // 2
            inv = torch.tensor([self.base ** (-2.0 * i / self.head_dim) for i in range(half)],
                               dtype=torch.float64)
            ang = torch.arange(seq_len, dtype=torch.float64)[:, None] * inv[None, :]
            self._tables[key] = (ang.cos().float().to(device), ang.sin().float().to(device))
        return self._tables[key]

    def forward(self, x):
        """x: [B, H, S, D] -> same shape and dtype."""
        cos, sin = self.tables(x.shape[-2], x.device)
        half = self.head_dim // 2
        xf = x.float()
        x1, x2 = xf[..., :half], xf[..., half:]
        y = torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)
        return y.to(x.dtype)


class Attention(nn.Module):
    def __init__(self, dim: int, n_heads: int):
        super().__init__()
        self.n_heads, self.head_dim = n_heads, dim // n_heads
        self.wq = nn.Linear(dim, dim, bias=False)
        self.wk = nn.Linear(dim, dim, bias=False)
        self.wv = nn.Linear(dim, dim, bias=False)
        self.wo = nn.Linear(dim, dim, bias=False)
        self.rope = RotaryEmbedding(self.head_dim)

    def forward(self, x):
        B, S, C = x.shape
        q, k, v = (w(x).view(B, S, self.n_heads, self.head_dim).transpose(1, 2)
                   for w in (self.wq, self.wk, self.wv))
        q, k = self.rope(q), self.rope(k)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.wo(y.transpose(1, 2).reshape(B, S, C))


class FeedForward(nn.Module):
    """SwiGLU: w2(silu(w1 x) * w3 x); w1 = gate, w3 = up, w2 = down."""

    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    def __init__(self, dim, n_heads, ffn_hidden, eps):
        super().__init__()
        self.attention_norm = RMSNorm(dim, eps)
        self.attention = Attention(dim, n_heads)
        self.ffn_norm = RMSNorm(dim, eps)
        self.feed_forward = FeedForward(dim, ffn_hidden)

    def forward(self, x):
        x = x + self.attention(self.attention_norm(x))
        return x + self.feed_forward(self.ffn_norm(x))


class Llama(nn.Module):
    def __init__(self, config: str = "small", seed: int = 0, norm_eps: float = 1e-6, **overrides):
        super().__init__()
        if config not in CONFIGS:
            raise ValueError(f"unknown LLaMA config '{config}'; choose one of {sorted(CONFIGS)}")
        cfg = dict(CONFIGS[config])
        unknown = set(overrides) - set(cfg)
        if unknown:
            raise ValueError(f"unknown LLaMA arguments {sorted(unknown)}; known: {sorted(cfg)}")
        cfg.update(overrides)
        torch.manual_seed(seed)
        self.config = cfg
        self.vocab_size, self.n_layer = cfg["vocab_size"], cfg["n_layers"]
        self.tok_embeddings = nn.Embedding(cfg["vocab_size"], cfg["dim"])
        self.layers = nn.ModuleList(Block(cfg["dim"], cfg["n_heads"], cfg["ffn_hidden"], norm_eps)
                                    for _ in range(cfg["n_layers"]))
        self.norm = RMSNorm(cfg["dim"], norm_eps)
        self.output = nn.Linear(cfg["dim"], cfg["vocab_size"], bias=False)
        std = 1.0 / math.sqrt(cfg["dim"])
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=std if isinstance(m, nn.Linear) else 1.0)

    def forward(self, tokens):
        if tokens.shape[1] > self.config["max_seq_len"]:
            raise ValueError(f"sequence length {tokens.shape[1]} exceeds max_seq_len {self.config['max_seq_len']}")
        x = self.tok_embeddings(tokens)
        for layer in self.layers:
            x = layer(x)
        return self.output(self.norm(x))
