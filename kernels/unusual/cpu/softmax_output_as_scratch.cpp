// UNUSUAL but correct: softmax that uses its output as scratch. It first fills the whole output
// with a junk pattern (0xff bytes: NaN in every float dtype), then per row stores the shifted
// exponentials into the output and overwrites them with the normalized values once summed. Only the final contents of an output matter; writing it several times is
// allowed (the poison and guard-band checks must not confuse this with a bad write). Must pass
// every stage and the timing protocol.
#include "vb_kernel.h"

#include <cmath>
#include <cstring>
#include <vector>

extern "C" int vb_kernel_run(const DLTensor* in, int n_in, DLTensor* out, int n_out,
                             const double*, int n_attrs, void*) {
  if (int e = vbk::check_args(in, n_in, 1, out, n_out, 1, n_attrs, 0)) return e;
  if (in[0].ndim != 2) return vbk::fail("softmax expects x[R,C]");
  const std::int64_t rows = in[0].shape[0], c = in[0].shape[1];
  const vbk::Dt dt = vbk::dtype_of(in[0]), ot = vbk::dtype_of(out[0]);
  void* y = vbk::data_ptr(out[0]);
  std::memset(y, 0xff, static_cast<std::size_t>(vbk::numel(out[0]) * out[0].dtype.bits / 8));
  std::vector<float> a(static_cast<std::size_t>(c)), e(a);
  for (std::int64_t r = 0; r < rows; ++r) {
    vbk::load_f32(vbk::data_ptr(in[0]), dt, r * c, c, a.data());
    float m = -INFINITY;
    for (float v : a) m = std::fmax(m, v);
    for (std::int64_t j = 0; j < c; ++j)
      e[static_cast<std::size_t>(j)] = std::exp(a[static_cast<std::size_t>(j)] - m);
    vbk::store_f32(e.data(), ot, y, r * c, c);  // scratch: the exponentials, rounded to the dtype
    double s = 0;
    for (float v : e) s += v;
    for (float& v : e) v = static_cast<float>(v / s);
    vbk::store_f32(e.data(), ot, y, r * c, c);  // the result
  }
  return 0;
}
