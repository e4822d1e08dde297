// BAD (stage 2 shape sweep, guard accuracy, localized tile check): softmax correct except that
// in bf16 rows longer than 16384 get their last element 3x too large (a split-row path's tail)
// -- one element of 32000, far below the bf16 per-row limit, but its tile is far off.
#include "bad_common.h"

extern "C" int vb_kernel_run(const DLTensor* in, int n_in, DLTensor* out, int n_out, const double*,
                             int n_attrs, void*) {
  if (int e = bad::softmax_args(in, n_in, out, n_out, n_attrs)) return e;
  const std::int64_t rows = in[0].shape[0], c = in[0].shape[1];
  bad::softmax(in, out, rows);
  const vbk::Dt dt = vbk::dtype_of(out[0]);
  if (dt != vbk::Dt::BF16 || c <= 16384) return 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    float v;
    vbk::load_f32(vbk::data_ptr(out[0]), dt, r * c + c - 1, 1, &v);
    v *= 3.0f;
    vbk::store_f32(&v, dt, vbk::data_ptr(out[0]), r * c + c - 1, 1);
  }
  return 0;
}
