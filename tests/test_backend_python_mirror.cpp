// The Python bridge's table of backends (python/vladbud/backends.py, the one Python module that
// names them) mirrors the C++ registry: the same names in the same order, each with its
// registered source extension, its device's torch device string and whether it serves torch ops.
// A backend added on one side only fails here, naming the difference.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "backends/backend.h"
#include "core/paths.h"
#include "core/process.h"

namespace vb {
namespace {

TEST(BackendPythonMirror, MatchesTheRegistry) {
  const std::string py = project_python();
  if (!have_program(py)) GTEST_SKIP() << "no Python interpreter '" << py << "' (scripts/setup.sh)";
  const std::string pkg = (vladbud_home() / "python").string();
  const ProcessResult r = run_process(
      {py, "-c",
       "import sys; sys.path.insert(0, sys.argv[1]); from vladbud import backends; "
       "print(backends.to_json())",
       pkg});
  ASSERT_TRUE(r.ok()) << r.err;
  const nlohmann::json table = nlohmann::json::parse(r.out);
  ASSERT_TRUE(table.is_array());
  const auto& cpp = all_backends();
  ASSERT_EQ(table.size(), cpp.size()) << "python/vladbud/backends.py lists " << table.dump()
                                      << "; the C++ registry: " << backend_names();
  for (std::size_t i = 0; i < cpp.size(); ++i) {
    const Backend& b = *cpp[i];
    const auto& p = table[i];
    EXPECT_EQ(p.value("name", ""), b.name()) << "entry " << i;
    EXPECT_EQ(p.value("extension", ""), b.source_extension()) << b.name();
    EXPECT_EQ(p.value("torch_device", ""), b.device().torch_device()) << b.name();
    EXPECT_EQ(p.value("serves_torch_ops", !b.serves_torch_ops()), b.serves_torch_ops()) << b.name();
  }
}

}  // namespace
}  // namespace vb
