// KernelBench (issue 19): its problems as VladBud workspaces, its protocol with VladBud's guards
// on top, and its fast_p score. The problems come from a KernelBench checkout
// (https://github.com/ScalingIntelligence/KernelBench: KernelBench/level{1,2,3,4}/<id>_<name>.py);
// the PyTorch half (mapping a forward to a kernel type, evaluating a ModelNew) is
// python/vladbud/kernelbench.py, run through the bridge's subprocess contract (bridge.h).
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace vb {

/// One KernelBench problem file.
struct KbProblem {
  int level = 0;             ///< 1..4
  int id = 0;                ///< the leading number of the file name
  std::string name;          ///< the file name without ".py", e.g. "23_Softmax"
  std::filesystem::path file;
  /// "level1/23_Softmax".
  std::string label() const { return "level" + std::to_string(level) + "/" + name; }
};

/// The folder holding level1..level4 of a checkout: `kb_root`/KernelBench when it exists, else
/// `kb_root` itself when it holds a level folder. Throws BridgeUsageError naming the fix (clone
/// https://github.com/ScalingIntelligence/KernelBench and pass --kb-root) when `kb_root` is empty,
/// missing, or holds no level folder.
std::filesystem::path kb_levels_dir(const std::filesystem::path& kb_root);

/// The problems of `level` (1..4; 0 = every level present), sorted by level then id. Files whose
/// name does not start with "<number>_" are skipped. Throws BridgeUsageError as kb_levels_dir, and
/// for a level outside 0..4 or a level folder that is missing.
std::vector<KbProblem> kb_list(const std::filesystem::path& kb_root, int level);

/// The problems named by `spec` in `level`: "all", or a comma-separated list of ids ("1,2,23") or
/// file names ("23_Softmax"). Throws BridgeUsageError for an id or name that is not in the level
/// (naming the level's folder) or an empty spec.
std::vector<KbProblem> kb_select(const std::filesystem::path& kb_root, int level,
                                 const std::string& spec);

/// The workspace folder of a problem: <workspace>/kernelbench/level<L>/<name>/.
std::filesystem::path kb_folder(const std::filesystem::path& workspace, const KbProblem& p);

/// Options of kb_setup.
struct KbSetupOptions {
  std::filesystem::path workspace = "workspace";
  std::string backend = "cpu";  ///< the backend whose starter a mapped problem gets
};

/// Maps problem `p` (python -m vladbud.kernelbench, action "map") and writes its folder
/// (kb_folder): always model_new.py and program_kb.md; when the forward is one of the nine kernel
/// types at its shapes, also problem.json (a VladBud kernel folder: kernel, dims, attrs, dtype,
/// backend, source; plus "kernelbench": {level, id, name, file, layout, layout_steps}) and the
/// backend's starter as <type><ext>, so `vladbud optimize --kernel DIR` and `vladbud bench` (in
/// DIR) apply. An unmapped problem's problem.json has "mapped": false and the reason. Replaces
/// an earlier setup of the same problem, keeping best/ (the optimizer's kept versions). Returns
/// the mapping ({"mapped", "type", "dims", "attrs", "dtype", "layout_steps", "reason", "ops",
/// "folder"}). Throws BridgeUsageError for an unknown backend or a malformed problem file,
/// std::runtime_error when Python fails otherwise.
nlohmann::json kb_setup(const KbProblem& p, const KbSetupOptions& o);

/// kb_setup for several problems with one Python process (mapping takes ~0.5 s per problem
/// once torch is imported, torch's import several seconds). Returns the mappings in order.
std::vector<nlohmann::json> kb_setup(const std::vector<KbProblem>& ps, const KbSetupOptions& o);

/// Options of kb_bench and kb_score.
struct KbBenchOptions {
  std::filesystem::path workspace = "workspace";
  std::string candidate;        ///< a ModelNew file; "" = the problem folder's model_new.py
  std::string backend = "cpu";  ///< builds a mapped folder's kernel; its device runs both models
  int trials = 5;               ///< correctness trials (KernelBench: 5)
  int reps = 0;                 ///< timed calls per model (0: the device's default, -1: no timing)
  int warmup = 3;
  double max_time_s = 30;       ///< per model's timed calls
  double atol = 1e-2, rtol = 1e-2;
  int seed = 42;
  bool compile = false;         ///< also time torch.compile(Model)
  bool strict = false;          ///< the fp64 oracle's verdict counts
  bool fp64 = true;             ///< compute the fp64 oracle
  int timeout_s = 1800;         ///< per problem
  /// Build a folder whose problem.json says "precision": "tf32" with its TF32 path
  /// (VB_PRECISION_TF32); false (--no-tf32) keeps fp32 true fp32.
  bool allow_tf32 = true;
  /// Draw get_inputs() on the GPU (torch.device context) instead of the host (KernelBench's
  /// way); for Level 1's multi-GB inputs. Ignored on the CPU.
  bool inputs_on_device = false;
};

/// True when a KernelBench folder's problem.json (`prob`, read from `file`) asks for the TF32 path:
/// "precision": "tf32". Absent or "fp32" is false. Throws BridgeUsageError, naming the file and the
/// fix, for another value, for "tf32" in a document without the "kernelbench" section (VladBud's
/// own fp32 is true fp32, DESIGN §2), or for "tf32" on anything but an fp32 matmul.
bool kb_precision_tf32(const nlohmann::json& prob, const std::filesystem::path& file);

/// A copy of kernel source `src`, scratch/<content hash>/tf32_<name>, that starts with
/// `#define VB_PRECISION_TF32 1` and `#line 1` (diagnostics keep the original's line numbers);
/// the kernel's TF32 path (kernels/cuda/matmul.cu) is compiled only with that define. Equal
/// sources give the same path, so a build cache keyed by the preprocessed text builds them once.
/// Throws std::runtime_error when `src` cannot be read or the copy written.
std::filesystem::path kb_tf32_source(const std::filesystem::path& src, const std::filesystem::path& scratch);

/// Evaluates a ModelNew against problem `p`'s Model (python/vladbud/kb_eval.py: KernelBench's
/// protocol plus VladBud's guards). When the candidate is the folder's own model_new.py of a
/// mapped problem, first builds the folder's kernel (best/<type><ext> when the optimizer kept
/// one, else its source) with the folder's backend and binds it. Returns the result document
/// A folder whose problem.json says "precision": "tf32" (an fp32 matmul) is built from a copy of
/// the source with VB_PRECISION_TF32 defined (kb_tf32_source) unless o.allow_tf32 is false.
/// ({"verdict": "PASS"|"FAIL", "guard", "reason", "kb_correct", "fp64", "timing", "speedup",
/// "speedup_vs_compile", "precision", "warnings", "kernel": {"type", "source", "library",
/// "precision"}, ...}); a kernel that
/// does not build is a FAIL with guard "build" and the compiler's diagnostics. Throws
/// BridgeUsageError when there is no candidate (naming `vladbud kernelbench setup`), the problem
/// or candidate file is malformed, or the backend's device is absent; std::runtime_error when
/// Python fails otherwise.
nlohmann::json kb_bench(const KbProblem& p, const KbBenchOptions& o);

/// fast_p thresholds reported by kb_score (KernelBench's fast_p: the share of ALL problems that
/// are correct and faster than p times the baseline; p = 0 is the correct share).
inline const std::vector<double> kFastP = {0.0, 1.0, 1.5, 2.0, 3.0, 5.0};

/// fast_p over `results` (kb_bench documents): {"n", "correct", "fast_p": {"0": x, "1.0": ...}}
/// against the eager Model, and "fast_p_compile" (over the problems whose torch.compile baseline
/// was timed) when any was. A result without "correct": true counts as incorrect.
nlohmann::json kb_fast_p(const std::vector<nlohmann::json>& results);

/// Runs kb_bench on every problem of `problems` (a problem without a candidate, or whose bench
/// throws, is recorded as incorrect with the reason, never aborting the run) and returns
/// {"problems": [{"label", "verdict", "guard", "reason", "speedup", ...}], "score": kb_fast_p}.
nlohmann::json kb_score(const std::vector<KbProblem>& problems, const KbBenchOptions& o,
                        const std::function<void(const std::string&)>& progress);

/// The Markdown report of a kb_score document: the fast_p table and one row per problem
/// (correct, speedup, vs compile, guard, reason).
std::string kb_score_markdown(const nlohmann::json& score);

}  // namespace vb
