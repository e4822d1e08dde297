// `vladbud rank TYPE --targets ID,ID`: climbs the confidence ladder for every variant of a
// kernel type on every target and prints the ranking with rungs, estimates, bands, tie groups
// and evidence.
#include <fmt/format.h>

#include <iostream>
#include <sstream>

#include "cli/commands.h"
#include "backends/backend.h"
#include "ladder/rank.h"

namespace vb::cli {

namespace {
struct RankArgs {
  std::string type, targets, variants, dtype = "fp32", size, backend;
  std::vector<std::string> calibration;
  int max_rung = 5;
  bool json = false, quick = false;
};

void run_rank(const RankArgs& a) {
  auto usage = [](const std::string& m) {
    std::cerr << "vladbud rank: " << m << "\n";
    throw CLI::RuntimeError(kUsage);
  };
  const KernelType* kt = find_kernel_type(a.type);
  if (!kt) usage("unknown kernel type '" + a.type + "'; choose one of: " + kernel_type_names());
  const auto dt = parse_dtype(a.dtype);
  if (!dt) usage("unknown dtype '" + a.dtype + "'; choose fp16, bf16 or fp32");
  if (a.max_rung < 0 || a.max_rung > 5) usage("--max-rung must be 0..5");
  std::vector<TargetSpec> targets;
  std::istringstream in(a.targets);
  std::string id;
  try {
    while (std::getline(in, id, ','))
      if (!id.empty()) targets.push_back(ladder::resolve_target(id));
  } catch (const std::invalid_argument& e) {
    usage(e.what());
  }
  if (targets.empty()) usage("--targets needs at least one target id (e.g. neoverse-v2,local)");
  std::vector<ladder::Variant> variants;
  const Backend* be = nullptr;
  if (!a.backend.empty()) {
    be = find_backend(a.backend);
    if (!be) usage("unknown backend '" + a.backend + "'; available: " + backend_names());
    // The backend must work here: rung 0 compiles with its toolchain (e.g. triton's Python).
    if (const std::string why = be->device_unavailable(); !why.empty())
      usage("--backend " + be->name() + ": " + why);
  }
  try {
    if (be && a.variants.empty()) {
      variants.push_back(ladder::starter_variant(*be, *kt));
    } else {
      variants = a.variants.empty() ? ladder::default_variants(kt->name())
                                    : ladder::load_variants(a.variants);
      if (be) {
        std::erase_if(variants, [&](const ladder::Variant& v) { return v.backend != be->name(); });
        if (variants.empty())
          usage("no " + be->source_extension() + " variant in " + a.variants + " for --backend " +
                be->name());
      }
    }
  } catch (const std::invalid_argument& e) {
    usage(e.what());
  }
  ladder::ClimbOptions o;
  o.dtype = *dt;
  o.quick = a.quick;
  o.max_rung = a.max_rung;
  if (!a.size.empty()) {
    o.size = kt->find_size(a.size, DeviceKind::Host);
    if (!o.size) usage("unknown size '" + a.size + "' for " + kt->name());
  }
  o.progress = [](const std::string& m) { std::cerr << m << "\n"; };
  std::vector<ladder::TargetRanking> r;
  try {
    std::vector<ladder::MeasuredTimes> measured;
    for (const auto& f : a.calibration) measured.push_back(ladder::load_measured_times(f, kt->name()));
    r = ladder::rank_variants(*kt, variants, targets, o, measured);
  } catch (const std::invalid_argument& e) {
    usage(e.what());
  }
  if (a.json)
    std::cout << ladder::rankings_to_json(r, kt->name(), *dt).dump(2) << "\n";
  else
    std::cout << ladder::format_rankings(r, kt->name());
}
}  // namespace

void add_rank(CLI::App& app) {
  auto args = std::make_shared<RankArgs>();
  auto* c = app.add_subcommand(
      "rank",
      "Rank the variants of a kernel type for targets present or absent by climbing the\n"
      "confidence ladder (0 static reject, 1 static signals, 2 correctness, 3 analytical,\n"
      "5 measured here). Variants whose uncertainty bands overlap share a tie group.");
  c->add_option("type", args->type, "kernel type")->required();
  c->add_option("--targets", args->targets, "comma-separated target ids (spec DB ids, 'local')")
      ->required();
  c->add_option("--variants", args->variants,
                "directory of variant sources (default kernels/variants/<backend>/TYPE of every "
                "backend that has one, or with --backend that backend's starter)");
  c->add_option("--backend", args->backend,
                "rank only sources of this backend (" + backend_names() +
                "); without --variants its starter kernels/<backend>/TYPE");
  c->add_option("--dtype", args->dtype, "dtype of the ranked problem")->capture_default_str();
  c->add_option("--size", args->size, "ranking size label (default: the type's benchmark size)");
  c->add_option("--max-rung", args->max_rung, "stop after this rung (0..5)")->capture_default_str();
  c->add_flag("--quick", args->quick, "fewer evaluator sizes at rung 2, short timing at rung 5");
  c->add_flag("--json", args->json, "print JSON");
  c->add_option("--calibration", args->calibration,
                "measured times of a target (bench/ranking_cuda.sh --measure's JSON; repeatable): "
                "that target's variants count as measured and calibrate the other targets of its "
                "family, or of its vendor across families with a wider band");
  c->callback([args] { run_rank(*args); });
}

}  // namespace vb::cli
