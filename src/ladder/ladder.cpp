#include "ladder/ladder.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "backends/backend.h"
#include "ladder/amd.h"
#include "ladder/nvidia.h"
#include "ladder/triton_nvidia.h"

namespace vb::ladder {

const TargetClimber& cpu_climber();  // ladder/cpu.cpp

std::string rung_name(int rung) {
  switch (rung) {
    case kStaticReject: return "static reject";
    case kStaticSignals: return "static signals";
    case kCorrectness: return "correctness";
    case kAnalytical: return "analytical";
    case kSimulation: return "simulation";
    case kRealHardware: return "real hardware";
    default: return "rung " + std::to_string(rung);
  }
}

nlohmann::json ClimbResult::to_json() const {
  nlohmann::json j;
  j["target"] = target_id;
  j["kernel"] = kernel;
  j["variant"] = variant;
  j["backend"] = backend;
  j["highest_rung"] = highest_rung;
  j["highest_rung_name"] = highest_rung >= 0 ? rung_name(highest_rung) : "none";
  j["rejected"] = rejected;
  j["confidence"] = confidence;
  j["stop_reason"] = stop_reason;
  auto& ev = j["evidence"] = nlohmann::json::array();
  for (const auto& e : evidence)
    ev.push_back({{"rung", e.rung},
                  {"rung_name", rung_name(e.rung)},
                  {"status", e.status},
                  {"tool", e.tool},
                  {"tool_version", e.tool_version},
                  {"summary", e.summary},
                  {"data", e.data.is_null() ? nlohmann::json::object() : e.data}});
  if (estimate) {
    j["estimate"] = {{"time_us", estimate->time_us},
                     {"low_us", estimate->low_us},
                     {"high_us", estimate->high_us},
                     {"rung", estimate->rung},
                     {"basis", estimate->basis},
                     {"calibrated_by", estimate->calibrated_by},
                     {"calibration_factor", estimate->calibration_factor}};
  } else {
    j["estimate"] = nullptr;
  }
  return j;
}

const std::vector<const TargetClimber*>& all_climbers() {
  // A target's first climber here is its default (climber_for(target)).
  static const std::vector<const TargetClimber*> v{&cpu_climber(), &nvidia_climber(),
                                                   &amd_climber(), &triton_nvidia_climber()};
  return v;
}

std::string climber_names() {
  std::string s;
  for (const auto* c : all_climbers()) s += (s.empty() ? "" : ", ") + c->name();
  return s;
}

const TargetClimber* climber_for(const TargetSpec& target) {
  for (const auto* c : all_climbers())
    if (c->handles(target)) return c;
  return nullptr;
}

const TargetClimber* climber_for(const TargetSpec& target, std::string_view backend) {
  for (const auto* c : all_climbers())
    if (c->handles(target) && c->accepts(backend)) return c;
  return climber_for(target);
}

std::string climber_extensions_for(const TargetSpec& target) {
  std::vector<std::string> exts;
  for (const auto* c : all_climbers()) {
    if (!c->handles(target)) continue;
    const Backend* be = find_backend(c->backend());
    const std::string ext = be ? be->source_extension() : c->backend();
    if (std::find(exts.begin(), exts.end(), ext) == exts.end()) exts.push_back(ext);
  }
  std::string s;
  for (const auto& e : exts) s += (s.empty() ? "" : " or ") + e;
  return s;
}

std::vector<RankedVariant> rank_climbs(std::vector<ClimbResult> climbs) {
  auto cls = [](const ClimbResult& r) { return r.rejected ? 2 : (r.estimate ? 0 : 1); };
  std::stable_sort(climbs.begin(), climbs.end(), [&](const ClimbResult& a, const ClimbResult& b) {
    if (cls(a) != cls(b)) return cls(a) < cls(b);
    if (cls(a) == 0 && a.estimate->time_us != b.estimate->time_us)
      return a.estimate->time_us < b.estimate->time_us;
    return a.variant < b.variant;
  });
  std::vector<RankedVariant> out;
  int group = 0;
  double group_high = -1;
  for (std::size_t i = 0; i < climbs.size(); ++i) {
    RankedVariant rv;
    rv.position = static_cast<int>(i) + 1;
    if (cls(climbs[i]) == 0) {
      const Estimate& e = *climbs[i].estimate;
      if (group == 0 || e.low_us > group_high) {
        ++group;
        group_high = e.high_us;
      } else {
        group_high = std::max(group_high, e.high_us);
      }
      rv.tie_group = group;
    }
    rv.result = std::move(climbs[i]);
    out.push_back(std::move(rv));
  }
  return out;
}

std::optional<Calibration> calibration_from(const std::vector<ClimbResult>& measured,
                                            const std::string& family, const std::string& when) {
  double log_sum = 0;
  int n = 0;
  std::string target, kernel;
  for (const auto& r : measured) {
    double est = 0, meas = 0;
    for (const auto& e : r.evidence) {
      if (e.rung == kAnalytical && e.data.is_object() && e.data.contains("estimate_us"))
        est = e.data["estimate_us"].get<double>();
      if (e.rung == kRealHardware && e.status == "pass" && e.data.is_object() &&
          e.data.contains("measured_us"))
        meas = e.data["measured_us"].get<double>();
    }
    if (!(est > 0) || !(meas > 0)) continue;
    if (!kernel.empty() && (r.kernel != kernel || r.target_id != target))
      throw std::invalid_argument("calibration_from: climbs of one target and kernel expected, got " +
                                  target + "/" + kernel + " and " + r.target_id + "/" + r.kernel);
    target = r.target_id;
    kernel = r.kernel;
    log_sum += std::log(meas / est);
    ++n;
  }
  if (n == 0) return std::nullopt;
  Calibration c;
  c.target_id = target;
  c.family = family;
  c.kernel = kernel;
  c.samples = n;
  c.factor = std::exp(log_sum / n);
  c.source = fmt::format("{} {} measured at rung 5 ({} variant{}, {}): measured/estimated {:.3g}",
                         target, kernel, n, n == 1 ? "" : "s", when, c.factor);
  return c;
}

void apply_calibration(ClimbResult& r, const Calibration& c) {
  if (!(c.factor > 0) || !std::isfinite(c.factor))
    throw std::invalid_argument("apply_calibration: factor must be positive and finite, got " +
                                std::to_string(c.factor));
  if (!r.estimate || r.estimate->rung >= kRealHardware || r.target_id == c.target_id) return;
  Estimate& e = *r.estimate;
  e.time_us *= c.factor;
  e.low_us *= c.factor;
  e.high_us *= c.factor;
  e.calibration_factor *= c.factor;
  e.calibrated_by = c.source;
  e.basis += fmt::format(" x calibration {:.3g}", c.factor);
}

nlohmann::json ranking_to_json(const std::vector<RankedVariant>& ranking) {
  auto a = nlohmann::json::array();
  for (const auto& r : ranking) {
    auto j = r.result.to_json();
    j["position"] = r.position;
    j["tie_group"] = r.tie_group;
    a.push_back(std::move(j));
  }
  return a;
}

}  // namespace vb::ladder
