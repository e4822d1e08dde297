// A minimal fork-join parallel loop over std::thread for the oracle and input generation.
// (The project avoids OpenMP so that g++ 12 and clang 14 build it without libomp.)
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>

namespace vb {

/// Number of worker threads used by parallel_for: std::thread::hardware_concurrency(), or the
/// value of the environment variable VB_THREADS when set (>= 1).
int hardware_threads();

/// Calls body(lo, hi) over disjoint chunks covering [0, n), at most hardware_threads() at a
/// time; chunks are at least `grain` long. Runs inline when n <= grain. The chunking depends
/// only on n, grain and the thread count, so results that depend on chunk order are
/// reproducible on one machine.
void parallel_for(std::int64_t n, std::int64_t grain,
                  const std::function<void(std::int64_t, std::int64_t)>& body);

}  // namespace vb
