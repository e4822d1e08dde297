#include "optimize/decision.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace vb::opt {

double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

KeepDecision decide_keep(const std::vector<TimingSample>& base,
                         const std::vector<TimingSample>& cand, double z) {
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
  // (a) spread of the round medians, pooled over both sides.
  std::vector<double> dev;
  for (double x : b) dev.push_back(std::fabs(x - d.base_us));
  for (double x : c) dev.push_back(std::fabs(x - d.cand_us));
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
  d.threshold = z * se_diff / d.base_us;
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
