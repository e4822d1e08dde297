// VladBud kernel SDK for C++ (CPU): a shifted exponential for AVX-512 kernels that take
// exp(x − m) over a row (softmax, cross_entropy): e = 2^t with t = x·log2(e) − m·log2(e)
// computed by one FMA, split as t = n + f (n = round(t), |f| <= 1/2), 2^f by a degree-5
// minimax polynomial (max relative error 2.4e-7 in fp32 Horner form), 2^n by vscalefps.
//
// 10 vector operations per 16 elements, against 15 for vbk::exp_f32x16 of (x − m): the row
// passes that take it are compute-bound on this machine's cores next to the DRAM stream.
//
// Accuracy: t carries a rounding error of |t|·2^-24 (tiny for the terms that dominate a sum,
// whose t is near 0), and the rounding of m·log2(e) scales every element of a row by the same
// factor 2^d (exp_shift_error), which cancels in a normalization (softmax) and is subtracted
// from a log-sum (cross_entropy). Only for |m| <= 2^20 (exp_shift_fits), where |d| < 0.09. Special values: x = −inf (finite m) gives 0 (t is clamped at −160, so
// 2^t underflows to 0), NaN gives NaN, x = m = ±inf gives NaN (inf − inf), as exp(x − m) does.
#pragma once

#if defined(__AVX512F__)
#include <immintrin.h>

namespace vbk {

/// Whether exp_shifted_f32x16 may be used for the shift m: |m| <= 2^20. The rounding of
/// m·log2(e) then moves every 2^t by a common factor 2^d, |d| <= 2^20·log2(e)·2^-24 < 0.09 (see
/// exp_shift_error); a larger |m| (up to fp32's max, where m·log2(e) overflows) must subtract
/// first: exp(x − m) by vbk::exp_f32x16.
inline bool exp_shift_fits(float m) { return m >= -0x1p20f && m <= 0x1p20f; }

/// The exact d = m·log2(e)_f32 + exp_shift_const(m) (in double): exp_shifted_f32x16 returns
/// exp(x − m)·2^d up to its rounding, so a log-sum adds −d·ln 2 to be exact.
inline double exp_shift_error(float m) {
  const float c = -(m * 1.44269504088896341f);
  return static_cast<double>(m) * static_cast<double>(1.44269504088896341f) + static_cast<double>(c);
}

/// The constant of exp_shifted_f32x16 for a row maximum m: −m·log2(e) (rounded once).
inline __m512 exp_shift_const(float m) {
  return _mm512_set1_ps(-(m * 1.44269504088896341f));
}

/// 2^t for 16 lanes (t <= ~128): t clamped at −160 (2^t then underflows to 0; NaN stays NaN,
/// as vmaxps returns its second operand), t = n + f, 2^f by the polynomial, 2^n by vscalefps.
inline __m512 exp2_f32x16(__m512 t) {
  t = _mm512_max_ps(_mm512_set1_ps(-160.0f), t);
  const __m512 n = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 f = _mm512_sub_ps(t, n);  // exact, in [-1/2, 1/2]
  __m512 p = _mm512_set1_ps(0.0013276470126584172f);
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.009675540961325169f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.05550713092088699f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.24022120237350464f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.6931469440460205f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0000001192092896f));
  return _mm512_scalef_ps(p, n);
}

/// exp(x − m) for 16 lanes, with c = exp_shift_const(m) (or a vector of per-lane constants).
inline __m512 exp_shifted_f32x16(__m512 x, __m512 c) {
  return exp2_f32x16(_mm512_fmadd_ps(x, _mm512_set1_ps(1.44269504088896341f), c));
}

}  // namespace vbk
#endif
