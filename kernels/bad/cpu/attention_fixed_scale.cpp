// BAD (stage 2 shape sweep, guard accuracy): correct attention (causal flag honoured) except
// that the score scale is always 1/sqrt(D) instead of attrs[1] -- right at the default, wrong
// for T5 (no scaling) or any custom sm_scale. K/V may have fewer heads (GQA: q [B,H,S,D],
// k/v [B,H_kv,S,D], query head h reads KV head h / (H/H_kv)), so that only the scale is wrong.
#include "bad_common.h"

extern "C" int vb_kernel_run(const DLTensor* in, int n_in, DLTensor* out, int n_out,
                             const double* attrs, int n_attrs, void*) {
  if (int e = vbk::check_args(in, n_in, 3, out, n_out, 1, n_attrs, 2)) return e;
  const std::int64_t bh = in[0].shape[0] * in[0].shape[1], s_len = in[0].shape[2],
                     d = in[0].shape[3];
  const std::int64_t group = in[1].shape[1] > 0 ? in[0].shape[1] / in[1].shape[1] : 1;
  const bool causal = attrs[0] != 0.0;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  const vbk::Dt dt = vbk::dtype_of(in[0]);
  const std::size_t n = static_cast<std::size_t>(s_len * d);
  std::vector<float> q(n), k(n), v(n), o(n), p(static_cast<std::size_t>(s_len));
  for (std::int64_t h = 0; h < bh; ++h) {
    vbk::load_f32(vbk::data_ptr(in[0]), dt, h * s_len * d, s_len * d, q.data());
    vbk::load_f32(vbk::data_ptr(in[1]), dt, (h / group) * s_len * d, s_len * d, k.data());
    vbk::load_f32(vbk::data_ptr(in[2]), dt, (h / group) * s_len * d, s_len * d, v.data());
    for (std::int64_t i = 0; i < s_len; ++i) {
      const std::int64_t nk = causal ? i + 1 : s_len;
      float m = -INFINITY;
      for (std::int64_t j = 0; j < nk; ++j) {
        float acc = 0;
        for (std::int64_t c = 0; c < d; ++c)
          acc += q[static_cast<std::size_t>(i * d + c)] * k[static_cast<std::size_t>(j * d + c)];
        p[static_cast<std::size_t>(j)] = acc * scale;
        m = std::fmax(m, acc * scale);
      }
      float sum = 0;
      for (std::int64_t j = 0; j < nk; ++j)
        sum += (p[static_cast<std::size_t>(j)] = std::exp(p[static_cast<std::size_t>(j)] - m));
      for (std::int64_t c = 0; c < d; ++c) {
        float acc = 0;
        for (std::int64_t j = 0; j < nk; ++j)
          acc += p[static_cast<std::size_t>(j)] * v[static_cast<std::size_t>(j * d + c)];
        o[static_cast<std::size_t>(i * d + c)] = acc / sum;
      }
    }
    vbk::store_f32(o.data(), vbk::dtype_of(out[0]), vbk::data_ptr(out[0]), h * s_len * d,
                   s_len * d);
  }
  return 0;
}
