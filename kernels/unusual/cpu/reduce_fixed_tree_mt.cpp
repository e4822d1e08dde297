// UNUSUAL but correct: a multithreaded row sum whose result does not depend on the thread
// count or scheduling -- each row is cut into fixed 4096-element blocks (summed in double by
// whichever OpenMP thread takes them), and the block sums are combined in a fixed pairwise
// tree in double. Long rows are split across threads, yet every call gives the same bits.
// Must pass every stage, determinism included.
#include "vb_kernel.h"

#include <vector>

extern "C" int vb_kernel_run(const DLTensor* in, int n_in, DLTensor* out, int n_out,
                             const double*, int n_attrs, void*) {
  if (int e = vbk::check_args(in, n_in, 1, out, n_out, 1, n_attrs, 0)) return e;
  const std::int64_t rows = in[0].shape[0], n = in[0].shape[1];
  constexpr std::int64_t kBlock = 4096;
  const std::int64_t blocks = (n + kBlock - 1) / kBlock;
  const vbk::Dt dt = vbk::dtype_of(in[0]);
  std::vector<double> part(static_cast<std::size_t>(rows * blocks));
#pragma omp parallel for schedule(dynamic, 1)
  for (std::int64_t k = 0; k < rows * blocks; ++k) {
    const std::int64_t r = k / blocks, b0 = (k % blocks) * kBlock;
    const std::int64_t len = n - b0 < kBlock ? n - b0 : kBlock;
    float x[kBlock];
    vbk::load_f32(vbk::data_ptr(in[0]), dt, r * n + b0, len, x);
    double s = 0;
    for (std::int64_t j = 0; j < len; ++j) s += x[j];
    part[static_cast<std::size_t>(k)] = s;
  }
  for (std::int64_t r = 0; r < rows; ++r) {
    double* p = part.data() + r * blocks;
    for (std::int64_t width = 1; width < blocks; width *= 2)
      for (std::int64_t i = 0; i + width < blocks; i += 2 * width) p[i] += p[i + width];
    const float y = static_cast<float>(blocks ? p[0] : 0.0);
    vbk::store_f32(&y, vbk::dtype_of(out[0]), vbk::data_ptr(out[0]), r, 1);
  }
  return 0;
}
