// The wire protocol between the evaluator (parent) and the isolated runner process (child).
//
// The parent creates a shared-memory arena (memfd) that holds every tensor with guard bands
// around it; the child maps it, loads the candidate's shared library and executes "call"
// commands. Commands and replies are one JSON object per line on two pipes. Candidate code
// runs only in the child: it sees the arena (inputs and outputs), never the oracle.
//
// Commands (parent -> child):
//   {"op":"load", "lib":PATH}                       -> {"ok":true} | {"ok":false,"error":...}
//   {"op":"map",  "size":BYTES}                     -> {"ok":true}
//   {"op":"call", "sets":[SET...], "attrs":[...], "warmup":N, "warmup_set":I,
//    "order":[I...], "verify":bool}
//      SET = {"in":[DESC...], "out":[DESC...]}, DESC = {"off":BYTES, "dtype":"fp16", "shape":[..]}
//      The parent fixes the exact sequence: N untimed calls on set warmup_set, then one timed
//      call per entry of order. With "verify", the outputs of the last set are poisoned and it
//      is called once more, untimed. Either way the FNV-1a hash of that set's outputs, taken
//      right after the call returned, is reported so the parent can prove no write happened
//      after return.
//      With "stepped":true (the timing protocol; issue 18 classes 7 and 8) the runner, before
//      each timed call and after the last, writes {"ok":true, "step":J, "staging_ns":N} (N: its
//      staging time since the previous step), stops its whole process with SIGSTOP, and once
//      continued reads {"op":"go"} from the command pipe. While it is stopped the parent
//      snapshots the outputs of call J-1 and writes set order[J]'s inputs and poisoned outputs
//      into the arena, bypassing the caches; a device with separate memory copies that set in
//      (flushing its caches) right before call J and its inputs and outputs out right after.
//      Inputs are mapped read-only in the runner during a call command when the kernel works on
//      the arena itself; a write into one is reported with guard input_mutation (or guard_band
//      for its band). The runner cannot create processes (seccomp), so nothing of the
//      candidate runs while it is stopped.
//   reply: {"ok":true, "times_ns":[one per order entry], "busy_ns":N, "timed_ns":N,
//           "loop_ns":N, "staging_ns":N, "verify_set":I, "verify_hash":"hex"}
//          or {"ok":false, "error":MSG, "guard":NAME}
//      staging_ns: time the runner spent outside the kernel calls on its own data handling --
//      copying buffers between the arena and the device (cuda) and hashing the verified
//      outputs -- which the parent's clock check leaves out (capped by the sets' bytes).
//
// Runner flavours (argv "--backend cpu|cuda"): with cuda, times_ns come from device events
// around each launch on the runner's stream, the "load" reply adds "device":{name, l2_bytes,
// total_mem_bytes, cc_major, cc_minor}, a sticky CUDA fault is reported with guard "crash",
// timed launches the events do not account for with guard "timer_cross_check", and a device
// allocation failure or a kernel holding more device memory than "--gpu-memory-budget BYTES"
// with guard "gpu_memory".
//   {"op":"ping", "nonce":N}                        -> {"ok":true, "pong":N}
//   {"op":"exit"}
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace vb::runner {

/// How the runner executes kernels (its argv "--backend NAME"). Host: the kernel gets arena
/// pointers on kDLCPU and the host clock times it. Cuda: the arena gets a device twin, the
/// kernel gets device pointers on kDLCUDA and device events time it. A backend's Device names
/// its flavour (backends/device.h); the runner's call path is written once over both.
enum class Flavour { Host, Cuda };

/// The runner's argv name of a flavour: "cpu" (Host), "cuda" (Cuda).
std::string flavour_name(Flavour f);
/// The flavour whose argv name is `name`; nullopt when there is none.
std::optional<Flavour> parse_flavour(std::string_view name);
/// Every flavour's argv name, comma-separated ("cpu, cuda"), for error messages.
std::string flavour_names();

/// File descriptor numbers in the child (set up by the parent before exec).
inline constexpr int kArenaFd = 3;
inline constexpr int kCommandFd = 4;
inline constexpr int kReplyFd = 5;
/// The candidate library, copied into a memfd by the parent (loaded as /proc/self/fd/6).
inline constexpr int kLibraryFd = 6;

/// Guard band size around every arena buffer (host arena and device twin).
inline constexpr std::size_t kGuardBandBytes = 4096;
/// The bands' 16-bit pattern, repeated from an even offset (every band starts at an even
/// offset: buffers hold whole 16-bit or wider elements). It poisons any result an
/// out-of-bounds read feeds (issue 18 class 3): a large finite value in every dtype -- fp16
/// 61280, bf16 and fp32 (0x7b7b7b7b) 1.3e36, fp64 1.6e287, int64 8.9e18 (a class id far out
/// of range) -- so it dominates a sum and also a max, which a NaN would not (fmax ignores
/// NaN). It differs from every output poison pattern below, so a kernel that copies poison
/// past the end is still caught as a write.
inline constexpr std::uint16_t kGuardBandWord = 0x7b7b;
/// The band byte expected at arena offset `offset` (kGuardBandWord little-endian, from even).
constexpr unsigned char guard_band_byte(std::size_t offset) {
  return static_cast<unsigned char>((offset & 1) ? (kGuardBandWord >> 8) : (kGuardBandWord & 0xff));
}

/// Poison bit patterns written into outputs before each call (NaNs, recognisable).
inline constexpr std::uint32_t kPoisonF32 = 0x7fbadbadu;
inline constexpr std::uint16_t kPoisonF16 = 0x7dadu;
inline constexpr std::uint16_t kPoisonBF16 = 0x7fadu;

/// FNV-1a 64-bit hash of a byte range (Fowler, Noll, Vo), 8 bytes at a time for speed.
std::uint64_t fnv1a64(const void* data, std::size_t n, std::uint64_t h = 0xcbf29ce484222325ULL);

/// Hex string of a 64-bit value (16 digits).
std::string hex64(std::uint64_t v);

}  // namespace vb::runner
