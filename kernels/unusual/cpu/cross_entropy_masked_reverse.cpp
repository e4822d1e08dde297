// UNUSUAL but correct: cross entropy that first builds a mask of the rows to count (target !=
// ignore_index, whatever its value: -100, -1, 0 or a class id), then walks the rows from the
// last to the first with a one-pass online logsumexp (running max, rescaled sum), and sums the
// per-row losses in double. Must pass every stage.
#include "vb_kernel.h"

#include <cmath>
#include <vector>

extern "C" int vb_kernel_run(const DLTensor* in, int n_in, DLTensor* out, int n_out,
                             const double* attrs, int n_attrs, void*) {
  if (int e = vbk::check_args(in, n_in, 2, out, n_out, 1, n_attrs, 1, 0x2u)) return e;
  const std::int64_t rows = in[0].shape[0], v = in[0].shape[1];
  const auto ig = static_cast<std::int64_t>(attrs[0]);
  const auto* tgt = static_cast<const std::int64_t*>(vbk::data_ptr(in[1]));
  std::vector<unsigned char> counted(static_cast<std::size_t>(rows));
  std::int64_t n = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    if (tgt[r] == ig) continue;
    if (tgt[r] < 0 || tgt[r] >= v) return vbk::fail("targets[%lld] out of range", (long long)r);
    counted[static_cast<std::size_t>(r)] = 1;
    ++n;
  }
  const vbk::Dt dt = vbk::dtype_of(in[0]);
  std::vector<float> x(static_cast<std::size_t>(v));
  double sum = 0;
  for (std::int64_t r = rows - 1; r >= 0; --r) {
    if (!counted[static_cast<std::size_t>(r)]) continue;
    vbk::load_f32(vbk::data_ptr(in[0]), dt, r * v, v, x.data());
    double m = -INFINITY, s = 0;
    for (float e : x) {
      if (e == -INFINITY) continue;  // contributes exp(-inf) = 0
      if (e > m) {
        s = s * std::exp(m - e) + 1.0;
        m = e;
      } else {
        s += std::exp(static_cast<double>(e) - m);
      }
    }
    sum += m + std::log(s) - x[static_cast<std::size_t>(tgt[r])];
  }
  const float loss = n ? static_cast<float>(sum / static_cast<double>(n)) : NAN;
  vbk::store_f32(&loss, vbk::Dt::F32, vbk::data_ptr(out[0]), 0, 1);
  return 0;
}
