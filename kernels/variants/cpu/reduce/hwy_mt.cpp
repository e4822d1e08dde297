// Highway SIMD (static dispatch), OpenMP-threaded over rows: four vector accumulators per row.
#include "vb_variant.h"

// Static dispatch only: the target is fixed by -march/-mcpu (Highway 1.0 in Debian 12 does not
// know every newer -march baseline as a dynamic target).
#define HWY_COMPILE_ONLY_STATIC 1
#include <hwy/highway.h>

namespace hn = hwy::HWY_NAMESPACE;

namespace {
HWY_ATTR float row_sum(const float* p, vbv::i64 n) {
  const hn::ScalableTag<float> d;
  const vbv::i64 N = static_cast<vbv::i64>(hn::Lanes(d));
  auto a0 = hn::Zero(d), a1 = hn::Zero(d), a2 = hn::Zero(d), a3 = hn::Zero(d);
  vbv::i64 i = 0;
  for (; i + 4 * N <= n; i += 4 * N) {
    a0 = hn::Add(a0, hn::LoadU(d, p + i));
    a1 = hn::Add(a1, hn::LoadU(d, p + i + N));
    a2 = hn::Add(a2, hn::LoadU(d, p + i + 2 * N));
    a3 = hn::Add(a3, hn::LoadU(d, p + i + 3 * N));
  }
  for (; i + N <= n; i += N) a0 = hn::Add(a0, hn::LoadU(d, p + i));
  float tail = 0;
  for (; i < n; ++i) tail += p[i];
  return hn::GetLane(hn::SumOfLanes(d, hn::Add(hn::Add(a0, a1), hn::Add(a2, a3)))) + tail;
}
}  // namespace

extern "C" int vb_kernel_run(const DLTensor* in, int n_in, DLTensor* out, int n_out,
                             const double*, int n_attrs, void*) {
  if (int e = vbk::check_args(in, n_in, 1, out, n_out, 1, n_attrs, 0)) return e;
  if (int e = vbk::check_same_dtype(in, n_in, out, n_out)) return e;
  if (in[0].ndim != 2) return vbk::fail("x: expected [M,N]");
  const vbv::i64 M = in[0].shape[0], N = in[0].shape[1];
  if (int e = vbk::check_shape(out[0], "y", {M})) return e;
  const auto dt = vbk::dtype_of(in[0]);
  const void* x = vbk::data_ptr(in[0]);

#pragma omp parallel for schedule(static) if (M > 1 && M * N >= (1 << 15))
  for (vbv::i64 r = 0; r < M; ++r) {
    float s = 0;
    alignas(64) float stage[vbv::kChunk];
    vbv::for_chunks(x, dt, r * N, N, stage,
                    [&](const float* p, vbv::i64 n, vbv::i64) { s += row_sum(p, n); });
    vbk::store_f32(&s, dt, vbk::data_ptr(out[0]), r, 1);
  }
  return 0;
}
