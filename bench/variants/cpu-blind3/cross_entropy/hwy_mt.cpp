// Instantiated for target h200-host (vladbud variants):
// Highway SIMD (static dispatch: vector max, hn::Exp sum with two accumulators), OpenMP-threaded over rows.
#include "vb_variant.h"

#include <cmath>
#include <vector>

// Static dispatch only: the target is fixed by -march/-mcpu.
#define HWY_COMPILE_ONLY_STATIC 1
#include <hwy/highway.h>
#include <hwy/contrib/math/math-inl.h>

namespace hn = hwy::HWY_NAMESPACE;

namespace {
/// loss = lse − x_t from the row max m, Σ exp(x − m) and a NaN flag: NaN if a logit is NaN,
/// m − x_t when m is ±inf (the max decides the logsumexp), else (m − x_t) + log(sum).
inline float finish_loss(float m, float sum, bool nan, float xt) {
  if (nan) return __builtin_nanf("");
  if (!std::isfinite(m)) return m - xt;
  return (m - xt) + std::log(sum);
}

/// Highway over an fp32 row [V]: vector max with a NaN lane flag (hn::IsNaN), then
/// Σ hn::Exp(max(x − m, −87)) in two accumulators (the clamp keeps -inf logits out of hn::Exp;
/// exp(−87) < 2e-38 is below any sum's rounding). Scalar tails.
HWY_ATTR float row_loss_f32(const float* HWY_RESTRICT p, vbv::i64 V, float xt) {
  const hn::ScalableTag<float> d;
  const vbv::i64 N = static_cast<vbv::i64>(hn::Lanes(d));
  auto vm = hn::Set(d, -__builtin_inff()), vn = hn::Zero(d);
  const auto one = hn::Set(d, 1.0f);
  vbv::i64 i = 0;
  for (; i + N <= V; i += N) {
    const auto v = hn::LoadU(d, p + i);
    vm = hn::Max(vm, v);
    vn = hn::IfThenElse(hn::IsNaN(v), one, vn);
  }
  float m = hn::GetLane(hn::MaxOfLanes(d, vm));
  bool nan = hn::GetLane(hn::MaxOfLanes(d, vn)) > 0.0f;
  for (; i < V; ++i) {
    nan |= p[i] != p[i];
    m = p[i] > m ? p[i] : m;
  }
  float s = 0;
  if (!nan && std::isfinite(m)) {
    const auto vmx = hn::Set(d, m), lo = hn::Set(d, -87.0f);
    auto s0 = hn::Zero(d), s1 = hn::Zero(d);
    i = 0;
    for (; i + 2 * N <= V; i += 2 * N) {
      s0 = hn::Add(s0, hn::Exp(d, hn::Max(hn::Sub(hn::LoadU(d, p + i), vmx), lo)));
      s1 = hn::Add(s1, hn::Exp(d, hn::Max(hn::Sub(hn::LoadU(d, p + i + N), vmx), lo)));
    }
    s = hn::GetLane(hn::SumOfLanes(d, hn::Add(s0, s1)));
    for (; i < V; ++i) s += vbk::exp_f32(p[i] - m);
  }
  return finish_loss(m, s, nan, xt);
}

/// The row in fp32: in place for fp32 logits, else converted into `row` [V].
float row_loss(const void* x, vbk::Dt dt, vbv::i64 off, vbv::i64 V, float xt, float* row) {
  if (dt == vbk::Dt::F32) return row_loss_f32(static_cast<const float*>(x) + off, V, xt);
  vbk::load_f32(x, dt, off, V, row);
  return row_loss_f32(row, V, xt);
}
/// fp32 staging floats per thread for a row of V logits of dtype dt.
inline vbv::i64 stage_floats(vbk::Dt dt, vbv::i64 V) {
  return dt == vbk::Dt::F32 ? 1 : V;
}
}  // namespace

extern "C" int vb_kernel_run(const DLTensor* in, int n_in, DLTensor* out, int n_out,
                             const double* attrs, int n_attrs, void*) {
  vbv::CrossEntropyArgs a;
  if (int e = vbv::check_cross_entropy(in, n_in, out, n_out, attrs, n_attrs, a)) return e;
  const vbv::i64 V = a.V;
  const auto dt = a.dt;
  const void* x = vbk::data_ptr(in[0]);
  const vbv::i64* tgt = static_cast<const vbv::i64*>(vbk::data_ptr(in[1]));
  float* loss_out = static_cast<float*>(vbk::data_ptr(out[0]));
  const std::vector<vbv::i64>& rows = a.rows;  // the non-ignored rows, in order
  const vbv::i64 nr = static_cast<vbv::i64>(rows.size());
  if (nr == 0) {
    *loss_out = __builtin_nanf("");  // mean over no rows: 0/0, as PyTorch
    return 0;
  }
  vbk::Scratch lbuf(nr);
  if (!lbuf.ok()) return vbk::fail("out of memory (row losses)");
  float* loss = lbuf.get();
  bool oom = false;
#pragma omp parallel if (nr > 1 && nr * V >= (vbv::i64{1} << 15))
  {
    vbk::Scratch buf(stage_floats(dt, V));
    if (!buf.ok()) {
#pragma omp atomic write
      oom = true;
    }
#pragma omp for schedule(static)
    for (vbv::i64 k = 0; k < nr; ++k) {
      if (!buf.ok()) continue;
      const vbv::i64 r = rows[static_cast<std::size_t>(k)];
      float xt;
      vbk::load_f32(x, dt, r * V + tgt[r], 1, &xt);
      loss[k] = row_loss(x, dt, r * V, V, xt, buf.get());
    }
  }
  if (oom) return vbk::fail("out of memory (row scratch)");
  double total = 0;  // row losses summed in row order, in double
  for (vbv::i64 k = 0; k < nr; ++k) total += static_cast<double>(loss[k]);
  *loss_out = static_cast<float>(total / static_cast<double>(nr));
  return 0;
}
