// BAD (issue 18 class 10): writes the uniform distribution 1/C in every row: a constant output
// with the right row sums and the right scale, within atol = rtol = 1e-2 of softmax wherever
// the inputs are nearly equal or the rows long. The fp64 oracle's relative error fails it.
#include "bad_common.h"

extern "C" int vb_kernel_run(const DLTensor* in, int n_in, DLTensor* out, int n_out, const double*,
                             int n_attrs, void*) {
  if (int e = bad::softmax_args(in, n_in, out, n_out, n_attrs)) return e;
  const std::int64_t rows = in[0].shape[0], c = in[0].shape[1];
  std::vector<float> u(static_cast<std::size_t>(c), 1.0f / static_cast<float>(c));
  for (std::int64_t r = 0; r < rows; ++r)
    vbk::store_f32(u.data(), vbk::dtype_of(out[0]), vbk::data_ptr(out[0]), r * c, c);
  return 0;
}
