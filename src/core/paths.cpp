#include "core/paths.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

namespace vb {

namespace fs = std::filesystem;

fs::path vladbud_home() {
  if (const char* e = std::getenv("VLADBUD_HOME"); e && *e) return fs::path(e);
#ifdef VB_SOURCE_DIR
  return fs::path(VB_SOURCE_DIR);
#else
  return fs::current_path();
#endif
}

fs::path cache_dir() {
  fs::path p;
  if (const char* e = std::getenv("VB_CACHE_DIR"); e && *e) {
    p = e;
  } else if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) {
    p = fs::path(x) / "vladbud";
  } else if (const char* h = std::getenv("HOME"); h && *h) {
    p = fs::path(h) / ".cache" / "vladbud";
  } else {
    p = fs::temp_directory_path() / "vladbud-cache";
  }
  fs::create_directories(p);
  return p;
}

fs::path self_exe_dir() {
  std::error_code ec;
  auto p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::current_path() : p.parent_path();
}

fs::path runner_path() {
  if (const char* e = std::getenv("VB_RUNNER"); e && *e) return fs::path(e);
  auto p = self_exe_dir() / "vladbud-runner";
  if (fs::exists(p)) return p;
#ifdef VB_BINARY_DIR
  p = fs::path(VB_BINARY_DIR) / "vladbud-runner";
  if (fs::exists(p)) return p;
#endif
  throw std::runtime_error("cannot find the runner binary 'vladbud-runner' next to " +
                           self_exe_dir().string() +
                           "; build the project (cmake --build build) or set VB_RUNNER");
}

void write_file_atomic(const fs::path& path, const std::string& content) {
  if (!path.parent_path().empty()) fs::create_directories(path.parent_path());
  const fs::path tmp = path.string() + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) throw std::runtime_error("cannot write " + tmp.string());
  std::size_t off = 0;
  while (off < content.size()) {
    const ssize_t w = ::write(fd, content.data() + off, content.size() - off);
    if (w <= 0) {
      ::close(fd);
      throw std::runtime_error("short write to " + tmp.string());
    }
    off += static_cast<std::size_t>(w);
  }
  ::fsync(fd);
  ::close(fd);
  fs::rename(tmp, path);
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string project_python() {
  if (const char* p = std::getenv("VB_PYTHON"); p && *p) return p;
  const std::filesystem::path venv = vladbud_home() / ".venv" / "bin" / "python";
  if (std::filesystem::exists(venv)) return venv.string();
  return "python3";
}

}  // namespace vb
