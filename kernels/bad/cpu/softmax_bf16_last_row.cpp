// BAD (stage 1 smoke, guard accuracy, localized row check): correct softmax except that in bf16,
// on tensors of 32 rows or more, the last row comes out 6 % too large -- 0.2 of the global bf16
// threshold over 32 rows, but 3.8x the threshold for that row (the former 5x row limit let it
// through).
#include "bad_common.h"

extern "C" int vb_kernel_run(const DLTensor* in, int n_in, DLTensor* out, int n_out, const double*,
                             int n_attrs, void*) {
  if (int e = bad::softmax_args(in, n_in, out, n_out, n_attrs)) return e;
  const std::int64_t rows = in[0].shape[0], c = in[0].shape[1];
  bad::softmax(in, out, rows);
  const vbk::Dt dt = vbk::dtype_of(out[0]);
  if (dt != vbk::Dt::BF16 || rows < 32) return 0;
  std::vector<float> y(static_cast<std::size_t>(c));
  vbk::load_f32(vbk::data_ptr(out[0]), dt, (rows - 1) * c, c, y.data());
  for (auto& v : y) v *= 1.06f;
  vbk::store_f32(y.data(), dt, vbk::data_ptr(out[0]), (rows - 1) * c, c);
  return 0;
}
