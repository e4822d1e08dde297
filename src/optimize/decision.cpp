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

double signed_rank_upper_p(const std::vector<double>& ranks, double w) {
  if (ranks.empty()) return 1;
  // Doubled ranks are integers (averaged ties are k + 0.5 at worst).
  std::vector<int> r2;
  int total = 0;
  for (double r : ranks) {
    r2.push_back(static_cast<int>(std::lround(2 * r)));
    total += r2.back();
  }
  std::vector<double> ways(static_cast<std::size_t>(total) + 1, 0.0);
  ways[0] = 1;
  int reach = 0;
  for (int v : r2) {
    for (int s = reach; s >= 0; --s)
      if (ways[static_cast<std::size_t>(s)] > 0) ways[static_cast<std::size_t>(s + v)] += ways[static_cast<std::size_t>(s)];
    reach += v;
  }
  const long w2 = std::lround(2 * w);
  double tail = 0, all = 0;
  for (int s = 0; s <= total; ++s) {
    all += ways[static_cast<std::size_t>(s)];
    if (s >= w2) tail += ways[static_cast<std::size_t>(s)];
  }
  return tail / all;
}

namespace {

// Ranks of |x| (1-based, ties averaged), for the non-zero entries of x, in x's order.
std::vector<double> abs_ranks(const std::vector<double>& x) {
  std::vector<std::size_t> idx(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) idx[i] = i;
  std::sort(idx.begin(), idx.end(),
            [&](std::size_t a, std::size_t b) { return std::fabs(x[a]) < std::fabs(x[b]); });
  std::vector<double> rank(x.size(), 0);
  for (std::size_t i = 0; i < idx.size();) {
    std::size_t j = i;
    while (j + 1 < idx.size() && std::fabs(x[idx[j + 1]]) == std::fabs(x[idx[i]])) ++j;
    for (std::size_t k = i; k <= j; ++k) rank[idx[k]] = 0.5 * static_cast<double>(i + j) + 1;
    i = j + 1;
  }
  return rank;
}

}  // namespace

KeepDecision decide_keep(const std::vector<TimingSample>& base,
                         const std::vector<TimingSample>& cand, double strictness,
                         int max_rounds, bool threshold_test) {
  if (base.empty() || base.size() != cand.size())
    throw std::invalid_argument(
        "decide_keep needs the same non-zero number of baseline and candidate rounds");
  KeepDecision d;
  for (const auto* side : {&base, &cand})
    for (const auto& s : *side)
      if (!(s.median_us > 0) || !std::isfinite(s.median_us)) {
        d.reason = fmt::format("a round's latency is not positive and finite ({} us): no decision",
                               s.median_us);
        return d;
      }
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
  // ---- the noise threshold ------------------------------------------------------------------
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
  // ---- the paired signed-rank test -----------------------------------------------------------
  std::vector<double> r;  // ln(base_i / cand_i) > 0: the candidate won pair i
  for (std::size_t i = 0; i < n; ++i) r.push_back(std::log(b[i] / c[i]));
  std::vector<double> nz;
  for (double x : r)
    if (x != 0) nz.push_back(x);
  const std::vector<double> rk = abs_ranks(nz);
  double w_plus = 0;
  for (std::size_t i = 0; i < nz.size(); ++i)
    if (nz[i] > 0) w_plus += rk[i];
  d.p_value = signed_rank_upper_p(rk, w_plus);
  d.alpha = kRankAlpha / std::max(strictness, 1e-9);
  const double median_ratio = median_of(r);
  // The candidate's median over rounds must be faster too: with rounds that drift a lot, most
  // pairs can be won while the medians say slower (a keep would lower the speedup chain).
  const bool rank_keep = d.p_value <= d.alpha && consistent && median_ratio > 0 && d.gain > 0;
  const bool threshold_keep = threshold_test && beats_noise && consistent;
  d.keep = threshold_keep || rank_keep;
  d.test = threshold_keep ? "noise threshold" : rank_keep ? "signed-rank" : "";
  // ---- could more rounds decide? -------------------------------------------------------------
  const std::size_t cap = max_rounds > 0 ? static_cast<std::size_t>(max_rounds) : n;
  if (!d.keep && n < cap && 1 - std::exp(-median_ratio) >= kMinGainForMoreRounds) {
    const std::size_t lost = n - static_cast<std::size_t>(d.pairs_faster);
    // Best case: every new pair won, by more than any so far (ranks n'+1 .. n'+k).
    std::vector<double> best_ranks = rk;
    double best_w = w_plus;
    for (std::size_t k = nz.size() + 1; k <= nz.size() + (cap - n); ++k) {
      best_ranks.push_back(static_cast<double>(k));
      best_w += static_cast<double>(k);
    }
    d.more_rounds = lost * 5 <= cap && signed_rank_upper_p(best_ranks, best_w) <= d.alpha;
  }
  d.reason = fmt::format(
      "interleaved {} rounds: best {:.2f} us, candidate {:.2f} us, gain {:+.2f}% vs noise "
      "threshold {:.2f}% ({}/{} pairs faster, signed-rank p {:.3g} vs {:.3g}){}",
      n, d.base_us, d.cand_us, 100 * d.gain, 100 * d.threshold, d.pairs_faster, d.pairs,
      d.p_value, d.alpha,
      d.keep          ? ": keep (" + d.test + ")"
      : !threshold_keep && beats_noise && consistent ? ": the noise threshold decides the first rounds only"
      : !beats_noise && !rank_keep ? ": gain within noise"
                      : ": not faster in enough pairs");
  return d;
}

}  // namespace vb::opt
