// `vladbud export`: the request for python -m vladbud.hf_export; see hf_export.h.
#include "bridge/hf_export.h"

#include <unistd.h>

#include "bridge/bridge.h"

namespace vb {

namespace fs = std::filesystem;
using nlohmann::json;

json hf_export(const HfExportOptions& o) {
  if (o.kernel.empty())
    throw BridgeUsageError("--kernel is required: a kernel folder (problem.json), a starters folder with "
                           "--type, or a .cu/.cpp kernel source");
  if (o.version < 1) throw BridgeUsageError("--version must be 1 or more (the package's major version)");
  json req = {{"kernel", fs::absolute(o.kernel).string()},
              {"name", o.name},
              {"out", o.out.empty() ? json(nullptr) : json(fs::absolute(o.out).string())},
              {"type", o.type.empty() ? json(nullptr) : json(o.type)},
              {"force", o.force},
              {"build", o.build},
              {"cuda_archs", o.cuda_archs.empty() ? json(nullptr) : json(o.cuda_archs)},
              {"license", o.license},
              {"version", o.version}};
  const fs::path scratch = fs::temp_directory_path() / ("vladbud-export-" + std::to_string(::getpid()));
  json res = run_bridge("hf_export", req, scratch, std::chrono::seconds(1800));
  std::error_code ec;
  fs::remove_all(scratch, ec);
  return res;
}

}  // namespace vb
