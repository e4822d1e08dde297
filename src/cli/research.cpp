// `vladbud research`: knowledge cards for targets (spec, local facts, capability probes,
// playbook, generation constraints) and the reference corpus of each kernel type.
#include <iostream>

#include "cli/commands.h"
#include "kernels/kernel_type.h"
#include "research/corpus.h"
#include "research/knowledge.h"

namespace vb::cli {

namespace {
struct ResearchArgs {
  std::string target, kernel;
  bool all = false, json = false, refresh = false, calibrate = false, no_probes = false,
       brief = false, progress = false;
};

[[noreturn]] void usage_error(const std::string& msg) {
  std::cerr << "vladbud research: " << msg << "\n";
  throw CLI::RuntimeError(kUsage);
}

std::vector<std::string> kernel_list(const std::string& kernel) {
  if (kernel == "all") {
    std::vector<std::string> v;
    for (const KernelType* k : all_kernel_types()) v.push_back(k->name());
    return v;
  }
  if (!find_kernel_type(kernel))
    usage_error("unknown kernel type '" + kernel + "'; choose one of: " + kernel_type_names() +
                " (or all)");
  return {kernel};
}

nlohmann::json corpus_json(const KernelCorpus& c, const std::string& target) {
  nlohmann::json j = c.raw;
  j["path"] = c.path.string();
  if (!target.empty()) {
    nlohmann::json mine = nlohmann::json::array();
    for (std::size_t i = 0; i < c.baselines.size(); ++i)
      for (const auto& t : c.baselines[i].targets)
        if (t == target) mine.push_back(c.raw["baselines"][i]);
    j["baselines_for_target"] = mine;
  }
  return j;
}

void run_research(const ResearchArgs& a) {
  if (a.target.empty() && !a.all && a.kernel.empty())
    usage_error("give a TARGET (a spec id such as h200, or 'local'), --all, or --kernel TYPE");
  if (!a.target.empty() && a.all) usage_error("give either a TARGET or --all, not both");

  CardOptions o;
  o.refresh_probes = a.refresh;
  o.calibrate = a.calibrate;
  o.probes = !a.no_probes;
  o.progress = progress_printer(a.progress);

  std::vector<KernelCorpus> corpora;
  if (!a.kernel.empty())
    for (const auto& k : kernel_list(a.kernel)) corpora.push_back(load_corpus(k));

  // Corpus only.
  if (a.target.empty() && !a.all) {
    if (a.json) {
      nlohmann::json out = nlohmann::json::array();
      for (const auto& c : corpora) out.push_back(corpus_json(c, ""));
      std::cout << (out.size() == 1 ? out[0] : nlohmann::json{{"corpus", out}}).dump(2) << "\n";
    } else {
      for (std::size_t i = 0; i < corpora.size(); ++i)
        std::cout << (i ? "\n" : "") << format_corpus(corpora[i]);
    }
    return;
  }

  std::vector<nlohmann::json> cards;
  try {
    if (a.all)
      cards = research_all(o);
    else
      cards.push_back(research_card(a.target, o));
  } catch (const UnknownTargetError& e) {
    usage_error(e.what());
  }

  if (a.json) {
    for (auto& card : cards)
      if (!corpora.empty()) {
        nlohmann::json cs = nlohmann::json::array();
        for (const auto& c : corpora) cs.push_back(corpus_json(c, card.value("target", "")));
        card["corpus"] = cs;
      }
    if (cards.size() == 1)
      std::cout << cards[0].dump(2) << "\n";
    else
      std::cout << nlohmann::json{{"cards", cards}}.dump(2) << "\n";
    return;
  }
  for (std::size_t i = 0; i < cards.size(); ++i) {
    if (i) std::cout << "\n";
    std::cout << format_card(cards[i], !a.brief && !a.all);
    for (const auto& c : corpora)
      std::cout << "\n" << format_corpus(c, cards[i].value("target", ""));
  }
}
}  // namespace

void add_research(CLI::App& app) {
  auto args = std::make_shared<ResearchArgs>();
  auto* c = app.add_subcommand(
      "research",
      "Knowledge cards: for a target (a spec id such as h200 or neoverse-v2, or 'local'), its\n"
      "spec, local facts when it is this machine, capability probes compiled for it (cached),\n"
      "the curated playbook of its family and the generation constraints derived from them;\n"
      "--kernel TYPE shows the reference corpus (algorithm, cited published baselines).");
  c->add_option("target", args->target, "target id (see `vladbud targets`), or 'local'");
  c->add_flag("--all", args->all, "cards for every target in the spec database");
  c->add_option("--kernel", args->kernel,
                "kernel type whose reference corpus to show (or 'all'); with a TARGET, its "
                "baselines for that target come first");
  c->add_flag("--json", args->json, "JSON output (a card, {cards: [...]}, or a corpus)");
  c->add_flag("--refresh", args->refresh, "re-run the capability probes instead of the cache");
  c->add_flag("--calibrate", args->calibrate,
              "re-measure local ceilings (CPU, and GPUs through nvcc) for a local target");
  c->add_flag("--no-probes", args->no_probes, "skip the capability probes");
  c->add_flag("--brief", args->brief, "leave the playbook text out of the text card");
  c->add_flag("--progress", args->progress, "print progress to stderr");
  c->callback([args] { run_research(*args); });
}

}  // namespace vb::cli
