#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

#include "optimize/proposer.h"

namespace vb::opt {

namespace {

// UCB1 over arms "NAME=VALUE": the best configuration with that one parameter changed.
// Reward of a trial: log(best / candidate) of the quick-screen latencies (> 0 is faster),
// -0.5 for a candidate that fails. With probability 1/5, or when every arm's neighbour has been
// tried, a uniformly random configuration not yet tried is proposed instead (a restart).
class SearchProposer : public Proposer {
 public:
  SearchProposer(std::uint64_t seed, Pruner pruner, const ParamSyntax& syntax)
      : seed_(seed), rng_(seed), pruner_(std::move(pruner)), syntax_(syntax) {}

  std::string name() const override { return "search"; }
  int pruned() const override { return pruned_; }

  std::optional<Proposal> propose(const ProposeContext& ctx) override {
    const auto params = parse_params(ctx.best_source, syntax_);
    if (params.empty())
      throw std::invalid_argument(ctx.source_name + " declares no tunable parameters: add " +
                                  syntax_.how_to_declare() + " (README), or use --proposer agent");
    const Config best = current_config(ctx.best_source, params, syntax_);
    tried_.insert(config_string(best));
    auto ok = [&](const Config& c, std::string* why) {
      if (tried_.count(config_string(c))) return false;
      if (pruner_) {
        const auto cand = apply_config(ctx.best_source, c, syntax_);
        if (auto r = pruner_(cand, c)) {
          tried_.insert(config_string(c));
          ++pruned_;
          if (why) *why = *r;
          return false;
        }
      }
      return true;
    };
    // Arms: neighbours of the best configuration.
    std::vector<std::pair<std::string, Config>> arms;
    for (const auto& p : params)
      for (const auto& v : p.domain) {
        if (v == best.at(p.name)) continue;
        Config c = best;
        c[p.name] = v;
        if (ok(c, nullptr)) arms.push_back({p.name + "=" + v, c});
      }
    std::uniform_real_distribution<double> u(0, 1);
    const bool restart = arms.empty() || u(rng_) < 0.2;
    if (!restart) {
      // Unvisited arms first (in a seeded random order), then the highest UCB1 score.
      std::shuffle(arms.begin(), arms.end(), rng_);
      double total = 1;
      for (const auto& [k, s] : stats_) total += s.n;
      double best_score = -1e300;
      std::size_t pick = 0;
      for (std::size_t i = 0; i < arms.size(); ++i) {
        auto it = stats_.find(arms[i].first);
        const double score = it == stats_.end() || it->second.n == 0
                                 ? 1e300
                                 : it->second.sum / it->second.n +
                                       0.5 * std::sqrt(2 * std::log(total) / it->second.n);
        if (score > best_score) best_score = score, pick = i;
      }
      Proposal pr;
      pr.config = arms[pick].second;
      pr.source = apply_config(ctx.best_source, pr.config, syntax_);
      pr.description = fmt::format("{} (bandit arm {})", config_string(pr.config), arms[pick].first);
      last_arm_ = arms[pick].first;
      pr.arm = last_arm_;
      tried_.insert(config_string(pr.config));
      return pr;
    }
    for (int attempt = 0; attempt < 200; ++attempt) {
      Config c;
      for (const auto& p : params) {
        std::uniform_int_distribution<std::size_t> d(0, p.domain.size() - 1);
        c[p.name] = p.domain[d(rng_)];
      }
      if (!ok(c, nullptr)) continue;
      Proposal pr;
      pr.config = c;
      pr.source = apply_config(ctx.best_source, c, syntax_);
      pr.description = config_string(c) + " (random restart)";
      last_arm_.clear();
      tried_.insert(config_string(c));
      return pr;
    }
    // Random sampling found nothing new: enumerate to be sure the space is exhausted.
    Config c;
    for (const auto& p : params) c[p.name] = p.domain.front();
    while (true) {
      if (ok(c, nullptr)) {
        Proposal pr;
        pr.config = c;
        pr.source = apply_config(ctx.best_source, c, syntax_);
        pr.description = config_string(c) + " (enumeration)";
        last_arm_.clear();
        tried_.insert(config_string(c));
        return pr;
      }
      std::size_t i = 0;
      for (; i < params.size(); ++i) {
        const auto& dom = params[i].domain;
        auto it = std::find(dom.begin(), dom.end(), c[params[i].name]);
        if (it + 1 != dom.end()) {
          c[params[i].name] = *(it + 1);
          break;
        }
        c[params[i].name] = dom.front();
      }
      if (i == params.size()) return std::nullopt;
    }
  }

  void observe(const Proposal& p, const Feedback& f) override {
    if (p.arm.empty()) return;
    auto& s = stats_[p.arm];
    s.n += 1;
    s.sum += !f.correct ? -0.5
             : (f.cand_us > 0 && f.best_us > 0) ? std::log(f.best_us / f.cand_us)
                                                : 0.0;
  }

  nlohmann::json state() const override {
    std::ostringstream r;
    r << rng_;
    nlohmann::json arms = nlohmann::json::object();
    for (const auto& [k, s] : stats_) arms[k] = {s.n, s.sum};
    return {{"seed", seed_},
            {"rng", r.str()},
            {"tried", std::vector<std::string>(tried_.begin(), tried_.end())},
            {"arms", arms},
            {"pruned", pruned_},
            {"last_arm", last_arm_}};
  }

  void restore(const nlohmann::json& j) override {
    if (!j.is_object() || !j.contains("rng")) return;
    std::istringstream r(j["rng"].get<std::string>());
    r >> rng_;
    tried_.clear();
    for (const auto& t : j.value("tried", nlohmann::json::array())) tried_.insert(t.get<std::string>());
    stats_.clear();
    const nlohmann::json arms = j.value("arms", nlohmann::json::object());
    for (const auto& [k, v] : arms.items())
      stats_[k] = {v[0].get<double>(), v[1].get<double>()};
    pruned_ = j.value("pruned", 0);
    last_arm_ = j.value("last_arm", "");
  }

 private:
  struct Arm {
    double n = 0, sum = 0;
  };
  std::uint64_t seed_;
  std::mt19937_64 rng_;
  Pruner pruner_;
  const ParamSyntax& syntax_;
  std::set<std::string> tried_;
  std::map<std::string, Arm> stats_;
  std::string last_arm_;
  int pruned_ = 0;
};

}  // namespace

std::unique_ptr<Proposer> make_search_proposer(std::uint64_t seed, Pruner pruner,
                                               const ParamSyntax& syntax) {
  return std::make_unique<SearchProposer>(seed, std::move(pruner), syntax);
}

}  // namespace vb::opt
