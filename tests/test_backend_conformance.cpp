// Backend conformance (issue 17 step 1, in the spirit of ggml's test-backend-ops): every
// registered backend goes through the same checks of the Backend and Device interfaces, so a
// new backend (one folder plus one registry line) is tested the moment it is registered. Also:
// an unknown backend name is refused with an error that names the registered ones.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <stdexcept>
#include <string>

#include "backends/backend.h"
#include "core/paths.h"
#include "kernels/kernel_type.h"
#include "ladder/rank.h"
#include "optimize/params.h"
#include "runner/protocol.h"
#include "support.h"

namespace vb {
namespace {

namespace fs = std::filesystem;

std::string backend_name(const ::testing::TestParamInfo<const Backend*>& info) {
  std::string n = info.param->name();
  for (char& c : n)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return n;
}

class BackendConformance : public ::testing::TestWithParam<const Backend*> {};

TEST_P(BackendConformance, IsFoundByItsNameAndItsExtension) {
  const Backend& b = *GetParam();
  ASSERT_FALSE(b.name().empty());
  EXPECT_EQ(find_backend(b.name()), &b);
  EXPECT_EQ(&require_backend(b.name()), &b);
  EXPECT_NE(backend_names().find(b.name()), std::string::npos);
  const std::string ext = b.source_extension();
  ASSERT_GE(ext.size(), 2u);
  EXPECT_EQ(ext.front(), '.');
  const Backend* by_ext = backend_for_extension(ext);
  ASSERT_NE(by_ext, nullptr);
  EXPECT_EQ(by_ext->source_extension(), ext);
  EXPECT_FALSE(b.toolchain_description().empty());
}

TEST_P(BackendConformance, HasAStarterForEveryKernelType) {
  const Backend& b = *GetParam();
  for (const KernelType* kt : all_kernel_types()) {
    const fs::path s = b.starter_source(kt->name());
    EXPECT_EQ(s.extension().string(), b.source_extension()) << s;
    EXPECT_EQ(s.parent_path().filename().string(), b.name()) << s;
    EXPECT_TRUE(fs::is_regular_file(s)) << "no starter " << s;
  }
}

TEST_P(BackendConformance, ItsDeviceAnswersEveryQuestionGenericCodeAsks) {
  const Backend& b = *GetParam();
  const Device& d = b.device();
  EXPECT_TRUE(d.kind() == DeviceKind::Host || d.kind() == DeviceKind::Gpu);
  EXPECT_FALSE(d.name().empty());
  EXPECT_FALSE(d.targets_label().empty());
  EXPECT_FALSE(d.timing_cache_name().empty());
  EXPECT_FALSE(d.oom_guard().empty());
  EXPECT_EQ(d.local_target_id().rfind("local-", 0), 0u) << d.local_target_id();
  // The torch device leads back to a backend on a device of the same kind.
  ASSERT_FALSE(d.torch_device().empty());
  const Backend* by_torch = backend_for_torch_device(d.torch_device());
  ASSERT_NE(by_torch, nullptr);
  EXPECT_EQ(by_torch->device().kind(), d.kind());
  EXPECT_NE(torch_device_names().find(d.torch_device()), std::string::npos);
  // The runner knows the flavour by the name the client passes it.
  const auto flavour = runner::parse_flavour(runner::flavour_name(d.runner_flavour()));
  ASSERT_TRUE(flavour.has_value()) << runner::flavour_name(d.runner_flavour());
  EXPECT_EQ(*flavour, d.runner_flavour());
  // Limits are never negative (0 = no check).
  const DeviceLimits l = d.limits();
  EXPECT_GE(l.vector_width_bytes, 0);
  EXPECT_GE(l.logical_cores, 0);
  EXPECT_GE(l.max_threads_per_block, 0);
  EXPECT_GE(l.shared_memory_per_block_bytes, 0);
  // Whether or not this machine has the device, the answer is consistent and never throws.
  EXPECT_EQ(b.device_unavailable(), d.unavailable());
  if (d.unavailable().empty()) EXPECT_FALSE(d.local_name().empty());
}

TEST_P(BackendConformance, EveryKernelTypeHasABenchmarkSizeOnItsDevice) {
  const DeviceKind k = GetParam()->device().kind();
  for (const KernelType* kt : all_kernel_types()) {
    const Size s = kt->benchmark_size(k);
    EXPECT_TRUE(kt->find_size(s.label, k).has_value()) << kt->name() << " " << s.label;
  }
}

TEST_P(BackendConformance, AMissingSourceIsAFailedBuildNotAnException) {
  const Backend& b = *GetParam();
  const fs::path missing =
      fs::temp_directory_path() / ("vb-conformance-missing-" + std::to_string(::getpid()) +
                                   b.source_extension());
  BuildResult r;
  ASSERT_NO_THROW(r = b.build(missing));
  EXPECT_FALSE(r.ok);
  EXPECT_FALSE(r.diagnostics.empty());
}

TEST_P(BackendConformance, OptionalHooksKeepTheirContracts) {
  const Backend& b = *GetParam();
  if (!b.has_target_arch()) EXPECT_THROW(b.set_target_arch("sm_90a"), std::invalid_argument);
  if (const Sanitizer* s = b.sanitizer()) {
    EXPECT_FALSE(s->tools().empty());
    EXPECT_FALSE(s->not_found_message().empty());
    const SanitizerFindings none = s->parse_log("");
    EXPECT_EQ(none.errors, 0);
  }
  const std::string pb = b.playbook();
  if (!pb.empty()) EXPECT_EQ(pb.rfind("### Playbook: ", 0), 0u) << pb.substr(0, 60);
  // Only a backend that writes a vectorization report fills one in.
  if (!b.has_vectorization_report()) {
    const BuildResult r = b.build(fs::temp_directory_path() / "vb-conformance-none.x");
    EXPECT_TRUE(r.vectorized_loops.empty());
  }
}

// Pool workers build for the backend's target_arch() (optimize/pool.cpp): none without one; with
// one, what set_target_arch() selected, and "" restores the default.
TEST_P(BackendConformance, TargetArchIsEmptyWithoutOneAndRoundTripsWithOne) {
  const Backend& b = *GetParam();
  if (!b.has_target_arch()) {
    EXPECT_EQ(b.target_arch(), "");
    return;
  }
  std::string arch;
  try {
    arch = b.target_arch();
  } catch (const std::runtime_error& e) {
    // No device here to ask and nothing selected: the error names the fix.
    EXPECT_NE(std::string(e.what()).find("arch"), std::string::npos) << e.what();
    return;
  }
  ASSERT_FALSE(arch.empty());
  b.set_target_arch(arch);
  EXPECT_EQ(b.target_arch(), arch);
  b.set_target_arch("");
  EXPECT_EQ(b.target_arch(), arch);
}

// `vladbud rank` and `vladbud variants` read every backend's variants folder by default.
TEST_P(BackendConformance, ItsVariantsFolderIsNamedAfterItAndReadByDefault) {
  const Backend& b = *GetParam();
  for (const KernelType* kt : all_kernel_types()) {
    const fs::path dir = b.variants_dir(kt->name());
    EXPECT_EQ(dir.filename().string(), kt->name()) << dir;
    EXPECT_EQ(dir.parent_path().filename().string(), b.name()) << dir;
    if (!fs::is_directory(dir)) continue;
    const auto all = ladder::default_variants(kt->name());
    for (const auto& e : fs::directory_iterator(dir)) {
      if (e.path().extension() != b.source_extension()) continue;
      const bool found = std::any_of(all.begin(), all.end(), [&](const ladder::Variant& v) {
        return v.source == e.path() && v.backend == b.name();
      });
      EXPECT_TRUE(found) << e.path() << " is not among the default variants of " << kt->name();
    }
  }
}

// The optimizer varies a starter through its backend's ParamSyntax: every declared tunable has a
// binding holding its default, and each other value of its domain rewrites that binding only.
TEST_P(BackendConformance, StarterTunablesParseAndEachValueRewritesOnlyItsOwnBinding) {
  const Backend& b = *GetParam();
  const ParamSyntax& syntax = b.param_syntax();
  EXPECT_FALSE(syntax.how_to_declare().empty());
  for (const KernelType* kt : all_kernel_types()) {
    const fs::path f = b.starter_source(kt->name());
    if (!fs::is_regular_file(f)) continue;  // HasAStarterForEveryKernelType says so
    const std::string src = read_file(f);
    std::vector<opt::TunableParam> ps;
    ASSERT_NO_THROW(ps = opt::parse_params(src, syntax)) << f;
    const opt::Config start = opt::current_config(src, ps, syntax);
    for (const auto& p : ps) {
      EXPECT_EQ(start.at(p.name), p.default_value) << f << " " << p.name;
      for (const auto& v : p.domain) {
        if (v == p.default_value) continue;
        const std::string variant = opt::apply_config(src, {{p.name, v}}, syntax);
        opt::Config want = start;
        want[p.name] = v;
        EXPECT_EQ(opt::current_config(variant, ps, syntax), want) << f << " " << p.name << "=" << v;
        EXPECT_EQ(opt::parse_params(variant, syntax).size(), ps.size()) << f;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Registered, BackendConformance, ::testing::ValuesIn(all_backends()),
                         backend_name);

TEST(BackendRegistry, NamesAreUniqueAndTheListMatchesBackendNames) {
  std::set<std::string> names;
  std::string joined;
  for (const Backend* b : all_backends()) {
    EXPECT_TRUE(names.insert(b->name()).second) << "registered twice: " << b->name();
    joined += (joined.empty() ? "" : ", ") + b->name();
  }
  EXPECT_FALSE(names.empty());
  EXPECT_EQ(backend_names(), joined);
  // A filter keeps only the backends it accepts.
  EXPECT_EQ(backend_names([](const Backend&) { return false; }), "");
}

TEST(BackendRegistry, AnUnknownNameIsRefusedWithTheKnownNames) {
  EXPECT_EQ(find_backend("no-such-backend"), nullptr);
  EXPECT_EQ(find_backend(""), nullptr);
  try {
    require_backend("no-such-backend");
    FAIL() << "require_backend accepted an unknown name";
  } catch (const std::invalid_argument& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("unknown backend 'no-such-backend'"), std::string::npos) << m;
    for (const Backend* b : all_backends())
      EXPECT_NE(m.find(b->name()), std::string::npos) << "the error must name " << b->name() << ": " << m;
  }
  EXPECT_EQ(backend_for_torch_device("no-such-device"), nullptr);
  EXPECT_EQ(backend_for_extension(".no-such-ext"), nullptr);
}

TEST(BackendRegistry, TheRunnerRefusesAnUnknownFlavourAndNamesTheKnownOnes) {
  EXPECT_FALSE(runner::parse_flavour("no-such-flavour").has_value());
  for (const Backend* b : all_backends())
    EXPECT_NE(runner::flavour_names().find(runner::flavour_name(b->device().runner_flavour())),
              std::string::npos);
}

}  // namespace
}  // namespace vb
