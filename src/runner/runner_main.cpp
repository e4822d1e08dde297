// vladbud-runner: the isolated process that executes candidate kernels (DESIGN §4).
//
// Started by the evaluator with the shared arena on fd 3, commands on fd 4 and replies on
// fd 5 (see runner/protocol.h). It loads one candidate library, maps the arena, and runs
// "call" commands. A crash, hang or abort here fails only the candidate; the parent notices
// EOF or its timeout and reports CRASH or TIMEOUT.
#include <dlfcn.h>
#include <dlpack/dlpack.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runner/protocol.h"

namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;
using KernelFn = int (*)(const DLTensor*, int, DLTensor*, int, const double*, int, void*);
using ErrorFn = const char* (*)();

struct State {
  void* lib = nullptr;
  KernelFn run = nullptr;
  ErrorFn last_error = nullptr;
  char* arena = nullptr;
  std::size_t arena_size = 0;
};

DLDataType parse_dtype(const std::string& s) {
  DLDataType d{};
  d.lanes = 1;
  if (s == "fp16") {
    d.code = kDLFloat, d.bits = 16;
  } else if (s == "bf16") {
    d.code = kDLBfloat, d.bits = 16;
  } else if (s == "fp32") {
    d.code = kDLFloat, d.bits = 32;
  } else if (s == "fp64") {
    d.code = kDLFloat, d.bits = 64;
  } else if (s == "int64") {
    d.code = kDLInt, d.bits = 64;
  } else {
    throw std::runtime_error("unknown dtype " + s);
  }
  return d;
}

std::string dtype_str(DLDataType d) {
  if (d.lanes != 1) return "vector dtype";
  if (d.code == kDLFloat && d.bits == 16) return "float16";
  if (d.code == kDLBfloat && d.bits == 16) return "bfloat16";
  if (d.code == kDLFloat && d.bits == 32) return "float32";
  if (d.code == kDLFloat && d.bits == 64) return "float64";
  if (d.code == kDLInt && d.bits == 64) return "int64";
  return "code " + std::to_string(d.code) + "/" + std::to_string(d.bits) + " bits";
}

std::size_t elem_size(DLDataType d) {
  return static_cast<std::size_t>(d.bits / 8);
}

// One set of tensors: descriptors passed to the kernel, plus pristine copies to detect
// descriptor tampering (a kernel "returning" another dtype or shape).
struct TensorSet {
  std::vector<std::vector<std::int64_t>> in_shapes, out_shapes;
  std::vector<DLTensor> in, out;
  std::vector<DLTensor> in_copy, out_copy;
  std::vector<std::vector<std::int64_t>> in_shapes_copy, out_shapes_copy;
  std::vector<std::size_t> out_bytes;
};

void build_side(const json& descs, char* arena, std::size_t arena_size,
                std::vector<std::vector<std::int64_t>>& shapes, std::vector<DLTensor>& ts,
                std::vector<std::size_t>* bytes) {
  shapes.clear();
  for (const auto& d : descs) shapes.push_back(d.at("shape").get<std::vector<std::int64_t>>());
  ts.clear();
  for (std::size_t i = 0; i < descs.size(); ++i) {
    const auto& d = descs[i];
    DLTensor t{};
    const auto off = d.at("off").get<std::size_t>();
    t.device = {kDLCPU, 0};
    t.dtype = parse_dtype(d.at("dtype").get<std::string>());
    t.ndim = static_cast<int>(shapes[i].size());
    t.shape = shapes[i].empty() ? nullptr : shapes[i].data();
    t.strides = nullptr;
    t.byte_offset = 0;
    std::size_t n = elem_size(t.dtype);
    for (auto s : shapes[i]) n *= static_cast<std::size_t>(s);
    if (off + n > arena_size) throw std::runtime_error("tensor outside the arena");
    t.data = arena + off;
    ts.push_back(t);
    if (bytes) bytes->push_back(n);
  }
}

std::string check_side(const char* side, const std::vector<DLTensor>& now,
                       const std::vector<DLTensor>& was,
                       const std::vector<std::vector<std::int64_t>>& shapes_now,
                       const std::vector<std::vector<std::int64_t>>& shapes_was) {
  for (std::size_t i = 0; i < now.size(); ++i) {
    const DLTensor& a = now[i];
    const DLTensor& b = was[i];
    const std::string who = std::string(side) + " " + std::to_string(i);
    if (a.dtype.code != b.dtype.code || a.dtype.bits != b.dtype.bits ||
        a.dtype.lanes != b.dtype.lanes)
      return "kernel changed the dtype of " + who + " from " + dtype_str(b.dtype) + " to " +
             dtype_str(a.dtype) + " (wrong output dtype)";
    if (a.ndim != b.ndim || a.shape != b.shape || shapes_now[i] != shapes_was[i])
      return "kernel changed the shape of " + who + " (wrong output shape)";
    if (a.data != b.data || a.byte_offset != b.byte_offset || a.strides != b.strides ||
        a.device.device_type != b.device.device_type)
      return "kernel changed the descriptor (data pointer, offset, strides or device) of " + who;
  }
  return {};
}

void poison(const DLTensor& t, std::size_t bytes) {
  if (t.dtype.bits == 32) {
    auto* p = static_cast<std::uint32_t*>(t.data);
    for (std::size_t i = 0; i < bytes / 4; ++i) p[i] = vb::runner::kPoisonF32;
  } else if (t.dtype.bits == 16) {
    const std::uint16_t v =
        t.dtype.code == kDLBfloat ? vb::runner::kPoisonBF16 : vb::runner::kPoisonF16;
    auto* p = static_cast<std::uint16_t*>(t.data);
    for (std::size_t i = 0; i < bytes / 2; ++i) p[i] = v;
  } else {
    std::memset(t.data, 0xff, bytes);
  }
}

json do_call(State& st, const json& cmd) {
  if (!st.run) return {{"ok", false}, {"error", "no kernel loaded"}};
  const auto& sets_j = cmd.at("sets");
  std::vector<TensorSet> sets(sets_j.size());
  for (std::size_t s = 0; s < sets.size(); ++s) {
    auto& ts = sets[s];
    build_side(sets_j[s].at("in"), st.arena, st.arena_size, ts.in_shapes, ts.in, nullptr);
    build_side(sets_j[s].at("out"), st.arena, st.arena_size, ts.out_shapes, ts.out, &ts.out_bytes);
    ts.in_copy = ts.in;
    ts.out_copy = ts.out;
    ts.in_shapes_copy = ts.in_shapes;
    ts.out_shapes_copy = ts.out_shapes;
  }
  if (sets.empty()) return {{"ok", false}, {"error", "call without tensor sets"}};
  const auto attrs = cmd.value("attrs", std::vector<double>{});
  // The parent fixes the exact call sequence: `warmup` untimed calls on set `warmup_set`,
  // then one timed call per entry of `order` (set indices), then optionally the verification
  // call. Nothing here depends on the clock, so the parent knows how much work it asked for.
  const int warmup = cmd.value("warmup", 0);
  const auto warmup_set = cmd.value("warmup_set", std::size_t{0});
  const auto order = cmd.value("order", std::vector<std::size_t>{0});
  const bool verify = cmd.value("verify", false);
  for (std::size_t s : order)
    if (s >= sets.size()) return {{"ok", false}, {"error", "set index out of range"}};
  if (warmup_set >= sets.size()) return {{"ok", false}, {"error", "warm-up set out of range"}};

  std::vector<long long> times;
  times.reserve(order.size());
  long long busy = 0;
  auto one_call = [&](std::size_t s, long long* ns) -> json {
    auto& ts = sets[s];
    const auto t0 = Clock::now();
    int rc = 0;
    try {
      rc = st.run(ts.in.data(), static_cast<int>(ts.in.size()), ts.out.data(),
                  static_cast<int>(ts.out.size()), attrs.data(), static_cast<int>(attrs.size()),
                  nullptr);
    } catch (const std::exception& e) {
      return {{"ok", false}, {"error", std::string("kernel threw an exception: ") + e.what()}};
    } catch (...) {
      return {{"ok", false}, {"error", "kernel threw a C++ exception"}};
    }
    const auto t1 = Clock::now();
    *ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count();
    if (rc != 0) {
      const char* msg = st.last_error ? st.last_error() : nullptr;
      std::string m = msg && *msg ? std::string(msg, ::strnlen(msg, 512)) : "(no message)";
      return {{"ok", false},
              {"guard", "kernel_error"},
              {"error", "kernel returned " + std::to_string(rc) + ": " + m}};
    }
    std::string bad = check_side("output", ts.out, ts.out_copy, ts.out_shapes, ts.out_shapes_copy);
    if (bad.empty()) bad = check_side("input", ts.in, ts.in_copy, ts.in_shapes, ts.in_shapes_copy);
    if (!bad.empty()) return {{"ok", false}, {"guard", "output_dtype_shape"}, {"error", bad}};
    return {};
  };

  const auto loop0 = Clock::now();
  for (int w = 0; w < warmup; ++w) {
    long long ns = 0;
    auto err = one_call(warmup_set, &ns);
    if (!err.is_null()) return err;
  }
  const auto timed0 = Clock::now();
  for (std::size_t s : order) {
    long long ns = 0;
    auto err = one_call(s, &ns);
    if (!err.is_null()) return err;
    busy += ns;
    times.push_back(ns);
  }
  const long long timed_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - timed0).count();
  const std::size_t last_set = order.empty() ? warmup_set : order.back();
  auto& ts = sets[last_set];
  if (verify) {
    for (std::size_t i = 0; i < ts.out.size(); ++i) poison(ts.out[i], ts.out_bytes[i]);
    long long ns = 0;
    auto err = one_call(last_set, &ns);
    if (!err.is_null()) return err;
  }
  // Hash of the last call's outputs taken right after it returned: the parent recomputes it
  // later, so a write that lands after return (work escaping the call) is caught.
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (std::size_t i = 0; i < ts.out.size(); ++i)
    h = vb::runner::fnv1a64(ts.out[i].data, ts.out_bytes[i], h);
  const long long loop_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - loop0).count();
  return {{"ok", true},
          {"times_ns", times},
          {"busy_ns", busy},
          {"timed_ns", timed_ns},
          {"loop_ns", loop_ns},
          {"verify_set", last_set},
          {"verify_hash", vb::runner::hex64(h)}};
}

json handle(State& st, const json& cmd) {
  const std::string op = cmd.at("op").get<std::string>();
  if (op == "load") {
    const std::string lib = cmd.at("lib").get<std::string>();
    st.lib = ::dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!st.lib) return {{"ok", false}, {"error", std::string("dlopen failed: ") + ::dlerror()}};
    st.run = reinterpret_cast<KernelFn>(::dlsym(st.lib, "vb_kernel_run"));
    st.last_error = reinterpret_cast<ErrorFn>(::dlsym(st.lib, "vb_kernel_last_error"));
    if (!st.run)
      return {{"ok", false}, {"error", "the library does not export vb_kernel_run (extern \"C\")"}};
    return {{"ok", true}};
  }
  if (op == "map") {
    const auto size = cmd.at("size").get<std::size_t>();
    if (st.arena) ::munmap(st.arena, st.arena_size);
    // MAP_POPULATE: fault the whole arena in now, so no timed call pays first-touch page faults.
    void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
                     vb::runner::kArenaFd, 0);
    if (p == MAP_FAILED) {
      st.arena = nullptr;
      st.arena_size = 0;
      return {{"ok", false}, {"error", "mmap of the arena failed"}};
    }
    st.arena = static_cast<char*>(p);
    st.arena_size = size;
    return {{"ok", true}};
  }
  if (op == "call") return do_call(st, cmd);
  if (op == "ping") return {{"ok", true}, {"pong", cmd.value("nonce", 0LL)}};
  return {{"ok", false}, {"error", "unknown op " + op}};
}

}  // namespace

int main() {
  ::syscall(SYS_close_range, vb::runner::kLibraryFd + 1, ~0U, 0);  // nothing else inherited
  FILE* in = ::fdopen(vb::runner::kCommandFd, "r");
  if (!in) {
    std::fprintf(stderr, "vladbud-runner: must be started by the evaluator (no command pipe)\n");
    return 2;
  }
  State st;
  char* buf = nullptr;
  std::size_t cap = 0;
  while (::getline(&buf, &cap, in) > 0) {
    std::string out;
    try {
      const json cmd = json::parse(buf);
      if (cmd.value("op", "") == "exit") break;
      // Candidate-provided text (error messages) may hold invalid UTF-8: replace, never abort.
      out = handle(st, cmd).dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
    } catch (const std::exception& e) {
      out = json{{"ok", false}, {"error", std::string("runner: ") + e.what()}}.dump(
                -1, ' ', false, json::error_handler_t::replace) +
            "\n";
    }
    std::size_t off = 0;
    while (off < out.size()) {
      const ssize_t w = ::write(vb::runner::kReplyFd, out.data() + off, out.size() - off);
      if (w <= 0) return 3;
      off += static_cast<std::size_t>(w);
    }
  }
  std::free(buf);
  return 0;
}
