#include "core/parallel.h"

#include <cstdlib>
#include <thread>
#include <vector>

namespace vb {

int hardware_threads() {
  if (const char* e = std::getenv("VB_THREADS")) {
    const int v = std::atoi(e);
    if (v >= 1) return v;
  }
  const unsigned h = std::thread::hardware_concurrency();
  return h == 0 ? 1 : static_cast<int>(h);
}

void parallel_for(std::int64_t n, std::int64_t grain,
                  const std::function<void(std::int64_t, std::int64_t)>& body) {
  if (n <= 0) return;
  grain = std::max<std::int64_t>(grain, 1);
  const std::int64_t max_chunks = (n + grain - 1) / grain;
  const std::int64_t workers = std::min<std::int64_t>(hardware_threads(), max_chunks);
  if (workers <= 1) {
    body(0, n);
    return;
  }
  const std::int64_t chunk = (n + workers - 1) / workers;
  std::vector<std::thread> pool;
  pool.reserve(static_cast<std::size_t>(workers - 1));
  for (std::int64_t w = 1; w < workers; ++w) {
    const std::int64_t lo = w * chunk, hi = std::min(n, lo + chunk);
    if (lo >= hi) break;
    pool.emplace_back([&body, lo, hi] { body(lo, hi); });
  }
  body(0, std::min(n, chunk));
  for (auto& t : pool) t.join();
}

}  // namespace vb
