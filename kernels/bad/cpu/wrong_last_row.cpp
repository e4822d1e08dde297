// BAD (localized per-row check, guard accuracy): correct softmax except that the last row is
// scaled by 1.02 -- small against the whole tensor, 2% wrong for that row.
#include "bad_common.h"

extern "C" int vb_kernel_run(const DLTensor* in, int n_in, DLTensor* out, int n_out, const double*,
                             int n_attrs, void*) {
  if (int e = bad::softmax_args(in, n_in, out, n_out, n_attrs)) return e;
  const std::int64_t rows = in[0].shape[0], c = in[0].shape[1];
  bad::softmax(in, out, rows);
  std::vector<float> y(static_cast<std::size_t>(c));
  const vbk::Dt dt = vbk::dtype_of(out[0]);
  vbk::load_f32(vbk::data_ptr(out[0]), dt, (rows - 1) * c, c, y.data());
  for (auto& v : y) v *= 1.02f;
  vbk::store_f32(y.data(), dt, vbk::data_ptr(out[0]), (rows - 1) * c, c);
  return 0;
}
