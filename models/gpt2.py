"""GPT-2 small (124M parameters), self-contained (no transformers).

Architecture of Radford et al., "Language Models are Unsupervised Multitask Learners" (2019),
laid out as the reference implementation and HF's GPT2LMHeadModel: the first child is
``transformer``, an ``nn.ModuleDict`` holding wte/wpe/h/ln_f (input detection must look past it),
pre-LayerNorm blocks, causal attention through ``F.scaled_dot_product_attention``, tanh GELU MLP,
and an LM head tied to the token embedding. Weights are random (seeded); VladBud profiles and
verifies kernels, it does not need trained weights.

Constructor arguments (``--model-args '{"n_layer": 2}'``): vocab_size 50257, n_positions 1024,
n_embd 768, n_layer 12, n_head 12, seed 0. Input: token ids ``[B, S]`` int64 in
``[0, vocab_size)``; output: logits ``[B, S, vocab_size]``.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd: int, n_head: int):
        super().__init__()
        if n_embd % n_head:
            raise ValueError(f"n_embd {n_embd} must be divisible by n_head {n_head}")
        self.n_head = n_head
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)

    def forward(self, x):
        B, S, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, S, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).reshape(B, S, C))


class MLP(nn.Module):
    def __init__(self, n_embd: int):
        super().__init__()
        self.c_fc = nn.Linear(n_embd, 4 * n_embd)
        self.c_proj = nn.Linear(4 * n_embd, n_embd)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, n_embd: int, n_head: int):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = MLP(n_embd)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT2(nn.Module):
    """GPT-2; the defaults are GPT-2 small (124M with the tied head)."""

    def __init__(self, vocab_size=50257, n_positions=1024, n_embd=768, n_layer=12, n_head=12, seed=0):
        super().__init__()
        torch.manual_seed(seed)
        self.vocab_size, self.n_positions, self.n_layer = vocab_size, n_positions, n_layer
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(vocab_size, n_embd),
            wpe=nn.Embedding(n_positions, n_embd),
            h=nn.ModuleList(Block(n_embd, n_head) for _ in range(n_layer)),
            ln_f=nn.LayerNorm(n_embd),
        ))
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
        self.lm_head.weight = self.transformer.wte.weight  # tied, as in GPT-2
        for m in self.modules():  # GPT-2's init: N(0, 0.02), zero biases
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)
            if isinstance(m, nn.Linear) and m.bias is not None:
                nn.init.zeros_(m.bias)

    def forward(self, idx):
        B, S = idx.shape
        if S > self.n_positions:
            raise ValueError(f"sequence length {S} exceeds n_positions {self.n_positions}")
        pos = torch.arange(S, device=idx.device)
        x = self.transformer.wte(idx) + self.transformer.wpe(pos)
        for block in self.transformer.h:
            x = block(x)
        return self.lm_head(self.transformer.ln_f(x))
