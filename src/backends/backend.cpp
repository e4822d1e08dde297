#include "backends/backend.h"

#include <regex>
#include <sstream>
#include <stdexcept>

#include "core/paths.h"

namespace vb {

std::filesystem::path Backend::starter_source(std::string_view kernel) const {
  return vladbud_home() / "kernels" / name() / (std::string(kernel) + source_extension());
}

void Backend::set_target_arch(const std::string&) const {
  throw std::invalid_argument("backend " + name() + " has no selectable target architecture");
}

std::vector<VectorizedLoop> parse_vectorization_report(const std::string& text) {
  std::vector<VectorizedLoop> loops;
  static const std::regex gcc(
      R"(^([^:\s]+):(\d+):\d+: optimized: loop vectorized using (\d+) byte vectors)");
  static const std::regex clang(
      R"(^([^:\s]+):(\d+):\d+: remark: vectorized loop \(vectorization width: (\d+))");
  std::istringstream in(text);
  std::string line;
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_search(line, m, gcc)) {
      loops.push_back({m[1], std::stoi(m[2]), std::stoi(m[3])});
    } else if (std::regex_search(line, m, clang)) {
      loops.push_back({m[1], std::stoi(m[2]), 0});
    }
  }
  return loops;
}

}  // namespace vb
