#include <fmt/format.h>

#include "backends/backend.h"
#include "optimize/proposer.h"

namespace vb::opt {

std::string program_md(const std::string& kernel, const std::string& backend,
                       const std::string& source_name) {
  // The backend's own playbook (Backend::playbook); an unknown backend gets none.
  const Backend* b = find_backend(backend);
  const std::string playbook = b ? b->playbook() : std::string();
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
