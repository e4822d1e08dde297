#!/usr/bin/env bash
# flash_attention tile configurations at a model's own attention shape, on the GPU machine, then
# the end-to-end benchmark of that model with the fastest configuration that passes every stage.
#
#   here:  bash bench/e2e_h200.sh --pack; mkdir -p .h200/fa; cp WS/kernels/NN_flash_attention/problem.json .h200/fa/
#   there: run(command="bash bench/h200_fa_tiles.sh", carry=[".h200", ".whl"])
#
# 1. For FA_WARPS in {4, 8} x FA_BLOCK_KV in {32, 64, 128} (the starter's @vb-param space for head
#    dims <= 128), a copy of kernels/cuda/flash_attention.cu with those defaults goes through
#    `vladbud bench -b cuda` in .h200/fa (its problem.json: shape, dtype, attributes), all five
#    stages and the timing, in parallel (TILES_LIMIT seconds, default 240). $OUT/fa-tiles.md lists
#    verdict, median and speedup vs PyTorch per configuration.
# 2. The fastest configuration with verdict PASS becomes the starter's default in this machine's
#    copy of the tree (never here), and bench/e2e_h200.sh runs E2E_MODELS (default hf-llama-836m)
#    with what time is left (E2E_TOTAL, default 330 s; verify with --compile on the HF Llama needs
#    ~140 s for five candidates: on 2026-12-03 E2E_TOTAL=290 left it 120 s and it was stopped).
#    Nothing runs in step 2 when no configuration passed.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
out="${OUT:-$here/h200-out}"; mkdir -p "$out"
fa="$here/.h200/fa"
[ -f "$fa/problem.json" ] || { echo "h200_fa_tiles: $fa/problem.json missing (see the header)" >&2; exit 2; }
export VLADBUD_HOME="$here" VB_CACHE_DIR="${VB_CACHE_DIR:-/tmp/vladbud-cache}" VB_PYTHON="${VB_PYTHON:-python3}"
export PATH="$here/.h200:$PATH:/usr/local/cuda/bin" LD_LIBRARY_PATH="$here/.h200${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export CPATH="$here/.h200/include${CPATH:+:$CPATH}" VB_RUNNER="$here/.h200/vladbud-runner"
src="$here/kernels/cuda/flash_attention.cu"
grep -qx '#define FA_WARPS 4' "$src" && grep -qx '#define FA_BLOCK_KV 64' "$src" ||
  { echo "h200_fa_tiles: $src no longer has the defaults this script rewrites" >&2; exit 2; }
cd "$fa"
configs=()
for w in 4 8; do for k in 32 64 128; do
  configs+=("w${w}_k${k}")
  sed -e "s/^#define FA_WARPS 4$/#define FA_WARPS $w/" -e "s/^#define FA_BLOCK_KV 64$/#define FA_BLOCK_KV $k/" \
    "$src" > "fa_w${w}_k${k}.cu"
  timeout "${TILES_LIMIT:-240}" vladbud bench -b cuda -s "fa_w${w}_k${k}.cu" --json --results "r_w${w}_k${k}.tsv" \
    > "$out/fa_w${w}_k${k}.json" 2> "$out/fa_w${w}_k${k}.err" &
done; done
wait
best="$(python3 - "$out" "${configs[@]}" <<'PY'
import json, sys
out, cfgs = sys.argv[1], sys.argv[2:]
rows, best = [], None
for c in cfgs:
    try:
        j = json.load(open(f"{out}/fa_{c}.json"))
    except Exception as e:  # noqa: BLE001
        rows.append(f"| {c} | no report ({type(e).__name__}) | | |"); continue
    med = j.get("latency_us")  # vladbud bench's median latency
    sp = j.get("speedup_vs_pytorch")
    rows.append(f"| {c} | {j.get('verdict')} | {med} | {sp} |")
    if j.get("verdict") == "PASS" and isinstance(med, (int, float)) and (best is None or med < best[1]):
        best = (c, med)
with open(f"{out}/fa-tiles.md", "w") as f:
    f.write("| config | verdict | median us | vs PyTorch |\n|---|---|---|---|\n" + "\n".join(rows) + "\n")
    f.write(f"\nfastest passing: {best}\n")
print(best[0] if best else "")
PY
)"
cat "$out/fa-tiles.md"
[ -n "$best" ] || { echo "h200_fa_tiles: no configuration passed; no end-to-end run"; exit 1; }
w="${best#w}"; w="${w%%_*}"; k="${best##*_k}"
sed -i -e "s/^#define FA_WARPS 4$/#define FA_WARPS $w/" -e "s/^#define FA_BLOCK_KV 64$/#define FA_BLOCK_KV $k/" "$src"
echo "h200_fa_tiles: starter defaults set to FA_WARPS=$w FA_BLOCK_KV=$k on this machine's copy"
cd "$here"
E2E_TOTAL="${E2E_TOTAL:-330}" E2E_MODELS="${E2E_MODELS:-hf-llama-836m}" E2E_PYTEST=0 \
  E2E_MODEL_LIMIT="${E2E_MODEL_LIMIT:-320}" E2E_ARGS="${E2E_ARGS:---step-limit verify=260}" bash bench/e2e_h200.sh
