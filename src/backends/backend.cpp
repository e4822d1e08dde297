#include "backends/backend.h"

#include <regex>
#include <sstream>

#include "core/paths.h"

namespace vb {

const Backend& cpu_backend();   // backends/cpu/cpu_backend.cpp
const Backend& cuda_backend();  // backends/cuda/cuda_backend.cpp

std::filesystem::path Backend::starter_source(std::string_view kernel) const {
  return vladbud_home() / "kernels" / name() / (std::string(kernel) + source_extension());
}

const Backend* find_backend(std::string_view name) {
  if (name == "cpu") return &cpu_backend();
  if (name == "cuda") return &cuda_backend();
  return nullptr;
}

std::string backend_names() {
  return "cpu, cuda";
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
