// Tests of src/targets/spec_db: the real spec database, schema validation of broken files, the
// mapping of detected devices to database entries and the derived specs of unknown devices.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "core/paths.h"
#include "targets/spec_db.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace vb {
namespace {

const std::vector<TargetSpec>& real_db() {
  static const std::vector<TargetSpec> db = load_spec_db();
  return db;
}

const TargetSpec& get(const std::string& id) {
  const TargetSpec* t = find_target(real_db(), id);
  if (!t) throw std::runtime_error("target not in the database: " + id);
  return *t;
}

// ---- the real database ---------------------------------------------------------------------

TEST(SpecDb, RealDatabaseLoadsWithEnoughTargetsAndVendors) {
  const auto& db = real_db();
  EXPECT_GE(db.size(), 20u);
  std::set<std::string> vendors;
  for (const auto& t : db) vendors.insert(t.vendor);
  EXPECT_GE(vendors.size(), 11u) << "vendors: " << vendors.size();
  for (const char* id : {"a100-sxm",
                         "rtx-4090",
                         "h100-sxm",
                         "h200",
                         "b200",
                         "rtx-5090",
                         "gb10",
                         "mi250x",
                         "mi300x",
                         "mi325x",
                         "mi355x",
                         "intel-max-1550",
                         "zen3-epyc",
                         "zen4-epyc",
                         "sapphirerapids",
                         "neoverse-v2",
                         "neoverse-n1",
                         "tpu-v5e",
                         "tpu-v6e",
                         "trainium2",
                         "hexagon",
                         "ascend-910b",
                         "cerebras-wse3",
                         "tenstorrent-wormhole"}) {
    EXPECT_NE(find_target(db, id), nullptr) << id;
  }
  // Sorted by id, ids unique.
  for (std::size_t i = 1; i < db.size(); ++i) EXPECT_LT(db[i - 1].id, db[i].id);
}

TEST(SpecDb, EveryTargetHasSourcesForItsNumbers) {
  for (const auto& t : real_db()) {
    EXPECT_FALSE(t.sources.empty()) << t.id;
    EXPECT_FALSE(t.peak_tflops.empty()) << t.id;
    for (const auto& [k, v] : t.peak_tflops) {
      EXPECT_GT(v, 0) << t.id << " " << k;
      EXPECT_NE(t.source_for("peak_tflops." + k), nullptr) << t.id << " " << k;
    }
    EXPECT_NE(t.source_for("memory_bandwidth_gbs"), nullptr) << t.id;
    EXPECT_NE(t.source_for("memory_gb"), nullptr) << t.id;
    EXPECT_GT(t.memory_bandwidth_gbs, 0) << t.id;
    for (const char* r : {"rung0", "rung1", "rung2"}) EXPECT_TRUE(t.rungs.count(r)) << t.id;
    EXPECT_FALSE(t.derived) << t.id;
    EXPECT_EQ(t.path.stem().string(), t.id);
  }
}

TEST(SpecDb, NvidiaEntriesCarryIdentityAndOccupancyLimits) {
  int n = 0;
  for (const auto& t : real_db()) {
    if (t.vendor != "NVIDIA" || t.kind != "gpu") continue;
    ++n;
    EXPECT_FALSE(t.compute_capability.empty()) << t.id;
    EXPECT_FALSE(t.name_tokens.empty()) << t.id;
    ASSERT_TRUE(t.limits.has_value()) << t.id;
    EXPECT_EQ(t.limits->warp_size, 32) << t.id;
    EXPECT_GT(t.limits->max_threads_per_sm, 0) << t.id;
    EXPECT_GT(t.limits->max_shared_memory_per_block_kb, 0) << t.id;
    EXPECT_LE(t.limits->max_shared_memory_per_block_kb, t.limits->max_shared_memory_per_sm_kb);
  }
  EXPECT_GE(n, 7);
  EXPECT_EQ(get("h200").limits->max_shared_memory_per_sm_kb, 228);
  EXPECT_EQ(get("h200").limits->max_threads_per_sm, 2048);
  EXPECT_EQ(get("rtx-4090").limits->max_threads_per_sm, 1536);
  EXPECT_EQ(get("a100-sxm").compute_capability, "8.0");
  EXPECT_EQ(get("gb10").compute_capability, "12.1");
}

TEST(SpecDb, DensePeaksNotTheSparsityHeadline) {
  // H100 SXM: BF16 dense 989.4 TFLOP/s; the datasheet's 1,979 is with 2:4 sparsity.
  EXPECT_NEAR(get("h100-sxm").peak("bf16").value(), 989.4, 1.0);
  EXPECT_NEAR(get("h100-sxm").peak("fp8").value(), 1978.9, 2.0);
  EXPECT_NEAR(get("h100-sxm").peak("tf32").value(), 494.7, 1.0);
  EXPECT_NEAR(get("a100-sxm").peak("bf16").value(), 312, 1.0);   // not 624
  EXPECT_NEAR(get("mi300x").peak("bf16").value(), 1307.4, 1.0);  // not 2614.9
  EXPECT_NEAR(get("b200").peak("bf16").value(), 2250, 1.0);      // not 4500
  EXPECT_NEAR(get("trainium2").peak("bf16").value(), 667, 1.0);  // not 2563
  // fp32 means true fp32, never the TF32 Tensor Core rate.
  EXPECT_NEAR(get("h100-sxm").peak_for(DType::F32).value(), 67, 0.5);
}

TEST(SpecDb, H200AndH100AreDistinct) {
  const TargetSpec& h200 = get("h200");
  const TargetSpec& h100 = get("h100-sxm");
  EXPECT_EQ(h200.memory_gb, 141);
  EXPECT_EQ(h200.memory_bandwidth_gbs, 4800);
  EXPECT_EQ(h100.memory_gb, 80);
  EXPECT_EQ(h100.memory_bandwidth_gbs, 3350);
  EXPECT_EQ(h200.compute_units, h100.compute_units);
  EXPECT_EQ(h200.compute_units, 132);
  EXPECT_EQ(h200.family, h100.family);  // siblings: one calibrates the other
}

TEST(SpecDb, PeakForFallsBackForSixteenBitDtypes) {
  const TargetSpec& zen3 = get("zen3-epyc");  // no native bf16 arithmetic
  ASSERT_FALSE(zen3.peak("bf16").has_value());
  EXPECT_EQ(zen3.peak_for(DType::BF16), zen3.peak("fp32"));
  EXPECT_EQ(get("mi300x").peak_for(DType::F64).value(), 163.4);   // fp64_matrix wins
  EXPECT_FALSE(get("tpu-v5e").peak_for(DType::F32).has_value());  // no fp32 peak published
}

// ---- schema validation ---------------------------------------------------------------------

fs::path make_temp_dir(const std::string& tag) {
  std::string templ = (fs::temp_directory_path() / ("vb_" + tag + "_XXXXXX")).string();
  if (!::mkdtemp(templ.data())) throw std::runtime_error("mkdtemp failed");
  return templ;
}

// A minimal valid spec named "toy".
json toy_spec() {
  return json::parse(R"({
    "id": "toy", "name": "Toy GPU", "vendor": "ToyCo", "family": "toy", "kind": "gpu",
    "isa": "toy1", "author_surfaces": ["triton"],
    "peak_tflops": {"fp32": 10, "bf16": 100},
    "memory_bandwidth_gbs": 1000, "memory_gb": 16,
    "compute_units": {"count": 8, "kind": "core"},
    "rungs": {"rung0": "none", "rung1": "none", "rung2": "triton interpreter"},
    "sources": {"peak_tflops": "Toy datasheet", "memory_bandwidth_gbs": "Toy datasheet",
                "memory_gb": "Toy datasheet", "compute_units": "Toy datasheet"}
  })");
}

// Writes `doc` as <dir>/<file>.json in a fresh directory and loads that directory.
std::vector<TargetSpec> load_one(const json& doc, const std::string& file = "toy") {
  const fs::path dir = make_temp_dir("specdb");
  std::ofstream(dir / (file + ".json")) << doc.dump(2);
  auto cleanup = [&] { fs::remove_all(dir); };
  try {
    auto db = load_spec_db(dir);
    cleanup();
    return db;
  } catch (...) {
    cleanup();
    throw;
  }
}

// Expects loading `doc` to be refused with a SpecError naming the file and `field`, and a message
// containing `expected_text`.
void expect_refused(const json& doc, const std::string& field, const std::string& expected_text,
                    const std::string& file = "toy") {
  try {
    load_one(doc, file);
    FAIL() << "accepted a broken file (field " << field << ")";
  } catch (const SpecError& e) {
    const std::string msg = e.what();
    EXPECT_EQ(e.field(), field) << msg;
    EXPECT_NE(msg.find(file + ".json"), std::string::npos) << msg;
    EXPECT_NE(msg.find("field \"" + field + "\""), std::string::npos) << msg;
    EXPECT_NE(msg.find(expected_text), std::string::npos) << msg;
  }
}

TEST(SpecDbSchema, MinimalSpecLoads) {
  auto db = load_one(toy_spec());
  ASSERT_EQ(db.size(), 1u);
  EXPECT_EQ(db[0].id, "toy");
  EXPECT_EQ(db[0].peak("bf16"), 100);
  EXPECT_EQ(db[0].compute_units, 8);
}

TEST(SpecDbSchema, MissingFieldIsRefused) {
  json d = toy_spec();
  d.erase("memory_bandwidth_gbs");
  expect_refused(d, "memory_bandwidth_gbs", "expected a positive number, got nothing");
  json e = toy_spec();
  e.erase("vendor");
  expect_refused(e, "vendor", "expected a non-empty string");
}

TEST(SpecDbSchema, NegativePeakIsRefused) {
  json d = toy_spec();
  d["peak_tflops"]["bf16"] = -5;
  expect_refused(d, "peak_tflops.bf16", "expected a positive number, got -5");
  json z = toy_spec();
  z["memory_gb"] = 0;
  expect_refused(z, "memory_gb", "expected a positive number, got 0");
}

TEST(SpecDbSchema, StringWhereANumberBelongsIsRefused) {
  json d = toy_spec();
  d["peak_tflops"]["bf16"] = "fast";
  expect_refused(d, "peak_tflops.bf16", "expected a positive number, got \"fast\"");
}

TEST(SpecDbSchema, NumberWithoutASourceIsRefused) {
  json d = toy_spec();
  d["caches"] = {{"l2_mb", 40}};  // no "caches" or "*" source
  expect_refused(d, "caches.l2_mb", "covered by a source");
  d["sources"]["caches"] = "Toy whitepaper";
  EXPECT_EQ(load_one(d).size(), 1u);  // now covered
}

TEST(SpecDbSchema, IdMustEqualFileName) {
  expect_refused(toy_spec(), "id", "the file name \"other\"", "other");
}

TEST(SpecDbSchema, OtherBrokenFieldsAreRefused) {
  json k = toy_spec();
  k["kind"] = "fpga";
  expect_refused(k, "kind", "one of \"gpu\", \"cpu\", \"accelerator\"");
  json u = toy_spec();
  u["peak_tflop"] = {{"fp32", 1}};  // misspelt field
  expect_refused(u, "peak_tflop", "one of the known fields");
  json p = toy_spec();
  p["peak_tflops"]["fp17"] = 3;
  expect_refused(p, "peak_tflops.fp17", "a known dtype key");
  json s = toy_spec();
  s["sources"]["memory_bandwith_gbs"] = "typo";
  expect_refused(s, "sources.memory_bandwith_gbs", "naming a field of this file");
  json nt = toy_spec();
  nt["notes"] = {{"memory_bandwith_gbs", "typo"}};
  expect_refused(nt, "notes.memory_bandwith_gbs", "naming a field");
  json r = toy_spec();
  r["rungs"].erase("rung2");
  expect_refused(r, "rungs.rung2", "expected a non-empty string");
  json n = toy_spec();  // an NVIDIA GPU needs its detection identity and occupancy limits
  n["vendor"] = "NVIDIA";
  n["match"] = {{"compute_capability", "9.0"}, {"name_tokens", {"TOY"}}};
  expect_refused(n, "limits", "expected an object, got nothing");
  n["match"]["compute_capability"] = 9.0;
  expect_refused(n, "match.compute_capability", "\"<major>.<minor>\"");
}

TEST(SpecDbSchema, InvalidJsonAndMissingDirectoryAreRefused) {
  const fs::path dir = make_temp_dir("specdb_bad");
  std::ofstream(dir / "broken.json") << "{\"id\": \"broken\",";
  try {
    load_spec_db(dir);
    ADD_FAILURE() << "accepted invalid JSON";
  } catch (const SpecError& e) {
    EXPECT_NE(std::string(e.what()).find("broken.json: not valid JSON"), std::string::npos)
        << e.what();
  }
  fs::remove_all(dir);
  EXPECT_THROW(load_spec_db(dir / "nonexistent"), SpecError);
}

// ---- device -> entry mapping ---------------------------------------------------------------

TEST(SpecDbMatch, NameTokens) {
  EXPECT_EQ(name_tokens_of("NVIDIA A100-SXM4-80GB"),
            (std::vector<std::string>{"nvidia", "a100", "sxm4", "80gb"}));
  EXPECT_EQ(name_tokens_of("Intel(R) Xeon(R) Platinum 8480+"),
            (std::vector<std::string>{"intel", "r", "xeon", "r", "platinum", "8480+"}));
}

TEST(SpecDbMatch, NvidiaDevicesMapByExactIdentity) {
  const auto& db = real_db();
  auto id_of = [&](const char* name, int ma, int mi) -> std::string {
    const TargetSpec* t = match_nvidia_device(db, name, ma, mi);
    return t ? t->id : "(none)";
  };
  EXPECT_EQ(id_of("NVIDIA H200", 9, 0), "h200");
  EXPECT_EQ(id_of("NVIDIA H100 80GB HBM3", 9, 0), "h100-sxm");
  EXPECT_NE(id_of("NVIDIA H200", 9, 0), "h100-sxm");
  EXPECT_EQ(id_of("NVIDIA H200 NVL", 9, 0), "(none)");  // other SKU: derived
  EXPECT_EQ(id_of("NVIDIA H100 PCIe", 9, 0), "(none)");
  EXPECT_EQ(id_of("NVIDIA H100 80GB HBM3", 8, 0), "(none)");  // compute capability differs
  EXPECT_EQ(id_of("NVIDIA A100-SXM4-80GB", 8, 0), "a100-sxm");
  EXPECT_EQ(id_of("NVIDIA A100 80GB PCIe", 8, 0), "(none)");
  EXPECT_EQ(id_of("NVIDIA GeForce RTX 4090", 8, 9), "rtx-4090");
  EXPECT_EQ(id_of("NVIDIA GeForce RTX 4090 D", 8, 9), "(none)");
  EXPECT_EQ(id_of("NVIDIA GeForce RTX 5090", 12, 0), "rtx-5090");
  EXPECT_EQ(id_of("NVIDIA B200", 10, 0), "b200");
  EXPECT_EQ(id_of("NVIDIA GB10", 12, 1), "gb10");
}

TEST(SpecDbMatch, UnknownDeviceGetsADerivedSpec) {
  NvidiaDeviceAttributes d;
  d.name = "NVIDIA L40S";
  d.cc_major = 8;
  d.cc_minor = 9;
  d.sm_count = 142;
  d.max_clock_mhz = 2520;
  d.memory_bytes = 48e9;
  d.memory_clock_mhz = 9001;
  d.memory_bus_width_bits = 384;
  d.l2_bytes = 96.0 * 1024 * 1024;
  d.shared_memory_per_sm_bytes = 100 * 1024;
  d.shared_memory_per_block_optin_bytes = 99 * 1024;
  d.max_threads_per_sm = 1536;
  d.max_blocks_per_sm = 24;
  d.registers_per_sm = 65536;
  d.warp_size = 32;
  const TargetSpec t = resolve_nvidia_device(real_db(), d);
  EXPECT_TRUE(t.derived);
  EXPECT_EQ(t.raw.at("derived"), true);
  EXPECT_EQ(t.id, "nvidia-l40s-derived");
  EXPECT_EQ(t.isa, "sm_89");
  EXPECT_EQ(t.family, "nvidia-ada");
  EXPECT_EQ(t.compute_units, 142);
  // fp32 = 142 SMs x 128 lanes x 2 FLOP x 2.52 GHz = 91.6 TFLOP/s
  EXPECT_NEAR(t.peak("fp32").value(), 142 * 128 * 2 * 2.52 / 1000, 0.01);
  EXPECT_FALSE(t.peak("bf16").has_value());  // Tensor Core peaks are not derivable
  // 2 x 9001 MHz x 384 bit / 8 = 864.1 GB/s
  EXPECT_NEAR(t.memory_bandwidth_gbs, 864.1, 0.1);
  ASSERT_TRUE(t.limits.has_value());
  EXPECT_EQ(t.limits->max_threads_per_sm, 1536);
  EXPECT_NEAR(t.limits->l2_mb, 96, 1e-9);
  EXPECT_FALSE(t.sources.empty());

  // A known device resolves to its database entry, not a derived spec.
  d.name = "NVIDIA H200";
  d.cc_major = 9;
  d.cc_minor = 0;
  const TargetSpec h = resolve_nvidia_device(real_db(), d);
  EXPECT_FALSE(h.derived);
  EXPECT_EQ(h.id, "h200");
}

TEST(SpecDbMatch, CpuModelsMapOrDerive) {
  const auto& db = real_db();
  CpuInfo cpu;
  cpu.arch = "x86_64";
  auto id_of = [&](const std::string& model) -> std::string {
    cpu.model = model;
    const TargetSpec* t = match_cpu(db, cpu);
    return t ? t->id : "(none)";
  };
  EXPECT_EQ(id_of("Intel(R) Xeon(R) Platinum 8480+"), "sapphirerapids");
  EXPECT_EQ(id_of("Intel(R) Xeon(R) Platinum 8592+"), "emeraldrapids");
  EXPECT_EQ(id_of("AMD EPYC 9654 96-Core Processor"), "zen4-epyc");
  EXPECT_EQ(id_of("AMD EPYC 7763 64-Core Processor"), "zen3-epyc");
  EXPECT_EQ(id_of("Neoverse-V2"), "neoverse-v2");
  EXPECT_EQ(id_of("Intel(R) Xeon(R) Processor"), "(none)");
  EXPECT_EQ(id_of("Intel(R) Xeon(R) Platinum 8480"), "(none)");  // 8480 is not 8480+

  cpu.model = "Intel(R) Xeon(R) Processor";
  cpu.vendor = "GenuineIntel";
  cpu.logical_cores = 4;
  cpu.isa = {"sse2", "sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl"};
  Ceilings c;
  c.measured_at = "2025-01-01T00:00:00Z";
  c.compiler = "test";
  c.mem_bw_gbs = 20;
  c.peak_tflops = {{DType::F64, 0.2}, {DType::F32, 0.4}};
  const TargetSpec t = derive_cpu_spec(cpu, c);
  EXPECT_EQ(t.id, "local-cpu");
  EXPECT_TRUE(t.derived);
  EXPECT_EQ(t.isa, "x86-64-v4");
  EXPECT_EQ(t.peak("fp32"), 0.4);
  EXPECT_EQ(t.memory_bandwidth_gbs, 20);
  EXPECT_NE(t.source_for("peak_tflops.fp32"), nullptr);
}

}  // namespace
}  // namespace vb
