// BAD (stage 2 shape sweep, guard accuracy): cross entropy that never reads ignore_index and
// treats every negative target as ignored -- right for PyTorch's -100 and for -1, wrong when
// the ignored class is a real id such as a pad token 0 (those rows are counted as class 0).
#include "bad_common.h"

extern "C" int vb_kernel_run(const DLTensor* in, int n_in, DLTensor* out, int n_out,
                             const double*, int n_attrs, void*) {
  if (int e = vbk::check_args(in, n_in, 2, out, n_out, 1, n_attrs, 1, 0x2u)) return e;
  const std::int64_t rows = in[0].shape[0], v = in[0].shape[1];
  const vbk::Dt dt = vbk::dtype_of(in[0]);
  const auto* tgt = static_cast<const std::int64_t*>(vbk::data_ptr(in[1]));
  std::vector<float> x(static_cast<std::size_t>(v));
  double sum = 0;
  std::int64_t counted = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    if (tgt[r] < 0) continue;
    if (tgt[r] >= v) return vbk::fail("target out of range");
    vbk::load_f32(vbk::data_ptr(in[0]), dt, r * v, v, x.data());
    double m = -INFINITY, s = 0;
    for (float e : x) m = std::fmax(m, e);
    for (float e : x) s += std::exp(e - m);
    sum += m + std::log(s) - x[static_cast<std::size_t>(tgt[r])];
    ++counted;
  }
  float loss = static_cast<float>(sum / static_cast<double>(counted));
  vbk::store_f32(&loss, vbk::Dt::F32, vbk::data_ptr(out[0]), 0, 1);
  return 0;
}
