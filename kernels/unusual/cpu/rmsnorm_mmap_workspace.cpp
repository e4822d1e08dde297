// UNUSUAL but correct: RMSNorm that keeps a workspace across calls -- one anonymous mmap,
// grown with mremap when a larger problem arrives -- and stages each row through it (x times
// the weight first, the scale applied afterwards). State that outlives a call is allowed as
// long as it is not a cache of results: every call recomputes from its inputs. Must pass
// every stage and the timing protocol.
#include "vb_kernel.h"

#include <sys/mman.h>

#include <cmath>

namespace {
float* workspace = nullptr;
std::size_t capacity = 0;  // floats

float* reserve(std::size_t n) {
  if (n <= capacity) return workspace;
  const std::size_t bytes = n * sizeof(float);
  void* p = workspace ? ::mremap(workspace, capacity * sizeof(float), bytes, MREMAP_MAYMOVE)
                      : ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                               -1, 0);
  if (p == MAP_FAILED) return nullptr;
  workspace = static_cast<float*>(p);
  capacity = n;
  return workspace;
}
}  // namespace

extern "C" int vb_kernel_run(const DLTensor* in, int n_in, DLTensor* out, int n_out,
                             const double* attrs, int n_attrs, void*) {
  if (int e = vbk::check_args(in, n_in, 2, out, n_out, 1, n_attrs, 1)) return e;
  const std::int64_t rows = in[0].shape[0], n = in[0].shape[1];
  const vbk::Dt dt = vbk::dtype_of(in[0]);
  float* ws = reserve(2 * static_cast<std::size_t>(n));
  if (!ws) return vbk::fail("cannot map a %lld-float workspace", static_cast<long long>(2 * n));
  float* w = ws + n;
  vbk::load_f32(vbk::data_ptr(in[1]), vbk::dtype_of(in[1]), 0, n, w);
  for (std::int64_t r = 0; r < rows; ++r) {
    vbk::load_f32(vbk::data_ptr(in[0]), dt, r * n, n, ws);
    double ss = 0;
    for (std::int64_t j = 0; j < n; ++j) ss += static_cast<double>(ws[j]) * ws[j];
    const double inv = 1.0 / std::sqrt(ss / static_cast<double>(n) + attrs[0]);
    for (std::int64_t j = 0; j < n; ++j) ws[j] *= w[j];
    for (std::int64_t j = 0; j < n; ++j) ws[j] = static_cast<float>(ws[j] * inv);
    vbk::store_f32(ws, vbk::dtype_of(out[0]), vbk::data_ptr(out[0]), r * n, n);
  }
  return 0;
}
