// The reference corpus (DESIGN §5, issue 3 item 6): for each of the nine kernel types, the
// canonical algorithm and cited published baselines per hardware, from data/corpus/<type>.json.
// Shown by `vladbud research --kernel TYPE`; corpus_reference() is the one-line "corpus
// reference" that `vladbud run --all` can print next to a result.
//
// File schema:
//   kernel_type  string, equal to the file stem (a registered kernel type)
//   algorithm    string, one paragraph
//   references   [{title, url}]              (optional)
//   baselines    [{implementation, hardware, targets [spec ids], dtype, metric, value,
//                  value_low?, value_high?, unit, pct_of_peak?, shape?, claim, source, note?}]
//                at least one, and at least one whose `source` is an http(s) URL.
// `claim` quotes or closely paraphrases the source; `source` is where it was published.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/paths.h"

namespace vb {

/// One published baseline of a kernel type on one piece of hardware.
struct CorpusBaseline {
  std::string implementation;  ///< "FlashAttention-3 (forward)"
  std::string hardware;        ///< "NVIDIA H100 SXM"
  std::vector<std::string>
      targets;         ///< spec-DB ids it applies to ("h100-sxm", "h200"), may be empty
  std::string dtype;   ///< "bf16", "fp16", "fp16/bf16", ...
  std::string metric;  ///< "throughput", "achieved bandwidth", "speedup", ...
  double value = 0;    ///< the headline number, in `unit`
  std::optional<double> value_low, value_high;  ///< a published range, when there is one
  std::string unit;                             ///< "TFLOP/s", "TB/s", "x vs Hugging Face ...", ...
  std::optional<double> pct_of_peak;  ///< percent of the hardware's datasheet peak, when stated
  std::string shape;                  ///< problem size, "" when not stated
  std::string claim;                  ///< the published statement
  std::string source;                 ///< URL (or document) where it was published
  std::string note;                   ///< VladBud's remark, "" when none
};

/// One kernel type's corpus file.
struct KernelCorpus {
  std::string kernel_type;
  std::string algorithm;
  std::vector<std::pair<std::string, std::string>> references;  ///< (title, url)
  std::vector<CorpusBaseline> baselines;
  std::filesystem::path path;  ///< the file it came from
  nlohmann::json raw;          ///< the whole file
};

/// Default corpus directory: vladbud_home()/data/corpus.
std::filesystem::path corpus_dir();

/// Loads and validates data/corpus/<type>.json. Throws std::runtime_error naming the file and
/// the field ("<path>: baselines[2].source: expected a non-empty string") when the file is
/// missing, is not JSON, or breaks the schema above.
KernelCorpus load_corpus(const std::string& type, const std::filesystem::path& dir = corpus_dir());

/// Kernel types that have a corpus file in `dir` (file stems, sorted).
std::vector<std::string> corpus_types(const std::filesystem::path& dir = corpus_dir());

/// The baselines of `c` listing `target_id` among their targets.
std::vector<CorpusBaseline> corpus_baselines_for(const KernelCorpus& c,
                                                 const std::string& target_id);

/// One line for a results table: the first baseline for `target_id`, e.g. "FlashAttention-3
/// (forward) 740 TFLOP/s (75% of peak), NVIDIA H100 SXM [https://arxiv.org/abs/2407.08608]";
/// "" when the type has no corpus file or no baseline for that target. Never throws.
std::string corpus_reference(const std::string& type, const std::string& target_id);

/// Human-readable corpus: algorithm, references, baselines (those for `target_id` first and
/// marked, when it is not empty).
std::string format_corpus(const KernelCorpus& c, const std::string& target_id = "");

}  // namespace vb
