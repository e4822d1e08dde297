// UNUSUAL but correct: softmax that runs every call on an OpenMP team of 300 threads (rows dealt
// round-robin), as OMP_NUM_THREADS=300 or a 300-thread host would. Correct, only oversubscribed:
// the runner's sandbox must leave room for such a team (issue 18: a process limit of 256 made
// libgomp abort). Must pass every stage.
#include "vb_kernel.h"

#include <cmath>
#include <vector>

#include <omp.h>

extern "C" int vb_kernel_run(const DLTensor* in, int n_in, DLTensor* out, int n_out,
                             const double*, int n_attrs, void*) {
  if (int e = vbk::check_args(in, n_in, 1, out, n_out, 1, n_attrs, 0)) return e;
  const std::int64_t rows = in[0].shape[0], c = in[0].shape[1];
  const vbk::Dt dt = vbk::dtype_of(in[0]);
  int team = 0;
#pragma omp parallel num_threads(300)
  {
#pragma omp single
    team = omp_get_num_threads();
    std::vector<float> x(static_cast<std::size_t>(c));
    for (std::int64_t r = omp_get_thread_num(); r < rows; r += omp_get_num_threads()) {
      vbk::load_f32(vbk::data_ptr(in[0]), dt, r * c, c, x.data());
      float m = -INFINITY, s = 0;
      for (float v : x) m = std::fmax(m, v);
      for (float& v : x) s += (v = std::exp(v - m));
      for (float& v : x) v /= s;
      vbk::store_f32(x.data(), vbk::dtype_of(out[0]), vbk::data_ptr(out[0]), r * c, c);
    }
  }
  if (team != 300) return vbk::fail("expected a team of 300 threads, got %d", team);
  return 0;
}
