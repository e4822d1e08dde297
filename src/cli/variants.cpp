// `vladbud variants TYPE --target ID --out DIR`: writes the CPU variants of a kernel type with
// their @vb-param tunables set from the target's knowledge card (vector width, cache sizes).
#include <iostream>

#include "cli/commands.h"
#include "ladder/rank.h"

namespace vb::cli {

namespace {
struct VariantsArgs {
  std::string type, target, out, from;
};

void run_variants(const VariantsArgs& a) {
  auto usage = [](const std::string& m) {
    std::cerr << "vladbud variants: " << m << "\n";
    throw CLI::RuntimeError(kUsage);
  };
  const KernelType* kt = find_kernel_type(a.type);
  if (!kt) usage("unknown kernel type '" + a.type + "'; choose one of: " + kernel_type_names());
  try {
    const TargetSpec t = ladder::resolve_target(a.target);
    const auto vs = a.from.empty() ? ladder::default_variants(kt->name()) : ladder::load_variants(a.from);
    for (const auto& v : ladder::instantiate_variants(vs, t, a.out))
      std::cout << v.source.string() << "  " << v.description << "\n";
  } catch (const std::invalid_argument& e) {
    usage(e.what());
  }
}
}  // namespace

void add_variants(CLI::App& app) {
  auto args = std::make_shared<VariantsArgs>();
  auto* c = app.add_subcommand(
      "variants",
      "Write the CPU variants of a kernel type instantiated for a target: every\n"
      "'// @vb-param NAME DEFAULT {allowed}' tunable set from the target's card.");
  c->add_option("type", args->type, "kernel type")->required();
  c->add_option("--target", args->target, "target id (spec DB id or 'local')")->required();
  c->add_option("--out", args->out, "output directory")->required();
  c->add_option("--from", args->from, "variant directory (default kernels/variants/<backend>/TYPE of every backend that has one)");
  c->callback([args] { run_variants(*args); });
}

}  // namespace vb::cli
