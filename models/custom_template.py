"""Template for profiling your own model with VladBud. Copy this file and edit it.

    vladbud profile --model models/custom_template.py --class-name TinyClassifier \
        --input-shape 8,128 --dtype fp32 --model-args '{"hidden": 256}'

What VladBud needs from the class:

1. A constructor it can call with keyword arguments only; ``--model-args`` is a JSON object of
   them. Build random weights (seed them) or load your own from a local file here.
2. ``forward`` taking one tensor. How VladBud makes that tensor, in this order:
   a. ``example_inputs(batch, seq, device)`` if the model defines it (as below): return the
      tensor ``forward`` expects, of shape/dtype/values you choose;
   b. else token ids ``[batch, seq]`` int64 in ``[0, vocab)``, where vocab is the model's
      ``vocab_size`` attribute (or ``config.vocab_size``), else the size of the first
      ``nn.Embedding`` found anywhere in the module tree;
   c. else floats ``[batch, seq, in_features]`` of the first ``nn.Linear``.
3. ``n_layer`` (optional): the depth used to derive verify's tolerance (default: the number of
   repeated blocks found, else 1).

Everything the model does is profiled; the operations VladBud recognises (linear/matmul,
attention, layer_norm, RMSNorm, RoPE, softmax, cross_entropy, sum) become extractable kernels.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class TinyClassifier(nn.Module):
    """Embedding -> n_layer x (LayerNorm, attention, MLP) -> mean-pool -> classes."""

    def __init__(self, vocab_size=1000, hidden=128, n_layer=2, n_head=4, classes=10, seed=0):
        super().__init__()
        torch.manual_seed(seed)
        self.vocab_size, self.n_layer, self.n_head = vocab_size, n_layer, n_head
        self.embed = nn.Embedding(vocab_size, hidden)
        self.norms = nn.ModuleList(nn.LayerNorm(hidden) for _ in range(n_layer))
        self.qkv = nn.ModuleList(nn.Linear(hidden, 3 * hidden) for _ in range(n_layer))
        self.mlp = nn.ModuleList(nn.Linear(hidden, hidden) for _ in range(n_layer))
        self.head = nn.Linear(hidden, classes)

    def example_inputs(self, batch: int, seq: int, device="cpu"):
        """Token ids [batch, seq] in [0, vocab_size)."""
        g = torch.Generator().manual_seed(0)
        return torch.randint(0, self.vocab_size, (batch, seq), generator=g).to(device)

    def forward(self, ids):
        x = self.embed(ids)
        B, S, C = x.shape
        for norm, qkv, mlp in zip(self.norms, self.qkv, self.mlp):
            q, k, v = (t.view(B, S, self.n_head, -1).transpose(1, 2) for t in qkv(norm(x)).split(C, 2))
            x = x + F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(B, S, C)
            x = x + F.gelu(mlp(x))
        return self.head(x.mean(dim=1))
