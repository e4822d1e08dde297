#!/usr/bin/env bash
# The triton backend on the H200 (issue 17 step 2), in ONE call of the `device` tool:
#   1. preview   the nine Triton starters under Triton's JIT on the GPU, OUTSIDE the evaluator
#                (bench/triton_gpu_preview.py: fp64 error, do_bench median next to PyTorch, at
#                the evaluator's GPU benchmark sizes, fp16/bf16/fp32).
#   2. interp    the interpreter path as CI runs it: the Triton integration tests (nine starters
#                PASS in fp32 under TRITON_INTERPRET=1, the bad-kernel guards, rank rung 1 on
#                MI300X/MI355X), to show they hold on that machine's Python/Triton too.
#   3. aot-check the evaluator's GPU path (ahead-of-time cubins launched by the C++ runner,
#                src/backends/triton/aot.h): the five stages of the nine starters in fp16, bf16
#                and fp32 (`vladbud bench --backend triton --no-timing`, nine in parallel: the
#                Triton compiles are CPU-bound), plus the GPU test of integration_triton_aot.
#   rank         the blind Triton ranking study's measurement (bench/ranking_triton.sh --measure:
#                triton-blind1 variants timed with do_bench in bf16; ranking-triton-measured-*.json)
#   4. aot-time  each starter timed at its GPU benchmark size in fp16, bf16 and fp32, one at a
#                time (`--timing-only`: stage 3 checked them), next to PyTorch; writes
#                triton-aot.json (rows as bench/results/h200-triton-preview.json: kernel, dtype,
#                size, verdict, latency_us, pytorch_us, tflops, gb_s, pct_peak) and
#                triton-aot.md. Types in AOT_TYPES order (default: issue 17's bar types first).
#   aot-variants the performance variants of the starters' @vb-param tunables (issue 17's bar:
#                matmul >= 0.9x torch.mm, memory-bound types >= 85 % of copy bandwidth), each
#                timed through the AOT path like aot-time (--timing-only, one at a time, next
#                to PyTorch) in the dtypes its line names, in the order listed (the starter's
#                own configuration first per type): aot-variants.md / .json, rows "TYPE@NAME".
#                The list is VARIANTS (a file of `TYPE DTYPES NAME [PARAM=VALUE ...]` lines,
#                bench/triton_gpu_preview.py --write-variants), by default the one below.
#   preview-variants  the same list under Triton's JIT (triton_gpu_preview.py --variants), with
#                fp64 errors: cheap (no AOT build per variant) and a cross-check of aot-variants.
#
#   bash bench/h200_all.sh --pack          here: build and copy the binaries into .h200/ (carry it)
#   bash bench/h200_triton.sh [STAGE...]   there (repo root): stages preview interp aot-check
#                                          aot-time (default: aot-check aot-time; the four
#                                          together exceed one 600 s call); logs and JSON packed into
#                                          $OUT/h200-triton.tar.gz plus summary.txt
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
out="${OUT:-$here/h200-out}"
logs="$(mktemp -d)/h200-triton"
mkdir -p "$out" "$logs"
export VLADBUD_HOME="$here" VB_CACHE_DIR="${VB_CACHE_DIR:-/tmp/vladbud-cache}"
# The launcher build includes vb_kernel.h, which needs DLPack: the GPU image lacks it, .h200/include
# carries it (bench/h200_all.sh --pack), as h200_all.sh exports it too.
export CPATH="$here/.h200/include${CPATH:+:$CPATH}"
export PATH="$here/.h200:$PATH:/usr/local/cuda/bin"
export LD_LIBRARY_PATH="$here/.h200${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export VB_RUNNER="$here/.h200/vladbud-runner" VB_PYTHON="${VB_PYTHON:-$(command -v python3)}"
export PYTHONUNBUFFERED=1
vb="$here/.h200/vladbud"
summary="$logs/summary.txt"
{
  echo "# h200_triton.sh $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname)"
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader 2>&1
  "$VB_PYTHON" -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)' 2>&1
} >"$summary"
declare -A limit=([preview]=420 [interp]=600 [aot-check]=300 [rank]=200 [aot-time]=240
                  [aot-variants]=240 [preview-variants]=150)
# The default variant list of aot-variants / preview-variants (see the header).
default_variants="$logs/variants.txt"
cat >"$default_variants" <<'VARIANTS'
# matmul 4096^3: the bar is >= 0.9x torch.mm in bf16 and fp16
matmul         bf16,fp16 default
matmul         bf16,fp16 s4          NUM_STAGES=4
matmul         bf16      p1          PERSISTENT=1
matmul         bf16      p2          PERSISTENT=2
matmul         bf16      p1s4        PERSISTENT=1 NUM_STAGES=4
matmul         bf16      m256n128s4  BLOCK_M=256 BLOCK_N=128 NUM_STAGES=4
matmul         bf16      n128s4      BLOCK_N=128 NUM_STAGES=4
matmul         bf16      k128n128    BLOCK_N=128 BLOCK_K=128
matmul         bf16      g16         GROUP_M=16
matmul         bf16      old128      BLOCK_N=128
# cross_entropy 512x128256: >= 85 % of the copy bandwidth
cross_entropy  bf16,fp16 default
cross_entropy  bf16      c4096w4     CHUNK=4096 CHUNK_NUM_WARPS=4
cross_entropy  bf16      c8192w4     CHUNK=8192 CHUNK_NUM_WARPS=4
cross_entropy  bf16      c16384w16   CHUNK=16384 CHUNK_NUM_WARPS=16
cross_entropy  bf16      c16384w8    CHUNK=16384 CHUNK_NUM_WARPS=8
# reduce 8192^2
reduce         bf16,fp16 default
reduce         bf16      t16384      TILE=16384
reduce         bf16      w16         NUM_WARPS=16
reduce         bf16      t16384w16   TILE=16384 NUM_WARPS=16
reduce         bf16      b4096       MAX_BLOCK=4096 TILE=4096
VARIANTS
variants_file="${VARIANTS:-$default_variants}"
stages=("$@"); [ ${#stages[@]} -eq 0 ] && stages=(aot-check aot-time)
types=(matmul softmax layernorm rmsnorm flash_attention fused_mlp cross_entropy rotary_embedding reduce)
# aot-time's order: issue 17's bar types first (matmul, then the memory-bound ones), so that a stage
# cut at its limit has timed those; AOT_TYPES (space-separated) overrides the list.
read -r -a time_types <<<"${AOT_TYPES:-matmul softmax rmsnorm layernorm cross_entropy reduce rotary_embedding flash_attention fused_mlp}"
for k in "${time_types[@]}"; do
  case " ${types[*]} " in *" $k "*) ;; *) echo "h200_triton.sh: AOT_TYPES names '$k', not a kernel type (${types[*]})" >&2; exit 2 ;; esac
done
export vb logs
for st in "${stages[@]}"; do
  case "$st" in preview | interp | aot-check | rank | aot-time | aot-variants | preview-variants) ;;
    *) echo "h200_triton.sh: unknown stage '$st' (preview, interp, aot-check, rank, aot-time, aot-variants, preview-variants)" >&2; exit 2 ;;
  esac
done
for st in "${stages[@]}"; do
  t0=$(date +%s)
  lim_var="STAGE_LIMIT_${st//-/_}"  # e.g. STAGE_LIMIT_aot_check=150 overrides the table
  lim="${!lim_var:-${limit[$st]:-300}}"
  case "$st" in
    preview) timeout "$lim" "$VB_PYTHON" bench/triton_gpu_preview.py "$vb" "$logs/triton-preview.json" \
               >"$logs/triton-preview.md" 2>"$logs/preview.log" ;;
    interp)  timeout "$lim" "$here/.h200/vb_integration_tests" --gtest_filter='*Triton*' \
               >"$logs/interp.log" 2>&1 ;;
    aot-check)
      printf '%s\n' "${types[@]}" | timeout "$lim" xargs -P 9 -I{} sh -c \
        '"$vb" bench --backend triton -k "$0" --no-timing --no-pytorch --json \
           --results "$logs/aot-check.tsv" --tag triton-aot-check \
           >"$logs/aot-check.$0.json" 2>"$logs/aot-check.$0.log"; echo "$0 rc=$?"' {} \
        >"$logs/aot-check.log" 2>&1
      "$here/.h200/vb_integration_tests" --gtest_filter='TritonAot*' >>"$logs/aot-check.log" 2>&1 ;;
    rank)    PY="$VB_PYTHON" timeout "$lim" bash bench/ranking_triton.sh --measure "$logs" \
               >"$logs/rank.log" 2>&1 ;;
    aot-time)
      # dtype outermost (bf16 first: the models' dtype), so that a stage cut at its limit has
      # timed every kernel in bf16 before it starts on the others.
      for dt in bf16 fp16 fp32; do
        for k in "${time_types[@]}"; do
          # Each run may take its whole 60 s: start one only when it ends within the limit.
          if [ $(( $(date +%s) - t0 + 60 )) -gt "$lim" ]; then echo "$k $dt skipped: stage limit ${lim}s"; continue; fi
          timeout 60 "$vb" bench --backend triton -k "$k" --dtype "$dt" --timing-only --json \
            --results "$logs/aot-time.tsv" --tag triton-aot >"$logs/aot-time.$k.$dt.json" \
            2>"$logs/aot-time.$k.$dt.log"
          echo "$k $dt rc=$?"
          # Packed after every run: a call cut short still brings back what was timed.
          tar -czf "$out/h200-triton.tar.gz" -C "$(dirname "$logs")" "$(basename "$logs")"
        done
      done >"$logs/aot-time.log" 2>&1
      "$VB_PYTHON" - "$logs" >"$logs/triton-aot.md" <<'PY'
import glob, json, os, sys
logs = sys.argv[1]
rows = []
for f in sorted(glob.glob(os.path.join(logs, "aot-time.*.json"))):
    kernel, dtype = os.path.basename(f)[len("aot-time."):-len(".json")].rsplit(".", 1)
    try:
        j = json.load(open(f))
    except ValueError:
        rows.append({"kernel": kernel, "dtype": dtype, "verdict": "NO JSON"})
        continue
    check = {}
    try:
        check = json.load(open(os.path.join(logs, f"aot-check.{kernel}.json")))
    except (OSError, ValueError):
        pass
    rows.append({"kernel": kernel, "dtype": dtype, "size": j.get("size"),
                 "stages": check.get("verdict"), "verdict": j.get("verdict"),
                 "reason": j.get("reason", ""), "latency_us": j.get("latency_us"),
                 "pytorch_us": (j.get("pytorch") or {}).get("median_us"),
                 "tflops": j.get("throughput_tflops"), "gb_s": j.get("bandwidth_gb_s"),
                 "pct_peak": j.get("pct_peak"), "speedup_vs_pytorch": j.get("speedup_vs_pytorch")})
json.dump({"rows": rows}, open(os.path.join(logs, "triton-aot.json"), "w"), indent=1)
print("| kernel | dtype | size | five stages | timed | latency us | PyTorch us | TFLOP/s | GB/s |")
print("|---|---|---|---|---|---|---|---|---|")
for r in rows:
    print(f"| {r['kernel']} | {r['dtype']} | {r.get('size')} | {r.get('stages')} | {r['verdict']} | "
          f"{r.get('latency_us')} | {r.get('pytorch_us')} | {r.get('tflops')} | {r.get('gb_s')} |")
PY
      ;;
    preview-variants)
      timeout "$lim" "$VB_PYTHON" bench/triton_gpu_preview.py --variants "$variants_file" "$vb" \
        "$logs/preview-variants.json" >"$logs/preview-variants.md" 2>"$logs/preview-variants.log" ;;
    aot-variants)
      vdir="$logs/variant-src"
      "$VB_PYTHON" bench/triton_gpu_preview.py --write-variants "$variants_file" "$vdir" >"$logs/variants.list" \
        2>"$logs/aot-variants.log"
      while read -r label dtypes; do
        for dt in ${dtypes//,/ }; do
          if [ $(( $(date +%s) - t0 + 60 )) -gt "$lim" ]; then echo "$label $dt skipped: stage limit ${lim}s"; continue; fi
          timeout 60 "$vb" bench --backend triton -k "${label%%@*}" --source "$vdir/$label.py" --dtype "$dt" \
            --timing-only --json --results "$logs/aot-variants.tsv" --tag "triton-aot-variant-$label" \
            >"$logs/aot-variant.$label.$dt.json" 2>"$logs/aot-variant.$label.$dt.log"
          echo "$label $dt rc=$?"
          tar -czf "$out/h200-triton.tar.gz" -C "$(dirname "$logs")" "$(basename "$logs")"
        done
      done <"$logs/variants.list" >>"$logs/aot-variants.log" 2>&1
      "$VB_PYTHON" - "$logs" >"$logs/aot-variants.md" <<'PY'
import glob, json, os, sys
logs = sys.argv[1]
rows = []
for line in open(os.path.join(logs, "variants.list")):
    label, dtypes = line.split()
    for dtype in dtypes.split(","):
        f = os.path.join(logs, f"aot-variant.{label}.{dtype}.json")
        try:
            j = json.load(open(f))
        except (OSError, ValueError):
            rows.append({"variant": label, "dtype": dtype, "verdict": "NO JSON"})
            continue
        rows.append({"variant": label, "dtype": dtype, "size": j.get("size"), "verdict": j.get("verdict"),
                     "reason": j.get("reason", ""), "latency_us": j.get("latency_us"),
                     "pytorch_us": (j.get("pytorch") or {}).get("median_us"),
                     "tflops": j.get("throughput_tflops"), "gb_s": j.get("bandwidth_gb_s"),
                     "pct_peak": j.get("pct_peak"), "speedup_vs_pytorch": j.get("speedup_vs_pytorch")})
json.dump({"rows": rows}, open(os.path.join(logs, "aot-variants.json"), "w"), indent=1)
print("| variant | dtype | size | timed | latency us | PyTorch us | vs PyTorch | TFLOP/s | GB/s | % peak |")
print("|---|---|---|---|---|---|---|---|---|---|")
for r in rows:
    print(f"| {r['variant']} | {r['dtype']} | {r.get('size')} | {r['verdict']} {r.get('reason', '')[:60]} | "
          f"{r.get('latency_us')} | {r.get('pytorch_us')} | {r.get('speedup_vs_pytorch')} | {r.get('tflops')} | "
          f"{r.get('gb_s')} | {r.get('pct_peak')} |")
PY
      ;;
    *) echo "unknown stage $st (preview, interp, aot-check, aot-time, aot-variants, preview-variants)" >&2; continue ;;
  esac
  rc=$?
  echo "stage $st: exit $rc, $(( $(date +%s) - t0 )) s" >>"$summary"
  # After every stage, so that a call cut short still brings back what finished.
  tar -czf "$out/h200-triton.tar.gz" -C "$(dirname "$logs")" "$(basename "$logs")"
  cp "$summary" "$out/summary.txt"
done
cat "$logs/triton-preview.md" >>"$summary" 2>/dev/null
cat "$logs/aot-check.log" "$logs/triton-aot.md" >>"$summary" 2>/dev/null
cat "$logs/aot-variants.md" "$logs/preview-variants.md" >>"$summary" 2>/dev/null
tar -czf "$out/h200-triton.tar.gz" -C "$(dirname "$logs")" "$(basename "$logs")"
cp "$summary" "$out/summary.txt"
cat "$summary"
