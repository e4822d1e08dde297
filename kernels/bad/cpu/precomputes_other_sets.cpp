// BAD (issue 18 class 7): precomputation during warm-up. Every call also walks the shared
// arena -- the harness lays the timing sets out one after another, so the next set's x and y
// sit at this call's x and y plus twice their distance -- and computes the softmax of every
// set it finds there into that set's output, remembering which outputs it filled. A later
// call on a remembered output returns at once. When all timing sets are in the arena before
// the untimed warm-up, the warm-up does the timed calls' work and they are timed 30-50 %
// faster with correct outputs. When each set's inputs appear only right before its own call
// (with its output poisoned), the remembered outputs are stale and the timed calls return
// poison, which the timing verification rejects.
#include <cstdio>
#include <cstring>
#include <set>
#include <string>

#include "bad_common.h"

namespace {
std::set<const void*> filled;

// The end of the run of adjacent mappings of the same file that holds `p` (from /proc/self/maps;
// the shared arena can be split into several by page protections), or 0.
std::uintptr_t mapping_end(const void* p) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  std::FILE* f = std::fopen("/proc/self/maps", "r");
  if (!f) return 0;
  unsigned long lo = 0, hi = 0;
  char line[512], path[256];
  std::string file;
  std::uintptr_t end = 0;
  while (std::fgets(line, sizeof line, f)) {
    path[0] = 0;
    if (std::sscanf(line, "%lx-%lx %*s %*s %*s %*s %255s", &lo, &hi, path) < 2) continue;
    if (a >= lo && a < hi) {
      end = hi, file = path;
    } else if (end != 0 && lo == end && file == path) {
      end = hi;
    } else if (end != 0) {
      break;  // maps are sorted: the run ended
    }
  }
  std::fclose(f);
  return end;
}
}  // namespace

extern "C" int vb_kernel_run(const DLTensor* in, int n_in, DLTensor* out, int n_out, const double*,
                             int n_attrs, void*) {
  if (int e = bad::softmax_args(in, n_in, out, n_out, n_attrs)) return e;
  char* x = static_cast<char*>(vbk::data_ptr(in[0]));
  char* y = static_cast<char*>(vbk::data_ptr(out[0]));
  if (filled.erase(y)) return 0;  // "already computed during the warm-up"
  bad::softmax(in, out, in[0].shape[0]);
  if (y <= x) return 0;
  const std::ptrdiff_t stride = 2 * (y - x);
  const std::size_t bytes = static_cast<std::size_t>(vbk::numel(out[0]) * out[0].dtype.bits / 8);
  const std::uintptr_t end = mapping_end(x);
  for (int m = 1; m < 512; ++m) {
    char* xs = x + m * stride;
    char* ys = y + m * stride;
    if (reinterpret_cast<std::uintptr_t>(ys) + bytes > end) break;
    DLTensor xi = in[0], yo = out[0];
    xi.data = xs, xi.byte_offset = 0;
    yo.data = ys, yo.byte_offset = 0;
    bad::softmax(&xi, &yo, in[0].shape[0]);
    filled.insert(ys);
  }
  return 0;
}
