"""BERT-base (Devlin et al., 2019), self-contained (no transformers).

Post-LayerNorm encoder: word + position + token-type embeddings, 12 layers of bidirectional
attention (``F.scaled_dot_product_attention``, not causal) and an erf-GELU MLP. The vocabulary is
30522 WordPiece tokens (bert-base-uncased), so generated token ids must stay below 30522.

Constructor arguments: vocab_size 30522, hidden 768, n_layer 12, n_head 12, intermediate 3072,
max_position 512, type_vocab 2, seed 0. Input: token ids ``[B, S]``; output: hidden states
``[B, S, hidden]``.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Layer(nn.Module):
    def __init__(self, hidden, n_head, intermediate):
        super().__init__()
        self.n_head = n_head
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.attn_out = nn.Linear(hidden, hidden)
        self.ln_attn = nn.LayerNorm(hidden, eps=1e-12)
        self.fc_in = nn.Linear(hidden, intermediate)
        self.fc_out = nn.Linear(intermediate, hidden)
        self.ln_out = nn.LayerNorm(hidden, eps=1e-12)

    def forward(self, x):
        B, S, C = x.shape
        q, k, v = (t.view(B, S, self.n_head, C // self.n_head).transpose(1, 2)
                   for t in self.qkv(x).split(C, dim=2))
        a = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(B, S, C)
        x = self.ln_attn(x + self.attn_out(a))
        return self.ln_out(x + self.fc_out(F.gelu(self.fc_in(x))))


class Bert(nn.Module):
    def __init__(self, vocab_size=30522, hidden=768, n_layer=12, n_head=12, intermediate=3072,
                 max_position=512, type_vocab=2, seed=0):
        super().__init__()
        torch.manual_seed(seed)
        self.vocab_size, self.max_position, self.n_layer = vocab_size, max_position, n_layer
        self.embeddings = nn.ModuleDict(dict(
            word=nn.Embedding(vocab_size, hidden), position=nn.Embedding(max_position, hidden),
            token_type=nn.Embedding(type_vocab, hidden), norm=nn.LayerNorm(hidden, eps=1e-12)))
        self.layers = nn.ModuleList(Layer(hidden, n_head, intermediate) for _ in range(n_layer))
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)

    def forward(self, input_ids):
        B, S = input_ids.shape
        if S > self.max_position:
            raise ValueError(f"sequence length {S} exceeds max_position {self.max_position}")
        e = self.embeddings
        pos = torch.arange(S, device=input_ids.device)
        x = e.word(input_ids) + e.position(pos) + e.token_type(torch.zeros_like(input_ids))
        x = e.norm(x)
        for layer in self.layers:
            x = layer(x)
        return x
