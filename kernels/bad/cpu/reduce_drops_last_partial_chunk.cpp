// BAD (stage 2 shape sweep, accuracy): an accurate row sum (double accumulation) that works in
// chunks of 65536 elements and forgets the last, partial chunk of a row longer than one chunk
// (a 32x128256 vocabulary row loses its last 62720 elements, edge-1x1000003 its last 16963).
// Shorter rows are exact. The long rows are judged against their 2-norm floor
// (Array64::scale) and must still fail: 62720 N(0,1) values are ~250 off, 0.7 of the floor
// ‖x_r‖₂ ~ 358 (threshold 1e-5).
#include "bad_common.h"

extern "C" int vb_kernel_run(const DLTensor* in, int n_in, DLTensor* out, int n_out, const double*,
                             int n_attrs, void*) {
  if (int e = vbk::check_args(in, n_in, 1, out, n_out, 1, n_attrs, 0)) return e;
  const std::int64_t rows = in[0].shape[0], n = in[0].shape[1];
  const vbk::Dt dt = vbk::dtype_of(in[0]);
  constexpr std::int64_t kChunk = 65536;
  const std::int64_t used = n > kChunk ? n / kChunk * kChunk : n;  // the defect
  std::vector<float> x(static_cast<std::size_t>(n));
  for (std::int64_t r = 0; r < rows; ++r) {
    vbk::load_f32(vbk::data_ptr(in[0]), dt, r * n, n, x.data());
    double s = 0;
    for (std::int64_t j = 0; j < used; ++j) s += x[static_cast<std::size_t>(j)];
    const float f = static_cast<float>(s);
    vbk::store_f32(&f, vbk::dtype_of(out[0]), vbk::data_ptr(out[0]), r, 1);
  }
  return 0;
}
