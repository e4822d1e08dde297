#include "optimize/decision.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace vb::opt {

double t_critical(int df) {
  // Student's t, one-sided 0.5 % quantiles (standard tables).
  static const double t[] = {0, 63.657, 9.925, 5.841, 4.604, 4.032, 3.707, 3.499, 3.355, 3.250,
                             3.169, 3.106, 3.055, 3.012, 2.977, 2.947, 2.921, 2.898, 2.878, 2.861,
                             2.845};
  if (df < 1) return t[1];
  if (df <= 20) return t[df];
  return df <= 40 ? 2.704 : 2.576;
}

double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

KeepDecision decide_keep(const std::vector<TimingSample>& base,
                         const std::vector<TimingSample>& cand, double strictness) {
  if (base.empty() || base.size() != cand.size())
    throw std::invalid_argument(
        "decide_keep needs the same non-zero number of baseline and candidate rounds");
  KeepDecision d;
  const std::size_t n = base.size();
  std::vector<double> b, c;
  for (std::size_t i = 0; i < n; ++i) {
    b.push_back(base[i].median_us);
    c.push_back(cand[i].median_us);
    d.pairs_faster += cand[i].median_us < base[i].median_us;
  }
  d.pairs = static_cast<int>(n);
  d.base_us = median_of(b);
  d.cand_us = median_of(c);
  if (!(d.base_us > 0)) {
    d.reason = "baseline latency is not positive";
    return d;
  }
  // (a) spread of the round medians, pooled over both sides. With an odd number of rounds
  // one deviation per side is zero by construction (the median itself): leave it out.
  std::vector<double> dev;
  for (const auto* side : {&b, &c}) {
    const double med = median_of(*side);
    bool skipped = side->size() % 2 == 0;
    for (double x : *side) {
      if (!skipped && x == med) {
        skipped = true;
        continue;
      }
      dev.push_back(std::fabs(x - med));
    }
  }
  const double sigma_rounds = 1.4826 * median_of(dev);
  // (b) within-round spread: the standard error of one round's median.
  std::vector<double> within;
  for (const auto* side : {&base, &cand})
    for (const auto& s : *side)
      within.push_back(1.2533 * 1.4826 * s.noise * s.median_us /
                       std::sqrt(static_cast<double>(std::max(1, s.reps))));
  const double sigma_within = median_of(within);
  const double sigma = std::max(sigma_rounds, sigma_within);
  const double se_diff = 1.2533 * sigma * std::sqrt(2.0 / static_cast<double>(n));
  d.gain = (d.base_us - d.cand_us) / d.base_us;
  d.threshold = strictness * t_critical(static_cast<int>(2 * n - 2)) * se_diff / d.base_us;
  const bool beats_noise = d.gain > d.threshold;
  const bool consistent = d.pairs_faster * 5 >= d.pairs * 4;
  d.keep = beats_noise && consistent;
  d.reason = fmt::format(
      "interleaved {} rounds: best {:.2f} us, candidate {:.2f} us, gain {:+.2f}% vs noise "
      "threshold {:.2f}% ({}/{} pairs faster){}",
      n, d.base_us, d.cand_us, 100 * d.gain, 100 * d.threshold, d.pairs_faster, d.pairs,
      d.keep          ? ": keep"
      : !beats_noise  ? ": gain within noise"
                      : ": not faster in enough pairs");
  return d;
}

}  // namespace vb::opt
