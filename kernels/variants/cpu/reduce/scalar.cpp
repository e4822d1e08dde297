// Scalar, single-threaded: a sequential fp32 sum per 1024-element chunk added into the row sum,
// loop vectorization disabled.
#include "vb_variant.h"

extern "C" __attribute__((optimize("no-tree-vectorize"))) int vb_kernel_run(
    const DLTensor* in, int n_in, DLTensor* out, int n_out, const double*, int n_attrs, void*) {
  if (int e = vbk::check_args(in, n_in, 1, out, n_out, 1, n_attrs, 0)) return e;
  if (int e = vbk::check_same_dtype(in, n_in, out, n_out)) return e;
  if (in[0].ndim != 2) return vbk::fail("x: expected [M,N]");
  const vbv::i64 M = in[0].shape[0], N = in[0].shape[1];
  if (int e = vbk::check_shape(out[0], "y", {M})) return e;
  const auto dt = vbk::dtype_of(in[0]);
  const void* x = vbk::data_ptr(in[0]);
  float stage[vbv::kChunk];
  for (vbv::i64 r = 0; r < M; ++r) {
    float s = 0;
    vbv::for_chunks(x, dt, r * N, N, stage, [&](const float* p, vbv::i64 n, vbv::i64) {
      float t = 0;
#pragma clang loop vectorize(disable) interleave(disable)
      for (vbv::i64 i = 0; i < n; ++i) t += p[i];
      s += t;
    });
    vbk::store_f32(&s, dt, vbk::data_ptr(out[0]), r, 1);
  }
  return 0;
}
