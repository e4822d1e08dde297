// vladbud-runner: the isolated process that executes candidate kernels (DESIGN §4).
//
// Started by the evaluator with the shared arena on fd 3, commands on fd 4 and replies on
// fd 5 (see runner/protocol.h). It loads one candidate library, maps the arena, and runs
// "call" commands. A crash, hang or abort here fails only the candidate; the parent notices
// EOF or its timeout and reports CRASH or TIMEOUT.
//
// The call path is written once over the runner's device interface (runner/device.h), picked
// once from `--backend <flavour>`. With a device that has separate memory (`--backend cuda`)
// every arena buffer gets a device twin (one device mirror of the whole arena, so the parent's
// guard bands exist in device memory too). For each "call" the runner copies the inputs
// host->device, fills the device guard bands and poisons the device outputs, runs the parent's
// call sequence on its own stream with a device event pair around each launch, synchronizes and
// checks for asynchronous faults after every launch, and finally copies the whole span (inputs,
// outputs, bands) device->host into the arena, so the parent's guard-band, input-mutation,
// poison, hash and oracle checks work unchanged. On the host the kernel works on the arena.
#include <dlfcn.h>
#include <dlpack/dlpack.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <vector>

#include "core/sandbox.h"

#include "runner/device.h"
#include "runner/protocol.h"

namespace {

using json = nlohmann::json;
using vb::forbid_new_processes;
using Clock = std::chrono::steady_clock;
using KernelFn = int (*)(const DLTensor*, int, DLTensor*, int, const double*, int, void*);
using ErrorFn = const char* (*)();

struct State {
  void* lib = nullptr;
  KernelFn run = nullptr;
  ErrorFn last_error = nullptr;
  char* arena = nullptr;
  std::size_t arena_size = 0;
  std::unique_ptr<vb::runner::RunnerDevice> dev;  ///< chosen once from --backend
  std::string dead;  ///< a sticky device fault: every later call reports it
  FILE* commands = nullptr;  ///< the command pipe (a stepped call reads "go" lines from it)
};

// ---- inputs read-only during calls (issue 18 class 8) ------------------------------------------
//
// On a device without separate memory the kernel gets the arena itself, so the pages of every
// input are mapped read-only in this process for the duration of a "call" command: a kernel
// that writes into an input -- even one that restores it before returning -- faults. The
// SIGSEGV handler names the input (guard input_mutation) or its band (guard_band) in a reply
// and exits; a fault anywhere else keeps the default action (a crash).

struct ReadOnlyRange {
  std::uintptr_t lo, hi;            ///< the protected pages
  std::uintptr_t data_lo, data_hi;  ///< the input's own bytes within them
  std::string data_reply, band_reply;
};
std::vector<ReadOnlyRange> g_read_only;  // written only while no call runs
std::atomic<int> g_faulted{0};

void write_all(int fd, const char* p, std::size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w <= 0) return;
    p += w, n -= static_cast<std::size_t>(w);
  }
}

void on_segv(int sig, siginfo_t* info, void*) {
  const auto a = reinterpret_cast<std::uintptr_t>(info->si_addr);
  for (const auto& r : g_read_only) {
    if (a < r.lo || a >= r.hi) continue;
    if (g_faulted.exchange(1) == 0) {
      const std::string& m = a >= r.data_lo && a < r.data_hi ? r.data_reply : r.band_reply;
      write_all(vb::runner::kReplyFd, m.data(), m.size());
      ::_exit(0);
    }
    for (;;) ::pause();  // another thread is reporting; _exit ends us all
  }
  ::signal(sig, SIG_DFL);  // not ours: fault again with the default action (a crash)
}

// ---- no processes of its own (issue 18 class 8): core/sandbox.h forbid_new_processes() ------

// Maps the pages of the given inputs read-only until destroyed (then read-write again).
class ReadOnlyInputs {
 public:
  /// `inputs`: {first byte, bytes, label such as "input 0 of set 3"} of each input.
  explicit ReadOnlyInputs(const std::vector<std::tuple<char*, std::size_t, std::string>>& inputs) {
    const long page = ::sysconf(_SC_PAGESIZE);
    // Only when a page never holds another buffer's bytes (a band is at least a page).
    if (page <= 0 || static_cast<std::size_t>(page) > vb::runner::kGuardBandBytes) return;
    const auto pg = static_cast<std::uintptr_t>(page);
    for (const auto& [p, n, label] : inputs) {
      if (n == 0) continue;
      ReadOnlyRange r;
      r.data_lo = reinterpret_cast<std::uintptr_t>(p);
      r.data_hi = r.data_lo + n;
      r.lo = r.data_lo / pg * pg;
      r.hi = (r.data_hi + pg - 1) / pg * pg;
      if (::mprotect(reinterpret_cast<void*>(r.lo), r.hi - r.lo, PROT_READ) != 0) continue;
      r.data_reply = json{{"ok", false},
                          {"guard", "input_mutation"},
                          {"error", "the kernel wrote into " + label +
                                        " (inputs are read-only: their pages are mapped "
                                        "read-only during the call, so even a write that is "
                                        "undone before returning faults)"}}
                         .dump() + "\n";
      r.band_reply = json{{"ok", false},
                          {"guard", "guard_band"},
                          {"error", "the kernel wrote past the bounds of " + label +
                                        " into its read-only guard band"}}
                         .dump() + "\n";
      g_read_only.push_back(std::move(r));
    }
  }
  ~ReadOnlyInputs() {
    for (const auto& r : g_read_only)
      ::mprotect(reinterpret_cast<void*>(r.lo), r.hi - r.lo, PROT_READ | PROT_WRITE);
    g_read_only.clear();
  }
  ReadOnlyInputs(const ReadOnlyInputs&) = delete;
  ReadOnlyInputs& operator=(const ReadOnlyInputs&) = delete;
};

/// Poison pattern and element size for a dtype (protocol.h): NaN payloads, 0xff otherwise.
void poison_pattern(DLDataType d, unsigned* value, int* elem) {
  if (d.bits == 32) {
    *value = vb::runner::kPoisonF32, *elem = 4;
  } else if (d.bits == 16) {
    *value = d.code == kDLBfloat ? vb::runner::kPoisonBF16 : vb::runner::kPoisonF16, *elem = 2;
  } else {
    *value = 0xff, *elem = 1;
  }
}

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
  std::vector<std::size_t> out_bytes, in_bytes;
  std::vector<std::size_t> in_off, out_off;  ///< arena offsets
};

// Descriptors of one side of a set: the device's data pointers for the arena offsets (a device
// twin's on a GPU, the arena's own on the host) on the device's DLDevice.
void build_side(const json& descs, std::size_t arena_size, const vb::runner::RunnerDevice& dev,
                std::vector<std::vector<std::int64_t>>& shapes, std::vector<DLTensor>& ts,
                std::vector<std::size_t>& bytes, std::vector<std::size_t>& offs) {
  shapes.clear();
  for (const auto& d : descs) shapes.push_back(d.at("shape").get<std::vector<std::int64_t>>());
  ts.clear();
  bytes.clear();
  offs.clear();
  for (std::size_t i = 0; i < descs.size(); ++i) {
    const auto& d = descs[i];
    DLTensor t{};
    const auto off = d.at("off").get<std::size_t>();
    t.device = dev.dl_device();
    t.dtype = parse_dtype(d.at("dtype").get<std::string>());
    t.ndim = static_cast<int>(shapes[i].size());
    t.shape = shapes[i].empty() ? nullptr : shapes[i].data();
    t.strides = nullptr;
    t.byte_offset = 0;
    std::size_t n = elem_size(t.dtype);
    for (auto s : shapes[i]) n *= static_cast<std::size_t>(s);
    if (off + n > arena_size) throw std::runtime_error("tensor outside the arena");
    t.data = dev.data(off);
    ts.push_back(t);
    bytes.push_back(n);
    offs.push_back(off);
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

// Device guard bands: the same size and pattern as the parent's host bands (protocol.h).
constexpr std::size_t kBandBytes = vb::runner::kGuardBandBytes;

// A timed launch whose host wall time exceeds twice its event time plus this much escaped the
// events (work on another stream). Launch + synchronization cost 5-50 us on current GPUs.
constexpr double kCrossCheckSlackNs = 500e3;

json device_fault(State& st, const std::string& what) {
  st.dead = st.dev->fault_name() + " in the candidate (" + what +
            "); the context is lost, the next candidate starts in a fresh runner";
  return {{"ok", false}, {"guard", "crash"}, {"error", st.dead}};
}

json do_call(State& st, const json& cmd) {
  if (!st.run) return {{"ok", false}, {"error", "no kernel loaded"}};
  if (!st.dead.empty()) return {{"ok", false}, {"guard", "crash"}, {"error", st.dead}};
  vb::runner::RunnerDevice& dev = *st.dev;
  if (!dev.mapped()) return {{"ok", false}, {"error", "arena not mapped on the device"}};
  const auto& sets_j = cmd.at("sets");
  std::vector<TensorSet> sets(sets_j.size());
  for (std::size_t s = 0; s < sets.size(); ++s) {
    auto& ts = sets[s];
    build_side(sets_j[s].at("in"), st.arena_size, dev, ts.in_shapes, ts.in, ts.in_bytes,
               ts.in_off);
    build_side(sets_j[s].at("out"), st.arena_size, dev, ts.out_shapes, ts.out, ts.out_bytes,
               ts.out_off);
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
  // Stepped (issue 18 classes 7 and 8): the parent reveals each timed set's inputs just
  // before its call, while this process is stopped. Before each timed call and after the last
  // one the runner reports {"step": j} and stops itself (SIGSTOP: every thread of the process,
  // the candidate's included, stands still); the parent snapshots the outputs of the call
  // that just returned, writes the next set's inputs and poisoned outputs with the caches
  // flushed, sends {"op":"go"} and continues the process. No thread of the kernel can see a
  // timed set's inputs before its call, or do work between calls.
  const bool stepped = cmd.value("stepped", false);
  for (std::size_t s : order)
    if (s >= sets.size()) return {{"ok", false}, {"error", "set index out of range"}};
  if (warmup_set >= sets.size()) return {{"ok", false}, {"error", "warm-up set out of range"}};

  // Separate memory: the span of the arena these sets occupy, bands included.
  std::size_t lo = st.arena_size, hi = 0;
  for (const auto& ts : sets) {
    for (std::size_t i = 0; i < ts.in.size(); ++i)
      lo = std::min(lo, ts.in_off[i]), hi = std::max(hi, ts.in_off[i] + ts.in_bytes[i]);
    for (std::size_t i = 0; i < ts.out.size(); ++i)
      lo = std::min(lo, ts.out_off[i]), hi = std::max(hi, ts.out_off[i] + ts.out_bytes[i]);
  }
  lo = lo >= kBandBytes ? lo - kBandBytes : 0;
  hi = std::min(st.arena_size, hi + kBandBytes);
  long long staging_ns = 0;
  // Poisons a set's outputs where the kernel sees them (NaN payloads, protocol.h).
  auto poison_outputs = [&](const TensorSet& ts) -> std::string {
    for (std::size_t i = 0; i < ts.out.size(); ++i) {
      unsigned v = 0;
      int eb = 1;
      poison_pattern(ts.out_copy[i].dtype, &v, &eb);
      auto e = dev.fill(ts.out_off[i], v, eb, ts.out_bytes[i] / eb);
      if (!e.empty()) return e;
    }
    return dev.synchronize();
  };
  const bool staged = dev.separate_memory() && lo < hi;
  if (staged) {
    // Stage in: bands (the whole span) filled, inputs copied, outputs poisoned, on the device.
    const auto s0 = Clock::now();
    // The span starts and ends at even offsets (bands are whole 16-bit words).
    std::string e = dev.fill(lo, vb::runner::kGuardBandWord, 2, (hi - lo) / 2);
    if (e.empty()) e = dev.synchronize();
    // Stepped: only the warm-up set's inputs exist yet; each timed set is staged at its step.
    for (std::size_t s = 0; s < sets.size(); ++s) {
      if (stepped && s != warmup_set) continue;
      const auto& ts = sets[s];
      for (std::size_t i = 0; i < ts.in.size() && e.empty(); ++i)
        e = dev.to_device(ts.in_off[i], st.arena + ts.in_off[i], ts.in_bytes[i]);
    }
    for (const auto& ts : sets)
      if (e.empty()) e = poison_outputs(ts);
    if (!e.empty()) return device_fault(st, "staging the inputs: " + e);
    staging_ns += std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - s0).count();
  }

  std::vector<long long> times;
  times.reserve(order.size());
  long long busy = 0;
  int escaped = 0;  // timed launches whose host time the device's timing does not account for
  double worst_host_ns = 0, worst_event_ns = 0;
  auto one_call = [&](std::size_t s, long long* ns, bool timed) -> json {
    auto& ts = sets[s];
    const auto t0 = Clock::now();
    int rc = 0;
    if (auto e = dev.start_timing(); !e.empty()) return device_fault(st, e);
    try {
      rc = st.run(ts.in.data(), static_cast<int>(ts.in.size()), ts.out.data(),
                  static_cast<int>(ts.out.size()), attrs.data(), static_cast<int>(attrs.size()),
                  dev.stream());
    } catch (const std::exception& e) {
      return {{"ok", false}, {"error", std::string("kernel threw an exception: ") + e.what()}};
    } catch (...) {
      return {{"ok", false}, {"error", "kernel threw a C++ exception"}};
    }
    // Check for asynchronous faults after every launch: a sticky error is the candidate's.
    double host_ns = 0;
    if (auto e = dev.finish_timing(t0, ns, &host_ns); !e.empty()) return device_fault(st, e);
    // The host clock cross-checks the device's timing (equal on the host: never escapes).
    if (timed && host_ns > 2.0 * static_cast<double>(*ns) + kCrossCheckSlackNs) {
      ++escaped;
      if (host_ns - static_cast<double>(*ns) > worst_host_ns - worst_event_ns)
        worst_host_ns = host_ns, worst_event_ns = static_cast<double>(*ns);
    }
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

  // Inputs read-only for the whole command where the kernel works on the arena itself.
  std::vector<std::tuple<char*, std::size_t, std::string>> inputs;
  if (!dev.separate_memory())
    for (std::size_t s = 0; s < sets.size(); ++s)
      for (std::size_t i = 0; i < sets[s].in.size(); ++i)
        inputs.emplace_back(st.arena + sets[s].in_off[i], sets[s].in_bytes[i],
                            "input " + std::to_string(i) + " of tensor set " + std::to_string(s));
  const ReadOnlyInputs read_only(inputs);

  // One stop point of a stepped call: report step `j` (with the staging time of the call
  // before it), stop, and on continuing require the parent's "go".
  long long step_staging_ns = 0;
  auto step = [&](std::size_t j) -> json {
    const std::string line =
        json{{"ok", true}, {"step", j}, {"staging_ns", step_staging_ns}}.dump() + "\n";
    write_all(vb::runner::kReplyFd, line.data(), line.size());
    step_staging_ns = 0;
    ::kill(::getpid(), SIGSTOP);
    char* buf = nullptr;
    std::size_t cap = 0;
    const ssize_t n = ::getline(&buf, &cap, st.commands);
    std::string got = n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
    std::free(buf);
    try {
      if (json::parse(got).value("op", "") == "go") return {};
    } catch (const std::exception&) {
    }
    return {{"ok", false}, {"error", "stepped call: expected {\"op\":\"go\"}, got " + got}};
  };
  // Stepped, device with separate memory: stage set `s` in (inputs, poisoned outputs, caches
  // flushed) before its call, and its inputs and outputs out after it, for the parent.
  auto stage_set = [&](const TensorSet& ts, bool in) -> std::string {
    const auto s0 = Clock::now();
    std::string e;
    if (in) {
      for (std::size_t i = 0; i < ts.in.size() && e.empty(); ++i)
        e = dev.to_device(ts.in_off[i], st.arena + ts.in_off[i], ts.in_bytes[i]);
      if (e.empty()) e = poison_outputs(ts);
      if (e.empty()) e = dev.flush_caches();
    } else {
      e = dev.synchronize();
      for (std::size_t i = 0; i < ts.in.size() && e.empty(); ++i)
        e = dev.to_host(st.arena + ts.in_off[i], ts.in_off[i], ts.in_bytes[i]);
      for (std::size_t i = 0; i < ts.out.size() && e.empty(); ++i)
        e = dev.to_host(st.arena + ts.out_off[i], ts.out_off[i], ts.out_bytes[i]);
    }
    const auto d = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - s0);
    step_staging_ns += d.count();
    staging_ns += d.count();
    return e;
  };

  const auto loop0 = Clock::now();
  for (int w = 0; w < warmup; ++w) {
    long long ns = 0;
    auto err = one_call(warmup_set, &ns, false);
    if (!err.is_null()) return err;
  }
  const auto timed0 = Clock::now();
  for (std::size_t j = 0; j < order.size(); ++j) {
    const std::size_t s = order[j];
    if (stepped) {
      if (auto err = step(j); !err.is_null()) return err;
      if (staged)
        if (auto e = stage_set(sets[s], true); !e.empty())
          return device_fault(st, "staging set " + std::to_string(s) + " in: " + e);
    }
    long long ns = 0;
    // The runner's own cross-check applies to the timing protocol's calls (warmup > 0): the
    // single call of a correctness case may pay one-time costs such as lazy module loading.
    auto err = one_call(s, &ns, warmup > 0);
    if (!err.is_null()) return err;
    busy += ns;
    times.push_back(ns);
    if (stepped && staged)
      if (auto e = stage_set(sets[s], false); !e.empty())
        return device_fault(st, "staging set " + std::to_string(s) + " out: " + e);
  }
  if (stepped)
    if (auto err = step(order.size()); !err.is_null()) return err;
  const long long timed_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - timed0).count();
  if (!order.empty() && 2 * escaped > static_cast<int>(order.size()))
    return {{"ok", false},
            {"guard", "timer_cross_check"},
            {"error",
             "the device events around the launch saw " + std::to_string(worst_event_ns / 1e3) +
                 " us but the runner's host clock saw " + std::to_string(worst_host_ns / 1e3) +
                 " us (in " + std::to_string(escaped) + " of " + std::to_string(order.size()) +
                 " timed calls): work escaped the events (launched on another stream?)"}};
  const std::size_t last_set = order.empty() ? warmup_set : order.back();
  auto& ts = sets[last_set];
  if (verify) {
    if (auto e = poison_outputs(ts); !e.empty()) return device_fault(st, "poisoning outputs: " + e);
    long long ns = 0;
    auto err = one_call(last_set, &ns, false);
    if (!err.is_null()) return err;
  }
  if (staged) {
    // Stage out: everything the kernel could touch (inputs, outputs, bands) back into the
    // arena, where the parent checks it.
    const auto s0 = Clock::now();
    std::string e = dev.synchronize();
    if (e.empty()) e = dev.to_host(st.arena + lo, lo, hi - lo);
    if (!e.empty()) return device_fault(st, "reading the outputs back: " + e);
    if (const std::string over = dev.over_budget(); !over.empty())
      return {{"ok", false}, {"guard", dev.memory_guard()}, {"error", over}};
    staging_ns += std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - s0).count();
  }
  // Hash of the last call's outputs taken right after it returned: the parent recomputes it
  // later, so a write that lands after return (work escaping the call) is caught.
  // Its time is the runner's own data handling like the staging (a 256 MiB output takes
  // ~0.1 s to hash, far longer than a GPU kernel), so it is reported with staging_ns.
  const auto h0 = Clock::now();
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (std::size_t i = 0; i < ts.out.size(); ++i)
    h = vb::runner::fnv1a64(st.arena + ts.out_off[i], ts.out_bytes[i], h);
  staging_ns += std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - h0).count();
  const long long loop_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - loop0).count();
  return {{"ok", true},
          {"times_ns", times},
          {"busy_ns", busy},
          {"timed_ns", timed_ns},
          {"loop_ns", loop_ns},
          {"staging_ns", staging_ns},
          {"verify_set", last_set},
          {"verify_hash", vb::runner::hex64(h)}};
}

json handle(State& st, const json& cmd) {
  const std::string op = cmd.at("op").get<std::string>();
  if (op == "load") {
    const std::string lib = cmd.at("lib").get<std::string>();
    // The device is ready before the library loads (cuda: the primary context is current
    // before the library's static CUDA runtime initializes, so the runtime shares it).
    if (auto e = st.dev->open(); !e.empty()) return {{"ok", false}, {"error", e}};
    st.lib = ::dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!st.lib) return {{"ok", false}, {"error", std::string("dlopen failed: ") + ::dlerror()}};
    st.run = reinterpret_cast<KernelFn>(::dlsym(st.lib, "vb_kernel_run"));
    st.last_error = reinterpret_cast<ErrorFn>(::dlsym(st.lib, "vb_kernel_last_error"));
    if (!st.run)
      return {{"ok", false}, {"error", "the library does not export vb_kernel_run (extern \"C\")"}};
    if (json d = st.dev->describe(); !d.is_null()) return {{"ok", true}, {"device", d}};
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
    std::string fault;
    json r = st.dev->map(st.arena, size, &fault);
    if (!fault.empty()) return device_fault(st, fault);
    return r;
  }
  if (op == "call") return do_call(st, cmd);
  if (op == "ping") return {{"ok", true}, {"pong", cmd.value("nonce", 0LL)}};
  return {{"ok", false}, {"error", "unknown op " + op}};
}

}  // namespace

int main(int argc, char** argv) {
  State st;
  bool keep_fds = false;
  auto flavour = vb::runner::Flavour::Host;
  std::size_t gpu_budget = 16ull << 30;  // device memory the candidate may use on its own
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--backend" && i + 1 < argc) {
      const std::string b = argv[++i];
      const auto parsed = vb::runner::parse_flavour(b);
      if (!parsed) {
        std::fprintf(stderr, "vladbud-runner: unknown backend '%s' (%s)\n", b.c_str(),
                     vb::runner::flavour_names().c_str());
        return 2;
      }
      flavour = *parsed;
    } else if (a == "--gpu-memory-budget" && i + 1 < argc) {
      gpu_budget = std::strtoull(argv[++i], nullptr, 10);
    } else if (a == "--keep-fds") {
      keep_fds = true;  // under compute-sanitizer, whose injected agent owns inherited fds
    }
  }
  st.dev = vb::runner::make_runner_device(flavour, gpu_budget);
  // Under compute-sanitizer (--keep-fds) its injected agent owns the process: no filter.
  if (!keep_fds) {
    if (const std::string e = forbid_new_processes(); !e.empty())
      std::fprintf(stderr, "vladbud-runner: candidates may create processes (%s)\n", e.c_str());
    // Every runner on the host shares the sandbox uid, and exec made this one dumpable again:
    // closed to the others (/proc/<pid>/mem, root, environ; ptrace), and no signals out.
    ::prctl(PR_SET_DUMPABLE, 0);
    if (const std::string e = vb::forbid_reaching_other_processes(); !e.empty())
      std::fprintf(stderr, "vladbud-runner: candidates may signal other processes (%s)\n",
                   e.c_str());
  }
  if (!keep_fds) ::syscall(SYS_close_range, vb::runner::kLibraryFd + 1, ~0U, 0);  // no others
  FILE* in = ::fdopen(vb::runner::kCommandFd, "r");
  if (!in) {
    std::fprintf(stderr, "vladbud-runner: must be started by the evaluator (no command pipe)\n");
    return 2;
  }
  st.commands = in;
  struct sigaction sa {};
  sa.sa_sigaction = on_segv;
  sa.sa_flags = SA_SIGINFO;
  ::sigemptyset(&sa.sa_mask);
  ::sigaction(SIGSEGV, &sa, nullptr);
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
