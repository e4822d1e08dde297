// Helpers shared by the CPU ranking variants (kernels/variants/cpu/<type>/*.cpp): row access in
// fp32 for every dtype, in chunks small enough to stay in L1, so each variant's own loop
// structure (scalar, omp simd, unrolled, Highway, blocked, threaded) is what differs.
#pragma once

#include "vb_kernel.h"

#include <cstdint>

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
