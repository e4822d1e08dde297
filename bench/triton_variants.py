#!/usr/bin/env python3
"""Writes the variant sets of the blind Triton ranking studies: study 1 (issue 17, "Measure"):
softmax, rmsnorm and matmul variants of the Triton starters (kernels/triton/<type>.py) that differ
in block sizes, num_warps and num_stages; study 2 (issue 20): softmax, rmsnorm, layernorm,
cross_entropy and reduce variants, each a choice of the starter's own @vb-param values (no other
text changed), none the configuration of a study-1 variant. Both before anything is measured.

Each variant is the starter's text with its configuration made explicit and overridden:
  softmax, rmsnorm  MAX_BLOCK (longest row kept in registers: one pass when C <= MAX_BLOCK),
                    CHUNK (the block of the two-pass path for longer rows), WARPS, NUM_STAGES
                    (the launch's num_warps / num_stages; the starter picks 8 or 4 warps by block)
  matmul            CONFIG_16 = (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages) of 16-bit
                    inputs, GROUP_M (the L2 swizzle width)
At the ranking problem (the GPU benchmark sizes, bf16: softmax and rmsnorm 8192x8192, matmul
4096^3) a MAX_BLOCK below 8192 sends the rows through the two-pass path. The configurations
below were chosen near the defaults so that most pairs lie within 2x of each other, and are
never changed after the prediction is committed: the study's files are frozen copies.

    python3 bench/triton_variants.py [--study 1|2|3] [--out DIR] [--check]

--check verifies that the files on disk are what this script writes from the starters the study
was generated from (git show STARTER_COMMITS[study]:kernels/triton/<type>.py): study 1 from
edd5510 (softmax gained @vb-param NUM_WARPS/SMALL_NUM_WARPS/CHUNK since), study 2 from 98612da
(375607f changed cross_entropy's defaults since), study 3 from e087558. Exits 1 when a starter no
longer has the text a substitution expects (the study is then regenerated from a new commit, not
patched).

Study 3 (model 6's blind test) adds flash_attention (b2h16s4096d128 causal) and fused_mlp
(b512d4096h11008) variants of their starters' tile @vb-params, and layernorm, cross_entropy
and reduce configurations neither study 1 nor 2 took; softmax and rmsnorm have only 4 left at
8192 columns (see CHUNKED3).

Study 2's sizes (the GPU benchmark sizes of src/kernels/<type>.cpp, bf16): softmax, rmsnorm,
layernorm and reduce 8192x8192, cross_entropy 512x128256. Study 1 used every one-pass warp count
of the softmax/rmsnorm starters' space (4, 8, 16 at Triton's default num_stages 3), so study 2's
softmax/rmsnorm variants are all chunked (MAX_BLOCK < 8192); two of them (v07, v08) share
study 1's CHUNK and warps but run Triton's default num_stages 3 where study 1 ran 1 and 2.
"""
import argparse
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent

# type -> [(name, {setting: value})]; an empty dict is the starter's own configuration.
ROWWISE = {
    # one pass (C = 8192 <= MAX_BLOCK): the row in registers, warps vary
    "v01_default": {},
    "v02_onepass_w4": {"MAX_BLOCK": 8192, "WARPS": 4},
    "v03_onepass_w16": {"MAX_BLOCK": 8192, "WARPS": 16},
    "v04_onepass_w32": {"MAX_BLOCK": 8192, "WARPS": 32},
    # two passes over chunks: chunk, warps and software-pipelining stages vary
    "v05_chunk2048_w8_s3": {"MAX_BLOCK": 4096, "CHUNK": 2048, "WARPS": 8, "NUM_STAGES": 3},
    "v06_chunk1024_w4_s2": {"MAX_BLOCK": 4096, "CHUNK": 1024, "WARPS": 4, "NUM_STAGES": 2},
    "v07_chunk4096_w16_s2": {"MAX_BLOCK": 4096, "CHUNK": 4096, "WARPS": 16, "NUM_STAGES": 2},
    "v08_chunk512_w4_s4": {"MAX_BLOCK": 4096, "CHUNK": 512, "WARPS": 4, "NUM_STAGES": 4},
    "v09_chunk2048_w4_s1": {"MAX_BLOCK": 4096, "CHUNK": 2048, "WARPS": 4, "NUM_STAGES": 1},
    "v10_chunk4096_w8_s3": {"MAX_BLOCK": 4096, "CHUNK": 4096, "WARPS": 8, "NUM_STAGES": 3},
}
MATMUL = {
    "v01_default": {},
    "v02_128x256x64_w8_s3": {"CONFIG_16": (128, 256, 64, 8, 3)},
    "v03_256x128x64_w8_s3": {"CONFIG_16": (256, 128, 64, 8, 3)},
    "v04_64x128x64_w4_s4": {"CONFIG_16": (64, 128, 64, 4, 4)},
    "v05_128x128x32_w4_s4": {"CONFIG_16": (128, 128, 32, 4, 4)},
    "v06_128x64x64_w4_s4": {"CONFIG_16": (128, 64, 64, 4, 4)},
    "v07_64x64x64_w4_s5": {"CONFIG_16": (64, 64, 64, 4, 5)},
    "v08_128x128x64_w4_s3": {"CONFIG_16": (128, 128, 64, 4, 3)},
    "v09_128x128x64_w8_s4": {"CONFIG_16": (128, 128, 64, 8, 4)},
    "v10_128x128x64_w8_s3_group1": {"GROUP_M": 1},
}
SETS = {"softmax": ROWWISE, "rmsnorm": ROWWISE, "matmul": MATMUL}

# Study 2 (issue 20): only @vb-param values (the starter's search space), Triton's default
# num_stages. softmax/rmsnorm: C = 8192 > MAX_BLOCK 4096 sends rows through the chunked path
# (block CHUNK; NUM_WARPS when CHUNK >= 2048, else SMALL_NUM_WARPS).
CHUNKED2 = {
    "v01_chunk2048_w16": {"MAX_BLOCK": 4096, "CHUNK": 2048, "NUM_WARPS": 16},
    "v02_chunk4096_w4": {"MAX_BLOCK": 4096, "CHUNK": 4096, "NUM_WARPS": 4},
    "v03_chunk1024_w8": {"MAX_BLOCK": 4096, "CHUNK": 1024, "SMALL_NUM_WARPS": 8},
    "v04_chunk1024_w2": {"MAX_BLOCK": 4096, "CHUNK": 1024, "SMALL_NUM_WARPS": 2},
    "v05_chunk512_w8": {"MAX_BLOCK": 4096, "CHUNK": 512, "SMALL_NUM_WARPS": 8},
    "v06_chunk512_w2": {"MAX_BLOCK": 4096, "CHUNK": 512, "SMALL_NUM_WARPS": 2},
    "v07_chunk2048_w4": {"MAX_BLOCK": 4096, "CHUNK": 2048, "NUM_WARPS": 4},
    "v08_chunk4096_w16": {"MAX_BLOCK": 4096, "CHUNK": 4096, "NUM_WARPS": 16},
}
# layernorm D = 8192: one pass (MAX_BLOCK 8192) or three passes over chunks.
LAYERNORM2 = {
    "v01_default": {},
    "v02_onepass_w4": {"NUM_WARPS": 4},
    "v03_onepass_w16": {"NUM_WARPS": 16},
    "v04_chunk4096_w16": {"MAX_BLOCK": 4096, "CHUNK": 4096, "NUM_WARPS": 16},
    "v05_chunk4096_w8": {"MAX_BLOCK": 4096, "CHUNK": 4096, "NUM_WARPS": 8},
    "v06_chunk2048_w8": {"MAX_BLOCK": 4096, "CHUNK": 2048, "NUM_WARPS": 8},
    "v07_chunk2048_w4": {"MAX_BLOCK": 4096, "CHUNK": 2048, "NUM_WARPS": 4},
    "v08_chunk1024_w4": {"MAX_BLOCK": 4096, "CHUNK": 1024, "SMALL_NUM_WARPS": 4},
}
# cross_entropy 512 x 128256: phase 1 is a program per (row, CHUNK logits), one step each.
CROSS_ENTROPY2 = {
    "v01_default": {},
    "v02_c8192_w4": {"CHUNK_NUM_WARPS": 4},
    "v03_c8192_w16": {"CHUNK_NUM_WARPS": 16},
    "v04_c4096_w4": {"CHUNK": 4096, "CHUNK_NUM_WARPS": 4},
    "v05_c4096_w8": {"CHUNK": 4096, "CHUNK_NUM_WARPS": 8},
    "v06_c16384_w16": {"CHUNK": 16384, "CHUNK_NUM_WARPS": 16},
    "v07_c2048_w4": {"CHUNK": 2048, "CHUNK_NUM_WARPS": 4},
    "v08_c16384_w8_rows32": {"CHUNK": 16384, "CHUNK_NUM_WARPS": 8, "FINAL_ROWS": 32},
}
# reduce 8192 x 8192: block = MAX_BLOCK columns per step, rows = TILE // block per program.
REDUCE2 = {
    "v01_default": {},
    "v02_b8192_w4": {"NUM_WARPS": 4},
    "v03_b8192_w16": {"NUM_WARPS": 16},
    "v04_b4096_t8192_w8": {"MAX_BLOCK": 4096},
    "v05_b2048_t8192_w8": {"MAX_BLOCK": 2048},
    "v06_b1024_t4096_w4": {"MAX_BLOCK": 1024, "TILE": 4096, "NUM_WARPS": 4},
    "v07_b2048_t16384_w16": {"MAX_BLOCK": 2048, "TILE": 16384, "NUM_WARPS": 16},
    "v08_b512_t2048_w4": {"MAX_BLOCK": 512, "TILE": 2048, "NUM_WARPS": 4},
}
# Study 3 (issue 20, model 6's blind test): only @vb-param values again, none the configuration
# of a study-1 or study-2 variant, from the starters at STARTER_COMMITS[3]. softmax/rmsnorm at
# 8192 columns have 17 configurations (3 one-pass warp counts, 14 chunk x warps); studies 1 and 2
# took all but 4 (CHUNK 512/1024 with 1 or 4 warps; study 1's 512w4/1024w4 ran num_stages 4/2,
# these the default 3), so those two types have 4 variants each here.
CHUNKED3 = {
    "v01_chunk512_w1": {"MAX_BLOCK": 4096, "CHUNK": 512, "SMALL_NUM_WARPS": 1},
    "v02_chunk512_w4": {"MAX_BLOCK": 4096, "CHUNK": 512, "SMALL_NUM_WARPS": 4},
    "v03_chunk1024_w1": {"MAX_BLOCK": 4096, "CHUNK": 1024, "SMALL_NUM_WARPS": 1},
    "v04_chunk1024_w4": {"MAX_BLOCK": 4096, "CHUNK": 1024, "SMALL_NUM_WARPS": 4},
}
# layernorm D = 8192, three passes over chunks: the chunk x warps pairs study 2 did not take.
LAYERNORM3 = {
    "v01_chunk512_w2": {"MAX_BLOCK": 4096, "CHUNK": 512, "SMALL_NUM_WARPS": 2},
    "v02_chunk512_w4": {"MAX_BLOCK": 4096, "CHUNK": 512, "SMALL_NUM_WARPS": 4},
    "v03_chunk512_w8": {"MAX_BLOCK": 4096, "CHUNK": 512, "SMALL_NUM_WARPS": 8},
    "v04_chunk1024_w1": {"MAX_BLOCK": 4096, "CHUNK": 1024, "SMALL_NUM_WARPS": 1},
    "v05_chunk1024_w2": {"MAX_BLOCK": 4096, "CHUNK": 1024, "SMALL_NUM_WARPS": 2},
    "v06_chunk1024_w8": {"MAX_BLOCK": 4096, "CHUNK": 1024, "SMALL_NUM_WARPS": 8},
    "v07_chunk2048_w16": {"MAX_BLOCK": 4096, "CHUNK": 2048, "NUM_WARPS": 16},
    "v08_chunk4096_w4": {"MAX_BLOCK": 4096, "CHUNK": 4096, "NUM_WARPS": 4},
}
# cross_entropy 512 x 128256: phase-1 chunk x warps pairs study 2 did not take, the merge at the
# starter's defaults (FINAL_ROWS 32, FINAL_CHUNKS 32, MEAN_NUM_WARPS 8); CHUNK 16384 with 2 warps
# spills (255 registers + 36 B), so the eighth is the starter's phase 1 (study 2's v08) with a
# 4-warp merge.
CROSS_ENTROPY3 = {
    "v01_c2048_w2": {"CHUNK": 2048, "CHUNK_NUM_WARPS": 2},
    "v02_c2048_w8": {"CHUNK": 2048, "CHUNK_NUM_WARPS": 8},
    "v03_c2048_w16": {"CHUNK": 2048, "CHUNK_NUM_WARPS": 16},
    "v04_c4096_w2": {"CHUNK": 4096, "CHUNK_NUM_WARPS": 2},
    "v05_c4096_w16": {"CHUNK": 4096, "CHUNK_NUM_WARPS": 16},
    "v06_c8192_w2": {"CHUNK": 8192, "CHUNK_NUM_WARPS": 2},
    "v07_c16384_w4": {"CHUNK": 16384, "CHUNK_NUM_WARPS": 4},
    "v08_c16384_w8_mean_w4": {"MEAN_NUM_WARPS": 4},
}
# reduce 8192 x 8192: (block = MAX_BLOCK, rows = TILE // block, warps) triples study 2 did not take.
REDUCE3 = {
    "v01_b8192_t16384_w8": {"TILE": 16384},
    "v02_b8192_t16384_w16": {"TILE": 16384, "NUM_WARPS": 16},
    "v03_b4096_t4096_w4": {"MAX_BLOCK": 4096, "TILE": 4096, "NUM_WARPS": 4},
    "v04_b4096_t16384_w8": {"MAX_BLOCK": 4096, "TILE": 16384},
    "v05_b4096_t8192_w16": {"MAX_BLOCK": 4096, "NUM_WARPS": 16},
    "v06_b2048_t2048_w4": {"MAX_BLOCK": 2048, "TILE": 2048, "NUM_WARPS": 4},
    "v07_b1024_t8192_w8": {"MAX_BLOCK": 1024},
    "v08_b2048_t16384_w8": {"MAX_BLOCK": 2048, "TILE": 16384},
}
# flash_attention b2h16s4096d128 causal (no Triton study before): (BLOCK_M, BLOCK_N, warps,
# stages) near the bf16 default (128, 64, 8, 3); (128, 64, 4, 3) spills on sm_90a (255 registers
# + 124 B), so not drawn.
FLASH3 = {
    "v01_default": {},
    "v02_m64n64_w8": {"BLOCK_M": 64},
    "v03_m128n32_w8": {"BLOCK_N": 32},
    "v04_m128n128_w8_s2": {"BLOCK_N": 128, "NUM_STAGES": 2},
    "v05_m64n64_w4": {"BLOCK_M": 64, "NUM_WARPS": 4},
    "v06_m64n128_w4_s2": {"BLOCK_M": 64, "BLOCK_N": 128, "NUM_WARPS": 4, "NUM_STAGES": 2},
    "v07_m128n64_w8_s2": {"NUM_STAGES": 2},
    "v08_m128n64_w16": {"NUM_WARPS": 16},
}
# fused_mlp b512d4096h11008 (no Triton study before): (BLOCK_M, BLOCK_N, BLOCK_K, warps, stages,
# GROUP_M) near the bf16 default (64, 128, 64, 8, 3, 8).
MLP3 = {
    "v01_default": {},
    "v02_m128n128k64": {"BLOCK_M": 128},
    "v03_m64n256k64": {"BLOCK_N": 256},
    "v04_m64n128k64_w4_s4": {"NUM_WARPS": 4, "NUM_STAGES": 4},
    "v05_m64n128k32_s4": {"BLOCK_K": 32, "NUM_STAGES": 4},
    "v06_m128n128k32_s4": {"BLOCK_M": 128, "BLOCK_K": 32, "NUM_STAGES": 4},
    "v07_m64n64k64_w4": {"BLOCK_N": 64, "NUM_WARPS": 4},
    "v08_group4": {"GROUP_M": 4},
}
STUDIES = {
    1: ("triton-blind1", SETS),
    2: ("triton-blind2", {"softmax": CHUNKED2, "rmsnorm": CHUNKED2, "layernorm": LAYERNORM2,
                          "cross_entropy": CROSS_ENTROPY2, "reduce": REDUCE2}),
    3: ("triton-blind3", {"softmax": CHUNKED3, "rmsnorm": CHUNKED3, "layernorm": LAYERNORM3,
                          "cross_entropy": CROSS_ENTROPY3, "reduce": REDUCE3,
                          "flash_attention": FLASH3, "fused_mlp": MLP3}),
}
# The starters each study was rendered from (git show COMMIT:PATH): study 1 before the starters
# gained their @vb-param spaces, study 2 before 375607f changed cross_entropy's defaults,
# study 3 at e087558 (9cb806a, committed by another session while study 3 was being drawn, added
# cross_entropy's MERGE_PARALLEL / MEAN_BLOCK with defaults that keep the e087558 behaviour;
# study 3's cross_entropy files have neither).
STARTER_COMMITS = {1: "edd5510", 2: "98612da", 3: "e087558"}

# What each starter's configuration looks like, and the explicit form it is rewritten to:
# (old text, new text) pairs, each of which must occur exactly once in the starter.
EXPLICIT = {
    "softmax": [
        ("NUM_WARPS = 8\n", "NUM_WARPS = 8\nWARPS = None  # the launch's num_warps (None: NUM_WARPS for >= 2048 columns, else 4)\n"
                             "NUM_STAGES = 3  # the launch's num_stages (Triton's default)\n"
                             "CHUNK = 2048  # block of the two-pass path\n"),
        ("        block = 2048\n", "        block = CHUNK\n"),
        ("num_warps=NUM_WARPS if block >= 2048 else 4)",
         "num_warps=WARPS or (NUM_WARPS if block >= 2048 else 4), num_stages=NUM_STAGES)"),
    ],
    "rmsnorm": [
        ("CHUNK = 2048\n", "CHUNK = 2048\nWARPS = None  # the launch's num_warps (None: 8 for >= 2048 columns, else 4)\n"
                           "NUM_STAGES = 3  # the launch's num_stages (Triton's default)\n"),
        ("num_warps=8 if block >= 2048 else 4)",
         "num_warps=WARPS or (8 if block >= 2048 else 4), num_stages=NUM_STAGES)"),
    ],
    "matmul": [],
}


def starter(kernel: str, study: int) -> str:
    """The starter's text the study is rendered from: kernels/triton/<kernel>.py at
    STARTER_COMMITS[study] (git show); exits when git cannot show it."""
    rel = f"kernels/triton/{kernel}.py"
    commit = STARTER_COMMITS[study]
    r = subprocess.run(["git", "-C", str(ROOT), "show", f"{commit}:{rel}"], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"triton_variants: git show {commit}:{rel} failed: {r.stderr.strip()}")
    return r.stdout


def render(kernel: str, name: str, cfg: dict, study: int = 1) -> str:
    src = starter(kernel, study)
    for old, new in (EXPLICIT[kernel] if study == 1 else []):
        if src.count(old) != 1:
            sys.exit(f"triton_variants: kernels/triton/{kernel}.py no longer has {old!r} exactly once")
        src = src.replace(old, new)
    lines = []
    for key, value in cfg.items():
        prefix = f"{key} = "
        hits = [l for l in src.splitlines() if l.startswith(prefix)]
        if len(hits) != 1:
            sys.exit(f"triton_variants: kernels/triton/{kernel}.py has {len(hits)} lines starting {prefix!r}")
        lines.append(f"{key} = {value!r}")
        if study != 1 and f"# @vb-param {key} " not in src:
            sys.exit(f"triton_variants: {key} is not a @vb-param of kernels/triton/{kernel}.py")
        was = hits[0][len(prefix):].split("#")[0].strip()
        src = src.replace(hits[0] + "\n", f"{key} = {value!r}  # variant {name} (starter: {was})\n", 1)
    what = ", ".join(lines) or "the starter's configuration"
    head = (f"# variant {name} of the blind Triton ranking study {study} (bench/triton_variants.py): {what}\n"
            f"# generated from kernels/triton/{kernel}.py; do not edit (the prediction was made on this text)\n")
    return head + src


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--study", type=int, choices=sorted(STUDIES), default=1)
    ap.add_argument("--out", help="folder (default bench/variants/triton-blind<STUDY>)")
    ap.add_argument("--check", action="store_true", help="verify the frozen files instead of writing")
    a = ap.parse_args()
    folder, sets = STUDIES[a.study]
    out = pathlib.Path(a.out or ROOT / "bench" / "variants" / folder)
    bad = 0
    for kernel, variants in sets.items():
        for name, cfg in variants.items():
            f = out / kernel / f"{name}.py"
            text = render(kernel, name, cfg, a.study)
            if a.check:
                if not f.exists() or f.read_text() != text:
                    print(f"changed or missing: {f}")
                    bad += 1
            else:
                f.parent.mkdir(parents=True, exist_ok=True)
                f.write_text(text)
    if not a.check:
        print(f"wrote {sum(len(v) for v in sets.values())} variants of {len(sets)} types under {out}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
