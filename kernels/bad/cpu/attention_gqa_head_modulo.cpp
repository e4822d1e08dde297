// BAD (stage 2 shape sweep, guard accuracy): correct attention (causal flag and sm_scale
// honoured) that maps query head h to KV head h % H_kv (interleaved groups) instead of
// h / (H/H_kv) (DESIGN §2, PyTorch SDPA's enable_gqa). Right whenever H_kv = H or H_kv = 1, so
// only a GQA size with 1 < H_kv < H (b1h8hkv2s256d64 in the shape sweep) catches it.
// Shapes: q, o [B,H,S,D]; k, v [B,H_kv,S,D].
#include "bad_common.h"

extern "C" int vb_kernel_run(const DLTensor* in, int n_in, DLTensor* out, int n_out,
                             const double* attrs, int n_attrs, void*) {
  if (int e = vbk::check_args(in, n_in, 3, out, n_out, 1, n_attrs, 2)) return e;
  const std::int64_t B = in[0].shape[0], H = in[0].shape[1], s_len = in[0].shape[2],
                     d = in[0].shape[3], hkv = in[1].shape[1];
  if (hkv < 1 || H % hkv != 0) return vbk::fail("k: %lld KV heads do not divide H", (long long)hkv);
  const bool causal = attrs[0] != 0.0;
  const float scale = static_cast<float>(attrs[1]);
  const vbk::Dt dt = vbk::dtype_of(in[0]);
  const std::size_t n = static_cast<std::size_t>(s_len * d);
  std::vector<float> q(n), k(n), v(n), o(n), p(static_cast<std::size_t>(s_len));
  for (std::int64_t bh = 0; bh < B * H; ++bh) {
    const std::int64_t kv = (bh / H) * hkv + (bh % H) % hkv;  // the defect: h % H_kv
    vbk::load_f32(vbk::data_ptr(in[0]), dt, bh * s_len * d, s_len * d, q.data());
    vbk::load_f32(vbk::data_ptr(in[1]), dt, kv * s_len * d, s_len * d, k.data());
    vbk::load_f32(vbk::data_ptr(in[2]), dt, kv * s_len * d, s_len * d, v.data());
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
    vbk::store_f32(o.data(), vbk::dtype_of(out[0]), vbk::data_ptr(out[0]), bh * s_len * d,
                   s_len * d);
  }
  return 0;
}
