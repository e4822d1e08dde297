"""rotary_embedding (Triton starter): y[B,H,S,D] = RoPE(x) with cos/sin[S,D/2] (DESIGN §2).

Inputs: x[B,H,S,D], cos[S,D/2], sin[S,D/2] (real tables: the kernel must read them). Outputs:
y (x's dtype). Attribute 0: interleaved (default 0): 0 rotates the halves (i, i+D/2), NeoX /
HF LLaMA; 1 rotates the pairs (2i, 2i+1), GPT-J. For pair (a, b) at position s and frequency
i: y_a = a·cos - b·sin, y_b = b·cos + a·sin, in fp32, rounded once.

Each program rotates ROWS consecutive rows of D elements (a row = one (b, h, s)); its position
is s = row mod S.

Python ABI: vb_kernel_run(inputs, outputs, attrs) with contiguous torch tensors in the type's
order and the attributes as floats; raises ValueError for a bad call.
"""
import triton
import triton.language as tl

# Tunables (the optimizer's search rewrites these assignments; every value is correct):
# @vb-param ROWS 16 {4,8,16,32,64}  (batch, head, position) rows per program
ROWS = 16
# @vb-param NUM_WARPS 4 {1,2,4,8}  warps per program
NUM_WARPS = 4


@triton.jit
def _rope(x_ptr, c_ptr, s_ptr, y_ptr, n_rows, S, D, HALF, ROWS: tl.constexpr,
          BLOCK: tl.constexpr, INTERLEAVED: tl.constexpr):
    r = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)
    i = tl.arange(0, BLOCK)
    m = (r[:, None] < n_rows) & (i[None, :] < HALF)
    pos = r % S
    cs = tl.load(c_ptr + pos[:, None] * HALF + i[None, :], mask=m, other=0.0).to(tl.float32)
    sn = tl.load(s_ptr + pos[:, None] * HALF + i[None, :], mask=m, other=0.0).to(tl.float32)
    if INTERLEAVED:
        ia = 2 * i
        ib = 2 * i + 1
    else:
        ia = i
        ib = i + HALF
    base = r[:, None] * D
    a = tl.load(x_ptr + base + ia[None, :], mask=m, other=0.0).to(tl.float32)
    b = tl.load(x_ptr + base + ib[None, :], mask=m, other=0.0).to(tl.float32)
    ty = y_ptr.dtype.element_ty
    tl.store(y_ptr + base + ia[None, :], (a * cs - b * sn).to(ty), mask=m)
    tl.store(y_ptr + base + ib[None, :], (b * cs + a * sn).to(ty), mask=m)


def vb_kernel_run(inputs, outputs, attrs):
    if len(inputs) != 3 or len(outputs) != 1 or len(attrs) != 1:
        raise ValueError("rotary_embedding: expected 3 inputs (x, cos, sin), 1 output, 1 attribute (interleaved)")
    x, cos, sin = inputs
    y = outputs[0]
    if x.dim() != 4:
        raise ValueError(f"rotary_embedding: x must be [B,H,S,D], got {tuple(x.shape)}")
    B, H, S, D = x.shape
    if D % 2 != 0:
        raise ValueError(f"rotary_embedding: head dim D = {D} must be even")
    half = D // 2
    if tuple(cos.shape) != (S, half) or tuple(sin.shape) != (S, half) or tuple(y.shape) != tuple(x.shape):
        raise ValueError(f"rotary_embedding: shapes cos {tuple(cos.shape)}, sin {tuple(sin.shape)}, y {tuple(y.shape)} do not fit [S,D/2], [S,D/2], [B,H,S,D]")
    if any(t.dtype != x.dtype for t in (cos, sin, y)):
        raise ValueError("rotary_embedding: x, cos, sin and y must have one dtype")
    if attrs[0] not in (0.0, 1.0):
        raise ValueError(f"rotary_embedding: interleaved must be 0 or 1 (got {attrs[0]})")
    n_rows = B * H * S
    if n_rows == 0 or D == 0:
        return
    _rope[(triton.cdiv(n_rows, ROWS),)](x, cos, sin, y, n_rows, S, D, half, ROWS=ROWS,
                                        BLOCK=triton.next_power_of_2(half),
                                        INTERLEAVED=attrs[0] == 1.0, num_warps=NUM_WARPS)
