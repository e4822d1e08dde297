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
// kernel type (src/kernels/<type>.cpp, `vladbud bench --kernel TYPE --abi`). Tensors are
// dense, row-major, on the CPU (device kDLCPU). The kernel must not allocate its outputs, keep
// state between calls, write outside its outputs, or modify its inputs or the DLTensor
// descriptors: the evaluator checks all of this.
#pragma once

#include <dlpack/dlpack.h>

#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__F16C__) || defined(__AVX__))
#include <immintrin.h>
#endif
#if defined(__F16C__) && (defined(__x86_64__) || defined(__i386__))
#define VBK_HAVE_F16C 1
#endif

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

#if defined(__aarch64__) && defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13
// GCC < 13 has no _Float16 in C++ on AArch64 (it defines __FLT16_MAX__ all the same); its
// __fp16 is the same IEEE binary16 storage type, with RNE conversions that vectorize.
#define VBK_HAVE_FLOAT16 1
using half_t = __fp16;
#elif defined(__FLT16_MAX__)
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

/// Branchless fp16 bits -> float (exact, same results as half_to_float); vectorizes as a loop
/// body on any target.
inline float half_to_float_branchless(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t em = static_cast<std::uint32_t>(h & 0x7fffu) << 13;  // exponent+mantissa
  const std::uint32_t e = em & 0x0f800000u;
  const std::uint32_t normal = em + 0x38000000u;  // rebias 15 -> 127
  const std::uint32_t infnan = em + 0x70000000u;  // exponent 31 -> 255
  const float sub = bits_to_float(em + 0x38800000u) - bits_to_float(0x38800000u);  // 0.m * 2^-14
  const std::uint32_t r = e == 0x0f800000u ? infnan : (e == 0 ? float_to_bits(sub) : normal);
  return bits_to_float(r | sign);
}

/// Branchless float -> fp16 bits, round to nearest even, overflow to inf, NaN -> quiet NaN
/// (same results as float_to_half up to NaN payloads); vectorizes as a loop body on any target.
inline std::uint16_t float_to_half_branchless(float f) {
  std::uint32_t u = float_to_bits(f);
  const std::uint32_t sign = (u >> 16) & 0x8000u;
  u &= 0x7fffffffu;
  const std::uint32_t magic = ((127 - 15) + (23 - 10) + 1) << 23;  // FPU rounds subnormals
  const std::uint32_t sub = float_to_bits(bits_to_float(u) + bits_to_float(magic)) - magic;
  const std::uint32_t nrm = (u + 0xc8000fffu + ((u >> 13) & 1u)) >> 13;  // rebias + RNE
  std::uint32_t r = u < 0x38800000u ? sub : nrm;
  r = u >= 0x477ff000u ? 0x7c00u : r;
  r = u > 0x7f800000u ? 0x7e00u : r;
  return static_cast<std::uint16_t>(r | sign);
}

// ---- math ----------------------------------------------------------------------------------

/// exp(x) in fp32: Cody-Waite reduction, degree-7 polynomial (cephes expf, ~1 ulp), 2^n applied
/// through the exponent bits. Branchless so that loops calling it vectorize. x < -86 (where
/// exp < 5e-38) and -inf give 0; x > 88.7228 (overflow) and +inf give +inf; NaN gives NaN.
inline float exp_f32(float x) {
#if defined(__x86_64__) || defined(__i386__)
  // Float compare + select: AVX-512/AVX2 compare and blend. NaN passes the clamp unchanged.
  const float xc = x < -86.0f ? -86.0f : (x > 88.72283935546875f ? 88.72283935546875f : x);
#else
  // GCC will not if-convert float compares guarding float math on AArch64 (-ftrapping-math):
  // compare the bit patterns as integers and select with bit masks instead.
  const std::uint32_t ux = float_to_bits(x);
  const std::uint32_t m_hi = 0u - static_cast<std::uint32_t>(static_cast<std::int32_t>(ux) > 0x42b17218);  // > 88.7228, +inf, +NaN
  const std::uint32_t m_lo = 0u - static_cast<std::uint32_t>(ux > 0xc2ac0000u);  // < -86, -inf, -NaN
  const float xc = bits_to_float((ux & ~(m_hi | m_lo)) | (0x42b17218u & m_hi) | (0xc2ac0000u & m_lo));
#endif
  const float magic = 12582912.0f;  // 1.5 * 2^23: adding it rounds to the nearest integer
  const float t = xc * 1.44269504088896341f + magic;
  const float n = t - magic;  // n in [-124, 128]
  float r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  // p·2^n = (p·2^(n-1))·2: the low bits of t hold n (magic's low 9 bits are 0), so t << 23 is
  // n << 23; with p in [0.7, 1.42], n - 1 in [-125, 127] keeps the exponent field normal, the final ·2 may overflow.
  const float y = bits_to_float(float_to_bits(p) + (float_to_bits(t) << 23) - 0x00800000u) * 2.0f;
#if defined(__x86_64__) || defined(__i386__)
  float z = x < -86.0f ? 0.0f : y;
  z = x > 88.72283935546875f ? __builtin_inff() : z;
  return x != x ? x : z;
#else
  const std::uint32_t m_nan = 0u - static_cast<std::uint32_t>((ux & 0x7fffffffu) > 0x7f800000u);
  std::uint32_t b = float_to_bits(y);
  b = (b & ~(m_hi | m_lo)) | (0x7f800000u & m_hi);  // +inf above, 0 below the range
  return bits_to_float((b & ~m_nan) | ((ux | 0x00400000u) & m_nan));
#endif
}

#if defined(__AVX512F__)
/// exp of 16 fp32 lanes with AVX-512, for loops written with intrinsics where exp dominates
/// (softmax, cross_entropy: ~1.5x the throughput of the vectorized exp_f32 here, whose range
/// selects cost more than its polynomial). Same reduction and polynomial as exp_f32 (Cody-Waite
/// by ln 2 in two parts, cephes' degree-7 polynomial, ~1 ulp); 2^n is applied by vscalefps,
/// which rounds to the subnormals below 2^-126 (exp_f32 flushes x < -86 to 0) and overflows to
/// +inf. The input is clamped to [-110, 89] first (exp(-110) rounds to 0, exp(89) to +inf), so
/// -inf gives 0 and +inf gives +inf; NaN stays NaN (vmaxps/vminps return their second operand
/// when one is NaN).
inline __m512 exp_f32x16(__m512 x) {
  x = _mm512_max_ps(_mm512_set1_ps(-110.0f), x);
  x = _mm512_min_ps(_mm512_set1_ps(89.0f), x);
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_scalef_ps(p, n);
}
#endif

// ---- span conversions (the loops the compiler vectorizes) -----------------------------------

#if defined(VBK_HAVE_F16C) && defined(__GNUC__) && !defined(__clang__)
// GCC 12 false positive inside its own AVX-512 conversion intrinsics (GCC bug 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

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
#if defined(VBK_HAVE_F16C)
    // x86: hardware conversion (GCC 12 does not vectorize _Float16 <-> float loops).
    const std::uint16_t* s = static_cast<const std::uint16_t*>(src) + offset;
    std::int64_t i = 0;
#if defined(__AVX512F__)
    for (; i + 16 <= n; i += 16)
      _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i))));
#endif
    for (; i + 8 <= n; i += 8)
      _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i))));
    for (; i < n; ++i) dst[i] = half_to_float(s[i]);
#elif defined(VBK_HAVE_FLOAT16) && defined(__aarch64__)
    const half_t* __restrict s = static_cast<const half_t*>(src) + offset;
#pragma omp simd
    for (std::int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(s[i]);
#else
    const std::uint16_t* __restrict s = static_cast<const std::uint16_t*>(src) + offset;
#pragma omp simd
    for (std::int64_t i = 0; i < n; ++i) dst[i] = half_to_float_branchless(s[i]);
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
#if defined(VBK_HAVE_F16C)
    std::uint16_t* d = static_cast<std::uint16_t*>(dst) + offset;
    std::int64_t i = 0;
#if defined(__AVX512F__)
    for (; i + 16 <= n; i += 16)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i),
                          _mm512_cvtps_ph(_mm512_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#endif
    for (; i + 8 <= n; i += 8)
      _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i),
                       _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    for (; i < n; ++i) d[i] = float_to_half(src[i]);
#elif defined(VBK_HAVE_FLOAT16) && defined(__aarch64__)
    half_t* __restrict d = static_cast<half_t*>(dst) + offset;
#pragma omp simd
    for (std::int64_t i = 0; i < n; ++i) d[i] = static_cast<half_t>(src[i]);
#else
    std::uint16_t* __restrict d = static_cast<std::uint16_t*>(dst) + offset;
#pragma omp simd
    for (std::int64_t i = 0; i < n; ++i) d[i] = float_to_half_branchless(src[i]);
#endif
  }
}

#if defined(VBK_HAVE_F16C) && defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

// ---- streaming (non-temporal) stores ---------------------------------------------------------

#if defined(VBK_HAVE_F16C) && defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC bug 105593, as above
#endif

/// Copies `bytes` from src to dst, with non-temporal stores on x86 (AVX-512 or AVX) for the
/// 64-byte-aligned part of dst: for large outputs that are written once and not read back
/// soon, this skips the read-for-ownership of every destination cache line (a plain store
/// moves each output line twice over the memory bus). Falls back to memcpy elsewhere and for
/// copies under 1 KiB. After the last streaming copy of a thread call stream_fence().
inline void stream_copy(void* dst, const void* src, std::size_t bytes) {
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__AVX512F__) || defined(__AVX__))
  if (bytes >= 1024) {
    char* d = static_cast<char*>(dst);
    const char* s = static_cast<const char*>(src);
    const std::size_t head = (64 - (reinterpret_cast<std::uintptr_t>(d) & 63)) & 63;
    std::memcpy(d, s, head);
    std::size_t i = head;
    for (; i + 64 <= bytes; i += 64) {
#if defined(__AVX512F__)
      _mm512_stream_si512(reinterpret_cast<__m512i*>(d + i),
                          _mm512_loadu_si512(reinterpret_cast<const void*>(s + i)));
#else
      _mm256_stream_si256(reinterpret_cast<__m256i*>(d + i),
                          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i)));
      _mm256_stream_si256(reinterpret_cast<__m256i*>(d + i + 32),
                          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i + 32)));
#endif
    }
    std::memcpy(d + i, s + i, bytes - i);
    return;
  }
#endif
  std::memcpy(dst, src, bytes);
}

/// Prefetches bytes [from, to) of `base` into the cache (one hint per 64-byte line; clipped to
/// `limit` bytes, the end of what may be read). Row kernels call it for the NEXT row's slice
/// while they compute on this row from cache, so DRAM reads overlap the arithmetic instead of
/// leaving the memory bus idle between rows. A hint: never faults, no effect on results. Into
/// L2, not L1 (locality 2: prefetcht1 on x86): the row being computed, its output row and the
/// weights already fill L1, and evicting them for the next row cost layernorm and rmsnorm ~15 %
/// (4096x4096 fp32 on this 2-core EPYC VM, 2026-12-05: 5.08 -> 4.38 ms and 4.39 -> 3.82 ms).
inline void prefetch_span(const void* base, std::int64_t from, std::int64_t to, std::int64_t limit) {
  if (!base) return;
  const char* p = static_cast<const char*>(base);
  for (std::int64_t b = from; b < to && b < limit; b += 64) __builtin_prefetch(p + b, 0, 2);
}

/// Orders this thread's earlier stream_copy stores before its later stores (sfence on x86; a
/// no-op elsewhere). Call it once per thread after its last streaming store.
inline void stream_fence() {
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__AVX512F__) || defined(__AVX__))
  _mm_sfence();
#endif
}

#if defined(__AVX512F__) && defined(VBK_HAVE_F16C)
/// 16 floats -> 16 bf16 (RNE, NaN -> quiet NaN: exactly float_to_bf16) in one __m256i.
inline __m256i bf16x16_from_f32(__m512 v) {
  const __m512i u = _mm512_castps_si512(v);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  const __m512i rnd = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), lsb), 16);
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                                _mm512_set1_epi32(0x7f800000));
  const __m512i qnan = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
  return _mm512_cvtepi32_epi16(_mm512_mask_mov_epi32(rnd, nan, qnan));
}
#endif

/// store_f32 with non-temporal stores (see stream_copy): same results as store_f32. `stage` is
/// scratch of at least 2*n bytes (used by the fallback for fp16/bf16 without AVX-512).
inline void stream_store_f32(const float* __restrict src, Dt dt, void* dst, std::int64_t offset,
                             std::int64_t n, void* stage) {
  if (dt == Dt::F32) {
    stream_copy(static_cast<float*>(dst) + offset, src, static_cast<std::size_t>(n) * 4);
    return;
  }
#if defined(__AVX512F__) && defined(VBK_HAVE_F16C)
  // Convert and stream 16 elements (32 bytes) at a time into the 32-byte-aligned part of dst.
  std::uint16_t* d = static_cast<std::uint16_t*>(dst) + offset;
  const std::uintptr_t addr = reinterpret_cast<std::uintptr_t>(d);
  (void)stage;
  if (n >= 512 && (addr & 1) == 0) {
    const std::int64_t head = static_cast<std::int64_t>(((32 - (addr & 31)) & 31) / 2);  // < 16 <= n
    store_f32(src, dt, dst, offset, head);
    std::int64_t i = head;
    if (dt == Dt::F16) {
      for (; i + 16 <= n; i += 16)
        _mm256_stream_si256(reinterpret_cast<__m256i*>(d + i),
                            _mm512_cvtps_ph(_mm512_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    } else {
      for (; i + 16 <= n; i += 16)
        _mm256_stream_si256(reinterpret_cast<__m256i*>(d + i), bf16x16_from_f32(_mm512_loadu_ps(src + i)));
    }
    store_f32(src + i, dt, dst, offset + i, n - i);
    return;
  }
  store_f32(src, dt, dst, offset, n);
#else
  store_f32(src, dt, stage, 0, n);
  stream_copy(static_cast<std::uint16_t*>(dst) + offset, stage, static_cast<std::size_t>(n) * 2);
#endif
}

#if defined(VBK_HAVE_F16C) && defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

/// Checks the common preconditions: argument counts, every tensor on device type `dev`
/// (kDLCPU for C++ kernels, kDLCUDA for CUDA kernels), float dtypes F16/BF16/F32 for every
/// tensor except those flagged in `int_inputs_mask` (bit i = input i is int64).
/// Returns 0 or a vbk::fail() code.
inline int check_args_on(DLDeviceType dev, const DLTensor* in, int n_in, int want_in,
                         DLTensor* out, int n_out, int want_out, int n_attrs, int want_attrs,
                         unsigned int_inputs_mask = 0) {
  const char* where = dev == kDLCPU ? "the CPU" : "the expected device";
  if (n_in != want_in) return fail("expected %d inputs, got %d", want_in, n_in);
  if (n_out != want_out) return fail("expected %d outputs, got %d", want_out, n_out);
  if (n_attrs < want_attrs) return fail("expected %d attributes, got %d", want_attrs, n_attrs);
  for (int i = 0; i < n_in; ++i) {
    if (in[i].device.device_type != dev) return fail("input %d is not on %s", i, where);
    const Dt d = dtype_of(in[i]);
    const bool want_int = (int_inputs_mask >> i) & 1u;
    if (want_int ? d != Dt::I64 : (d == Dt::I64 || d == Dt::Other))
      return fail("input %d has an unsupported dtype (code %d, %d bits)", i, in[i].dtype.code,
                  in[i].dtype.bits);
  }
  for (int i = 0; i < n_out; ++i) {
    if (out[i].device.device_type != dev) return fail("output %d is not on %s", i, where);
    const Dt d = dtype_of(out[i]);
    if (d == Dt::I64 || d == Dt::Other) return fail("output %d has an unsupported dtype", i);
  }
  return 0;
}

/// check_args_on(kDLCPU, ...): the preconditions of a CPU kernel.
inline int check_args(const DLTensor* in, int n_in, int want_in, DLTensor* out, int n_out,
                      int want_out, int n_attrs, int want_attrs, unsigned int_inputs_mask = 0) {
  return check_args_on(kDLCPU, in, n_in, want_in, out, n_out, want_out, n_attrs, want_attrs,
                       int_inputs_mask);
}

// ---- shape / layout checks and scratch memory -------------------------------------------------

/// True when the tensor is dense row-major: strides absent, or equal to the compact strides
/// (strides of size-1 dimensions are ignored).
inline bool is_dense(const DLTensor& t) {
  if (t.strides == nullptr) return true;
  std::int64_t expect = 1;
  for (int i = t.ndim - 1; i >= 0; --i) {
    if (t.shape[i] != 1 && t.strides[i] != expect) return false;
    expect *= t.shape[i];
  }
  return true;
}

/// Checks that tensor `t` (called `name` in messages) is dense with exactly the given dims;
/// a dim of -1 matches any extent. Use: `if (int e = vbk::check_shape(x, "x", {M, N})) return e;`
inline int check_shape(const DLTensor& t, const char* name, std::initializer_list<std::int64_t> dims) {
  if (t.ndim != static_cast<int>(dims.size()))
    return fail("%s: expected %d dimensions, got %d", name, static_cast<int>(dims.size()), t.ndim);
  int i = 0;
  for (std::int64_t d : dims) {
    if (t.shape[i] < 0) return fail("%s: negative extent %lld in dim %d", name, (long long)t.shape[i], i);
    if (d >= 0 && t.shape[i] != d)
      return fail("%s: dim %d is %lld, expected %lld", name, i, (long long)t.shape[i], (long long)d);
    ++i;
  }
  if (!is_dense(t)) return fail("%s: not dense row-major (strided tensors are not supported)", name);
  if (t.data == nullptr && numel(t) != 0) return fail("%s: null data pointer", name);
  return 0;
}

/// Checks that every float tensor (inputs not in `int_inputs_mask`, and outputs not in
/// `skip_outputs_mask`) has the same dtype as input 0; returns 0 or a vbk::fail() code.
inline int check_same_dtype(const DLTensor* in, int n_in, const DLTensor* out, int n_out,
                            unsigned int_inputs_mask = 0, unsigned skip_outputs_mask = 0) {
  const Dt d0 = dtype_of(in[0]);
  for (int i = 1; i < n_in; ++i)
    if (!((int_inputs_mask >> i) & 1u) && dtype_of(in[i]) != d0)
      return fail("input %d has a different dtype than input 0", i);
  for (int i = 0; i < n_out; ++i)
    if (!((skip_outputs_mask >> i) & 1u) && dtype_of(out[i]) != d0)
      return fail("output %d has a different dtype than input 0", i);
  return 0;
}

/// 64-byte aligned float scratch buffer, freed on scope exit (use inside one call only; the
/// kernel must not keep state between calls). `ok()` is false when the allocation failed.
class Scratch {
 public:
  Scratch() = default;
  explicit Scratch(std::int64_t n_floats) { alloc(n_floats); }
  ~Scratch() { std::free(p_); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  /// (Re)allocates n floats (contents uninitialized); returns the pointer or nullptr.
  float* alloc(std::int64_t n_floats) {
    std::free(p_);
    std::size_t bytes = (static_cast<std::size_t>(n_floats > 0 ? n_floats : 1) * 4 + 63) / 64 * 64;
    p_ = static_cast<float*>(std::aligned_alloc(64, bytes));
    return p_;
  }
  float* get() const { return p_; }
  bool ok() const { return p_ != nullptr; }

 private:
  float* p_ = nullptr;
};

}  // namespace vbk

#ifndef VBK_NO_LAST_ERROR_IMPL
extern "C" const char* vb_kernel_last_error(void) { return vbk::error_buffer(); }
#endif
