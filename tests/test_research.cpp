// Tests of src/research: capability probes on this machine's toolchains (ptxas, g++, the aarch64
// cross compiler), their cache, the reference corpus, the playbooks and the knowledge cards.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "core/paths.h"
#include "core/process.h"
#include "kernels/kernel_type.h"
#include "research/capabilities.h"
#include "research/corpus.h"
#include "research/knowledge.h"
#include "targets/nvidia_detect.h"
#include "targets/spec_db.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace vb {
namespace {

class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_)
      ::setenv(name_, old_->c_str(), 1);
    else
      ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

fs::path make_temp_dir(const std::string& tag) {
  std::string templ = (fs::temp_directory_path() / ("vb_" + tag + "_XXXXXX")).string();
  if (!::mkdtemp(templ.data())) throw std::runtime_error("mkdtemp failed");
  return templ;
}

bool contains(const std::string& s, const std::string& n) {
  return s.find(n) != std::string::npos;
}

// Every probe test gets a fresh cache so that a verdict is really compiled, not remembered.
class CapabilityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = make_temp_dir("caps");
    env_.emplace("VB_CACHE_DIR", dir_.string());
  }
  void TearDown() override {
    env_.reset();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  static CapabilityResult probe(const std::string& id, const std::string& arch) {
    const CapabilityProbe* p = find_capability_probe(id);
    if (!p) throw std::runtime_error("no probe " + id);
    return run_capability_probe(*p, arch);
  }
  fs::path dir_;
  std::optional<ScopedEnv> env_;
};

std::string show(const CapabilityResult& r) {
  return r.probe + "@" + r.arch + ": " + cap_status_name(r.status) + " — " + r.reason + " [" +
         r.tool + "] " + r.note;
}

bool have_ptxas() {
  return have_program("ptxas") || have_program("/usr/local/cuda/bin/ptxas");
}

// ---- NVIDIA (ptxas) -----------------------------------------------------------------------

TEST_F(CapabilityTest, PtxasAcceptsWgmmaForSm90aAndRejectsItForSm90) {
  if (!have_ptxas()) GTEST_SKIP() << "ptxas not installed";
  const auto a = probe("wgmma", "sm_90a");
  EXPECT_EQ(a.status, CapStatus::kAccepted) << show(a);
  const auto b = probe("wgmma", "sm_90");
  EXPECT_EQ(b.status, CapStatus::kRejected) << show(b);
  EXPECT_TRUE(contains(b.reason, "not supported on .target 'sm_90'")) << show(b);
  EXPECT_TRUE(contains(b.note, "control: accepted for sm_90a")) << show(b);
  EXPECT_TRUE(contains(b.tool, "ptxas")) << show(b);
}

TEST_F(CapabilityTest, PtxasAcceptsTcgen05ForSm100aOnly) {
  if (!have_ptxas()) GTEST_SKIP() << "ptxas not installed";
  const auto a = probe("tcgen05", "sm_100a");
  EXPECT_EQ(a.status, CapStatus::kAccepted) << show(a);
  const auto b = probe("tcgen05", "sm_120");
  EXPECT_EQ(b.status, CapStatus::kRejected) << show(b);
  const auto c = probe("tcgen05", "sm_90a");
  EXPECT_EQ(c.status, CapStatus::kRejected) << show(c);
}

TEST_F(CapabilityTest, Tcgen05ForSm121IsRejectedOrHonestlyUnavailable) {
  if (!have_ptxas()) GTEST_SKIP() << "ptxas not installed";
  const auto r = probe("tcgen05", "sm_121");
  if (r.status == CapStatus::kUnavailable) {
    // An older ptxas that does not know sm_121 must say so, never "rejected".
    EXPECT_TRUE(contains(r.reason, "sm_121")) << show(r);
  } else {
    EXPECT_EQ(r.status, CapStatus::kRejected) << show(r);
  }
  const auto a = probe("tcgen05", "sm_121a");
  EXPECT_NE(a.status, CapStatus::kAccepted) << show(a);  // GB10 has no tcgen05/TMEM
  EXPECT_NE(a.status, CapStatus::kError) << show(a);
}

TEST_F(CapabilityTest, MmaSyncBf16NeedsSm80AndTmaNeedsSm90) {
  if (!have_ptxas()) GTEST_SKIP() << "ptxas not installed";
  EXPECT_EQ(probe("mma_sync_bf16", "sm_80").status, CapStatus::kAccepted);
  EXPECT_EQ(probe("mma_sync_bf16", "sm_75").status, CapStatus::kRejected);
  EXPECT_EQ(probe("cp_async_bulk_tensor", "sm_90").status, CapStatus::kAccepted);
  EXPECT_EQ(probe("cp_async_bulk_tensor", "sm_80").status, CapStatus::kRejected);
  EXPECT_EQ(probe("mma_sync_fp8", "sm_89").status, CapStatus::kAccepted);
  EXPECT_EQ(probe("mma_sync_fp8", "sm_80").status, CapStatus::kRejected);
}

TEST_F(CapabilityTest, UnknownSmIsUnavailableNotRejected) {
  if (!have_ptxas()) GTEST_SKIP() << "ptxas not installed";
  const auto r = probe("wgmma", "sm_999");
  EXPECT_EQ(r.status, CapStatus::kUnavailable) << show(r);
  EXPECT_TRUE(contains(r.reason, "does not know sm_999")) << show(r);
}

TEST_F(CapabilityTest, MissingPtxasIsUnavailable) {
  ScopedEnv env("VB_PTXAS", "/nonexistent/bin/ptxas");
  const auto r = probe("wgmma", "sm_90a");
  EXPECT_EQ(r.status, CapStatus::kUnavailable) << show(r);
  EXPECT_TRUE(contains(r.reason, "unavailable: ptxas not installed")) << show(r);
}

// ---- x86 (g++ / clang) --------------------------------------------------------------------

TEST_F(CapabilityTest, SapphireRapidsHasAmxAndAvx512Bf16) {
  const auto amx = probe("amx_bf16", "sapphirerapids");
  EXPECT_EQ(amx.status, CapStatus::kAccepted) << show(amx);
  const auto bf16 = probe("avx512_bf16", "sapphirerapids");
  EXPECT_EQ(bf16.status, CapStatus::kAccepted) << show(bf16);
}

TEST_F(CapabilityTest, Zen3RejectsAvx512ButHasAvx2) {
  const auto r = probe("avx512f", "znver3");
  EXPECT_EQ(r.status, CapStatus::kRejected) << show(r);
  EXPECT_TRUE(contains(r.reason, "VB_PROBE_REJECT")) << show(r);
  EXPECT_TRUE(contains(r.note, "control: accepted")) << show(r);
  EXPECT_EQ(probe("avx2_fma", "znver3").status, CapStatus::kAccepted);
  EXPECT_EQ(probe("amx_bf16", "znver3").status, CapStatus::kRejected);
}

TEST_F(CapabilityTest, Zen4Avx512IsAcceptedOrTheCompilerSaysItDoesNotKnowZen4) {
  const auto r = probe("avx512f", "znver4");
  if (r.status == CapStatus::kUnavailable) {
    EXPECT_TRUE(contains(r.reason, "not know -march=znver4")) << show(r);  // e.g. GCC 12.2
  } else {
    EXPECT_EQ(r.status, CapStatus::kAccepted) << show(r);
  }
}

TEST_F(CapabilityTest, MissingCompilerIsUnavailableNeverANo) {
  const fs::path empty = dir_ / "empty-bin";
  fs::create_directories(empty);
  ScopedEnv path("PATH", empty.string());
  const auto r = probe("avx512f", "znver3");
  EXPECT_EQ(r.status, CapStatus::kUnavailable) << show(r);
  EXPECT_TRUE(contains(r.reason, "not installed")) << show(r);
}

// ---- aarch64 (cross compiler) -------------------------------------------------------------

TEST_F(CapabilityTest, NeoverseV2HasSve2ThroughTheCrossCompiler) {
  const auto r = probe("sve2", "neoverse-v2");
  if (!have_program("aarch64-linux-gnu-g++") && !have_program("clang++")) {
    EXPECT_EQ(r.status, CapStatus::kUnavailable) << show(r);
    EXPECT_TRUE(contains(r.reason, "not installed")) << show(r);
    return;
  }
  EXPECT_EQ(r.status, CapStatus::kAccepted) << show(r);
  EXPECT_EQ(probe("bf16_mmla", "neoverse-v2").status, CapStatus::kAccepted);
  const auto n1 = probe("sve2", "neoverse-n1");
  EXPECT_EQ(n1.status, CapStatus::kRejected) << show(n1);
}

// ---- cache ----------------------------------------------------------------------------------

TEST_F(CapabilityTest, SecondCallIsACacheHitAndRefreshRecompiles) {
  const CapabilityProbe* p = find_capability_probe("avx2_fma");
  ASSERT_NE(p, nullptr);
  const auto first = run_capability_probe(*p, "haswell");
  EXPECT_FALSE(first.cached);
  EXPECT_EQ(first.status, CapStatus::kAccepted) << show(first);
  ASSERT_TRUE(fs::exists(capability_cache_dir()));
  std::size_t files = 0;
  for (const auto& e : fs::directory_iterator(capability_cache_dir()))
    files += e.path().extension() == ".json" ? 1 : 0;
  EXPECT_EQ(files, 1u);
  const auto second = run_capability_probe(*p, "haswell");
  EXPECT_TRUE(second.cached);
  EXPECT_EQ(second.status, first.status);
  EXPECT_EQ(second.tool, first.tool);
  EXPECT_EQ(second.checked_at, first.checked_at);
  const auto third = run_capability_probe(*p, "haswell", /*refresh=*/true);
  EXPECT_FALSE(third.cached);
  EXPECT_EQ(third.status, CapStatus::kAccepted);
}

TEST_F(CapabilityTest, ProbeCapabilitiesCoversTheArchitectureSpecificVariant) {
  if (!have_ptxas()) GTEST_SKIP() << "ptxas not installed";
  const auto rs = probe_capabilities(ProbeIsa::kNvptx, "sm_90");
  std::set<std::string> arches;
  for (const auto& r : rs) {
    arches.insert(r.arch);
    EXPECT_NE(r.status, CapStatus::kError) << show(r);
  }
  EXPECT_EQ(arches, (std::set<std::string>{"sm_90", "sm_90a"}));
}

TEST(CapabilityResultJson, RoundTrips) {
  CapabilityResult r;
  r.probe = "wgmma";
  r.isa = "nvptx";
  r.arch = "sm_90a";
  r.feature = "f";
  r.status = CapStatus::kRejected;
  r.reason = "why";
  const json j = r;
  EXPECT_EQ(j.at("status"), "rejected");
  const CapabilityResult back = j.get<CapabilityResult>();
  EXPECT_EQ(back.status, CapStatus::kRejected);
  EXPECT_EQ(back.reason, "why");
  json bad = j;
  bad["status"] = "maybe";
  EXPECT_THROW(bad.get<CapabilityResult>(), std::invalid_argument);
}

// ---- corpus ---------------------------------------------------------------------------------

TEST(Corpus, EveryKernelTypeHasACitedCorpus) {
  ASSERT_EQ(all_kernel_types().size(), 9u);
  for (const KernelType* kt : all_kernel_types()) {
    SCOPED_TRACE(kt->name());
    const KernelCorpus c = load_corpus(kt->name());
    EXPECT_EQ(c.kernel_type, kt->name());
    EXPECT_GT(c.algorithm.size(), 200u);
    ASSERT_FALSE(c.baselines.empty());
    bool url = false;
    for (const auto& b : c.baselines) {
      EXPECT_FALSE(b.claim.empty());
      EXPECT_FALSE(b.source.empty());
      EXPECT_GT(b.value, 0);
      url = url || b.source.rfind("https://", 0) == 0;
    }
    EXPECT_TRUE(url) << "no baseline cites a URL";
  }
  // No stray corpus file for a type that does not exist.
  for (const auto& t : corpus_types()) EXPECT_NE(find_kernel_type(t), nullptr) << t;
}

TEST(Corpus, BaselineTargetsAreSpecIds) {
  const auto db = load_spec_db();
  for (const auto& t : corpus_types())
    for (const auto& b : load_corpus(t).baselines)
      for (const auto& id : b.targets) EXPECT_NE(find_target(db, id), nullptr) << t << ": " << id;
}

TEST(Corpus, BrokenFileIsRefusedWithPathAndField) {
  const fs::path dir = make_temp_dir("corpus");
  write_file_atomic(dir / "softmax.json",
                    R"({"kernel_type": "softmax", "algorithm": "x", "baselines": [
                         {"implementation": "a", "hardware": "b", "metric": "m", "value": 1,
                          "unit": "u", "claim": "c", "source": ""}]})");
  try {
    load_corpus("softmax", dir);
    FAIL() << "expected a refusal";
  } catch (const std::runtime_error& e) {
    EXPECT_TRUE(contains(e.what(), "softmax.json")) << e.what();
    EXPECT_TRUE(contains(e.what(), "baselines[0].source")) << e.what();
  }
  write_file_atomic(dir / "reduce.json",
                    R"({"kernel_type": "softmax", "algorithm": "x", "baselines": []})");
  EXPECT_THROW(load_corpus("reduce", dir), std::runtime_error);
  write_file_atomic(dir / "matmul.json",
                    R"({"kernel_type": "matmul", "algorithm": "x", "baselines": [
                         {"implementation": "a", "hardware": "b", "metric": "m", "value": 1,
                          "unit": "u", "claim": "c", "source": "a book"}]})");
  try {
    load_corpus("matmul", dir);
    FAIL() << "a corpus with no URL source must be refused";
  } catch (const std::runtime_error& e) {
    EXPECT_TRUE(contains(e.what(), "URL")) << e.what();
  }
  EXPECT_THROW(load_corpus("rmsnorm", dir), std::runtime_error);  // missing file
  fs::remove_all(dir);
}

TEST(Corpus, ReferenceLineForATarget) {
  const std::string fa = corpus_reference("flash_attention", "h100-sxm");
  EXPECT_TRUE(contains(fa, "arxiv.org")) << fa;
  EXPECT_EQ(corpus_reference("flash_attention", "no-such-target"), "");
  EXPECT_EQ(corpus_reference("no_such_type", "h100-sxm"), "");
}

// ---- playbooks and index --------------------------------------------------------------------

TEST(Playbooks, CoverTheGpuCpuAndTpuFamiliesWithSources) {
  const auto db = load_spec_db();
  std::set<std::string> checked;
  for (const auto& s : db) {
    const bool covered = (s.kind == "gpu" && (s.vendor == "NVIDIA" || s.vendor == "AMD")) ||
                         s.kind == "cpu" || s.family == "google-tpu";
    if (!covered || !checked.insert(s.family).second) continue;
    SCOPED_TRACE(s.id + " / " + s.family);
    const auto pb = playbook_for_family(s.family);
    ASSERT_TRUE(pb.has_value());
    std::size_t bullets = 0, urls = 0, pos = 0;
    while ((pos = pb->text.find("\n- **", pos)) != std::string::npos) ++bullets, ++pos;
    pos = 0;
    while ((pos = pb->text.find("https://", pos)) != std::string::npos) ++urls, ++pos;
    EXPECT_GE(bullets, 5u);
    EXPECT_LE(bullets, 10u);
    EXPECT_GE(urls, bullets) << "every bullet cites a source";
  }
  EXPECT_GE(checked.size(), 7u);
  EXPECT_FALSE(playbook_for_family("no-such-family").has_value());
}

TEST(KnowledgeIndex, ToolchainNamesRefersToSpecTargets) {
  const auto db = load_spec_db();
  const json idx = json::parse(read_file(vladbud_home() / "data" / "knowledge" / "index.json"));
  for (const auto& [id, v] : idx.at("toolchain_arch").items()) {
    if (id.rfind('_', 0) == 0) continue;
    EXPECT_NE(find_target(db, id), nullptr) << id;
  }
  for (const auto& s : db) {
    const auto pt = probe_target_for(s);
    if (s.kind == "cpu") {
      EXPECT_TRUE(pt.has_value()) << s.id;
    }
    if (s.vendor == "NVIDIA" && s.kind == "gpu") {
      ASSERT_TRUE(pt.has_value()) << s.id;
      EXPECT_EQ(pt->isa, ProbeIsa::kNvptx);
      EXPECT_EQ(pt->arch.back() == 'a', false) << pt->arch;  // base arch; 'a' is added
    }
  }
}

// ---- generation constraints and cards -------------------------------------------------------

TEST(Constraints, DerivedFromProbesAndSpec) {
  TargetSpec cpu;
  cpu.id = "test-cpu";
  cpu.kind = "cpu";
  cpu.vendor = "Test";
  cpu.isa = "x86-64-v4";
  cpu.raw = json{{"vector_width", {{"name", "AVX-512"}, {"bits", 512}, {"fp32_lanes", 16}}},
                 {"caches", {{"l2_kb_per_core", 2048}}},
                 {"matrix_instructions", {"spec says AMX"}}};
  auto res = [](std::string id, CapStatus s, std::string fam = "") {
    CapabilityResult r;
    r.probe = id;
    r.isa = "x86";
    r.arch = "testarch";
    r.status = s;
    r.matrix_family = fam;
    r.tool = "g++ test";
    return r;
  };
  json c = generation_constraints(
      cpu, {res("avx2_fma", CapStatus::kAccepted), res("avx512f", CapStatus::kRejected),
            res("amx_bf16", CapStatus::kRejected, "AMX")});
  EXPECT_EQ(c["vector_width_bytes"]["value"], 32);
  EXPECT_EQ(c["on_chip_memory_per_block_bytes"]["value"], 2048 * 1024);
  EXPECT_TRUE(c["matrix_instructions"]["value"].empty());  // probes said no: the spec is not used
  EXPECT_EQ(c["compile_target"]["flags"], "-march=testarch");
  c = generation_constraints(
      cpu, {res("avx512f", CapStatus::kAccepted), res("amx_bf16", CapStatus::kAccepted, "AMX")});
  EXPECT_EQ(c["vector_width_bytes"]["value"], 64);
  EXPECT_EQ(c["matrix_instructions"]["value"], json::array({"AMX"}));
  c = generation_constraints(cpu, {});  // nothing could be probed: fall back to the spec
  EXPECT_EQ(c["vector_width_bytes"]["value"], 64);
  EXPECT_EQ(c["matrix_instructions"]["value"], json::array({"spec says AMX"}));
}

class CardTest : public CapabilityTest {};

TEST_F(CardTest, UnknownTargetErrorsClearly) {
  try {
    research_card("no-such-target");
    FAIL() << "expected UnknownTargetError";
  } catch (const UnknownTargetError& e) {
    EXPECT_TRUE(contains(e.what(), "unknown target 'no-such-target'")) << e.what();
    EXPECT_TRUE(contains(e.what(), "h200")) << e.what();
    EXPECT_TRUE(contains(e.what(), "local")) << e.what();
  }
}

TEST_F(CardTest, H200CardHasSpecProbesConstraintsAndPlaybook) {
  if (!have_ptxas()) GTEST_SKIP() << "ptxas not installed";
  const json card = research_card("h200");
  EXPECT_EQ(card["target"], "h200");
  EXPECT_EQ(card["spec"]["id"], "h200");
  ASSERT_EQ(card["capabilities"].size(), 1u);
  EXPECT_EQ(card["capabilities"][0]["arch"], "sm_90");
  const json& c = card["constraints"];
  EXPECT_EQ(c["compile_target"]["value"], "sm_90a");
  EXPECT_EQ(c["simd_group"]["width"], 32);
  EXPECT_EQ(c["vector_width_bytes"]["value"], 16);
  EXPECT_EQ(c["on_chip_memory_per_block_bytes"]["value"], 227 * 1024);
  const auto m = c["matrix_instructions"]["value"].get<std::vector<std::string>>();
  EXPECT_NE(std::find(m.begin(), m.end(), "wgmma (sm_90a)"), m.end()) << c.dump();
  EXPECT_EQ(std::find(m.begin(), m.end(), "tcgen05"), m.end()) << c.dump();
  EXPECT_EQ(card["playbook"]["title"], "NVIDIA Hopper");
  std::string why;
  if (detect_nvidia_gpus(&why).empty()) {
    EXPECT_FALSE(card["local"]["present"].get<bool>());
  }
  EXPECT_TRUE(contains(format_card(card), "wgmma")) << format_card(card);
}

TEST_F(CardTest, TpuCardHasNoProbesButSpecConstraints) {
  const json card = research_card("tpu-v5e");
  EXPECT_TRUE(card["capabilities"].empty());
  EXPECT_TRUE(card.contains("capabilities_note"));
  EXPECT_EQ(card["playbook"]["title"], "Google TPU (Pallas)");
  EXPECT_FALSE(card["constraints"]["matrix_instructions"]["value"].empty());
}

TEST_F(CardTest, LocalCardDescribesThisMachine) {
  CardOptions o;
  o.measure_local = false;  // no ceiling measurement in a unit test
  const json card = research_card("local", o);
  EXPECT_EQ(card["target"], "local");
  EXPECT_FALSE(card["local"]["cpu"]["model"].get<std::string>().empty());
  std::string why;
  if (detect_nvidia_gpus(&why).empty()) {
    EXPECT_TRUE(card["local"]["gpus"].empty());
    EXPECT_TRUE(contains(card["local"]["gpu_status"].get<std::string>(), "no GPU")) << card.dump();
  }
  ASSERT_FALSE(card["capabilities"].empty());
  EXPECT_EQ(card["capabilities"][0]["arch"], "native");
  for (const auto& r : card["capabilities"][0]["results"])
    EXPECT_NE(r["status"], "error") << r.dump();
}

TEST_F(CardTest, FormatsALocalCardWithAGpu) {
  CardOptions o;
  o.measure_local = false;
  o.probes = false;
  json card = research_card("local", o);
  GpuInfo g;
  g.name = "NVIDIA H200";
  g.cc_major = 9;
  g.sm_count = 132;
  g.total_mem_bytes = 150'000'000'000ull;
  g.l2_bytes = 60u << 20;
  g.smem_per_block_optin_bytes = 232448;
  g.warp_size = 32;
  json ceil = {{"measured", true},
               {"mem_bw_gbs", 4300.0},
               {"peak_tflops", {{"bf16", 780.0}, {"fp32", 60.0}}}};
  card["local"]["gpus"].push_back(
      {{"info", g}, {"spec", "h200"}, {"derived", false}, {"ceilings", ceil}});
  const json gc = generation_constraints(*find_target(load_spec_db(), "h200"), {}, json(g));
  EXPECT_EQ(gc["compile_target"]["value"], "sm_90a");
  EXPECT_EQ(gc["on_chip_memory_per_block_bytes"]["value"], 232448);
  EXPECT_EQ(gc["simd_group"]["width"], 32);
  card["constraints"]["gpus"].push_back(gc);
  const std::string text = format_card(card);
  EXPECT_TRUE(contains(text, "NVIDIA H200 (sm_90, 132 SMs")) << text;
  EXPECT_TRUE(contains(text, "memory 4300 GB/s")) << text;
  EXPECT_TRUE(contains(text, "(GPU 0)")) << text;
}

}  // namespace
}  // namespace vb
