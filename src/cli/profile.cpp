// `vladbud profile`: where a PyTorch model's time goes, by kernel type, at its own shapes.
#include <fmt/format.h>

#include <filesystem>
#include <iostream>

#include "bridge/bridge.h"
#include "cli/commands.h"
#include "core/paths.h"

namespace vb::cli {

namespace {
struct ProfileArgs {
  std::string model, class_name, module, config, model_args = "{}", input_shape = "1,128",
                                                  dtype = "fp32", device = "cpu",
                                                  workspace = "workspace";
  bool export_trace = false, json = false;
  int warmup = 3, iters = 3, rows = 20;
};

[[noreturn]] void usage_error(const std::string& msg) {
  std::cerr << "vladbud profile: " << msg << "\n";
  throw CLI::RuntimeError(kUsage);
}

void run_profile(const ProfileArgs& a) {
  if (a.model.empty() && a.module.empty())
    usage_error("pass --model FILE.py --class-name CLASS (e.g. --model models/gpt2.py "
                "--class-name GPT2), or --module transformers --class-name AutoModelForCausalLM "
                "--config CONFIG");
  if (!a.model.empty() && !std::filesystem::is_regular_file(a.model))
    usage_error("model file '" + a.model + "' does not exist; the bundled models are " +
                (vladbud_home() / "models").string() + "/{gpt2,llama,bert,custom_template}.py");
  if (a.class_name.empty()) usage_error("--class-name is required (the nn.Module class to build)");
  const auto dt = parse_dtype(a.dtype);
  if (!dt || !is_floating(*dt) || *dt == DType::F64)
    usage_error("--dtype must be fp32, fp16 or bf16 (got '" + a.dtype + "')");
  if (a.device != "cpu" && a.device != "cuda")
    usage_error("--device must be cpu or cuda (got '" + a.device + "')");
  nlohmann::json margs;
  try {
    margs = nlohmann::json::parse(a.model_args);
  } catch (const nlohmann::json::exception&) {
    usage_error("--model-args is not valid JSON; pass an object, e.g. '{\"n_layer\": 2}'");
  }
  if (!margs.is_object()) usage_error("--model-args must be a JSON object");
  {
    // B,S: two positive integers (checked here so the error comes before torch starts).
    const auto comma = a.input_shape.find(',');
    bool ok = comma != std::string::npos;
    try {
      std::size_t p1 = 0, p2 = 0;
      if (ok) {
        const long b = std::stol(a.input_shape.substr(0, comma), &p1);
        const long s = std::stol(a.input_shape.substr(comma + 1), &p2);
        ok = b > 0 && s > 0 && p1 == comma && p2 == a.input_shape.size() - comma - 1;
      }
    } catch (const std::exception&) {
      ok = false;
    }
    if (!ok)
      usage_error("--input-shape must be BATCH,SEQ with two positive integers, e.g. 1,128 (got '" +
                  a.input_shape + "')");
  }
  const std::filesystem::path ws = a.workspace;
  std::filesystem::create_directories(ws);
  const std::filesystem::path model_abs =
      a.model.empty() ? std::filesystem::path() : std::filesystem::absolute(a.model);
  nlohmann::json req = {{"model", model_abs.string()},
                        {"class_name", a.class_name},
                        {"module", a.module},
                        {"config", !a.config.empty() && std::filesystem::exists(a.config)
                                       ? std::filesystem::absolute(a.config).string()
                                       : a.config},
                        {"model_args", margs},
                        {"input_shape", a.input_shape},
                        {"dtype", a.dtype},
                        {"device", a.device},
                        {"warmup", a.warmup},
                        {"iters", a.iters},
                        {"export_trace", a.export_trace ? std::filesystem::absolute(ws / "trace.json").string() : ""}};
  nlohmann::json raw;
  try {
    raw = run_bridge("profile", req, ws / ".bridge");
  } catch (const BridgeUsageError& e) {
    usage_error(e.what());
  }
  if (raw.value("records", 0) == 0 || raw["entries"].empty() || raw.value("profiled_us", 0.0) <= 0) {
    std::cerr << "vladbud profile: the profiler recorded no operator time for " << a.class_name
              << " (empty trace: the forward may run outside PyTorch operators, e.g. in a "
                 "compiled graph or on another device); nothing written\n";
    throw CLI::RuntimeError(kFail);
  }
  const Roof roof = device_roof(a.device, *dt);
  const nlohmann::json prof = analyze_profile(raw, roof);
  write_file_atomic(ws / "profile.json", prof.dump(1) + "\n");
  if (a.json) {
    std::cout << prof.dump(2) << "\n";
    return;
  }
  const auto& m = prof["model"];
  std::cout << fmt::format("model: {} ({:.1f}M parameters, depth {}), input {} {}, dtype {}, device {} ({})\n",
                           a.class_name, m.value("parameters", 0) / 1e6, m.value("depth", 0),
                           m["input"]["shape"].dump(), m["input"].value("dtype", ""), a.dtype,
                           a.device, prof.value("device_name", ""));
  std::cout << fmt::format(
      "forward: {:.2f} ms (median, unprofiled); profiled {:.2f} ms per forward over {} forwards "
      "after {} warm-up; torch {} ({} threads)\n",
      prof.value("forward_ms", 0.0), prof.value("profiled_us", 0.0) / 1e3, a.iters, a.warmup,
      prof.value("torch", ""), prof.value("threads", 0));
  std::cout << fmt::format("roof: {:.3g} TFLOP/s ({}), {:.0f} GB/s, ridge {:.1f} FLOP/B ({})\n",
                           roof.peak_tflops, a.dtype, roof.bandwidth_gbs, roof.ridge(), roof.source);
  std::cout << format_profile_table(prof, a.rows);
  std::cout << fmt::format(
      "in the nine kernel types: {:.1f}% of the time; Amdahl bound if all of it took no time: "
      "{:.2f}x\n",
      100 * prof.value("typed_share", 0.0), prof.value("amdahl_max_all", 1.0));
  for (const auto& w : prof.value("warnings", nlohmann::json::array()))
    std::cout << "warning: " << w.get<std::string>() << "\n";
  std::cout << "wrote " << (ws / "profile.json").string();
  if (a.export_trace) std::cout << " and " << (ws / "trace.json").string() << " (Chrome trace)";
  std::cout << "\nnext: vladbud extract --top 5\n";
}
}  // namespace

void add_profile(CLI::App& app) {
  auto a = std::make_shared<ProfileArgs>();
  auto* c = app.add_subcommand(
      "profile",
      "Profile a PyTorch model's forward pass (torch.profiler, after warm-up): time per kernel "
      "type at the model's shapes and dtype, counted once (an op and its kernels are one entry), "
      "compute/memory bound from the FLOP/byte model and this device's ridge point, Amdahl's "
      "bound. Writes workspace/profile.json.");
  c->add_option("--model", a->model, "Python file defining the model class (models/gpt2.py, ...)");
  c->add_option("--class-name", a->class_name, "nn.Module class (GPT2, Llama, Bert, ...)");
  c->add_option("--module", a->module,
                "importable module instead of --model; 'transformers' builds --class-name from --config with random weights");
  c->add_option("--config", a->config, "transformers config: config.json, a folder, or a cached name");
  c->add_option("--model-args", a->model_args, "constructor keyword arguments as a JSON object")
      ->capture_default_str();
  c->add_option("--input-shape", a->input_shape, "BATCH,SEQ of the input")->capture_default_str();
  c->add_option("--dtype", a->dtype, "fp32, fp16 or bf16 (the model is cast to it)")->capture_default_str();
  c->add_option("--device", a->device, "cpu or cuda")->capture_default_str();
  c->add_flag("--export-trace", a->export_trace, "also write workspace/trace.json (Chrome trace)");
  c->add_flag("--json", a->json, "print profile.json instead of the table");
  c->add_option("--warmup", a->warmup, "warm-up forwards before profiling")->capture_default_str();
  c->add_option("--iters", a->iters, "profiled forwards (times are per forward)")->capture_default_str();
  c->add_option("--rows", a->rows, "rows of the table")->capture_default_str();
  c->add_option("--workspace", a->workspace, "workspace folder")->capture_default_str();
  c->callback([a] { run_profile(*a); });
}

}  // namespace vb::cli
