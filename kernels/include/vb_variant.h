// Helpers shared by the CPU ranking variants (kernels/variants/cpu/<type>/*.cpp): row access in
// fp32 for every dtype, in chunks small enough to stay in L1, and each type's ABI checks
// (check_rows, check_attention, check_mlp, check_rope, check_cross_entropy), so each variant's
// own loop structure (scalar, omp simd, unrolled, Highway, blocked, threaded) is what differs.
#pragma once

#include "vb_kernel.h"

#include <cmath>
#include <cstdint>
#include <vector>

namespace vbv {

using i64 = std::int64_t;

/// Elements per fp32 staging chunk for 16-bit rows (4 KiB: a fraction of any L1D).
inline constexpr i64 kChunk = 1024;

/// Calls f(const float* p, i64 n, i64 offset) over the row [off, off+len) of `x` (dtype dt) in
/// chunks of at most kChunk elements: in place for fp32, else converted into `stage` (kChunk
/// floats). A per-chunk partial sum keeps fp32 accumulation error at ~(kChunk + len/kChunk) ulp
/// instead of ~len ulp for million-element rows.
template <class F>
inline void for_chunks(const void* x, vbk::Dt dt, i64 off, i64 len, float* stage, F&& f) {
  for (i64 i = 0; i < len; i += kChunk) {
    const i64 n = len - i < kChunk ? len - i : kChunk;
    if (dt == vbk::Dt::F32) {
      f(static_cast<const float*>(x) + off + i, n, i);
    } else {
      vbk::load_f32(x, dt, off + i, n, stage);
      f(stage, n, i);
    }
  }
}

}  // namespace vbv

namespace vbv {

/// The whole tensor `t` as fp32: its own data for fp32, else converted into `s` (numel floats).
/// nullptr when the scratch allocation fails.
inline const float* as_f32(const DLTensor& t, vbk::Scratch& s) {
  const vbk::Dt dt = vbk::dtype_of(t);
  if (dt == vbk::Dt::F32) return static_cast<const float*>(vbk::data_ptr(t));
  const i64 n = vbk::numel(t);
  float* p = s.alloc(n);
  if (!p) return nullptr;
  vbk::load_f32(vbk::data_ptr(t), dt, 0, n, p);
  return p;
}

/// Checks the common row-wise ABI: one [R,C] input (plus `extra` 1-D [C] inputs), one [R,C]
/// output, `n_attr` attributes, all of one dtype. Sets R, C.
inline int check_rows(const DLTensor* in, int n_in, int want_in, DLTensor* out, int n_out,
                      int n_attrs, int want_attrs, i64& R, i64& C) {
  if (int e = vbk::check_args(in, n_in, want_in, out, n_out, 1, n_attrs, want_attrs)) return e;
  if (int e = vbk::check_same_dtype(in, n_in, out, n_out)) return e;
  if (in[0].ndim != 2) return vbk::fail("x: expected 2 dimensions, got %d", in[0].ndim);
  R = in[0].shape[0];
  C = in[0].shape[1];
  for (int i = 1; i < want_in; ++i)
    if (int e = vbk::check_shape(in[i], "weight", {C})) return e;
  return vbk::check_shape(out[0], "y", {R, C});
}

}  // namespace vbv

namespace vbv {

/// flash_attention's ABI (DESIGN §2): q, o [B,H,S,D] and k, v [B,Hkv,S,D] of one dtype, Hkv
/// (k.shape[1]) >= 1 dividing H (grouped-query attention: query head h reads KV head
/// h / (H/Hkv)); attributes {causal (0 or 1), sm_scale (finite)}.
struct AttentionArgs {
  i64 B = 0, H = 0, Hkv = 0, S = 0, D = 0;
  bool causal = false;
  float scale = 0;
  vbk::Dt dt = vbk::Dt::F32;
  /// Query heads per KV head, H / Hkv: flattened query head bh = b·H + h reads flattened KV
  /// head bh / group() = b·Hkv + h / group() (exact because group() divides H).
  i64 group() const { return H / Hkv; }
};

/// Checks flash_attention's arguments and fills `a`; 0, or 1 with vbk::fail's message.
inline int check_attention(const DLTensor* in, int n_in, DLTensor* out, int n_out,
                           const double* attrs, int n_attrs, AttentionArgs& a) {
  if (int e = vbk::check_args(in, n_in, 3, out, n_out, 1, n_attrs, 2)) return e;
  if (int e = vbk::check_same_dtype(in, n_in, out, n_out)) return e;
  if (in[0].ndim != 4) return vbk::fail("q: expected 4 dimensions [B,H,S,D], got %d", in[0].ndim);
  if (in[1].ndim != 4) return vbk::fail("k: expected 4 dimensions [B,H_kv,S,D], got %d", in[1].ndim);
  a.B = in[0].shape[0], a.H = in[0].shape[1], a.S = in[0].shape[2], a.D = in[0].shape[3];
  a.Hkv = in[1].shape[1];
  if (int e = vbk::check_shape(in[0], "q", {a.B, a.H, a.S, a.D})) return e;
  if (int e = vbk::check_shape(in[1], "k", {a.B, a.Hkv, a.S, a.D})) return e;
  if (int e = vbk::check_shape(in[2], "v", {a.B, a.Hkv, a.S, a.D})) return e;
  if (int e = vbk::check_shape(out[0], "o", {a.B, a.H, a.S, a.D})) return e;
  if (a.Hkv < 1 || a.H % a.Hkv != 0)
    return vbk::fail("k, v: %lld KV heads (dim 1) must be >= 1 and divide the %lld query heads of "
                     "q (GQA: query head h reads KV head h / (H/H_kv))",
                     (long long)a.Hkv, (long long)a.H);
  if (attrs[0] != 0.0 && attrs[0] != 1.0) return vbk::fail("causal must be 0 or 1 (got %g)", attrs[0]);
  a.causal = attrs[0] != 0.0;
  a.scale = static_cast<float>(attrs[1]);
  if (!std::isfinite(a.scale)) return vbk::fail("sm_scale must be finite (got %g)", attrs[1]);
  a.dt = vbk::dtype_of(in[0]);
  return 0;
}

/// fused_mlp's ABI: x [B,D], w_gate [H,D], w_up [H,D], w_down [D,H] -> y [B,D], one dtype, no
/// attributes.
struct MlpArgs {
  i64 B = 0, D = 0, H = 0;
  vbk::Dt dt = vbk::Dt::F32;
};

/// Checks fused_mlp's arguments and fills `a`; 0, or 1 with vbk::fail's message.
inline int check_mlp(const DLTensor* in, int n_in, DLTensor* out, int n_out, int n_attrs,
                     MlpArgs& a) {
  if (int e = vbk::check_args(in, n_in, 4, out, n_out, 1, n_attrs, 0)) return e;
  if (int e = vbk::check_same_dtype(in, n_in, out, n_out)) return e;
  if (in[0].ndim != 2) return vbk::fail("x: expected 2 dimensions [B,D], got %d", in[0].ndim);
  if (in[1].ndim != 2) return vbk::fail("w_gate: expected 2 dimensions [H,D], got %d", in[1].ndim);
  a.B = in[0].shape[0], a.D = in[0].shape[1], a.H = in[1].shape[0];
  if (int e = vbk::check_shape(in[0], "x", {a.B, a.D})) return e;
  if (int e = vbk::check_shape(in[1], "w_gate", {a.H, a.D})) return e;
  if (int e = vbk::check_shape(in[2], "w_up", {a.H, a.D})) return e;
  if (int e = vbk::check_shape(in[3], "w_down", {a.D, a.H})) return e;
  if (int e = vbk::check_shape(out[0], "y", {a.B, a.D})) return e;
  a.dt = vbk::dtype_of(in[0]);
  return 0;
}

/// rotary_embedding's ABI: x [B,H,S,D] (D even), cos and sin [S,D/2] -> y [B,H,S,D], one
/// dtype; attribute {interleaved (0 or 1)}.
struct RopeArgs {
  i64 B = 0, H = 0, S = 0, D = 0;
  bool interleaved = false;
  vbk::Dt dt = vbk::Dt::F32;
};

/// Checks rotary_embedding's arguments and fills `a`; 0, or 1 with vbk::fail's message.
inline int check_rope(const DLTensor* in, int n_in, DLTensor* out, int n_out,
                      const double* attrs, int n_attrs, RopeArgs& a) {
  if (int e = vbk::check_args(in, n_in, 3, out, n_out, 1, n_attrs, 1)) return e;
  if (int e = vbk::check_same_dtype(in, n_in, out, n_out)) return e;
  if (in[0].ndim != 4) return vbk::fail("x: expected 4 dimensions [B,H,S,D], got %d", in[0].ndim);
  a.B = in[0].shape[0], a.H = in[0].shape[1], a.S = in[0].shape[2], a.D = in[0].shape[3];
  if (a.D % 2 != 0) return vbk::fail("x: head dim D = %lld must be even", (long long)a.D);
  const i64 h = a.D / 2;
  if (int e = vbk::check_shape(in[0], "x", {a.B, a.H, a.S, a.D})) return e;
  if (int e = vbk::check_shape(in[1], "cos", {a.S, h})) return e;
  if (int e = vbk::check_shape(in[2], "sin", {a.S, h})) return e;
  if (int e = vbk::check_shape(out[0], "y", {a.B, a.H, a.S, a.D})) return e;
  if (attrs[0] != 0.0 && attrs[0] != 1.0) return vbk::fail("interleaved must be 0 or 1 (got %g)", attrs[0]);
  a.interleaved = attrs[0] != 0.0;
  a.dt = vbk::dtype_of(in[0]);
  return 0;
}

/// cross_entropy's ABI: logits [B,V], targets [B] int64 -> loss (0-d fp32); attribute
/// {ignore_index (an integer)}. `rows` gets the rows whose target is not ignore_index, in order.
struct CrossEntropyArgs {
  i64 B = 0, V = 0, ignore = -100;
  vbk::Dt dt = vbk::Dt::F32;
  std::vector<i64> rows;
};

/// Checks cross_entropy's arguments and fills `a`; a target outside [0, V) that is not
/// ignore_index is an error (named by row). 0, or 1 with vbk::fail's message.
inline int check_cross_entropy(const DLTensor* in, int n_in, DLTensor* out, int n_out,
                               const double* attrs, int n_attrs, CrossEntropyArgs& a) {
  if (int e = vbk::check_args(in, n_in, 2, out, n_out, 1, n_attrs, 1, 0x2u)) return e;
  if (vbk::dtype_of(out[0]) != vbk::Dt::F32) return vbk::fail("loss: expected fp32 output");
  if (in[0].ndim != 2) return vbk::fail("logits: expected 2 dimensions [B,V], got %d", in[0].ndim);
  a.B = in[0].shape[0], a.V = in[0].shape[1];
  if (int e = vbk::check_shape(in[0], "logits", {a.B, a.V})) return e;
  if (int e = vbk::check_shape(in[1], "targets", {a.B})) return e;
  if (int e = vbk::check_shape(out[0], "loss", {})) return e;
  if (!(std::fabs(attrs[0]) < 9.0e18) || attrs[0] != std::floor(attrs[0]))
    return vbk::fail("ignore_index must be an integer (got %g)", attrs[0]);
  a.ignore = static_cast<i64>(attrs[0]);
  a.dt = vbk::dtype_of(in[0]);
  const i64* tgt = static_cast<const i64*>(vbk::data_ptr(in[1]));
  try {
    a.rows.clear();
    a.rows.reserve(static_cast<std::size_t>(a.B));
  } catch (...) {
    return vbk::fail("out of memory (row list)");
  }
  for (i64 r = 0; r < a.B; ++r) {
    const i64 t = tgt[r];
    if (t == a.ignore) continue;
    if (t < 0 || t >= a.V)
      return vbk::fail("targets[%lld] = %lld is outside [0, %lld) and is not ignore_index",
                       (long long)r, (long long)t, (long long)a.V);
    a.rows.push_back(r);
  }
  return 0;
}

}  // namespace vbv
