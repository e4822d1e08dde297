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

double row_error_factor(DType t) {
  return t == DType::F16 || t == DType::BF16 ? 2.0 : 5.0;
}

double tile_error_factor(DType t) {
  return t == DType::F16 || t == DType::BF16 ? 4.0 : 10.0;
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
  // The oracle's magnitude floor (Array64::scale), when it gives one per element.
  const bool floors = ref.scale.size() == ref.v.size() && !ref.scale.empty();
  auto floor_of = [&](std::int64_t i) {
    return floors ? std::fabs(ref.scale[static_cast<std::size_t>(i)]) : 0.0;
  };

  // Per-row and per-tile sums, computed in parallel; the pattern check records the first
  // mismatch. Tiles are kTileLen consecutive elements of a row, the last one the row's tail.
  const std::int64_t tiles_per_row = (row_len + kTileLen - 1) / std::max<std::int64_t>(kTileLen, 1);
  std::vector<double> err2(static_cast<std::size_t>(rows)), ref2(static_cast<std::size_t>(rows));
  std::vector<double> tile_err2(static_cast<std::size_t>(rows * tiles_per_row)),
      tile_ref2(static_cast<std::size_t>(rows * tiles_per_row));
  std::vector<std::int64_t> first_bad(static_cast<std::size_t>(rows), -1),
      finite(static_cast<std::size_t>(rows), 0);
  parallel_for(rows, std::max<std::int64_t>(1, (1 << 16) / std::max<std::int64_t>(row_len, 1)),
               [&](std::int64_t lo, std::int64_t hi) {
                 for (std::int64_t row = lo; row < hi; ++row) {
                   double e2 = 0, r2 = 0;
                   std::int64_t bad = -1, nf = 0;
                   for (std::int64_t t0 = 0; t0 < row_len; t0 += kTileLen) {
                     double te2 = 0, tr2 = 0;
                     for (std::int64_t j = t0; j < std::min(row_len, t0 + kTileLen); ++j) {
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
                       te2 += (o - f) * (o - f);
                       const double fl = floor_of(i);
                       tr2 += std::max(f * f, fl * fl);
                       ++nf;
                     }
                     const auto k = static_cast<std::size_t>(row * tiles_per_row + t0 / kTileLen);
                     tile_err2[k] = te2;
                     tile_ref2[k] = tr2;
                     e2 += te2;
                     r2 += tr2;
                   }
                   err2[static_cast<std::size_t>(row)] = e2;
                   ref2[static_cast<std::size_t>(row)] = r2;
                   first_bad[static_cast<std::size_t>(row)] = bad;
                   finite[static_cast<std::size_t>(row)] = nf;
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
  std::int64_t n_finite = 0;
  for (std::int64_t row = 0; row < rows; ++row) {
    e2 += err2[static_cast<std::size_t>(row)];
    r2 += ref2[static_cast<std::size_t>(row)];
    n_finite += finite[static_cast<std::size_t>(row)];
  }
  const double ref_norm = std::sqrt(r2);
  r.rel_error = ref_norm > 0 ? std::sqrt(e2) / ref_norm : std::sqrt(e2 / std::max<double>(1, n));
  // Floors of the localized denominators: a typical row's (tile's) reference norm, so that a
  // row or tile whose reference is near zero is judged against the tensor's scale.
  const double rms_row = rows > 0 ? std::sqrt(r2 / static_cast<double>(rows)) : 0;
  const double rms_elem = n_finite > 0 ? std::sqrt(r2 / static_cast<double>(n_finite)) : 0;
  for (std::int64_t row = 0; row < rows; ++row) {
    const double rn = std::sqrt(ref2[static_cast<std::size_t>(row)]);
    const double denom = std::max(rn, rms_row);
    const double en = std::sqrt(err2[static_cast<std::size_t>(row)]);
    const double e = denom > 0 ? en / denom : en / std::sqrt(static_cast<double>(row_len));
    if (e > r.worst_row_error) {
      r.worst_row_error = e;
      r.worst_row = row;
    }
    for (std::int64_t t = 0; t < tiles_per_row; ++t) {
      const auto k = static_cast<std::size_t>(row * tiles_per_row + t);
      const std::int64_t len = std::min(kTileLen, row_len - t * kTileLen);
      const double td =
          std::max(std::sqrt(tile_ref2[k]), rms_elem * std::sqrt(static_cast<double>(len)));
      const double te = std::sqrt(tile_err2[k]);
      const double et = td > 0 ? te / td : te / std::sqrt(static_cast<double>(len));
      if (et > r.worst_tile_error) {
        r.worst_tile_error = et;
        r.worst_tile_row = row;
        r.worst_tile_col = t * kTileLen;
      }
    }
  }
  if (r.rel_error > r.threshold) {
    r.ok = false;
    r.failure = "accuracy";
    r.reason = fmt::format(
        "relative Frobenius error {:.3g} > {:.3g} ({} threshold); worst row {} of {} at {:.3g}",
        r.rel_error, r.threshold, dtype_name(dt), r.worst_row, rows, r.worst_row_error);
  } else if (r.worst_row_error > row_error_factor(dt) * r.threshold) {
    r.ok = false;
    r.failure = "accuracy";
    r.reason = fmt::format(
        "localized check: row {} of {} has error {:.3g} > {:.3g} ({}x the {} threshold) although "
        "the global error is {:.3g}",
        r.worst_row, rows, r.worst_row_error, row_error_factor(dt) * r.threshold,
        row_error_factor(dt), dtype_name(dt), r.rel_error);
  } else if (r.worst_tile_error > tile_error_factor(dt) * r.threshold) {
    r.ok = false;
    r.failure = "accuracy";
    const std::int64_t c0 = r.worst_tile_col, c1 = std::min(row_len, c0 + kTileLen) - 1;
    r.reason = fmt::format(
        "localized check: {} {}, columns {}..{} of {}{} has error {:.3g} > {:.3g} ({}x the {} "
        "threshold) although the global error is {:.3g} and the worst row's {:.3g}",
        rows > 1 ? "row" : "tensor", rows > 1 ? std::to_string(r.worst_tile_row) : std::string(),
        c0, c1, row_len, c1 == row_len - 1 && c0 > 0 ? " (the row's tail)" : "",
        r.worst_tile_error, tile_error_factor(dt) * r.threshold, tile_error_factor(dt),
        dtype_name(dt), r.rel_error,
        r.worst_row_error);
  }
  return r;
}

}  // namespace vb
