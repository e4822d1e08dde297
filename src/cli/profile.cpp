// `vladbud profile`: where a PyTorch model's time goes, by kernel type, at its own shapes.
#include <fmt/format.h>

#include <filesystem>
#include <iostream>

#include "bridge/pipeline.h"
#include "cli/commands.h"
#include "core/paths.h"

namespace vb::cli {

namespace {
struct ProfileArgs {
  ProfileRequest req;
  bool json = false;
  int rows = 20;
};

void run_profile(const ProfileArgs& a) {
  ProfileOutcome p;
  try {
    p = profile_model(a.req);
  } catch (const BridgeUsageError& e) {
    std::cerr << "vladbud profile: " << e.what() << "\n";
    throw CLI::RuntimeError(kUsage);
  } catch (const EmptyProfileError& e) {
    std::cerr << "vladbud profile: " << e.what() << "\n";
    throw CLI::RuntimeError(kFail);
  }
  if (a.json) {
    std::cout << p.profile.dump(2) << "\n";
    return;
  }
  std::cout << format_profile_summary(p, a.req, a.rows);
  std::cout << "wrote " << p.written.string();
  if (a.req.export_trace)
    std::cout << " and " << (std::filesystem::path(a.req.workspace) / "trace.json").string()
              << " (Chrome trace)";
  std::cout << "\nnext: vladbud extract --top 5\n";
}
}  // namespace

void add_profile(CLI::App& app) {
  auto a = std::make_shared<ProfileArgs>();
  ProfileRequest& r = a->req;
  auto* c = app.add_subcommand(
      "profile",
      "Profile a PyTorch model's forward pass (torch.profiler, after warm-up): time per kernel "
      "type at the model's shapes and dtype, counted once (an op and its kernels are one entry), "
      "compute/memory bound from the FLOP/byte model and this device's ridge point, Amdahl's "
      "bound. Writes workspace/profile.json.");
  c->add_option("--model", r.model, "Python file defining the model class (models/gpt2.py, ...)");
  c->add_option("--class-name", r.class_name, "nn.Module class (GPT2, Llama, Bert, ...)");
  c->add_option("--module", r.module,
                "importable module instead of --model; 'transformers' builds --class-name from --config with random weights");
  c->add_option("--config", r.config, "transformers config: config.json, a folder, or a cached name");
  c->add_option("--model-args", r.model_args, "constructor keyword arguments as a JSON object")
      ->capture_default_str();
  c->add_option("--input-shape", r.input_shape, "BATCH,SEQ of the input")->capture_default_str();
  c->add_option("--dtype", r.dtype, "fp32, fp16 or bf16 (the model is cast to it)")->capture_default_str();
  c->add_option("--device", r.device, "cpu or cuda")->capture_default_str();
  c->add_flag("--export-trace", r.export_trace, "also write workspace/trace.json (Chrome trace)");
  c->add_flag("--json", a->json, "print profile.json instead of the table");
  c->add_option("--warmup", r.warmup, "warm-up forwards before profiling")->capture_default_str();
  c->add_option("--iters", r.iters, "profiled forwards (times are per forward)")->capture_default_str();
  c->add_option("--rows", a->rows, "rows of the table")->capture_default_str();
  c->add_option("--workspace", r.workspace, "workspace folder")->capture_default_str();
  c->callback([a] { run_profile(*a); });
}

}  // namespace vb::cli
