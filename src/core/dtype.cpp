#include "core/dtype.h"

#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>

namespace vb {

std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::F16:
    case DType::BF16:
      return 2;
    case DType::F32:
      return 4;
    case DType::F64:
    case DType::I64:
      return 8;
  }
  return 0;
}

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::F16:
      return "fp16";
    case DType::BF16:
      return "bf16";
    case DType::F32:
      return "fp32";
    case DType::F64:
      return "fp64";
    case DType::I64:
      return "int64";
  }
  return "?";
}

std::optional<DType> parse_dtype(std::string_view s) {
  if (s == "fp16" || s == "float16" || s == "half" || s == "f16") return DType::F16;
  if (s == "bf16" || s == "bfloat16") return DType::BF16;
  if (s == "fp32" || s == "float32" || s == "float" || s == "f32") return DType::F32;
  if (s == "fp64" || s == "float64" || s == "double" || s == "f64") return DType::F64;
  if (s == "int64" || s == "i64") return DType::I64;
  return std::nullopt;
}

bool is_floating(DType t) {
  return t != DType::I64;
}

namespace {

// A binary floating-point format with `mant` stored significand bits, exponent bias `bias`
// and minimum normal exponent `emin` (IEEE 754 layout: sign | exponent | mantissa).
struct SmallFormat {
  int mant;
  int exp_bits;
  int bias;
  int emin;
  double max_finite;
};

constexpr SmallFormat kHalf{10, 5, 15, -14, 65504.0};
constexpr SmallFormat kBf16{7, 8, 127, -126, 3.3895313892515355e38};

// Rounds a double to the format with round-to-nearest-even, directly on the IEEE-754 bit
// pattern (one rounding, no intermediate float), so it is exact and fast (integer ops only).
// Overflow gives +-inf, NaN a quiet NaN, values below half the smallest subnormal +-0.
std::uint16_t encode_small(double x, const SmallFormat& f) {
  std::uint64_t u;
  std::memcpy(&u, &x, 8);
  const auto sign = static_cast<std::uint16_t>((u >> 48) & 0x8000u);
  const std::uint32_t exp_all = ((1u << f.exp_bits) - 1u) << f.mant;
  const int dexp = static_cast<int>((u >> 52) & 0x7ffu);
  const std::uint64_t dman = u & ((1ull << 52) - 1);
  if (dexp == 0x7ff)  // inf or NaN
    return static_cast<std::uint16_t>(sign | exp_all | (dman ? (1u << (f.mant - 1)) : 0u));
  if (dexp == 0) return sign;  // double subnormals are far below any 16-bit subnormal
  const int e = dexp - 1023;
  const int emax = f.bias;  // largest unbiased exponent of a finite value
  if (e > emax) return static_cast<std::uint16_t>(sign | exp_all);
  const std::uint64_t sig = (1ull << 52) | dman;  // 53-bit significand
  int shift = 52 - f.mant;
  if (e < f.emin) shift += f.emin - e;  // subnormal in the target: coarser quantum
  if (shift > 54) return sign;          // below half the smallest subnormal
  std::uint64_t q = sig >> shift;
  const std::uint64_t rem = sig & ((1ull << shift) - 1);
  const std::uint64_t half = 1ull << (shift - 1);
  if (rem > half || (rem == half && (q & 1u))) ++q;
  std::uint64_t bits;
  if (e >= f.emin) {
    // Carry from rounding propagates into the exponent (and to inf at the top) by itself.
    bits = (static_cast<std::uint64_t>(e + f.bias) << f.mant) + (q - (1ull << f.mant));
    if (bits >= exp_all) bits = exp_all;
  } else {
    bits = q;  // q == 2^mant rounds up into the smallest normal, also by itself
  }
  return static_cast<std::uint16_t>(sign | bits);
}

}  // namespace

float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = (h >> 15) & 1u;
  const std::uint32_t exp = (h >> 10) & 0x1fu;
  const std::uint32_t man = h & 0x3ffu;
  double v;
  if (exp == 0x1f) {
    v = man ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  } else if (exp == 0) {
    v = std::ldexp(static_cast<double>(man), -24);
  } else {
    v = std::ldexp(static_cast<double>(man | 0x400u), static_cast<int>(exp) - 25);
  }
  return static_cast<float>(sign ? -v : v);
}

float bf16_to_float(std::uint16_t b) {
  const std::uint32_t u = static_cast<std::uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

std::uint16_t double_to_half(double x) {
  return encode_small(x, kHalf);
}
std::uint16_t double_to_bf16(double x) {
  return encode_small(x, kBf16);
}

double load_as_double(const void* data, DType t, std::size_t i) {
  switch (t) {
    case DType::F16:
      return half_to_float(static_cast<const std::uint16_t*>(data)[i]);
    case DType::BF16:
      return bf16_to_float(static_cast<const std::uint16_t*>(data)[i]);
    case DType::F32:
      return static_cast<const float*>(data)[i];
    case DType::F64:
      return static_cast<const double*>(data)[i];
    case DType::I64:
      return static_cast<double>(static_cast<const std::int64_t*>(data)[i]);
  }
  return 0.0;
}

void store_from_double(void* data, DType t, std::size_t i, double x) {
  switch (t) {
    case DType::F16:
      static_cast<std::uint16_t*>(data)[i] = double_to_half(x);
      return;
    case DType::BF16:
      static_cast<std::uint16_t*>(data)[i] = double_to_bf16(x);
      return;
    case DType::F32:
      static_cast<float*>(data)[i] = static_cast<float>(x);  // RNE in the default FP mode
      return;
    case DType::F64:
      static_cast<double*>(data)[i] = x;
      return;
    case DType::I64:
      static_cast<std::int64_t*>(data)[i] = static_cast<std::int64_t>(x);
      return;
  }
}

double round_to_dtype(double x, DType t) {
  switch (t) {
    case DType::F16:
      return half_to_float(double_to_half(x));
    case DType::BF16:
      return bf16_to_float(double_to_bf16(x));
    case DType::F32:
      return static_cast<double>(static_cast<float>(x));
    case DType::F64:
      return x;
    case DType::I64:
      return std::trunc(x);
  }
  return x;
}

double dtype_max(DType t) {
  switch (t) {
    case DType::F16:
      return kHalf.max_finite;
    case DType::BF16:
      return kBf16.max_finite;
    case DType::F32:
      return FLT_MAX;
    case DType::F64:
      return DBL_MAX;
    case DType::I64:
      return static_cast<double>(std::numeric_limits<std::int64_t>::max());
  }
  return 0;
}

double dtype_min_normal(DType t) {
  switch (t) {
    case DType::F16:
      return std::ldexp(1.0, -14);
    case DType::BF16:
    case DType::F32:
      return FLT_MIN;
    case DType::F64:
      return DBL_MIN;
    case DType::I64:
      return 1.0;
  }
  return 0;
}

double dtype_unit_roundoff(DType t) {
  switch (t) {
    case DType::F16:
      return std::ldexp(1.0, -11);
    case DType::BF16:
      return std::ldexp(1.0, -8);
    case DType::F32:
      return std::ldexp(1.0, -24);
    case DType::F64:
      return std::ldexp(1.0, -53);
    case DType::I64:
      return 0.0;
  }
  return 0;
}

}  // namespace vb
