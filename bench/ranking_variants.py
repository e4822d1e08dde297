#!/usr/bin/env python3
"""Writes the variant sets of the blind GPU ranking studies 2-4 and of the second blind CPU study
(issue 20) from the CUDA and CPU starters' own search spaces (their `@vb-param` declarations),
before anything is measured.

Each variant is the starter's text with some `@vb-param` values overridden by `#define` lines
at the top (the starter's `#ifndef` defaults then yield), so every variant is one point of the
space the optimizer searches. The configurations are listed below, chosen near the defaults
(one to three parameters changed) so that most pairs lie within 1.5x of each other, and never
changed after the prediction is committed: the study's variant files are frozen copies.

    python3 bench/ranking_variants.py [--study blind2|blind3|blind4|cpu-blind2] [--out DIR] [--check]

--check verifies that the files on disk carry this script's configurations (header and
#define lines); the starter text below them is the copy taken when the set was written (commit
bf04dda), not today's starter.
"""
import argparse
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent

# Five types, none of them fitted on before (softmax and rmsnorm were the first study's; its
# matmul set had hand-written tiles, this one walks the wgmma path's own parameters).
# type -> [(name, {param: value})]; parameters that matter at the GPU benchmark size
# (src/kernels/<type>.cpp benchmark_size: layernorm 8192x8192, CE 512x128256, FA b2h16s4096d128,
# fused_mlp b512d4096h11008, matmul 4096^3).
BLIND2 = {
    "layernorm": [
        ("v01_default", {}),
        ("v02_block128", {"BLOCK_THREADS": 128}),
        ("v03_block512", {"BLOCK_THREADS": 512}),
        ("v04_block512_packs4", {"BLOCK_THREADS": 512, "MAX_PACKS": 4}),
        ("v05_vec8", {"VEC_BYTES": 8, "MAX_PACKS": 16}),
        ("v06_grid4", {"MAX_BLOCKS_PER_SM": 4}),
        ("v07_block1024_packs2", {"BLOCK_THREADS": 1024, "MAX_PACKS": 2}),
        ("v08_stream512_u8", {"MAX_PACKS": 2, "LONG_BLOCK_THREADS": 512, "UNROLL": 8}),
        ("v09_block128_grid8", {"BLOCK_THREADS": 128, "MAX_BLOCKS_PER_SM": 8}),
    ],
    "cross_entropy": [
        ("v01_default", {}),
        ("v02_split2048", {"SPLIT_COLS": 2048}),
        ("v03_split16384", {"SPLIT_COLS": 16384}),
        ("v04_chunk512", {"CHUNK_THREADS": 512}),
        ("v05_loads2", {"CHUNK_LOADS": 2}),
        ("v06_chunkgrid8", {"CHUNK_BLOCKS_PER_SM": 8}),
        ("v07_stages2", {"CHUNK_STAGES": 2}),
        ("v08_stages6_group8", {"CHUNK_STAGES": 6, "CHUNK_GROUP": 8}),
        ("v09_no_pdl", {"DEPENDENT_LAUNCH": 0}),
        ("v10_chunk128_grid2", {"CHUNK_THREADS": 128, "CHUNK_BLOCKS_PER_SM": 2}),
    ],
    "flash_attention": [
        ("v01_default", {}),
        ("v02_warps8", {"FA_WARPS": 8}),
        ("v03_kv32", {"FA_BLOCK_KV": 32}),
        ("v04_kv128", {"FA_BLOCK_KV": 128}),
        ("v05_warps8_kv32", {"FA_WARPS": 8, "FA_BLOCK_KV": 32}),
        ("v06_warps8_kv128", {"FA_WARPS": 8, "FA_BLOCK_KV": 128}),
        ("v07_rows16", {"FA_WARP_ROWS": 16}),
        ("v08_split_small", {"FA_SPLIT_SMALL_GRIDS": 1}),
    ],
    "fused_mlp": [
        ("v01_default", {}),
        ("v02_bn64", {"BLOCK_N": 64, "WARPS_N": 2}),
        ("v03_bk64_s3", {"BLOCK_K": 64, "STAGES": 3}),
        ("v04_s3", {"STAGES": 3}),
        ("v05_s2", {"STAGES": 2}),
        ("v06_bm64", {"BLOCK_M": 64, "WARPS_M": 1}),
        ("v07_group1", {"GROUP_M": 1}),
        ("v08_warps4x2", {"WARPS_M": 4, "WARPS_N": 2}),
        ("v09_bm64_bn64", {"BLOCK_M": 64, "BLOCK_N": 64, "WARPS_M": 2, "WARPS_N": 2}),
    ],
    "matmul": [
        ("v01_default", {}),
        ("v02_wg_n128", {"WG_BLOCK_N": 128}),
        ("v03_wg_s3", {"WG_STAGES": 3}),
        ("v04_wg_n128_s6", {"WG_BLOCK_N": 128, "WG_STAGES": 6}),
        ("v05_wg_n128_s3", {"WG_BLOCK_N": 128, "WG_STAGES": 3}),
        ("v06_wg_group1", {"GROUP_M": 1}),
        ("v07_wg_group16", {"GROUP_M": 16}),
        ("v08_wg_n128_s5", {"WG_BLOCK_N": 128, "WG_STAGES": 5}),
        ("v09_wg_n128_s4", {"WG_BLOCK_N": 128, "WG_STAGES": 4}),
    ],
}

# The third study (model 3, prepared 2026-12-04 for measurement in a later session): five types,
# configurations none of the earlier studies measured (matmul's mma.sync path and wgmma group
# sizes, fused_mlp tiles and depths, softmax/rmsnorm block and pack combinations, cross_entropy
# ring shapes).
BLIND3 = {
    "matmul": [
        ("v01_mma_128x128_k32_s4", {"USE_WGMMA": 0}),
        ("v02_mma_128x128_k64_s3", {"USE_WGMMA": 0, "BLOCK_K": 64, "STAGES": 3}),
        ("v03_mma_128x256_w2x4", {"USE_WGMMA": 0, "BLOCK_N": 256, "WARPS_N": 4}),
        ("v04_mma_s5", {"USE_WGMMA": 0, "STAGES": 5}),
        ("v05_mma_min2", {"USE_WGMMA": 0, "MIN_BLOCKS": 2}),
        ("v06_wg_n256_s5", {"WG_STAGES": 5}),
        ("v07_wg_n128_group4", {"WG_BLOCK_N": 128, "GROUP_M": 4}),
        ("v08_wg_n256_group4_s3", {"GROUP_M": 4, "WG_STAGES": 3}),
    ],
    "fused_mlp": [
        ("v01_default", {}),
        ("v02_bk64_s2", {"BLOCK_K": 64, "STAGES": 2}),
        ("v03_bk64_s3_bn64", {"BLOCK_K": 64, "STAGES": 3, "BLOCK_N": 64, "WARPS_N": 2}),
        ("v04_warps2x2", {"WARPS_N": 2}),
        ("v05_warps4x1", {"WARPS_M": 4, "WARPS_N": 1}),
        ("v06_group4", {"GROUP_M": 4}),
        ("v07_bm64_s3", {"BLOCK_M": 64, "WARPS_M": 1, "STAGES": 3}),
        ("v08_bk64_s3_group1", {"BLOCK_K": 64, "STAGES": 3, "GROUP_M": 1}),
    ],
    "softmax": [
        ("v01_block128_packs16", {"BLOCK_THREADS": 128, "MAX_PACKS": 16}),
        ("v02_block256_grid8", {"MAX_BLOCKS_PER_SM": 8}),
        ("v03_block128_grid16_vec8", {"BLOCK_THREADS": 128, "VEC_BYTES": 8, "MAX_PACKS": 16}),
        ("v04_block512_packs2", {"BLOCK_THREADS": 512, "MAX_PACKS": 2}),
        ("v05_stream512_u4", {"MAX_PACKS": 2, "LONG_BLOCK_THREADS": 512}),
        ("v06_block256_grid32", {"MAX_BLOCKS_PER_SM": 32}),
        ("v07_stream256_u8", {"MAX_PACKS": 2, "LONG_BLOCK_THREADS": 256, "UNROLL": 8}),
        ("v08_block1024_packs1_vec16", {"BLOCK_THREADS": 1024, "MAX_PACKS": 1}),
    ],
    "rmsnorm": [
        ("v01_block128_grid8", {"BLOCK_THREADS": 128, "MAX_BLOCKS_PER_SM": 8}),
        ("v02_block512_packs2", {"BLOCK_THREADS": 512, "MAX_PACKS": 2}),
        ("v03_vec8_block256", {"VEC_BYTES": 8}),
        ("v04_block256_grid32", {"MAX_BLOCKS_PER_SM": 32}),
        ("v05_stream512_u8", {"MAX_PACKS": 2, "LONG_BLOCK_THREADS": 512, "UNROLL": 8}),
        ("v06_block1024_packs1", {"BLOCK_THREADS": 1024, "MAX_PACKS": 1}),
        ("v07_block128_packs16", {"BLOCK_THREADS": 128, "MAX_PACKS": 16}),
        ("v08_vec8_block128_grid4", {"VEC_BYTES": 8, "BLOCK_THREADS": 128, "MAX_PACKS": 16, "MAX_BLOCKS_PER_SM": 4}),
    ],
    "cross_entropy": [
        ("v01_loads8", {"CHUNK_LOADS": 8}),
        ("v02_stages4", {"CHUNK_STAGES": 4}),
        ("v03_group4", {"CHUNK_GROUP": 4}),
        ("v04_chunkgrid2", {"CHUNK_BLOCKS_PER_SM": 2}),
        ("v05_chunk512_grid2", {"CHUNK_THREADS": 512, "CHUNK_BLOCKS_PER_SM": 2}),
        ("v06_stages0", {"CHUNK_STAGES": 0}),
        ("v07_split0_block1024", {"SPLIT_COLS": 0, "BLOCK_THREADS": 1024}),
        ("v08_group32_stages2", {"CHUNK_GROUP": 32, "CHUNK_STAGES": 2}),
    ],
}

# The fourth study (model 4, prepared 2026-12-05 for measurement in a later session): five types
# (layernorm, flash_attention, fused_mlp, cross_entropy, matmul), configurations none of the
# earlier studies measured (the default of each is the anchor), near the defaults so that most
# pairs lie within 1.5x; matmul keeps two mma.sync points beside six wgmma ones.
BLIND4 = {
    "layernorm": [
        ("v01_default", {}),
        ("v02_block64_packs16", {"BLOCK_THREADS": 64, "MAX_PACKS": 16}),
        ("v03_packs4", {"MAX_PACKS": 4}),
        ("v04_grid8", {"MAX_BLOCKS_PER_SM": 8}),
        ("v05_grid32", {"MAX_BLOCKS_PER_SM": 32}),
        ("v06_block128_packs16", {"BLOCK_THREADS": 128, "MAX_PACKS": 16}),
        ("v07_block512_grid4", {"BLOCK_THREADS": 512, "MAX_BLOCKS_PER_SM": 4}),
        ("v08_block128_grid4", {"BLOCK_THREADS": 128, "MAX_BLOCKS_PER_SM": 4}),
    ],
    "flash_attention": [
        ("v01_default", {}),
        ("v02_minctas3", {"FA_MIN_CTAS": 3}),
        ("v03_minctas4", {"FA_MIN_CTAS": 4}),
        ("v04_rows16_kv32", {"FA_WARP_ROWS": 16, "FA_BLOCK_KV": 32}),
        ("v05_rows16_kv128", {"FA_WARP_ROWS": 16, "FA_BLOCK_KV": 128}),
        ("v06_warps8_rows16", {"FA_WARPS": 8, "FA_WARP_ROWS": 16}),
        ("v07_kvwide16", {"FA_BLOCK_KV_WIDE": 16}),
        ("v08_warps8_minctas3", {"FA_WARPS": 8, "FA_MIN_CTAS": 3}),
    ],
    "fused_mlp": [
        ("v01_default", {}),
        ("v02_bk64_s4", {"BLOCK_K": 64, "STAGES": 4}),
        ("v03_warps1x4", {"WARPS_M": 1, "WARPS_N": 4}),
        ("v04_bn64_group4", {"BLOCK_N": 64, "WARPS_N": 2, "GROUP_M": 4}),
        ("v05_bm64_bn64_s3", {"BLOCK_M": 64, "BLOCK_N": 64, "WARPS_M": 2, "WARPS_N": 2, "STAGES": 3}),
        ("v06_s2_group4", {"STAGES": 2, "GROUP_M": 4}),
        ("v07_bm64_group1", {"BLOCK_M": 64, "WARPS_M": 1, "GROUP_M": 1}),
        ("v08_bk64_s2_bn64", {"BLOCK_K": 64, "STAGES": 2, "BLOCK_N": 64, "WARPS_N": 2}),
    ],
    "cross_entropy": [
        ("v01_default", {}),
        ("v02_loads1", {"CHUNK_LOADS": 1}),
        ("v03_chunk128", {"CHUNK_THREADS": 128}),
        ("v04_group2", {"CHUNK_GROUP": 2}),
        ("v05_group1_stages4", {"CHUNK_GROUP": 1, "CHUNK_STAGES": 4}),
        ("v06_chunkgrid1", {"CHUNK_BLOCKS_PER_SM": 1}),
        ("v07_split2048_loads8", {"SPLIT_COLS": 2048, "CHUNK_LOADS": 8}),
        ("v08_chunk512_stages2", {"CHUNK_THREADS": 512, "CHUNK_STAGES": 2}),
    ],
    "matmul": [
        ("v01_default", {}),
        ("v02_wg_n128_group1", {"WG_BLOCK_N": 128, "GROUP_M": 1}),
        ("v03_wg_group1_s3", {"GROUP_M": 1, "WG_STAGES": 3}),
        ("v04_wg_group16_s3", {"GROUP_M": 16, "WG_STAGES": 3}),
        ("v05_mma_bk64_s4", {"USE_WGMMA": 0, "BLOCK_K": 64, "STAGES": 4}),
        ("v06_mma_w4x2", {"USE_WGMMA": 0, "WARPS_M": 4, "WARPS_N": 2}),
        ("v07_wg_group4", {"GROUP_M": 4}),
        ("v08_wg_n128_s6_group4", {"WG_BLOCK_N": 128, "WG_STAGES": 6, "GROUP_M": 4}),
    ],
}

# The second blind CPU study (issue 20: "re-run the CPU study with new variants"): five types
# from the CPU starters' own spaces (the first CPU study ranked hand-written implementations:
# scalar, SIMD, Highway, multi-threaded, online), at bench/ranking_cpu.sh's sizes (softmax,
# rmsnorm, reduce 4096x4096; matmul 512^3; flash_attention b1h8s1024d64 causal), fp32. Thread
# counts stay the runtime's (one per CPU): a fixed count is 2-16x away on a 16-vCPU host.
CPU_BLIND2 = {
    "softmax": [
        ("v01_default", {}),
        ("v02_lanes16", {"LANES": 16}),
        ("v03_lanes128", {"LANES": 128}),
        ("v04_no_stream", {"STREAM_STORES": 0}),
        ("v05_no_prefetch", {"PREFETCH_NEXT": 0}),
        ("v06_block2048", {"WRITE_BLOCK": 2048}),
        ("v07_lanes32_block1024", {"LANES": 32, "WRITE_BLOCK": 1024}),
        ("v08_no_stream_no_prefetch", {"STREAM_STORES": 0, "PREFETCH_NEXT": 0}),
    ],
    "rmsnorm": [
        ("v01_default", {}),
        ("v02_lanes16", {"LANES": 16}),
        ("v03_lanes128", {"LANES": 128}),
        ("v04_no_stream", {"STREAM_STORES": 0}),
        ("v05_no_prefetch", {"PREFETCH_NEXT": 0}),
        ("v06_lanes32_no_prefetch", {"LANES": 32, "PREFETCH_NEXT": 0}),
        ("v07_no_stream_no_prefetch", {"STREAM_STORES": 0, "PREFETCH_NEXT": 0}),
        ("v08_lanes128_no_stream", {"LANES": 128, "STREAM_STORES": 0}),
    ],
    "reduce": [
        ("v01_default", {}),
        ("v02_chunk14", {"CHUNK_LOG2": 14}),
        ("v03_chunk20", {"CHUNK_LOG2": 20}),
        ("v04_no_prefetch", {"PREFETCH_BYTES": 0}),
        ("v05_prefetch32k", {"PREFETCH_BYTES": 32768}),
        ("v06_prefetchnta", {"PREFETCH_LOCALITY": 0}),
        ("v07_lanes16", {"LANES": 16}),
        ("v08_t0_2k", {"PREFETCH_LOCALITY": 3, "PREFETCH_BYTES": 2048}),
    ],
    "matmul": [
        ("v01_default", {}),
        ("v02_kc128", {"KC": 128}),
        ("v03_kc512", {"KC": 512}),
        ("v04_mc48", {"MC_ROWS": 48}),
        ("v05_nc1024", {"NC_COLS": 1024}),
        ("v06_mr6", {"MR_TILE": 6}),
        ("v07_nv2", {"NV_TILE": 2}),
        ("v08_kc384_mc192", {"KC": 384, "MC_ROWS": 192}),
    ],
    "flash_attention": [
        ("v01_default", {}),
        ("v02_q32", {"BLOCK_Q": 32}),
        ("v03_q128", {"BLOCK_Q": 128}),
        ("v04_k32", {"BLOCK_K": 32}),
        ("v05_k128", {"BLOCK_K": 128}),
        ("v06_micro4", {"MICRO_ROWS": 4}),
        ("v07_q16_micro4", {"BLOCK_Q": 16, "MICRO_ROWS": 4}),
        ("v08_q128_k128", {"BLOCK_Q": 128, "BLOCK_K": 128}),
    ],
}

# study -> (folder under bench/variants, sets, the starters' backend folder, file extension)
STUDIES = {"blind2": ("cuda-blind2", BLIND2, "cuda", ".cu"),
           "blind3": ("cuda-blind3", BLIND3, "cuda", ".cu"),
           "blind4": ("cuda-blind4", BLIND4, "cuda", ".cu"),
           "cpu-blind2": ("cpu-blind2", CPU_BLIND2, "cpu", ".cpp")}

PARAM_RE = re.compile(r"^//\s*@vb-param\s+(\w+)\s+(\S+)\s+\{([^}]*)\}", re.M)


def render(kernel: str, name: str, cfg: dict, study: str = "blind2") -> str:
    _, _, backend, ext = STUDIES[study]
    src = (ROOT / "kernels" / backend / f"{kernel}{ext}").read_text()
    space = {m.group(1): m.group(3).split(",") for m in PARAM_RE.finditer(src)}
    for p, v in cfg.items():
        if p not in space:
            sys.exit(f"ranking_variants: {kernel} declares no @vb-param {p}")
        if str(v) not in space[p]:
            sys.exit(f"ranking_variants: {kernel} {p}={v} is outside its space {{{','.join(space[p])}}}")
    what = ", ".join(f"{p}={v}" for p, v in cfg.items()) or "the starter's defaults"
    label = study[-1] if backend == "cuda" else study  # the CUDA studies' headers, unchanged
    head = f"// variant {name} of the blind ranking study {label} (bench/ranking_variants.py): {what}\n"
    head += "".join(f"#define {p} {v}\n" for p, v in cfg.items())
    return head + src


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--study", choices=sorted(STUDIES), default="blind2")
    ap.add_argument("--out", help="folder (default bench/variants/<the study's folder>)")
    ap.add_argument("--check", action="store_true", help="verify the frozen files instead of writing")
    a = ap.parse_args()
    folder, sets, _, ext = STUDIES[a.study]
    out = pathlib.Path(a.out or ROOT / "bench" / "variants" / folder)
    bad = 0
    for kernel, variants in sets.items():
        for name, cfg in variants:
            f = out / kernel / f"{name}{ext}"
            text = render(kernel, name, cfg, a.study)
            if a.check:
                head = text.split("\n", len(cfg) + 1)[: len(cfg) + 1]
                if not f.exists() or f.read_text().split("\n", len(cfg) + 1)[: len(cfg) + 1] != head:
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
