// AMD GPU detection (issue 17 step 2, item 6; src/targets/amd_detect.h): the tools' JSON is
// parsed from fixtures (tests/fixtures/amd/, hand-written in the tools' shapes), detection runs
// fake tools put on a PATH of the test's own, the names map to the spec database's MI300X /
// MI325X / MI355X entries, and a machine without any AMD tool or ROCm driver has no AMD GPU
// and no error.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "core/paths.h"
#include "support.h"
#include "targets/amd_detect.h"
#include "targets/spec_db.h"

namespace vb {
namespace {

namespace fs = std::filesystem;

std::string fixture(const std::string& name) {
  return read_file(test::repo_root() / "tests" / "fixtures" / "amd" / name);
}

// A fresh folder for fake tools (removed by the caller).
fs::path tool_dir(const std::string& tag) {
  const fs::path d = fs::temp_directory_path() / ("vb-amd-" + tag + "-" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

void write_tool(const fs::path& dir, const std::string& name, const std::string& body) {
  const fs::path p = dir / name;
  std::ofstream(p) << "#!/bin/sh\n" << body << "\n";
  fs::permissions(p, fs::perms::owner_all);
}

TEST(AmdDetect, ParsesAmdSmiStaticInBothWrappings) {
  const auto gpus = parse_amd_smi_static(fixture("amd-smi-static-asic.json"));
  ASSERT_EQ(gpus.size(), 2u);
  EXPECT_EQ(gpus[1].index, 1);
  EXPECT_EQ(gpus[0].name, "AMD Instinct MI300X");
  EXPECT_EQ(gpus[0].gfx_arch, "gfx942");
  EXPECT_EQ(gpus[0].compute_units, 304);
  EXPECT_EQ(gpus[0].detected_by, "amd-smi static --asic --json");
  // Older amd-smi: the bare list; "N/A" is unreported; an entry without "asic" is skipped.
  const auto old = parse_amd_smi_static(
      R"([{"gpu": 3, "asic": {"market_name": "N/A", "target_graphics_version": "gfx950"}},
          {"gpu": 4}])");
  ASSERT_EQ(old.size(), 1u);
  EXPECT_EQ(old[0].index, 3);
  EXPECT_EQ(old[0].name, "");
  EXPECT_EQ(old[0].gfx_arch, "gfx950");
  EXPECT_THROW(parse_amd_smi_static("AMD SMI not initialized"), std::invalid_argument);
  EXPECT_THROW(parse_amd_smi_static(R"({"gpus": 2})"), std::invalid_argument);
}

TEST(AmdDetect, ParsesRocmSmiProductNamesAndTheTorchProbe) {
  const auto cards = parse_rocm_smi_product(fixture("rocm-smi-productname.json"));
  ASSERT_EQ(cards.size(), 2u);  // "system" is not a card
  EXPECT_EQ(cards[0].index, 0);
  EXPECT_EQ(cards[0].name, "AMD Instinct MI325X");
  EXPECT_EQ(cards[0].gfx_arch, "gfx942");
  EXPECT_EQ(cards[1].gfx_arch, "gfx1100");
  EXPECT_THROW(parse_rocm_smi_product("[1, 2]"), std::invalid_argument);

  const auto t = parse_torch_hip_probe(fixture("torch-hip-probe.json"));
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].name, "AMD Instinct MI355X");
  EXPECT_EQ(t[0].gfx_arch, "gfx950") << "feature flags dropped";
  EXPECT_EQ(t[0].compute_units, 256);
  EXPECT_NE(t[0].detected_by.find("torch.version.hip"), std::string::npos);
  // A CUDA or CPU build of torch: hip is null, whatever devices it sees.
  EXPECT_TRUE(parse_torch_hip_probe(R"({"hip": null, "devices": [{"name": "NVIDIA H200"}]})").empty());
  EXPECT_THROW(parse_torch_hip_probe("{}"), std::invalid_argument);
}

TEST(AmdDetect, NamesMapToTheirSpecEntriesAndTheArchAloneNeverDecides) {
  const auto db = load_spec_db();
  auto id = [&](const std::string& name, const std::string& arch) {
    AmdGpuInfo g;
    g.name = name;
    g.gfx_arch = arch;
    const TargetSpec* t = match_amd_device(db, g);
    return t ? t->id : std::string("none");
  };
  EXPECT_EQ(id("AMD Instinct MI300X", "gfx942"), "mi300x");
  EXPECT_EQ(id("Instinct MI300X", ""), "mi300x");
  EXPECT_EQ(id("AMD Instinct MI325X", "gfx942"), "mi325x");
  EXPECT_EQ(id("AMD Instinct MI355X", "gfx950"), "mi355x");
  EXPECT_EQ(id("AMD Instinct MI250X", "gfx90a"), "mi250x");
  EXPECT_EQ(id("AMD Instinct MI300A", "gfx942"), "none");   // an APU, not in the database
  EXPECT_EQ(id("AMD Instinct MI300X", "gfx950"), "none");   // name and arch disagree
  EXPECT_EQ(id("", "gfx942"), "none");                      // MI300X, MI300A or MI325X?
  EXPECT_EQ(id("NVIDIA H200", ""), "none");
}

TEST(AmdDetect, DetectionRunsTheToolsOnPathInOrderAndFallsBack) {
  const fs::path dir = tool_dir("detect");
  const fs::path fx = test::repo_root() / "tests" / "fixtures" / "amd";
  AmdDetectOptions o;
  o.path = dir.string();
  o.kfd = dir / "no-kfd";
  // No tool, no ROCm driver: nothing, no error, and the reason.
  std::string why;
  EXPECT_TRUE(detect_amd_gpus(&why, o).empty());
  EXPECT_NE(why.find("neither amd-smi nor rocm-smi is on PATH"), std::string::npos) << why;
  EXPECT_NE(why.find("does not exist"), std::string::npos) << why;
  // amd-smi (the fake that prints the fixture) wins.
  fs::create_symlink(fx / "fake-amd-smi.sh", dir / "amd-smi");
  write_tool(dir, "rocm-smi", "cat '" + (fx / "rocm-smi-productname.json").string() + "'");
  auto gpus = detect_amd_gpus(&why, o);
  ASSERT_EQ(gpus.size(), 2u) << why;
  EXPECT_EQ(gpus[0].name, "AMD Instinct MI300X");
  // A failing amd-smi: rocm-smi answers.
  fs::remove(dir / "amd-smi");
  write_tool(dir, "amd-smi", "echo 'amdgpu driver not loaded' >&2; exit 1");
  gpus = detect_amd_gpus(&why, o);
  ASSERT_EQ(gpus.size(), 2u) << why;
  EXPECT_EQ(gpus[0].name, "AMD Instinct MI325X");
  EXPECT_EQ(gpus[0].detected_by, "rocm-smi --showproductname --json");
  // Neither tool answers, but the ROCm driver is there: a ROCm torch answers.
  fs::remove(dir / "rocm-smi");
  std::ofstream(dir / "kfd") << "";
  o.kfd = dir / "kfd";
  write_tool(dir, "python", "cat '" + (fx / "torch-hip-probe.json").string() + "'");
  o.python = (dir / "python").string();
  gpus = detect_amd_gpus(&why, o);
  ASSERT_EQ(gpus.size(), 1u) << why;
  EXPECT_EQ(gpus[0].gfx_arch, "gfx950");
  // A CUDA build of torch: no AMD GPU, and the notes say what each source answered.
  write_tool(dir, "python", R"(echo '{"hip": null, "devices": []}')");
  EXPECT_TRUE(detect_amd_gpus(&why, o).empty());
  EXPECT_NE(why.find("amd-smi exited with 1: amdgpu driver not loaded"), std::string::npos) << why;
  EXPECT_NE(why.find("not a ROCm build"), std::string::npos) << why;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace vb
