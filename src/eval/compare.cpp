#include "eval/compare.h"

#include <fmt/format.h>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/parallel.h"
#include "runner/protocol.h"

namespace vb {

double error_threshold(DType t) {
  switch (t) {
    case DType::F16:
      return 1e-3;
    case DType::BF16:
      return 1.6e-2;
    case DType::F32:
      return 1e-5;
    case DType::F64:
      return 1e-12;
    case DType::I64:
      return 0;
  }
  return 0;
}

bool is_poison(const TensorView& out, std::int64_t i) {
  const auto k = static_cast<std::size_t>(i);
  switch (out.desc.dtype) {
    case DType::F32: {
      std::uint32_t u;
      std::memcpy(&u, static_cast<const char*>(out.data) + 4 * k, 4);
      return u == runner::kPoisonF32;
    }
    case DType::F16:
      return static_cast<const std::uint16_t*>(out.data)[k] == runner::kPoisonF16;
    case DType::BF16:
      return static_cast<const std::uint16_t*>(out.data)[k] == runner::kPoisonBF16;
    default:
      return false;
  }
}

namespace {

// 0 finite, 1 NaN, 2 +inf, 3 -inf
int fp_class(double x) {
  if (std::isnan(x)) return 1;
  if (std::isinf(x)) return x > 0 ? 2 : 3;
  return 0;
}
const char* class_name(int c) {
  static const char* names[] = {"finite", "NaN", "+inf", "-inf"};
  return names[c];
}

std::string fmt_index(std::int64_t i, std::int64_t row_len, std::int64_t rows) {
  if (rows <= 1) return fmt::format("element {}", i);
  return fmt::format("row {} of {}, column {}", i / row_len, rows, i % row_len);
}

}  // namespace

CompareResult compare_output(const TensorView& out, const Array64& ref, std::int64_t row_len) {
  CompareResult r;
  const DType dt = out.desc.dtype;
  r.threshold = error_threshold(dt);
  const std::int64_t n = out.desc.numel();
  if (n != ref.numel()) {
    r.ok = false;
    r.failure = "shape";
    r.reason = fmt::format("output has {} elements, oracle {}", n, ref.numel());
    return r;
  }
  if (row_len <= 0 || n % row_len != 0) row_len = n;
  const std::int64_t rows = n == 0 ? 0 : n / row_len;

  // Per-row sums, computed in parallel; the pattern check records the first mismatch.
  std::vector<double> err2(static_cast<std::size_t>(rows)), ref2(static_cast<std::size_t>(rows));
  std::vector<std::int64_t> first_bad(static_cast<std::size_t>(rows), -1);
  parallel_for(rows, std::max<std::int64_t>(1, (1 << 16) / std::max<std::int64_t>(row_len, 1)),
               [&](std::int64_t lo, std::int64_t hi) {
                 for (std::int64_t row = lo; row < hi; ++row) {
                   double e2 = 0, r2 = 0;
                   std::int64_t bad = -1;
                   for (std::int64_t j = 0; j < row_len; ++j) {
                     const std::int64_t i = row * row_len + j;
                     const double o = out.get(i), f = ref.v[static_cast<std::size_t>(i)];
                     const int co = fp_class(o), cf = fp_class(f);
                     // An element still holding the poison pattern was never written, even
                     // where the oracle expects NaN (a real NaN result is not our pattern).
                     if (co != cf || (cf == 1 && is_poison(out, i))) {
                       if (bad < 0) bad = i;
                       continue;
                     }
                     if (cf != 0) continue;
                     e2 += (o - f) * (o - f);
                     r2 += f * f;
                   }
                   err2[static_cast<std::size_t>(row)] = e2;
                   ref2[static_cast<std::size_t>(row)] = r2;
                   first_bad[static_cast<std::size_t>(row)] = bad;
                 }
               });

  for (std::int64_t row = 0; row < rows; ++row) {
    const std::int64_t i = first_bad[static_cast<std::size_t>(row)];
    if (i < 0) continue;
    // Count unwritten elements to name the guard precisely.
    std::int64_t poisoned = 0;
    for (std::int64_t k = 0; k < n; ++k) poisoned += is_poison(out, k) ? 1 : 0;
    r.ok = false;
    const double o = out.get(i), f = ref.v[static_cast<std::size_t>(i)];
    if (poisoned > 0 && (std::isfinite(f) || is_poison(out, i))) {
      r.failure = "poisoned";
      r.reason = fmt::format(
          "{} of {} output elements were never written (still hold the NaN poison), first at {}",
          poisoned, n, fmt_index(i, row_len, rows));
    } else {
      r.failure = "nan_inf";
      r.reason = fmt::format(
          "NaN/Inf pattern differs from the oracle at {}: got {} ({}), expected {} ({})",
          fmt_index(i, row_len, rows), o, class_name(fp_class(o)), f, class_name(fp_class(f)));
    }
    return r;
  }

  double e2 = 0, r2 = 0;
  for (std::int64_t row = 0; row < rows; ++row) {
    e2 += err2[static_cast<std::size_t>(row)];
    r2 += ref2[static_cast<std::size_t>(row)];
  }
  const double ref_norm = std::sqrt(r2);
  r.rel_error = ref_norm > 0 ? std::sqrt(e2) / ref_norm : std::sqrt(e2 / std::max<double>(1, n));
  const double rms_row = rows > 0 ? std::sqrt(r2 / static_cast<double>(rows)) : 0;
  for (std::int64_t row = 0; row < rows; ++row) {
    const double rn = std::sqrt(ref2[static_cast<std::size_t>(row)]);
    const double denom = std::max(rn, rms_row);
    const double en = std::sqrt(err2[static_cast<std::size_t>(row)]);
    const double e = denom > 0 ? en / denom : en / std::sqrt(static_cast<double>(row_len));
    if (e > r.worst_row_error) {
      r.worst_row_error = e;
      r.worst_row = row;
    }
  }
  if (r.rel_error > r.threshold) {
    r.ok = false;
    r.failure = "accuracy";
    r.reason = fmt::format(
        "relative Frobenius error {:.3g} > {:.3g} ({} threshold); worst row {} of {} at {:.3g}",
        r.rel_error, r.threshold, dtype_name(dt), r.worst_row, rows, r.worst_row_error);
  } else if (r.worst_row_error > kRowFactor * r.threshold) {
    r.ok = false;
    r.failure = "accuracy";
    r.reason = fmt::format(
        "localized check: row {} of {} has error {:.3g} > {:.3g} ({}x the {} threshold) although "
        "the global error is {:.3g}",
        r.worst_row, rows, r.worst_row_error, kRowFactor * r.threshold, kRowFactor, dtype_name(dt),
        r.rel_error);
  }
  return r;
}

}  // namespace vb
