// `vladbud report`: workspace/report.md and workspace/progress.png (src/optimize/report_md.h).
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "optimize/report_md.h"

namespace vb::cli {

void add_report(CLI::App& app) {
  auto ws = std::make_shared<std::string>("workspace");
  auto python = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  auto* c = app.add_subcommand(
      "report", "Write workspace/report.md (per kernel: baseline, best, speedups, % of ceiling, "
                "experiments, keep rate; Amdahl breakdown; verify result) and "
                "workspace/progress.png (matplotlib).");
  c->add_option("--workspace", *ws, "workspace folder")->capture_default_str();
  c->add_option("--python", *python, "Python interpreter for the plot (default: .venv, python3)");
  c->add_flag("--json", *json, "print the written paths as JSON");
  c->callback([ws, python, json] {
    try {
      const auto r = opt::write_report(*ws, *python);
      if (*json) {
        std::cout << nlohmann::json{{"report_md", r.report_md.string()},
                                    {"progress_png", r.png_written ? r.progress_png.string() : ""},
                                    {"png_note", r.png_note}}
                         .dump(2)
                  << "\n";
      } else {
        std::cout << "report_md: " << r.report_md.string() << "\n";
        if (r.png_written) std::cout << "progress_png: " << r.progress_png.string() << "\n";
        else std::cout << "progress_png: not written (" << r.png_note << ")\n";
      }
    } catch (const std::exception& e) {
      std::cerr << "vladbud report: " << e.what() << "\n";
      throw CLI::RuntimeError(kUsage);
    }
  });
}

}  // namespace vb::cli
