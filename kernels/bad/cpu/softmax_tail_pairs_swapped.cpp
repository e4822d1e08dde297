// BAD (stage 5 edge, guard accuracy): softmax whose 16-bit store packs the row's tail in pairs
// with the two halves swapped, a packing bug that shows only when a row of 8 or more elements
// leaves remainder 2, 4 or 6 modulo 8 (BERT's 30522-logit rows do; before the tail sweep no
// tested length did).
#include "bad_common.h"

extern "C" int vb_kernel_run(const DLTensor* in, int n_in, DLTensor* out, int n_out, const double*,
                             int n_attrs, void*) {
  if (int e = bad::softmax_args(in, n_in, out, n_out, n_attrs)) return e;
  const std::int64_t rows = in[0].shape[0], c = in[0].shape[1], tail = c % 8;
  bad::softmax(in, out, rows);
  const vbk::Dt dt = vbk::dtype_of(out[0]);
  if (dt == vbk::Dt::F32 || c < 8 || tail % 2 != 0) return 0;
  auto* y = static_cast<std::uint16_t*>(vbk::data_ptr(out[0]));
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = c - tail; j + 1 < c; j += 2) std::swap(y[r * c + j], y[r * c + j + 1]);
  return 0;
}
