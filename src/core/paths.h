// Where VladBud finds its own files and keeps its caches.
#pragma once

#include <filesystem>
#include <string>
#include <system_error>

namespace vb {

/// Root of the VladBud tree (kernels/, data/, kernels/include/): $VLADBUD_HOME when set, else
/// the source directory baked in at configure time (VB_SOURCE_DIR).
std::filesystem::path vladbud_home();

/// Per-user cache directory, created on first use: $VB_CACHE_DIR, else $XDG_CACHE_HOME/vladbud,
/// else $HOME/.cache/vladbud. Build artifacts and measured ceilings live below it.
std::filesystem::path cache_dir();

/// Directory of the running executable (from /proc/self/exe).
std::filesystem::path self_exe_dir();

/// Path of the isolated runner binary: $VB_RUNNER when set, else vladbud-runner next to the
/// running executable, else next to the build tree's vladbud (VB_BINARY_DIR for tests).
std::filesystem::path runner_path();

/// The project's Python interpreter (the one with torch and triton): $VB_PYTHON when set, else
/// <home>/.venv/bin/python (made by scripts/setup.sh) when it exists, else "python3" (PATH).
std::string project_python();

/// Writes `content` to `path` atomically (temp file in the same directory, fsync, rename).
/// Throws std::runtime_error naming the path on failure.
void write_file_atomic(const std::filesystem::path& path, const std::string& content);

/// Reads a whole file; throws std::runtime_error naming the path if it cannot be read.
std::string read_file(const std::filesystem::path& path);

/// Removes the directory tree `dir` when it goes out of scope, however the scope ends (work
/// directories of tool runs). Errors are ignored: a leftover directory is not a failure.
struct RemoveTreeOnExit {
  std::filesystem::path dir;
  ~RemoveTreeOnExit() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
};

}  // namespace vb
