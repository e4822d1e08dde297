// `vladbud export` end to end through the CLI (the Python half, python/vladbud/hf_export.py, is
// tested in python/tests/test_hf_export.py, which also builds and loads a variant): the source tree
// of a CUDA starter (no build: no GPU is needed to write it), and bad input refused with exit
// code 2 and a message naming the fix.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/paths.h"
#include "core/process.h"
#include "support.h"

namespace vb {
namespace {

namespace fs = std::filesystem;

ProcessResult vladbud(std::vector<std::string> args, const fs::path& cwd) {
  args.insert(args.begin(), vb::test::binary_dir() + "/vladbud");
  return run_process(args, std::chrono::minutes(5), cwd);
}

fs::path temp_dir(const std::string& name) {
  auto d = fs::temp_directory_path() / ("vb-export-" + std::to_string(::getpid()) + "-" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::string starter(const std::string& f) { return (test::repo_root() / "kernels" / f).string(); }

TEST(Export, WritesTheKernelBuilderTreeOfACudaStarter) {
  const auto d = temp_dir("tree");
  auto r = vladbud({"export", "--kernel", starter("cuda/rmsnorm.cu"), "--name", "vb-rmsnorm", "--out", "pkg",
                    "--cuda-arch", "9.0a", "--no-build", "--json"},
                   d);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["type"], "rmsnorm");
  EXPECT_EQ(j["backend"], "cuda");
  EXPECT_EQ(j["package"], "vb_rmsnorm");
  EXPECT_TRUE(j["build"].is_null());
  EXPECT_EQ(j["layers"], nlohmann::json::array({"RMSNorm"}));
  const fs::path p = d / "pkg";
  for (const char* f : {"build.toml", "torch-ext/torch_binding.cpp", "torch-ext/torch_binding.h",
                        "torch-ext/vb_rmsnorm/__init__.py", "torch-ext/vb_rmsnorm/layers.py",
                        "vb_rmsnorm_cuda/rmsnorm.cu", "vb_rmsnorm_cuda/vb_cuda.cuh",
                        "tests/test_vb_rmsnorm.py", "benchmarks/benchmark_vb_rmsnorm.py"})
    EXPECT_TRUE(fs::is_regular_file(p / f)) << f;
  const std::string toml = read_file(p / "build.toml");
  EXPECT_NE(toml.find("edition = 5"), std::string::npos) << toml;
  EXPECT_NE(toml.find("name = \"vb-rmsnorm\""), std::string::npos) << toml;
  EXPECT_NE(toml.find("cuda-capabilities = [\"9.0a\"]"), std::string::npos) << toml;
  EXPECT_NE(read_file(p / "torch-ext/vb_rmsnorm/__init__.py").find("from ._ops import ops"), std::string::npos);
  // A second export into the same folder needs --force.
  auto again = vladbud({"export", "-k", starter("cuda/rmsnorm.cu"), "--name", "vb-rmsnorm", "-o", "pkg",
                        "--no-build"},
                       d);
  EXPECT_EQ(again.exit_code, 2);
  EXPECT_NE(again.err.find("pass --force"), std::string::npos) << again.err;
  auto forced = vladbud({"export", "-k", starter("cuda"), "--type", "fused_mlp", "--name", "vb-rmsnorm", "-o",
                         "pkg", "--no-build", "--force"},
                        d);
  EXPECT_EQ(forced.exit_code, 0) << forced.err;
  EXPECT_NE(forced.out.find("kernelize layers: LlamaMLP"), std::string::npos) << forced.out;
  EXPECT_TRUE(fs::exists(p / "vb_rmsnorm_cuda/fused_mlp.cu"));
  EXPECT_FALSE(fs::exists(p / "vb_rmsnorm_cuda/rmsnorm.cu"));
}

TEST(Export, BadInputExitsTwoNamingTheFix) {
  const auto d = temp_dir("bad");
  struct Case {
    std::vector<std::string> args;
    std::string says;
  };
  const std::vector<Case> cases = {
      {{"--kernel", starter("cuda/rmsnorm.cu"), "--name", "VbRms"}, "not a valid package name"},
      {{"--kernel", starter("cuda/rmsnorm.cu"), "--name", "import"}, "Python keyword"},
      {{"--kernel", (d / "nope").string(), "--name", "vb_x"}, "no such file or folder"},
      {{"--kernel", starter("triton/rmsnorm.py"), "--name", "vb_x"},
       "triton kernels are not compiled into such a library"},
      {{"--kernel", starter("cuda"), "--name", "vb_x"}, "give --type"},
      {{"--kernel", starter("cuda"), "--type", "conv", "--name", "vb_x"}, "unknown kernel type"},
      {{"--kernel", starter("cuda/rmsnorm.cu"), "--name", "vb_x", "--cuda-arch", "sm_90"},
       "not a compute capability"},
      {{"--kernel", starter("cuda/rmsnorm.cu"), "--name", "vb_x", "--version", "0"}, "--version must be"},
      {{"--kernel", starter("cuda/rmsnorm.cu")}, "--name is required"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> a = {"export"};
    a.insert(a.end(), c.args.begin(), c.args.end());
    a.push_back("--no-build");
    auto r = vladbud(a, d);
    EXPECT_EQ(r.exit_code, 2) << c.says << ": " << r.err;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << c.says << ": " << r.err;
  }
  EXPECT_TRUE(fs::is_empty(d)) << "a refused export wrote nothing";
}

}  // namespace
}  // namespace vb
