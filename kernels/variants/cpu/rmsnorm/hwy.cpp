// Highway SIMD (static dispatch, FMA accumulators), single-threaded.
#include "vb_variant.h"

#include <cmath>

// Static dispatch only: the target is fixed by -march/-mcpu.
#define HWY_COMPILE_ONLY_STATIC 1
#include <hwy/highway.h>

namespace hn = hwy::HWY_NAMESPACE;

namespace {
/// Highway: two FMA accumulators for the sum of squares, vector scale by rsqrt * w.
HWY_ATTR void rms_row(float* HWY_RESTRICT row, const float* HWY_RESTRICT w, vbv::i64 C, float eps) {
  const hn::ScalableTag<float> d;
  const vbv::i64 N = static_cast<vbv::i64>(hn::Lanes(d));
  auto a0 = hn::Zero(d), a1 = hn::Zero(d);
  vbv::i64 i = 0;
  for (; i + 2 * N <= C; i += 2 * N) {
    const auto v0 = hn::LoadU(d, row + i), v1 = hn::LoadU(d, row + i + N);
    a0 = hn::MulAdd(v0, v0, a0);
    a1 = hn::MulAdd(v1, v1, a1);
  }
  float ss = hn::GetLane(hn::SumOfLanes(d, hn::Add(a0, a1)));
  for (; i < C; ++i) ss += row[i] * row[i];
  const float inv = 1.0f / std::sqrt(ss / static_cast<float>(C) + eps);
  const auto vi = hn::Set(d, inv);
  i = 0;
  for (; i + N <= C; i += N)
    hn::StoreU(hn::Mul(hn::Mul(hn::LoadU(d, row + i), vi), hn::LoadU(d, w + i)), d, row + i);
  for (; i < C; ++i) row[i] = row[i] * inv * w[i];
}
}  // namespace

extern "C" int vb_kernel_run(const DLTensor* in, int n_in, DLTensor* out, int n_out,
                             const double* attrs, int n_attrs, void*) {
  (void)attrs;
  vbv::i64 R = 0, C = 0;
  if (int e = vbv::check_rows(in, n_in, 2, out, n_out, n_attrs, 1, R, C)) return e;
  if (R == 0 || C == 0) return 0;
  const auto dt = vbk::dtype_of(in[0]);
  const void* x = vbk::data_ptr(in[0]);
  void* y = vbk::data_ptr(out[0]);
  vbk::Scratch wbuf;
  const float* w = vbv::as_f32(in[1], wbuf);
  if (!w) return vbk::fail("out of memory (weight)");
  const float eps = static_cast<float>(attrs[0]);
  bool oom = false;
  {
    vbk::Scratch buf(C);
    float* row = buf.get();
    if (!row) {
#pragma omp atomic write
      oom = true;
    }
    for (vbv::i64 r = 0; r < R; ++r) {
      if (!row) continue;
      vbk::load_f32(x, dt, r * C, C, row);
      rms_row(row, w, C, eps);
      vbk::store_f32(row, dt, y, r * C, C);
    }
  }
  if (oom) return vbk::fail("out of memory (row scratch)");
  return 0;
}
