// Writing memory so that none of it stays in the CPU's caches (DESIGN §4: a timed call must not
// read its inputs from a cache the harness warmed).
#pragma once

#include <cstddef>

namespace vb {

/// Copies `n` bytes from `src` to `dst` (non-overlapping) and leaves no line of `dst` in any
/// cache level of any core: x86-64 uses non-temporal stores (MOVNTDQ, SSE2, which evict the
/// line from every cache, Intel SDM vol. 1 §10.4.6.2) with the unaligned head and tail flushed
/// by CLFLUSH; AArch64 copies, then cleans and invalidates each line to the point of coherency
/// (DC CIVAC); other architectures copy only. Ends with a store fence, so the data is in memory
/// before any later signal to another process.
void copy_uncached(void* dst, const void* src, std::size_t n);

}  // namespace vb
