// The keep/revert rule (DESIGN §4): a candidate is kept only when it is faster than the current
// best by more than the measured noise, with baseline and candidate timed interleaved in the
// same run (ABBA rounds), never by a fixed percentage.
#pragma once

#include <string>
#include <vector>

namespace vb::opt {

/// One timed round of one side: the evaluator's median latency and its spread.
struct TimingSample {
  double median_us = 0;  ///< median latency of the round, microseconds
  double noise = 0;      ///< within-round MAD / median (EvalReport timing.noise)
  int reps = 1;          ///< timed calls in the round
};

/// The verdict of the comparison, with the numbers behind it.
struct KeepDecision {
  bool keep = false;
  double base_us = 0, cand_us = 0;  ///< medians over rounds
  double gain = 0;                  ///< (base - cand) / base; > 0 means the candidate is faster
  double threshold = 0;             ///< the gain needed, as a fraction of base (noise-derived)
  int pairs_faster = 0, pairs = 0;  ///< interleaved pairs in which the candidate was faster
  std::string reason;               ///< one line for results.tsv
};

/// Decides on interleaved rounds (base[i] and cand[i] timed back to back). The noise is a robust
/// sigma of one round's median: the larger of (a) 1.4826 x the pooled MAD of the round medians
/// around their side's median and (b) the within-round spread, 1.4826 x noise x median /
/// sqrt(reps) x 1.2533 (the standard error of a median). Keep iff the gain exceeds
/// strictness x t(2n-2) x 1.2533 x sigma x sqrt(2 / n) -- the standard error of the difference
/// of two medians of n rounds times Student's one-sided 0.5 % critical value for the pooled
/// degrees of freedom (t_critical) -- AND the candidate won at least 80 % of the interleaved
/// pairs.
/// Throws std::invalid_argument when the sides are empty or of different lengths.
KeepDecision decide_keep(const std::vector<TimingSample>& base,
                         const std::vector<TimingSample>& cand, double strictness = 1.0);

/// Student's t one-sided 0.5 % critical value for `df` degrees of freedom (table; 2.576 beyond 40).
double t_critical(int df);

/// Median of a non-empty vector (0 when empty).
double median_of(std::vector<double> v);

}  // namespace vb::opt
