// Element types of VladBud tensors and exact conversions between them.
//
// The kernel types of DESIGN §2 take fp16, bf16 and fp32 data (plus int64 targets for
// cross_entropy); the fp64 oracle works in double. All narrowing conversions here round to
// nearest, ties to even (IEEE 754-2008 §4.3.1), and are done directly from double so that the
// oracle's output is never double-rounded.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace vb {

/// Element type of a tensor. The numeric values are VladBud's own; the DLPack mapping lives in
/// `to_dlpack` / `from_dlpack` (src/core/tensor.h).
enum class DType : std::uint8_t { F16, BF16, F32, F64, I64 };

/// Bytes per element (2, 2, 4, 8, 8).
std::size_t dtype_size(DType t);

/// Canonical short name: "fp16", "bf16", "fp32", "fp64", "int64".
std::string_view dtype_name(DType t);

/// Parses "fp16"/"float16"/"half", "bf16"/"bfloat16", "fp32"/"float32"/"float",
/// "fp64"/"float64"/"double", "int64"/"i64". Returns nullopt for anything else.
std::optional<DType> parse_dtype(std::string_view s);

/// True for F16, BF16, F32, F64.
bool is_floating(DType t);

/// The three dtypes every kernel type is tested in (DESIGN §2): fp16, bf16, fp32.
inline constexpr DType kKernelDtypes[] = {DType::F16, DType::BF16, DType::F32};

// ---- scalar conversions -------------------------------------------------------------------

/// fp16 (IEEE binary16) bits -> float. Exact (every binary16 value is a float).
float half_to_float(std::uint16_t h);
/// bf16 bits -> float. Exact.
float bf16_to_float(std::uint16_t b);
/// double -> fp16 bits, round-to-nearest-even, overflow to +-inf, NaN stays NaN, subnormals kept.
std::uint16_t double_to_half(double x);
/// double -> bf16 bits, round-to-nearest-even, overflow to +-inf, NaN stays NaN.
std::uint16_t double_to_bf16(double x);
/// float -> fp16 bits (RNE). Same as double_to_half((double)f): a float is exact in double.
inline std::uint16_t float_to_half(float f) {
  return double_to_half(static_cast<double>(f));
}
/// float -> bf16 bits (RNE).
inline std::uint16_t float_to_bf16(float f) {
  return double_to_bf16(static_cast<double>(f));
}

/// Reads element `i` of a contiguous buffer of dtype `t` as double (exact for every dtype
/// except int64 values beyond 2^53).
double load_as_double(const void* data, DType t, std::size_t i);

/// Writes `x` rounded (RNE) to dtype `t` into element `i` of a contiguous buffer. For I64 the
/// value is truncated toward zero.
void store_from_double(void* data, DType t, std::size_t i, double x);

/// Rounds `x` to the nearest value representable in `t` and returns it as double
/// (the oracle's "rounded to the output dtype").
double round_to_dtype(double x, DType t);

/// Largest finite value of a floating dtype: 65504 (fp16), 3.3895e38 (bf16), FLT_MAX, DBL_MAX.
double dtype_max(DType t);
/// Smallest positive normal value: 6.1035e-5 (fp16), 1.1755e-38 (bf16, fp32), DBL_MIN.
double dtype_min_normal(DType t);
/// Unit roundoff u = 2^-(p) where p is the significand precision: 2^-11, 2^-8, 2^-24, 2^-53.
double dtype_unit_roundoff(DType t);

}  // namespace vb
