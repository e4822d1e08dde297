// BAD (stage 1 smoke, guard accuracy, localized row check): correct layernorm except that in
// fp16 the last row is scaled by 1.004 (about 4 fp16 ulps on every element of that row) --
// under the global fp16 threshold, and under the former 5x row limit (5e-3), over the 2x one.
#include "bad_common.h"

extern "C" int vb_kernel_run(const DLTensor* in, int n_in, DLTensor* out, int n_out,
                             const double* attrs, int n_attrs, void*) {
  if (int e = vbk::check_args(in, n_in, 3, out, n_out, 1, n_attrs, 1)) return e;
  const std::int64_t rows = in[0].shape[0], d = in[0].shape[1];
  const vbk::Dt dt = vbk::dtype_of(in[0]);
  std::vector<float> x(static_cast<std::size_t>(d)), w(x), b(x);
  vbk::load_f32(vbk::data_ptr(in[1]), dt, 0, d, w.data());
  vbk::load_f32(vbk::data_ptr(in[2]), dt, 0, d, b.data());
  for (std::int64_t r = 0; r < rows; ++r) {
    vbk::load_f32(vbk::data_ptr(in[0]), dt, r * d, d, x.data());
    double mean = 0, var = 0;
    for (float v : x) mean += v;
    mean /= static_cast<double>(d);
    for (float v : x) var += (v - mean) * (v - mean);
    var /= static_cast<double>(d);
    const double inv = 1.0 / std::sqrt(var + attrs[0]);
    const double k = (dt == vbk::Dt::F16 && r == rows - 1 && rows > 1) ? 1.004 : 1.0;
    for (std::size_t j = 0; j < x.size(); ++j)
      x[j] = static_cast<float>(((x[j] - mean) * inv * w[j] + b[j]) * k);
    vbk::store_f32(x.data(), vbk::dtype_of(out[0]), vbk::data_ptr(out[0]), r * d, d);
  }
  return 0;
}
