// Instantiated for target h200-host (vladbud variants):
// Compiler-vectorized two-pass logsumexp (omp simd max and sum reductions), single-threaded.
#include "vb_variant.h"

#include <cmath>
#include <vector>

namespace {
/// loss = lse − x_t from the row max m, Σ exp(x − m) and a NaN flag: NaN if a logit is NaN,
/// m − x_t when m is ±inf (the max decides the logsumexp), else (m − x_t) + log(sum).
inline float finish_loss(float m, float sum, bool nan, float xt) {
  if (nan) return __builtin_nanf("");
  if (!std::isfinite(m)) return m - xt;
  return (m - xt) + std::log(sum);
}

/// One fp32 row of V logits: m = max and the NaN count
/// in one omp simd pass, then s = Σ exp(x − m) (vbk::exp_f32, omp simd reduction).
float row_loss_f32(const float* __restrict p, vbv::i64 V, float xt) {
  float m = -__builtin_inff();
  int nan = 0;
#pragma omp simd reduction(max : m) reduction(+ : nan)
  for (vbv::i64 i = 0; i < V; ++i) {
    nan += p[i] != p[i];
    m = p[i] > m ? p[i] : m;
  }
  float s = 0;
  if (std::isfinite(m)) {
#pragma omp simd reduction(+ : s)
    for (vbv::i64 i = 0; i < V; ++i) s += vbk::exp_f32(p[i] - m);
  }
  return finish_loss(m, s, nan != 0, xt);
}

/// The row in fp32: in place for fp32 logits, else converted into `row`.
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
  {
    vbk::Scratch buf(stage_floats(dt, V));
    if (!buf.ok()) {
#pragma omp atomic write
      oom = true;
    }
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
