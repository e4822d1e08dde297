// BAD (issue 18 class 3): the row maximum is taken over the row rounded up to 8 elements, as a
// vector loop without a tail would: it reads past the end of each row. Inside the tensor that
// only shifts the reference point (softmax is shift-invariant, so the result stays right),
// but the last row reads past the end of the buffer, which in a real program may be another
// tensor or an unmapped page. The guard bands hold a large finite value, so the read poisons
// the last row (every exponential underflows) and the comparison fails; a NaN band would not
// (fmax ignores NaN), nor would a small pattern.
#include "bad_common.h"

extern "C" int vb_kernel_run(const DLTensor* in, int n_in, DLTensor* out, int n_out, const double*,
                             int n_attrs, void*) {
  if (int e = bad::softmax_args(in, n_in, out, n_out, n_attrs)) return e;
  const std::int64_t rows = in[0].shape[0], c = in[0].shape[1], padded = (c + 7) / 8 * 8;
  const vbk::Dt dt = vbk::dtype_of(in[0]);
  std::vector<float> a(static_cast<std::size_t>(padded)), b(static_cast<std::size_t>(c));
  for (std::int64_t r = 0; r < rows; ++r) {
    vbk::load_f32(vbk::data_ptr(in[0]), dt, r * c, padded, a.data());  // past the row's end
    float m = -INFINITY;
    for (std::int64_t j = 0; j < padded; ++j) m = std::fmax(m, a[static_cast<std::size_t>(j)]);
    float s = 0;
    for (std::int64_t j = 0; j < c; ++j) s += (b[static_cast<std::size_t>(j)] = std::exp(a[static_cast<std::size_t>(j)] - m));
    for (std::int64_t j = 0; j < c; ++j) b[static_cast<std::size_t>(j)] /= s;
    vbk::store_f32(b.data(), vbk::dtype_of(out[0]), vbk::data_ptr(out[0]), r * c, c);
  }
  return 0;
}
