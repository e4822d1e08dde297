// BAD (stage 5 edge shapes): rmsnorm that processes each row in chunks of 16 columns and drops
// the remainder -- right for every LLM hidden size, wrong for odd widths (tail left unwritten).
#include "bad_common.h"

extern "C" int vb_kernel_run(const DLTensor* in, int n_in, DLTensor* out, int n_out,
                             const double* attrs, int n_attrs, void*) {
  if (int e = vbk::check_args(in, n_in, 2, out, n_out, 1, n_attrs, 1)) return e;
  const std::int64_t rows = in[0].shape[0], n = in[0].shape[1], n16 = n / 16 * 16;
  const vbk::Dt dt = vbk::dtype_of(in[0]);
  std::vector<float> x(static_cast<std::size_t>(n)), w(static_cast<std::size_t>(n));
  vbk::load_f32(vbk::data_ptr(in[1]), dt, 0, n, w.data());
  for (std::int64_t r = 0; r < rows; ++r) {
    vbk::load_f32(vbk::data_ptr(in[0]), dt, r * n, n, x.data());
    double ss = 0;
    for (float v : x) ss += static_cast<double>(v) * v;
    const float inv = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(n) + attrs[0]));
    for (std::int64_t j = 0; j < n16; ++j)
      x[static_cast<std::size_t>(j)] *= inv * w[static_cast<std::size_t>(j)];
    if (n16 > 0) vbk::store_f32(x.data(), vbk::dtype_of(out[0]), vbk::data_ptr(out[0]), r * n, n16);
  }
  return 0;
}
