// The C++ half of the PyTorch bridge: profile analysis (FLOP/byte model, bound, Amdahl),
// extraction into kernel folders, problem.json. No Python here (unit tests, also under ASan).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "bridge/bridge.h"
#include "bridge/kernelbench.h"
#include "bridge/pipeline.h"
#include "core/paths.h"
#include "support.h"

namespace vb {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// What python -m vladbud.profile returns (trimmed): two typed groups, one untyped.
json raw_profile(const std::string& dtype = "bf16") {
  return {{"device", "cpu"},
          {"dtype", dtype},
          {"input_shape", {1, 64}},
          {"records", 100},
          {"profiled_us", 1000.0},
          {"model", {{"file", "models/gpt2.py"}, {"class_name", "GPT2"}}},
          {"entries",
           {{{"type", "matmul"}, {"op", "aten::linear"}, {"dims", {{"M", 1024}, {"N", 1024}, {"K", 1024}}},
             {"attrs", json::object()}, {"dtype", dtype}, {"calls", 2.0}, {"us", 600.0}},
            {{"type", "rmsnorm"}, {"op", "aten::pow + ..."}, {"dims", {{"M", 64}, {"N", 512}}},
             {"attrs", json::object()}, {"dtype", dtype}, {"calls", 5.0}, {"us", 300.0}},
            {{"type", nullptr}, {"op", "aten::gelu"}, {"dims", nullptr}, {"attrs", json::object()},
             {"dtype", dtype}, {"shapes", {{1, 64, 3072}}}, {"calls", 1.0}, {"us", 100.0}}}}};
}

Roof test_roof() {
  Roof r;
  r.peak_tflops = 1.0;      // 1 TFLOP/s
  r.bandwidth_gbs = 100.0;  // 100 GB/s -> ridge 10 FLOP/B
  r.source = "test";
  return r;
}

fs::path temp_dir(const std::string& name) {
  auto d = fs::temp_directory_path() / ("vb-bridge-" + std::to_string(::getpid()) + "-" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

TEST(Bridge, AnalyzeClassifiesBoundFromTheFlopByteModelAndGivesAmdahl) {
  const json p = analyze_profile(raw_profile(), test_roof());
  const auto& mm = p["entries"][0];
  // matmul 1024^3 bf16: 2*1024^3 FLOP over 3*1024^2*2 B = 341 FLOP/B > ridge 10.
  EXPECT_DOUBLE_EQ(mm["flops"].get<double>(), 2.0 * 1024 * 1024 * 1024);
  EXPECT_NEAR(mm["arithmetic_intensity"].get<double>(), 2.0 * 1024 / 6.0, 1e-9);
  EXPECT_EQ(mm["bound"], "compute");
  EXPECT_DOUBLE_EQ(mm["share"].get<double>(), 0.6);
  EXPECT_DOUBLE_EQ(mm["amdahl_max"].get<double>(), 1.0 / 0.4);
  EXPECT_EQ(mm["size_label"], "model-M1024xN1024xK1024");
  const auto& rn = p["entries"][1];
  EXPECT_EQ(rn["bound"], "memory");  // 4 FLOP per element over >= 4 B per element
  EXPECT_LT(rn["arithmetic_intensity"].get<double>(), 10.0);
  EXPECT_EQ(p["entries"][2]["bound"], "n/a");
  EXPECT_DOUBLE_EQ(p["typed_share"].get<double>(), 0.9);
  EXPECT_NEAR(p["amdahl_max_all"].get<double>(), 10.0, 1e-9);
  EXPECT_DOUBLE_EQ(p["roof"]["ridge_flop_per_byte"].get<double>(), 10.0);
  EXPECT_NE(format_profile_table(p, 10).find("matmul"), std::string::npos);
}

TEST(Bridge, ShapesThatDoNotFitTheTypeAreNotedNotFatal) {
  json raw = raw_profile();
  raw["entries"][0]["dims"] = {{"M", 8}, {"N", 8}};  // no K
  const json p = analyze_profile(raw, test_roof());
  EXPECT_EQ(p["entries"][0]["bound"], "n/a");
  EXPECT_NE(p["entries"][0]["note"].get<std::string>().find("K"), std::string::npos);
  EXPECT_THROW(model_size(*find_kernel_type("matmul"), json{{"M", 8}, {"N", 8}}, json::object()),
               std::invalid_argument);
}

// A GQA attention entry (classify.py adds HKV when K/V have fewer heads than Q): the size keeps
// HKV (label "model-B2xH8xHKV2xS128xD64"), K/V bytes count HKV heads, FLOPs count query heads;
// extract carries HKV into problem.json; an HKV that does not divide H is noted, not fatal.
TEST(Bridge, GqaAttentionEntryKeepsItsKvHeadsThroughAnalyzeAndExtract) {
  json raw = raw_profile("fp16");
  raw["entries"][0] = {{"type", "flash_attention"},
                       {"op", "aten::scaled_dot_product_attention"},
                       {"dims", {{"B", 2}, {"H", 8}, {"HKV", 2}, {"S", 128}, {"D", 64}}},
                       {"attrs", {{"causal", 1.0}}},
                       {"dtype", "fp16"},
                       {"calls", 2.0},
                       {"us", 600.0}};
  const json p = analyze_profile(raw, test_roof());
  const auto& fa = p["entries"][0];
  ASSERT_TRUE(fa.contains("size_label")) << fa.dump();
  EXPECT_EQ(fa["size_label"], "model-B2xH8xHKV2xS128xD64-causal1");
  EXPECT_DOUBLE_EQ(fa["flops"].get<double>(), 4.0 * 2 * 8 * 128 * 128 * 64 / 2);
  EXPECT_DOUBLE_EQ(fa["bytes"].get<double>(), 2.0 * 2 * 128 * 64 * (8 + 2 + 2 + 8));
  EXPECT_NE(format_profile_table(p, 10).find("HKV=2"), std::string::npos);
  const auto ws = temp_dir("extract-gqa");
  const auto dirs = extract_kernels(p, 1, "cpu", ws);
  ASSERT_EQ(dirs.size(), 1u);
  const auto mp = read_model_problem(dirs[0]);
  ASSERT_TRUE(mp.has_value());
  EXPECT_EQ(mp->size.dims.at("HKV"), 2);
  const Problem prob = mp->type->make_problem(mp->size, mp->dtype);
  EXPECT_EQ(prob.inputs[1].shape, (std::vector<std::int64_t>{2, 2, 128, 64}));
  fs::remove_all(ws);

  raw["entries"][0]["dims"]["HKV"] = 3;
  const json bad = analyze_profile(raw, test_roof());
  EXPECT_EQ(bad["entries"][0]["bound"], "n/a");
  EXPECT_NE(bad["entries"][0]["note"].get<std::string>().find("H % HKV == 0"), std::string::npos)
      << bad["entries"][0]["note"];
}

TEST(Bridge, ExtractWritesOneFolderPerGroupWithTheModelsShapesAndDtype) {
  const auto ws = temp_dir("extract");
  const json p = analyze_profile(raw_profile("bf16"), test_roof());
  const auto dirs = extract_kernels(p, 5, "cpu", ws);  // only two typed groups exist
  ASSERT_EQ(dirs.size(), 2u);
  EXPECT_EQ(dirs[0].filename(), "01_matmul");
  EXPECT_EQ(dirs[1].filename(), "02_rmsnorm");
  EXPECT_EQ(read_file(dirs[1] / "rmsnorm.cpp"), read_file(test::starter("rmsnorm")));
  const auto mp = read_model_problem(dirs[1]);
  ASSERT_TRUE(mp.has_value());
  EXPECT_EQ(mp->type->name(), "rmsnorm");
  EXPECT_EQ(mp->dtype, DType::BF16);  // the profiled dtype, not a default
  EXPECT_EQ(mp->size.dims.at("M"), 64);
  EXPECT_EQ(mp->size.dims.at("N"), 512);
  EXPECT_DOUBLE_EQ(mp->doc["share"].get<double>(), 0.3);
  EXPECT_FALSE(read_model_problem(ws).has_value());
  // Another backend's starters, in its own language (extract --backend triton).
  const auto tdirs = extract_kernels(p, 5, "triton", ws);
  ASSERT_EQ(tdirs.size(), 2u);
  EXPECT_EQ(read_file(tdirs[1] / "rmsnorm.py"),
            read_file(test::repo_root() / "kernels" / "triton" / "rmsnorm.py"));
  EXPECT_FALSE(fs::exists(tdirs[1] / "rmsnorm.cpp"));
  EXPECT_EQ(read_model_problem(tdirs[1])->doc.value("backend", ""), "triton");
  fs::remove_all(ws);
}

TEST(Bridge, ExtractWithNothingTypedOrBadArgumentsIsAUsageError) {
  const auto ws = temp_dir("extract-empty");
  json raw = raw_profile();
  raw["entries"] = json::array({raw["entries"][2]});
  const json p = analyze_profile(raw, test_roof());
  EXPECT_THROW(extract_kernels(p, 3, "cpu", ws), BridgeUsageError);
  EXPECT_THROW(extract_kernels(analyze_profile(raw_profile(), test_roof()), 0, "cpu", ws), BridgeUsageError);
  EXPECT_THROW(extract_kernels(analyze_profile(raw_profile(), test_roof()), 1, "tpu", ws), BridgeUsageError);
  fs::remove_all(ws);
}

TEST(Bridge, MalformedProblemJsonNamesTheFileAndTheFix) {
  const auto d = temp_dir("bad-problem");
  write_file_atomic(d / "problem.json", R"({"kernel": "matmul", "dtype": "fp8", "dims": {}})");
  try {
    (void)read_model_problem(d);
    FAIL() << "no error";
  } catch (const BridgeUsageError& e) {
    EXPECT_NE(std::string(e.what()).find("problem.json"), std::string::npos) << e.what();
  }
  write_file_atomic(d / "problem.json", R"({"kernel": "matmul", "dtype": "fp16", "dims": {"M": 4}})");
  try {
    (void)read_model_problem(d);
    FAIL() << "no error";
  } catch (const BridgeUsageError& e) {
    EXPECT_NE(std::string(e.what()).find("vladbud extract"), std::string::npos) << e.what();
  }
  // A dimension that is not a whole number within int64 names the dimension (never truncated
  // or wrapped): 2.5 used to become HKV 2 and 1e20 a negative count.
  for (const char* bad : {"2.5", "\"2\"", "null", "true", "99999999999999999999",
                          "18446744073709551615"}) {
    write_file_atomic(d / "problem.json",
                      std::string(R"({"kernel": "flash_attention", "dtype": "bf16", "dims": )") +
                          R"({"B": 1, "H": 8, "S": 64, "D": 64, "HKV": )" + bad + "}}");
    try {
      (void)read_model_problem(d);
      FAIL() << "no error for HKV " << bad;
    } catch (const BridgeUsageError& e) {
      EXPECT_NE(std::string(e.what()).find("dimension 'HKV' must be a whole number"),
                std::string::npos)
          << e.what();
    }
  }
  write_file_atomic(d / "problem.json",
                    R"({"kernel": "flash_attention", "dtype": "bf16", )"
                    R"("dims": {"B": 1, "H": 8, "S": 64, "D": 64, "HKV": 2}})");
  const auto ok = read_model_problem(d);
  ASSERT_TRUE(ok.has_value());
  EXPECT_EQ(ok->size.dims.at("HKV"), 2);
  fs::remove_all(d);
}

TEST(Bridge, Tf32PrecisionIsKernelBenchModeOnly) {
  const auto d = temp_dir("tf32-problem");
  const json kb = {{"level", 1}, {"id", 1}, {"name", "1_Square"}};
  json p = {{"kernel", "matmul"}, {"dtype", "fp32"}, {"dims", {{"M", 8}, {"N", 8}, {"K", 8}}}};
  EXPECT_FALSE(kb_precision_tf32(p, d / "problem.json"));  // no field: true fp32
  p["precision"] = "fp32";
  EXPECT_FALSE(kb_precision_tf32(p, d / "problem.json"));
  p["precision"] = "tf32";
  p["kernelbench"] = kb;
  EXPECT_TRUE(kb_precision_tf32(p, d / "problem.json"));
  write_file_atomic(d / "problem.json", p.dump());
  EXPECT_TRUE(read_model_problem(d).has_value());  // a KernelBench folder reads (bench stays true fp32)

  auto refused = [&](json doc, const std::string& what) {
    write_file_atomic(d / "problem.json", doc.dump());
    try {
      (void)read_model_problem(d);
      ADD_FAILURE() << "no error for " << doc.dump();
    } catch (const BridgeUsageError& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("problem.json"), std::string::npos) << e.what();
    }
  };
  json outside = p;
  outside.erase("kernelbench");  // an ordinary folder: VladBud's fp32 is true fp32
  refused(outside, "KernelBench mode only");
  json softmax = p;
  softmax["kernel"] = "softmax";
  softmax["dims"] = {{"R", 4}, {"C", 8}};
  refused(softmax, "fp32 matmul only");
  json bf16 = p;
  bf16["dtype"] = "bf16";
  refused(bf16, "fp32 matmul only");
  json unknown = p;
  unknown["precision"] = "fp8";
  refused(unknown, "is unknown");
  fs::remove_all(d);
}

TEST(Bridge, Tf32SourceCopyDefinesTheSwitchAndPointsBackToTheSource) {
  const auto d = temp_dir("tf32-source");
  write_file_atomic(d / "matmul.cu", "int x;\n");
  const fs::path c = kb_tf32_source(d / "matmul.cu", d / "scratch");
  EXPECT_EQ(c.parent_path().parent_path(), d / "scratch");
  EXPECT_EQ(c.filename(), "tf32_matmul.cu");
  const std::string t = read_file(c);
  EXPECT_NE(t.find("#define VB_PRECISION_TF32 1\n#line 1\nint x;\n"), std::string::npos) << t;
  EXPECT_EQ(read_file(d / "matmul.cu"), "int x;\n");  // the folder's source is untouched
  // The same source from another folder is the same copy (one build); another source is not.
  fs::create_directories(d / "other");
  write_file_atomic(d / "other" / "matmul.cu", "int x;\n");
  EXPECT_EQ(kb_tf32_source(d / "other" / "matmul.cu", d / "scratch"), c);
  write_file_atomic(d / "other" / "matmul.cu", "int y;\n");
  EXPECT_NE(kb_tf32_source(d / "other" / "matmul.cu", d / "scratch"), c);
  EXPECT_THROW(kb_tf32_source(d / "missing.cu", d / "scratch"), std::exception);
  fs::remove_all(d);
}

// Writes `text` as `folder`/best/best.json (the optimizer's record of a folder's best).
void put_best_json(const fs::path& folder, const std::string& text) {
  fs::create_directories(folder / "best");
  std::ofstream(folder / "best" / "best.json") << text;
}

// Issue 16: a best figure timed under contention carries a flag in best/best.json, and verify's
// own-shape screen must not drop a kernel on it (the in-model rounds decide). The flag that
// counts is the starter's for experiment 0 and the kept version's otherwise; a missing or
// malformed best.json takes the figure as it is.
TEST(Bridge, BestFigureContendedReadsTheFlagOfTheVersionThatIsBest) {
  const auto d = temp_dir("contended");
  const auto put = [&](const std::string& text) { put_best_json(d, text); };
  EXPECT_FALSE(best_figure_contended(d));  // no best/ at all
  put(R"({"experiment": 0, "baseline_contended": true, "kept_contended": false})");
  EXPECT_TRUE(best_figure_contended(d));
  put(R"({"experiment": 0, "baseline_contended": false, "kept_contended": false})");
  EXPECT_FALSE(best_figure_contended(d));
  // A kept version re-timed quietly: the starter's old contended figure no longer matters.
  put(R"({"experiment": 7, "baseline_contended": true, "kept_contended": false})");
  EXPECT_FALSE(best_figure_contended(d));
  put(R"({"experiment": 7, "baseline_contended": false, "kept_contended": true})");
  EXPECT_TRUE(best_figure_contended(d));
  // Bad input: truncated JSON, a flag of the wrong type, an array: not contended, no throw.
  put(R"({"experiment": 0, "baseline_contended": tr)");
  EXPECT_FALSE(best_figure_contended(d));
  put(R"({"experiment": 0, "baseline_contended": "yes"})");
  EXPECT_FALSE(best_figure_contended(d));
  put(R"([1, 2])");
  EXPECT_FALSE(best_figure_contended(d));
  fs::remove_all(d);
}

// The starter's own figure (the summary's and report.md's baseline column) is contended as long
// as best.json's baseline_contended says so, whatever was kept since; bad input reads false.
TEST(Bridge, BaselineFigureContendedReadsTheStartersFlagWhateverWasKept) {
  const auto d = temp_dir("baseline-contended");
  const auto put = [&](const std::string& text) { put_best_json(d, text); };
  EXPECT_FALSE(baseline_figure_contended(d));  // no best/ at all
  put(R"({"experiment": 0, "baseline_contended": true, "kept_contended": false})");
  EXPECT_TRUE(baseline_figure_contended(d));
  put(R"({"experiment": 7, "baseline_contended": true, "kept_contended": false})");
  EXPECT_TRUE(baseline_figure_contended(d));
  put(R"({"experiment": 7, "baseline_contended": false, "kept_contended": true})");
  EXPECT_FALSE(baseline_figure_contended(d));
  for (const char* bad : {R"({"baseline_contended": tr)", R"({"baseline_contended": "yes"})",
                          R"([1, 2])", R"({"experiment": 0})"}) {
    put(bad);
    EXPECT_FALSE(baseline_figure_contended(d)) << bad;
  }
  fs::remove_all(d);
}

}  // namespace
}  // namespace vb
