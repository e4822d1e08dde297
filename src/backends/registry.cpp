// The backend registry (DESIGN §1, cf. ggml's ggml_backend_registry constructor): the only
// place that names the backends. A new backend is one folder under src/backends/ that defines
// its `const Backend& <name>_backend()`, plus one line in registry_list() below. A backend
// outside the tree (a test fixture) adds itself with register_backend (as ggml's
// ggml_backend_register does for dynamically loaded ones).
#include <stdexcept>

#include "backends/backend.h"

namespace vb {

const Backend& cpu_backend();   // backends/cpu/cpu_backend.cpp
const Backend& cuda_backend();  // backends/cuda/cuda_backend.cpp
const Backend& triton_backend();  // backends/triton/triton_backend.cpp

namespace {

// The registered backends. Order matters once: the first backend of a device is the default
// for that device (backend_for_torch_device).
std::vector<const Backend*> registry_list() {
  return {
      &cpu_backend(),
      &cuda_backend(),
      &triton_backend(),
  };
}

// The list: the built-in backends, then the registered ones.
std::vector<const Backend*>& registry() {
  static std::vector<const Backend*> list = registry_list();
  return list;
}

}  // namespace

const std::vector<const Backend*>& all_backends() { return registry(); }

void register_backend(const Backend& backend) {
  for (const Backend* b : registry()) {
    if (b->name() == backend.name())
      throw std::invalid_argument("register_backend: a backend named '" + backend.name() +
                                  "' is already registered; choose another name");
    if (b->source_extension() == backend.source_extension())
      throw std::invalid_argument("register_backend: backend " + b->name() + " already uses the " +
                                  "source extension '" + backend.source_extension() + "' that " +
                                  backend.name() + " claims; give it its own extension");
  }
  registry().push_back(&backend);
}

const Backend* find_backend(std::string_view name) {
  for (const Backend* b : all_backends())
    if (b->name() == name) return b;
  return nullptr;
}

const Backend& require_backend(std::string_view name) {
  if (const Backend* b = find_backend(name)) return *b;
  throw std::invalid_argument("unknown backend '" + std::string(name) +
                              "'; available: " + backend_names());
}

const Backend* backend_for_extension(std::string_view ext) {
  for (const Backend* b : all_backends())
    if (b->source_extension() == ext) return b;
  return nullptr;
}

std::string backend_names(const std::function<bool(const Backend&)>& which) {
  std::string s;
  for (const Backend* b : all_backends())
    if (!which || which(*b)) s += (s.empty() ? "" : ", ") + b->name();
  return s;
}

const Backend* backend_for_torch_device(std::string_view torch_device) {
  for (const Backend* b : all_backends())
    if (b->device().torch_device() == torch_device) return b;
  return nullptr;
}

std::string torch_device_names() {
  std::vector<std::string> seen;
  for (const Backend* b : all_backends()) {
    const std::string d = b->device().torch_device();
    bool dup = false;
    for (const auto& x : seen) dup = dup || x == d;
    if (!dup) seen.push_back(d);
  }
  std::string s;
  for (std::size_t i = 0; i < seen.size(); ++i)
    s += (i == 0 ? "" : i + 1 == seen.size() ? " or " : ", ") + seen[i];
  return s;
}

}  // namespace vb
