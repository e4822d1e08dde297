#include "targets/load_record.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <stdexcept>

namespace vb {

std::optional<double> read_load_average(const std::filesystem::path& path) {
  std::ifstream in(path);
  double v = 0;
  if (!(in >> v) || !std::isfinite(v) || v < 0) return std::nullopt;
  return v;
}

LoadRecord::LoadRecord(double check_from_s) : check_from_s_(check_from_s) {
  if (!std::isfinite(check_from_s) || check_from_s < 0)
    throw std::invalid_argument(
        fmt::format("LoadRecord: check_from_s must be a finite number >= 0 (got {})", check_from_s));
}

void LoadRecord::add(double at_s, std::optional<double> load) {
  std::lock_guard<std::mutex> lk(mu_);
  if (!load || !std::isfinite(*load) || *load < 0) {
    ++unreadable_;
    return;
  }
  const double v = *load;
  ++samples_;
  if (!first_) first_ = v;
  max_ = max_ ? std::max(*max_, v) : v;
  if (std::max(at_s, 0.0) >= check_from_s_) {
    ++checked_;
    max_checked_ = max_checked_ ? std::max(*max_checked_, v) : v;
  }
}

void LoadRecord::sample(double at_s) { add(at_s, read_load_average()); }

int LoadRecord::samples() const {
  std::lock_guard<std::mutex> lk(mu_);
  return samples_;
}
int LoadRecord::unreadable() const {
  std::lock_guard<std::mutex> lk(mu_);
  return unreadable_;
}
std::optional<double> LoadRecord::at_start() const {
  std::lock_guard<std::mutex> lk(mu_);
  return first_;
}
std::optional<double> LoadRecord::max() const {
  std::lock_guard<std::mutex> lk(mu_);
  return max_;
}
std::optional<double> LoadRecord::max_checked() const {
  std::lock_guard<std::mutex> lk(mu_);
  return max_checked_;
}

nlohmann::json LoadRecord::to_json() const {
  std::lock_guard<std::mutex> lk(mu_);
  auto num = [](const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
  std::string note;
  if (samples_ == 0)
    note = "not sampled: /proc/loadavg could not be read";
  else if (!max_checked_)
    note = fmt::format("no sample from {:.0f} s into the run on (it ended sooner): the "
                       "busy-machine check, which reads only those, did not apply; at_start and "
                       "max are what the run saw",
                       check_from_s_);
  return {{"at_start", num(first_)},       {"max", num(max_)},
          {"max_checked", num(max_checked_)}, {"check_from_s", check_from_s_},
          {"samples", samples_},           {"checked_samples", checked_},
          {"unreadable", unreadable_},     {"note", note}};
}

std::string LoadRecord::summary() const {
  std::lock_guard<std::mutex> lk(mu_);
  if (samples_ == 0) return "load average (1 min): not sampled (/proc/loadavg could not be read)";
  std::string s = fmt::format("load average (1 min): {:.2f} at the start, up to {:.2f} over {} sample(s)",
                              *first_, *max_, samples_);
  if (!max_checked_)
    s += fmt::format(" (none from {:.0f} s into the run on, so the busy-machine check did not apply)",
                     check_from_s_);
  return s;
}

}  // namespace vb
