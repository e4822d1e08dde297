// `vladbud bench`: evaluate one kernel source (default: the starter) and time it.
#include <unistd.h>

#include <fmt/format.h>
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>

#include "bridge/bridge.h"
#include "bridge/in_use.h"
#include "cli/commands.h"
#include "eval/report.h"
#include "kernels/kernel_type.h"

namespace vb::cli {

namespace {
struct BenchArgs {
  std::string kernel, source, backend = "cpu", size, dtype, results = "results.tsv",
                              tag = "bench", arch, sanitize, check_dtypes;
  bool quick = false, json = false, no_timing = false, timing_only = false, list_sizes = false,
       progress = false, abi = false, no_pytorch = false, no_in_use = false;
  std::uint64_t seed = 42, fresh_seed = 0;
  double timeout = 30;
};

[[noreturn]] void usage_error(const std::string& msg) {
  std::cerr << "vladbud bench: " << msg << "\n";
  throw CLI::RuntimeError(kUsage);
}

void run_bench(const BenchArgs& args) {
  // Inside a kernel folder written by `vladbud extract` (problem.json): the model's type, dtype
  // and shapes are the timed problem unless given; correctness still runs every size and dtype.
  BenchArgs a = args;
  std::optional<ModelProblem> mp;
  try {
    mp = read_model_problem(std::filesystem::current_path());
  } catch (const BridgeUsageError& e) {
    usage_error(e.what());
  }
  if (mp && (a.kernel.empty() || a.kernel == mp->type->name())) {
    a.kernel = mp->type->name();
    if (a.dtype.empty()) a.dtype = std::string(dtype_name(mp->dtype));
    const std::string own = mp->doc.value("source", "");
    if (a.source.empty() && !own.empty() && std::filesystem::exists(own)) a.source = own;
  } else {
    mp.reset();
  }
  if (a.kernel.empty()) {
    // Both mistakes at once when there are two (a new user's `bench -s nonexist.cpp` heard only
    // of the missing --kernel).
    const std::string also = !a.source.empty() && !std::filesystem::exists(a.source)
                                 ? "; and --source '" + a.source + "' does not exist"
                                 : "";
    usage_error("--kernel is required (or run inside a workspace/kernels/NN_<type>/ folder made by "
                "`vladbud extract`, whose problem.json gives the type)" + also);
  }
  if (a.dtype.empty()) a.dtype = "fp32";
  const KernelType* kt = find_kernel_type(a.kernel);
  if (!kt)
    usage_error("unknown kernel type '" + a.kernel + "'; choose one of: " + kernel_type_names());
  const Backend* be = find_backend(a.backend);
  if (!be) usage_error("unknown backend '" + a.backend + "'; available: " + backend_names());
  const Device& dev = be->device();
  if (!a.arch.empty()) {
    if (!be->has_target_arch())
      usage_error("--arch applies to --backend " +
                  backend_names([](const Backend& b) { return b.has_target_arch(); }) + " only");
    try {
      be->set_target_arch(a.arch);
    } catch (const std::invalid_argument& e) {
      usage_error(e.what());
    }
  }
  if (!a.sanitize.empty()) {
    const Sanitizer* san = be->sanitizer();
    if (!san)
      usage_error("--sanitize applies to --backend " +
                  backend_names([](const Backend& b) { return b.sanitizer() != nullptr; }) +
                  " only");
    const auto tools = san->tools();
    if (std::find(tools.begin(), tools.end(), a.sanitize) == tools.end()) {
      std::string list;
      for (std::size_t i = 0; i < tools.size(); ++i)
        list += (i == 0 ? "" : i + 1 == tools.size() ? " or " : ", ") + tools[i];
      usage_error("--sanitize must be " + list + " (got '" + a.sanitize + "')");
    }
    if (san->find_executable().empty()) usage_error(san->not_found_message());
  }
  if (a.abi && a.json) {
    // The resolved problem of --size (default: the backend's benchmark size) in --dtype, for
    // tools that run the same problem elsewhere (bench/pytorch_baselines.py).
    const auto dt = parse_dtype(a.dtype);
    if (!dt || !is_floating(*dt) || *dt == DType::F64)
      usage_error("--dtype must be fp16, bf16 or fp32 (got '" + a.dtype + "')");
    std::optional<Size> size = kt->benchmark_size(dev.kind());
    if (!a.size.empty()) size = kt->find_size(a.size, dev.kind());
    if (!size) usage_error("unknown size '" + a.size + "' for " + kt->name() + " (--list-sizes)");
    const Problem p = kt->make_problem(*size, *dt);
    auto tensors = [](const std::vector<TensorDesc>& ts) {
      nlohmann::json out = nlohmann::json::array();
      for (const auto& t : ts)
        out.push_back({{"name", t.name}, {"dtype", std::string(dtype_name(t.dtype))}, {"shape", t.shape}});
      return out;
    };
    nlohmann::json attrs = nlohmann::json::object();
    for (std::size_t i = 0; i < p.attrs.size(); ++i) attrs[p.attr_names[i]] = p.attrs[i];
    nlohmann::json j = {{"kernel", kt->name()},        {"size", p.size.label},
                        {"dtype", std::string(dtype_name(p.dtype))}, {"inputs", tensors(p.inputs)},
                        {"outputs", tensors(p.outputs)}, {"attrs", attrs},
                        {"flops", kt->flops(p)},        {"min_bytes", kt->min_bytes(p)}};
    std::cout << j.dump(2) << "\n";
    return;
  }
  if (a.abi) {
    // The ABI of the type, from its spec: argument order, names, dtypes, shapes, attributes.
    const Problem p = kt->make_problem(kt->smoke_size(), DType::F32);
    std::cout << kt->name() << ": " << kt->summary() << "\n";
    std::cout << "vb_kernel_run(inputs, n_inputs, outputs, n_outputs, attrs, n_attrs, stream)\n";
    auto dims = [](const TensorDesc& t) {
      std::string s = "[";
      for (std::size_t i = 0; i < t.shape.size(); ++i)
        s += (i ? "," : "") + std::to_string(t.shape[i]);
      return s + "]";
    };
    for (std::size_t i = 0; i < p.inputs.size(); ++i)
      std::cout << "  inputs[" << i << "]  " << p.inputs[i].name << " " << dims(p.inputs[i])
                << (p.inputs[i].dtype == DType::I64 ? " int64" : " problem dtype") << "\n";
    for (std::size_t i = 0; i < p.outputs.size(); ++i)
      std::cout << "  outputs[" << i << "] " << p.outputs[i].name << " " << dims(p.outputs[i])
                << (p.outputs[i].dtype == DType::F32 && p.outputs[i].shape.empty()
                        ? " fp32"
                        : " problem dtype")
                << "\n";
    const auto specs = kt->attributes();
    for (std::size_t i = 0; i < specs.size(); ++i)
      std::cout << "  attrs[" << i << "]   " << specs[i].name << " (default "
                << (std::isnan(specs[i].default_value) ? std::string("derived")
                                                       : fmt::format("{}", specs[i].default_value))
                << "): " << specs[i].doc << "\n";
    std::cout << "shapes shown for the smoke size " << kt->smoke_size().label
              << "; problem dtype is fp16, bf16 or fp32\n";
    return;
  }
  if (a.list_sizes) {
    for (const auto& s : kt->all_sizes(dev.kind())) std::cout << s.label << "\n";
    return;
  }
  EvalOptions o;
  o.quick = a.quick;
  o.timing = !a.no_timing;
  o.correctness = !a.timing_only;
  if (a.timing_only && a.no_timing)
    usage_error("--timing-only and --no-timing exclude each other (one of the two must run)");
  o.seed = a.seed;
  o.fresh_seed = a.fresh_seed;
  o.call_timeout_s = a.timeout;
  o.progress = progress_printer(a.progress);
  o.sanitizer = a.sanitize;
  const auto dt = parse_dtype(a.dtype);
  if (!dt || !is_floating(*dt) || *dt == DType::F64)
    usage_error("--dtype must be fp16, bf16 or fp32 (got '" + a.dtype + "')");
  o.timing_dtype = *dt;
  if (!a.check_dtypes.empty()) {
    // A subset of the correctness dtypes (e.g. fp32 for a quick emulated run); never empty.
    o.dtypes.clear();
    std::size_t pos = 0;
    while (pos <= a.check_dtypes.size()) {
      const std::size_t end = std::min(a.check_dtypes.find(',', pos), a.check_dtypes.size());
      const std::string name = a.check_dtypes.substr(pos, end - pos);
      const auto d = parse_dtype(name);
      if (!d || !is_floating(*d) || *d == DType::F64)
        usage_error("--check-dtypes takes fp16, bf16 and fp32 separated by commas (got '" + name +
                    "' in '" + a.check_dtypes + "')");
      if (std::find(o.dtypes.begin(), o.dtypes.end(), *d) == o.dtypes.end()) o.dtypes.push_back(*d);
      pos = end + 1;
    }
  }
  if (!a.size.empty()) {
    auto s = kt->find_size(a.size, dev.kind());
    if (!s) {
      std::string labels;
      for (const auto& x : kt->all_sizes(dev.kind())) labels += " " + x.label;
      usage_error("unknown size '" + a.size + "' for " + kt->name() + "; known sizes:" + labels);
    }
    o.timing_size = *s;
  } else if (mp) {
    o.timing_size = mp->size;
  }
  const std::filesystem::path src =
      a.source.empty() ? be->starter_source(kt->name()) : std::filesystem::path(a.source);
  if (!std::filesystem::exists(src))
    usage_error("source file '" + src.string() + "' does not exist");
  if (!std::filesystem::is_regular_file(src))
    usage_error("source '" + src.string() + "' is not a regular file");
  if (!(a.timeout > 0) || a.timeout > 86400)
    usage_error("--timeout must be a number of seconds in (0, 86400]");
  // Check the results file before spending minutes on the evaluation.
  if (std::filesystem::is_directory(a.results) || a.results.empty())
    usage_error("--results '" + a.results + "' must be a file path, not a directory");
  if (std::filesystem::exists(a.results)) {
    std::ifstream in(a.results);
    std::string first;
    std::getline(in, first);
    if (!first.empty() && first != results_header())
      usage_error("--results '" + a.results +
                  "' exists but is not a results.tsv (its first line is not the header); move it "
                  "away or choose another path");
  }

  // A machine that cannot run this backend's kernels is a usage error, not a verdict on the
  // kernel (issue 18: without a GPU every kernel used to FAIL with guard 'build').
  if (const std::string why = be->device_unavailable(); !why.empty())
    usage_error("--backend " + be->name() + ": there is no device here to run the kernel (" + why +
                "). Run on a machine that has one (for cuda: an NVIDIA GPU and its driver), use "
                "--backend cpu, or rank the kernel for absent hardware with `vladbud rank " +
                kt->name() + " --targets <id>` (e.g. h100-sxm)");
  EvalReport r = evaluate(*kt, *be, src, o);
  // The in-use check (issue 18 class 6): a PASS must hold outside the evaluator's sandbox, in
  // an ordinary process calling the library through torch.ops.vladbud, as a model does.
  if (r.verdict == "PASS" && !a.no_in_use && !be->serves_torch_ops())
    r.warnings.push_back("in-use check not run: backend " + be->name() +
                         " has no torch.ops.vladbud path yet");
  if (r.verdict == "PASS" && !a.no_in_use && be->serves_torch_ops()) {
    const auto scratch = std::filesystem::temp_directory_path() /
                         ("vladbud-in-use-" + std::to_string(::getpid()));
    try {
      const std::string why = in_use_mismatch(*kt, *be, r.build.library, o.timing_dtype,
                                              r.fresh_seed ^ 0x1d05e, scratch);
      if (!why.empty()) {
        r.verdict = "FAIL";
        r.guard = "in_use";
        r.failed_stage = "in_use";
        r.reason = why + " (the sandboxed stages passed: the kernel behaves differently in use)";
      }
    } catch (const std::exception& e) {
      r.warnings.push_back(std::string("in-use check skipped (") + e.what() +
                           "); run `bash scripts/setup.sh` for the .venv, or pass --no-in-use");
    }
    std::error_code ec;
    std::filesystem::remove_all(scratch, ec);
  }
  // The target: the backend's local device (the one the runner used).
  const std::string target = dev.local_target_id(), target_name = dev.local_name();
  // speedup_vs_pytorch: PyTorch on the same device, dtype and shapes, same protocol.
  ResultsRow row = results_row(r, target, a.tag);
  nlohmann::json torch_base;
  std::string no_base = "--no-pytorch";
  // PyTorch is timed next to a correct result, and next to a --timing-only one (UNVERIFIED: the
  // stages were run earlier or elsewhere, e.g. bench/h200_triton.sh's aot-check before its
  // aot-time, whose rows had no PyTorch figure to set the speedup against).
  if ((r.correct() || r.verdict == "UNVERIFIED") && r.timing && !a.no_pytorch) {
    try {
      const Size ts = o.timing_size ? *o.timing_size : kt->benchmark_size(dev.kind());
      torch_base = pytorch_baseline(kt->make_problem(ts, r.timing->dtype), dev.torch_device(),
                                    r.timing->rotation_sets, r.timing->rotation_bytes, a.quick);
      row.speedup_vs_pytorch =
          fmt::format("{:.3f}", torch_base["median_us"].get<double>() / r.timing->median_us);
    } catch (const std::exception& e) {
      no_base = e.what();
      if (no_base.size() > 300) no_base = no_base.substr(0, 300) + "...";
    }
  } else if (!a.no_pytorch) {
    no_base = "no timed result that passed or skipped the correctness stages";
  }
  int experiment = 0;
  try {
    experiment = append_results_row(a.results, row);
  } catch (const std::exception& e) {
    std::cerr << "vladbud bench: warning: result not logged: " << e.what() << "\n";
  }
  if (a.json) {
    auto j = report_to_json(r);
    j["target"] = target;
    j["results_tsv"] = a.results;
    j["experiment"] = experiment;
    // A number (PyTorch's median over the kernel's, the same protocol), null when not measured
    // (pytorch_unavailable says why); results.tsv keeps the 3-decimal text.
    if (!torch_base.is_null())
      j["speedup_vs_pytorch"] = torch_base["median_us"].get<double>() / r.timing->median_us;
    else
      j["speedup_vs_pytorch"] = nullptr;
    if (!torch_base.is_null()) j["pytorch"] = torch_base;
    else j["pytorch_unavailable"] = no_base;
    std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } else {
    std::cout << format_key_values(r);
    if (!torch_base.is_null())
      std::cout << fmt::format("pytorch_latency_us: {:.3f} ({}, torch {}, median of {})\n",
                               torch_base["median_us"].get<double>(), torch_base.value("op", ""),
                               torch_base.value("torch", ""), torch_base.value("reps", 0));
    std::cout << "speedup_vs_pytorch: " << row.speedup_vs_pytorch
              << (torch_base.is_null() ? " (" + no_base + ")" : "") << "\n";
    std::cout << "target: " << target << " (" << target_name << ")\n";
    if (experiment)
      std::cout << "results_tsv: " << a.results << " (experiment " << experiment << ")\n";
    if (!r.build.ok && !r.build.diagnostics.empty())
      std::cerr << "compiler diagnostics:\n" << r.build.diagnostics;
  }
  const int code = exit_code_for(r.verdict);
  if (code != 0) throw CLI::RuntimeError(code);
}
}  // namespace

void add_bench(CLI::App& app) {
  auto args = std::make_shared<BenchArgs>();
  auto* c = app.add_subcommand(
      "bench",
      "Build a kernel source, validate it against the fp64 oracle through the five stages and "
      "every guard, time it, and report % of this machine's measured ceiling.\n"
      "Prints greppable 'key: value' lines (or --json) and appends one row to results.tsv.\n"
      "Exit code 0 only when the verdict is PASS.");
  c->add_option("--kernel,-k", args->kernel,
                "kernel type: " + kernel_type_names() + " (default inside an extracted folder: its problem.json)");
  c->add_option("--source,-s", args->source,
                "kernel source to evaluate (default: the starter kernels/<backend>/<type>)");
  c->add_option("--backend,-b", args->backend, "backend: " + backend_names())
      ->capture_default_str();
  c->add_option("--arch", args->arch,
                "cuda: GPU architecture to compile for, e.g. sm_90a (default: the detected GPU)");
  c->add_option("--sanitize", args->sanitize,
                "cuda: run the correctness stages under compute-sanitizer (memcheck, racecheck, "
                "initcheck, synccheck); findings fail with guard 'sanitizer'; no timing");
  c->add_option("--size", args->size,
                "size label to time (default: the type's benchmark size; --list-sizes shows all)");
  c->add_option("--dtype", args->dtype,
                "dtype of the timed problem: fp16, bf16, fp32 (default fp32, or problem.json's; correctness always runs all three)");
  c->add_option("--check-dtypes", args->check_dtypes,
                "dtypes of the correctness stages, comma-separated (default fp16,bf16,fp32), e.g. "
                "fp32 for a quick run under the Triton interpreter");
  c->add_flag("--quick", args->quick, "fewer sizes per stage and a short timing window");
  c->add_flag("--json", args->json, "print the report as JSON");
  c->add_flag("--no-timing", args->no_timing, "correctness stages only");
  c->add_flag("--timing-only", args->timing_only,
              "skip the correctness stages and only time (for ranking studies of variants "
              "validated before); the verdict is UNVERIFIED, exit code 0, unless a timing guard "
              "fires (INVALID, exit code 5)");
  c->add_flag("--list-sizes", args->list_sizes, "list the size labels of the kernel type and exit");
  c->add_flag("--abi", args->abi,
              "print the kernel type's ABI (input/output/attribute order, shapes) and exit; with --json, "
              "the resolved problem of --size (default: the benchmark size) in --dtype");
  c->add_flag("--progress", args->progress,
              "print progress to stderr even when it is not a terminal");
  c->add_flag("--no-pytorch", args->no_pytorch,
              "skip the PyTorch baseline (speedup_vs_pytorch n/a); it needs the .venv made by setup.sh");
  c->add_flag("--no-in-use", args->no_in_use,
              "skip the in-use check: after a PASS, the library is called once more through "
              "torch.ops.vladbud in an ordinary Python process (your environment, no sandbox) and "
              "compared with the fp64 oracle; a mismatch FAILs with guard in_use (needs the .venv)");
  c->add_option("--results", args->results, "results.tsv to append to")->capture_default_str();
  c->add_option("--tag", args->tag, "tag column of the results.tsv row")->capture_default_str();
  c->add_option("--seed", args->seed, "default seed of the inputs")->capture_default_str();
  c->add_option("--fresh-seed", args->fresh_seed,
                "the extra fresh seed (default: new each run; printed)");
  c->add_option("--timeout", args->timeout, "wall-clock limit of one kernel call, seconds")
      ->capture_default_str();
  c->callback([args] { run_bench(*args); });
}

}  // namespace vb::cli
