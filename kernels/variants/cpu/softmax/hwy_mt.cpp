// Highway SIMD (static dispatch, hn::Exp), OpenMP-threaded over rows.
#include "vb_variant.h"

// Static dispatch only: the target is fixed by -march/-mcpu.
#define HWY_COMPILE_ONLY_STATIC 1
#include <hwy/highway.h>
#include <hwy/contrib/math/math-inl.h>

namespace hn = hwy::HWY_NAMESPACE;

namespace {
/// Highway: vector max, hn::Exp with a vector sum (two accumulators), vector scale.
HWY_ATTR void softmax_row(float* HWY_RESTRICT row, vbv::i64 C) {
  const hn::ScalableTag<float> d;
  const vbv::i64 N = static_cast<vbv::i64>(hn::Lanes(d));
  vbv::i64 i = 0;
  auto vm = hn::Set(d, -__builtin_inff());
  for (; i + N <= C; i += N) vm = hn::Max(vm, hn::LoadU(d, row + i));
  float m = hn::GetLane(hn::MaxOfLanes(d, vm));
  for (; i < C; ++i) m = row[i] > m ? row[i] : m;
  const auto vmx = hn::Set(d, m);
  auto s0 = hn::Zero(d), s1 = hn::Zero(d);
  i = 0;
  for (; i + 2 * N <= C; i += 2 * N) {
    const auto e0 = hn::Exp(d, hn::Sub(hn::LoadU(d, row + i), vmx));
    const auto e1 = hn::Exp(d, hn::Sub(hn::LoadU(d, row + i + N), vmx));
    hn::StoreU(e0, d, row + i);
    hn::StoreU(e1, d, row + i + N);
    s0 = hn::Add(s0, e0);
    s1 = hn::Add(s1, e1);
  }
  float s = hn::GetLane(hn::SumOfLanes(d, hn::Add(s0, s1)));
  for (; i < C; ++i) {
    row[i] = vbk::exp_f32(row[i] - m);
    s += row[i];
  }
  // NaN inputs: Max ignores them on some targets; make them propagate as in PyTorch.
  for (vbv::i64 k = 0; k < C; ++k)
    if (row[k] != row[k]) s = row[k];
  const auto inv = hn::Set(d, 1.0f / s);
  i = 0;
  for (; i + N <= C; i += N) hn::StoreU(hn::Mul(hn::LoadU(d, row + i), inv), d, row + i);
  for (; i < C; ++i) row[i] *= 1.0f / s;
}
}  // namespace

extern "C" int vb_kernel_run(const DLTensor* in, int n_in, DLTensor* out, int n_out,
                             const double* attrs, int n_attrs, void*) {
  (void)attrs;
  vbv::i64 R = 0, C = 0;
  if (int e = vbv::check_rows(in, n_in, 1, out, n_out, n_attrs, 0, R, C)) return e;
  if (R == 0 || C == 0) return 0;
  const auto dt = vbk::dtype_of(in[0]);
  const void* x = vbk::data_ptr(in[0]);
  void* y = vbk::data_ptr(out[0]);
  bool oom = false;
#pragma omp parallel if (R > 1 && R * C >= (vbv::i64{1} << 15))
  {
    vbk::Scratch buf(C);
    float* row = buf.get();
    if (!row) {
#pragma omp atomic write
      oom = true;
    }
#pragma omp for schedule(static)
    for (vbv::i64 r = 0; r < R; ++r) {
      if (!row) continue;
      vbk::load_f32(x, dt, r * C, C, row);
      softmax_row(row, C);
      vbk::store_f32(row, dt, y, r * C, C);
    }
  }
  if (oom) return vbk::fail("out of memory (row scratch)");
  return 0;
}
