#include <fmt/format.h>

#include "optimize/proposer.h"

namespace vb::opt {

std::string program_md(const std::string& kernel, const std::string& backend,
                       const std::string& source_name) {
  std::string playbook;
  if (backend == "cuda") {
    playbook = R"(### Playbook: CUDA (NVIDIA)
1. Find the bound first: `pct_peak` in results.tsv is % of the roofline ceiling (memory or
   compute, whichever binds at this shape). Memory-bound kernels (softmax, norms, reductions,
   RoPE) gain from fewer bytes and wider accesses; compute-bound ones (matmul, attention, MLP)
   from tensor cores and data reuse.
2. Memory-bound: one pass over the data where possible (online max/sum for softmax, Welford
   for variance), 16-byte vector loads (float4 / 8 x half), coalesced rows (one warp or block
   per row, lanes stride by 32), warp shuffles (`__shfl_xor_sync`) for row reductions instead
   of shared-memory trees, enough blocks in flight (>= 2 x SM count).
3. Compute-bound: tile for shared memory and registers (block tile 64-256, warp tile 32-64,
   k-step 16-64), `ldmatrix` + `mma.sync` (or WMMA) on fp16/bf16 with fp32 accumulation,
   double-buffered `cp.async` loads, avoid bank conflicts (pad or swizzle).
4. Tune the declared `@vb-param` values (BLOCK_THREADS, tile sizes, vector width) before
   restructuring; keep register use low enough for >= 2 blocks per SM; watch spills.
)";
  } else {
    playbook = R"(### Playbook: CPU (C++ with OpenMP)
1. Find the bound first: `pct_peak` in results.tsv is % of the roofline ceiling of this
   machine (memory bandwidth or FMA peak at this shape).
2. Memory-bound kernels (softmax, norms, reductions, RoPE): read each row once, fuse passes
   (keep the row in L1/L2 between passes), keep several independent accumulators so the
   vectorized loop is not latency-bound, stream stores for outputs written once, split rows
   over threads only when the work is large enough to pay the fork/join.
3. Compute-bound kernels (matmul, attention, MLP): block for L1/L2 (pack a panel of B, keep a
   register tile of C of 4-8 vectors x 4-6 rows), broadcast-FMA inner loop, align to the
   vector width (`#pragma omp simd`, `__restrict`), parallelize the outer block loops.
4. Tune the declared `@vb-param` values (unroll, block size, accumulators, threads) before
   restructuring; results must stay bitwise deterministic run to run (fixed reduction order).
)";
  }
  return fmt::format(R"(# program.md: operating manual for an optimization agent

You are optimizing one {kernel} kernel for the `{backend}` backend. VladBud's loop runs you, then
builds and evaluates what you leave in `{src}` and keeps it only if it is correct and faster.

## Protocol
1. Read `problem.json` (the model's shape, dtype and this kernel's share of model time) and
   `results.tsv` (the latest experiments on this kernel: latency_us, pct_peak, correctness,
   and in `description` the reason of each keep or revert).
2. Edit `{src}` (the ONE file you may change). It starts as the current best version.
3. Exit. Make one focused change per run: the loop attributes each gain or loss to your edit.
4. The loop then runs the quick checks, the full five correctness stages (smoke, shape sweep
   over all sizes and fp16/bf16/fp32, numerical stability, determinism, edge shapes) with every
   guard, and a timing interleaved with the current best.

## Decision rules (applied by the loop, not by you)
* Any failed stage or guard (wrong values, NaN pattern, out-of-bounds or unwritten output,
  modified input, nondeterminism, timeout, crash, build error) -> reverted.
* Correct but not faster than the best by more than the measured noise (baseline and candidate
  timed alternately in the same run) -> reverted.
* Faster beyond noise -> kept: becomes the new best (saved in best/ and history/).
* A kernel at >= 90 % of its roofline ceiling, or without a gain in many experiments, is
  finished; the loop moves to another kernel.

{playbook}
## The kernel ABI
`extern "C" int vb_kernel_run(const DLTensor* inputs, int n_inputs, DLTensor* outputs,
int n_outputs, const double* attrs, int n_attrs, void* stream)`; return 0 on success or
`vbk::fail(...)`. Keep the SDK header include and the argument checks. Inputs are read-only.
Every output element must be written, every call, with the inputs of that call.

## What you must not touch
Only `{src}` may change. Do not create, edit or delete any other file in this folder
(`problem.json`, `program.md`, `results.tsv`, `best/`, `history/`, `tried/`, `state.json`), and
nothing outside it: the evaluator, the oracle references, the inputs, the SDK headers and the
vladbud binaries are checksummed before and after your run. Any such change is undone and your
candidate is rejected unevaluated. Do not detect the test harness, cache results between calls,
use background threads, or read the clock to shape your output: the evaluator checks for each.
)",
                     fmt::arg("kernel", kernel), fmt::arg("backend", backend),
                     fmt::arg("src", source_name), fmt::arg("playbook", playbook));
}

}  // namespace vb::opt
