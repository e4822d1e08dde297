// VladBud kernel SDK for C++ (CPU) kernel sources: the kernel ABI of DESIGN §3 plus small,
// vectorizable helpers for dtype conversion and error reporting.
//
// A kernel source is ONE translation unit that includes this header and defines
//
//   extern "C" int vb_kernel_run(const DLTensor* inputs, int n_inputs,
//                                DLTensor* outputs, int n_outputs,
//                                const double* attrs, int n_attrs, void* stream);
//
// returning 0 on success or vbk::fail("...") on error. The header defines
// vb_kernel_last_error() for it. Inputs, outputs and attributes come in the order fixed by the
// kernel type (src/kernels/<type>.cpp, `vladbud bench --kernel TYPE --help-abi`). Tensors are
// dense, row-major, on the CPU (device kDLCPU). The kernel must not allocate its outputs, keep
// state between calls, write outside its outputs, or modify its inputs or the DLTensor
// descriptors: the evaluator checks all of this.
#pragma once

#include <dlpack/dlpack.h>

#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>

extern "C" int vb_kernel_run(const DLTensor* inputs, int n_inputs, DLTensor* outputs,
                             int n_outputs, const double* attrs, int n_attrs, void* stream);
extern "C" const char* vb_kernel_last_error(void);

namespace vbk {

/// Element types the kernel types use.
enum class Dt { F16, BF16, F32, I64, Other };

/// The element type of a DLTensor (single lane only).
inline Dt dtype_of(const DLTensor& t) {
  if (t.dtype.lanes != 1) return Dt::Other;
  if (t.dtype.code == kDLFloat && t.dtype.bits == 16) return Dt::F16;
  if (t.dtype.code == kDLBfloat && t.dtype.bits == 16) return Dt::BF16;
  if (t.dtype.code == kDLFloat && t.dtype.bits == 32) return Dt::F32;
  if (t.dtype.code == kDLInt && t.dtype.bits == 64) return Dt::I64;
  return Dt::Other;
}

/// Number of elements (1 for a 0-d tensor).
inline std::int64_t numel(const DLTensor& t) {
  std::int64_t n = 1;
  for (int i = 0; i < t.ndim; ++i) n *= t.shape[i];
  return n;
}

/// Base pointer of the tensor's data (data + byte_offset).
inline void* data_ptr(const DLTensor& t) {
  return static_cast<char*>(t.data) + t.byte_offset;
}

/// Thread-local message buffer behind vb_kernel_last_error().
inline char* error_buffer() {
  static thread_local char buf[512] = {0};
  return buf;
}

/// Records a printf-style error message and returns 1 (use: `return vbk::fail("...", ...);`).
inline int fail(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(error_buffer(), 512, fmt, ap);
  va_end(ap);
  return 1;
}

// ---- scalar conversions (round to nearest even) ---------------------------------------------

inline float bits_to_float(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline std::uint32_t float_to_bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

/// bf16 -> float (exact).
inline float bf16_to_float(std::uint16_t b) { return bits_to_float(static_cast<std::uint32_t>(b) << 16); }

/// float -> bf16, round to nearest even; NaN stays a quiet NaN.
inline std::uint16_t float_to_bf16(float f) {
  const std::uint32_t u = float_to_bits(f);
  const std::uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const std::uint32_t nan = (u >> 16) | 0x40u;
  return static_cast<std::uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
}

#if defined(__FLT16_MAX__)
#define VBK_HAVE_FLOAT16 1
using half_t = _Float16;  // compiler-native binary16: conversions are RNE and vectorize
#endif

/// fp16 bits -> float (exact).
inline float half_to_float(std::uint16_t h) {
#if defined(VBK_HAVE_FLOAT16)
  half_t x;
  std::memcpy(&x, &h, 2);
  return static_cast<float>(x);
#else
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  if (exp == 0x1f) return bits_to_float(sign | 0x7f800000u | (man << 13));
  if (exp == 0) {
    const float v = static_cast<float>(man) * 5.9604644775390625e-8f;  // 2^-24
    return sign ? -v : v;
  }
  return bits_to_float(sign | ((exp + 112u) << 23) | (man << 13));
#endif
}

/// float -> fp16 bits, round to nearest even, overflow to inf.
inline std::uint16_t float_to_half(float f) {
#if defined(VBK_HAVE_FLOAT16)
  half_t x = static_cast<half_t>(f);
  std::uint16_t h;
  std::memcpy(&h, &x, 2);
  return h;
#else
  const std::uint32_t u = float_to_bits(f);
  const std::uint16_t sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
  const std::uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u);
  if (a >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // >= 65520 -> inf
  if (a < 0x38800000u) {                                                    // < 2^-14: subnormal
    const float v = bits_to_float(a) * 16777216.0f;                         // * 2^24
    return static_cast<std::uint16_t>(sign | static_cast<std::uint16_t>(std::nearbyint(v)));
  }
  const std::uint32_t r = a + 0xfffu + ((a >> 13) & 1u);
  return static_cast<std::uint16_t>(sign | ((r - 0x38000000u) >> 13));
#endif
}

// ---- span conversions (the loops the compiler vectorizes) -----------------------------------

/// Converts n elements of `src` (dtype dt: F16, BF16 or F32) starting at element `offset`
/// to float in `dst`.
inline void load_f32(const void* src, Dt dt, std::int64_t offset, std::int64_t n,
                     float* __restrict dst) {
  if (dt == Dt::F32) {
    std::memcpy(dst, static_cast<const float*>(src) + offset, static_cast<std::size_t>(n) * 4);
  } else if (dt == Dt::BF16) {
    const std::uint16_t* __restrict s = static_cast<const std::uint16_t*>(src) + offset;
#pragma omp simd
    for (std::int64_t i = 0; i < n; ++i) dst[i] = bf16_to_float(s[i]);
  } else {
#if defined(VBK_HAVE_FLOAT16)
    const half_t* __restrict s = static_cast<const half_t*>(src) + offset;
#pragma omp simd
    for (std::int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(s[i]);
#else
    const std::uint16_t* s = static_cast<const std::uint16_t*>(src) + offset;
    for (std::int64_t i = 0; i < n; ++i) dst[i] = half_to_float(s[i]);
#endif
  }
}

/// Converts n floats from `src` to dtype dt (RNE) into `dst` starting at element `offset`.
inline void store_f32(const float* __restrict src, Dt dt, void* dst, std::int64_t offset,
                      std::int64_t n) {
  if (dt == Dt::F32) {
    std::memcpy(static_cast<float*>(dst) + offset, src, static_cast<std::size_t>(n) * 4);
  } else if (dt == Dt::BF16) {
    std::uint16_t* __restrict d = static_cast<std::uint16_t*>(dst) + offset;
#pragma omp simd
    for (std::int64_t i = 0; i < n; ++i) d[i] = float_to_bf16(src[i]);
  } else {
#if defined(VBK_HAVE_FLOAT16)
    half_t* __restrict d = static_cast<half_t*>(dst) + offset;
#pragma omp simd
    for (std::int64_t i = 0; i < n; ++i) d[i] = static_cast<half_t>(src[i]);
#else
    std::uint16_t* d = static_cast<std::uint16_t*>(dst) + offset;
    for (std::int64_t i = 0; i < n; ++i) d[i] = float_to_half(src[i]);
#endif
  }
}

/// Checks the common preconditions: argument counts, CPU device, float dtypes F16/BF16/F32
/// for every tensor except those flagged in `int_inputs_mask` (bit i = input i is int64).
/// Returns 0 or a vbk::fail() code.
inline int check_args(const DLTensor* in, int n_in, int want_in, DLTensor* out, int n_out,
                      int want_out, int n_attrs, int want_attrs, unsigned int_inputs_mask = 0) {
  if (n_in != want_in) return fail("expected %d inputs, got %d", want_in, n_in);
  if (n_out != want_out) return fail("expected %d outputs, got %d", want_out, n_out);
  if (n_attrs < want_attrs) return fail("expected %d attributes, got %d", want_attrs, n_attrs);
  for (int i = 0; i < n_in; ++i) {
    if (in[i].device.device_type != kDLCPU) return fail("input %d is not on the CPU", i);
    const Dt d = dtype_of(in[i]);
    const bool want_int = (int_inputs_mask >> i) & 1u;
    if (want_int ? d != Dt::I64 : (d == Dt::I64 || d == Dt::Other))
      return fail("input %d has an unsupported dtype (code %d, %d bits)", i, in[i].dtype.code,
                  in[i].dtype.bits);
  }
  for (int i = 0; i < n_out; ++i) {
    if (out[i].device.device_type != kDLCPU) return fail("output %d is not on the CPU", i);
    const Dt d = dtype_of(out[i]);
    if (d == Dt::I64 || d == Dt::Other) return fail("output %d has an unsupported dtype", i);
  }
  return 0;
}

}  // namespace vbk

#ifndef VBK_NO_LAST_ERROR_IMPL
extern "C" const char* vb_kernel_last_error(void) { return vbk::error_buffer(); }
#endif
