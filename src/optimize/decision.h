// The keep/revert rule (DESIGN §4): a candidate is kept only when it is faster than the current
// best by more than the measured noise, with baseline and candidate timed interleaved in the
// same run (ABBA rounds), never by a fixed percentage. Two tests, either of which keeps
// (issue 16: on a shared 2-core machine the first alone rejected a 2.2x faster candidate):
//  - the noise threshold, for quiet machines: three rounds decide a few-percent gain;
//  - a paired signed-rank test on the rounds' latency ratios, for loaded ones: it needs no
//    estimate of the spread (contention inflates the within-round spread and gives the round
//    medians a heavy tail), only that the candidate wins the interleaved pairs consistently;
//    the loop adds rounds while it is undecided (KeepDecision::more_rounds).
#pragma once

#include <string>
#include <vector>

namespace vb::opt {

/// One timed round of one side: the evaluator's median latency and its spread.
struct TimingSample {
  double median_us = 0;  ///< median latency of the round, microseconds
  double noise = 0;      ///< within-round MAD / median (EvalReport timing.noise)
  int reps = 1;          ///< timed calls in the round
  /// Other runnable tasks seen when the round was timed (Measurement::other_runnable): > 0
  /// means other work competed for the cores, which can favour a side (fewer threads win
  /// while a core is busy).
  int other_runnable = 0;
};

/// The verdict of the comparison, with the numbers behind it.
struct KeepDecision {
  bool keep = false;
  double base_us = 0, cand_us = 0;  ///< medians over rounds
  double gain = 0;                  ///< (base - cand) / base; > 0 means the candidate is faster
  double threshold = 0;             ///< the gain needed, as a fraction of base (noise-derived)
  int pairs_faster = 0, pairs = 0;  ///< interleaved pairs in which the candidate was faster
  /// Exact one-sided p-value of the Wilcoxon signed-rank test of the pairs' log latency ratios
  /// ln(base_i / cand_i) against "not faster" (ties at zero dropped, tied ranks averaged).
  double p_value = 1;
  double alpha = 0;  ///< the signed-rank test's level: kRankAlpha / strictness
  /// Not kept, but more rounds (up to decide_keep's max_rounds) could still make the signed-rank
  /// test keep it: the median pair says the candidate saves >= kMinGainForMoreRounds of the
  /// best's time, the pairs it lost still leave room
  /// for 80 % by max_rounds, and the p-value reachable if every new pair is won by the largest
  /// margin yet is <= alpha. False once max_rounds are in.
  bool more_rounds = false;
  std::string test;    ///< "noise threshold" or "signed-rank" (the test that kept), else ""
  std::string reason;  ///< one line for results.tsv
};

/// The signed-rank test's one-sided level at strictness 1. 0.002 needs >= 9 pairs, all won
/// (2^-9 = 0.00195): a candidate no faster than the best is kept by it in at most ~0.2 % of
/// comparisons per look (a few looks per comparison: rounds, 2 x rounds, ... max_rounds).
inline constexpr double kRankAlpha = 0.002;

/// Extra rounds are spent only on a candidate whose median pair saves at least 3 % of the best's
/// time: smaller gains are what a loaded machine cannot confirm cheaply (a GPT-2 LM-head round
/// costs ~3 s here), and on a quiet one the noise threshold decides them in the first rounds.
inline constexpr double kMinGainForMoreRounds = 0.03;

/// Decides on interleaved rounds (base[i] and cand[i] timed back to back). The noise is a robust
/// sigma of one round's median: the larger of (a) 1.4826 x the pooled MAD of the round medians
/// around their side's median and (b) the within-round spread, 1.4826 x noise x median /
/// sqrt(reps) x 1.2533 (the standard error of a median). Keep iff the gain exceeds
/// strictness x t(2n-2) x 1.2533 x sigma x sqrt(2 / n) -- the standard error of the difference
/// of two medians of n rounds times Student's one-sided 0.5 % critical value for the pooled
/// degrees of freedom (t_critical) -- AND the candidate won at least 80 % of the interleaved
/// pairs. Or keep iff the signed-rank p-value (KeepDecision::p_value) <= kRankAlpha /
/// strictness and the candidate won at least 80 % of the pairs. `max_rounds` (0 = the number
/// of rounds given) bounds the rounds the caller is willing to add: more_rounds says whether
/// adding some could still keep. The signed-rank path also needs the candidate's median over
/// rounds below the best's (gain > 0). `threshold_test` false: only the signed-rank test may
/// keep -- the loop passes false at every look after the first, since the noise threshold's
/// level holds for one look (re-running it at 6, 9, 12 rounds nearly doubled how often an
/// equal candidate was kept under 2 % iid noise: 0.73 % vs 0.40 %, a review's simulation).
/// A round latency that is not positive and finite gives keep = false with the reason.
/// Throws std::invalid_argument when the sides are empty or of different lengths.
KeepDecision decide_keep(const std::vector<TimingSample>& base,
                         const std::vector<TimingSample>& cand, double strictness = 1.0,
                         int max_rounds = 0, bool threshold_test = true);

/// Exact upper-tail probability P(W+ >= w) of the Wilcoxon signed-rank statistic for the given
/// ranks (tied ranks averaged, so halves allowed) under the null of symmetric signs: each rank
/// counts with probability 1/2. Computed by dynamic programming over doubled ranks
/// (O(n x sum of ranks)). Returns 1 for no ranks.
double signed_rank_upper_p(const std::vector<double>& ranks, double w);

/// Student's t one-sided 0.5 % critical value for `df` degrees of freedom (table; 2.576 beyond 40).
double t_critical(int df);

/// Median of a non-empty vector (0 when empty).
double median_of(std::vector<double> v);

}  // namespace vb::opt
