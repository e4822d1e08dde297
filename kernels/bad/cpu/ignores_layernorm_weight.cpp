// BAD (stage 1, guard accuracy): layernorm that applies the bias but ignores the weight.
#include "bad_common.h"

extern "C" int vb_kernel_run(const DLTensor* in, int n_in, DLTensor* out, int n_out,
                             const double* attrs, int n_attrs, void*) {
  if (int e = vbk::check_args(in, n_in, 3, out, n_out, 1, n_attrs, 1)) return e;
  const std::int64_t rows = in[0].shape[0], d = in[0].shape[1];
  const vbk::Dt dt = vbk::dtype_of(in[0]);
  std::vector<float> x(static_cast<std::size_t>(d)), b(static_cast<std::size_t>(d));
  vbk::load_f32(vbk::data_ptr(in[2]), dt, 0, d, b.data());
  for (std::int64_t r = 0; r < rows; ++r) {
    vbk::load_f32(vbk::data_ptr(in[0]), dt, r * d, d, x.data());
    double mean = 0, var = 0;
    for (float v : x) mean += v;
    mean /= static_cast<double>(d);
    for (float v : x) var += (v - mean) * (v - mean);
    var /= static_cast<double>(d);
    const double inv = 1.0 / std::sqrt(var + attrs[0]);
    for (std::int64_t j = 0; j < d; ++j)
      x[static_cast<std::size_t>(j)] =
          static_cast<float>((x[static_cast<std::size_t>(j)] - mean) * inv) +
          b[static_cast<std::size_t>(j)];
    vbk::store_f32(x.data(), vbk::dtype_of(out[0]), vbk::data_ptr(out[0]), r * d, d);
  }
  return 0;
}
