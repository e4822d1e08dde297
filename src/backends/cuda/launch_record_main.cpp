// vladbud-launch-record: runs the host side of a CUDA kernel library WITHOUT a GPU and records
// what it would launch (ladder rung 1, NVIDIA: the launch geometry at the problem's size).
//
// The kernel library is built with `nvcc -cudart none` (src/backends/cuda/launch_record.cpp),
// so every CUDA runtime call it makes resolves, when this program dlopen()s it, to the
// definitions below (this executable exports them: ENABLE_EXPORTS). They answer device queries
// from the TARGET's spec (SM count, shared memory, compute capability: the target need not be
// present), occupancy queries from the ptxas numbers of the kernel asked about (the same
// occupancy calculator as rung 1, src/analysis/occupancy.h), and record every kernel launch
// (<<<>>>, cudaLaunchKernel, cudaLaunchKernelEx with its cluster attribute), memset and
// allocation. Device memory is address space reserved with PROT_NONE: a launcher that reads
// device memory on the host faults, and the parent reports the crash. The candidate's host code
// runs under the runner's seccomp filter (core/sandbox.h: no new processes) and the parent's
// 60 s timeout.
//
// Usage: vladbud-launch-record REQUEST.json   (prints one JSON object on stdout)
//   REQUEST: {"library": PATH, "inputs": [{"dtype": "bf16", "shape": [..]}], "outputs": [..],
//             "attrs": [..], "device_attributes": {"<cudaDeviceAttr number>": value},
//             "limits": {SmLimits fields}, "kernels": {"<mangled>": {"registers": R,
//             "smem_bytes": S, "local_bytes": L, "max_threads": T}}}
//   OUTPUT:  {"ok": bool, "rc": vb_kernel_run's return, "error": text, "launches": [{"kernel":
//             mangled, "grid": [x,y,z], "block": [x,y,z], "dynamic_smem": B, "cluster": [x,y,z]}],
//             "memsets": [{"bytes": N}], "allocations": [{"bytes": N}], "unanswered": [..]}
// Exit status: 0 when the output was written (whatever the kernel returned), 2 on a bad request.
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <dlpack/dlpack.h>
#include <fcntl.h>
#include <grp.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/occupancy.h"
#include "core/sandbox.h"
#include "runner/client.h"

namespace {

struct KernelResources {
  int registers = 0;
  long smem_bytes = 0, local_bytes = 0;
  int max_threads = 1024;
};

struct State {
  std::map<const void*, std::string> names;  // host stub -> mangled device name
  std::map<int, int> attributes;             // cudaDeviceAttr -> value (the target's)
  std::map<std::string, KernelResources> kernels;
  vb::analysis::SmLimits limits;
  nlohmann::json launches = nlohmann::json::array();
  nlohmann::json memsets = nlohmann::json::array();
  nlohmann::json allocations = nlohmann::json::array();
  nlohmann::json unanswered = nlohmann::json::array();
  dim3 cfg_grid, cfg_block;
  size_t cfg_smem = 0;
  void* cfg_stream = nullptr;
  cudaError_t last = cudaSuccess;
  void* fatbin_handle = nullptr;
};

State& st() {
  static State s;
  return s;
}

// Reserves `bytes` of address space that faults on any host access (a "device" buffer).
void* reserve(size_t bytes) {
  const size_t n = std::max<size_t>(bytes, 4096);
  void* p = mmap(nullptr, n, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

// A kernel in an anonymous namespace is mangled with a name nvcc derives from the source file's
// name and a hash (`36_GLOBAL__N__43a081a2_4_a_cu_5c686896`): the recording build and the
// ptxas build that measured the resources may see the same text under different paths (the
// recording build is cached by content), so names are compared with that identifier replaced
// by `11_GLOBAL__N_`. The length prefix bounds the identifier exactly (Itanium ABI <source-name>).
std::string without_anonymous_namespace_id(const std::string& mangled) {
  static const std::string tag = "_GLOBAL__N_";
  std::string out;
  size_t i = 0;
  while (i < mangled.size()) {
    const size_t at = mangled.find(tag, i);
    if (at == std::string::npos) break;
    size_t d = at;
    while (d > i && std::isdigit(static_cast<unsigned char>(mangled[d - 1]))) --d;
    const size_t len = d < at ? std::stoul(mangled.substr(d, at - d)) : 0;
    if (len < tag.size() || at + len > mangled.size()) {  // not a length-prefixed source name
      out += mangled.substr(i, at + tag.size() - i);
      i = at + tag.size();
      continue;
    }
    out += mangled.substr(i, d - i) + "11" + tag;
    i = at + len;
  }
  return out + mangled.substr(std::min(i, mangled.size()));
}

// The registered device name as the request spells it: exact, or the one request kernel that
// is equal once anonymous-namespace identifiers are set aside (none if two are).
std::string kernel_name(const void* f) {
  auto it = st().names.find(f);
  if (it == st().names.end()) return "<unregistered host function>";
  if (st().kernels.count(it->second)) return it->second;
  const std::string key = without_anonymous_namespace_id(it->second);
  const std::string* match = nullptr;
  for (const auto& [name, k] : st().kernels)
    if (without_anonymous_namespace_id(name) == key) {
      if (match) return it->second;
      match = &name;
    }
  return match ? *match : it->second;
}

const KernelResources* resources_of(const void* f) {
  auto it = st().kernels.find(kernel_name(f));
  return it == st().kernels.end() ? nullptr : &it->second;
}

cudaError_t record_launch(const void* f, dim3 g, dim3 b, size_t smem, dim3 cluster) {
  st().launches.push_back({{"kernel", kernel_name(f)},
                           {"grid", {g.x, g.y, g.z}},
                           {"block", {b.x, b.y, b.z}},
                           {"dynamic_smem", smem},
                           {"cluster", {cluster.x, cluster.y, cluster.z}}});
  if (g.x == 0 || g.y == 0 || g.z == 0 || b.x * b.y * b.z == 0 || b.x * b.y * b.z > 1024)
    return st().last = cudaErrorInvalidConfiguration;
  return cudaSuccess;
}

// The fake cuTensorMapEncodeTiled/Im2col: the descriptor is opaque to the host; zero it.
int fake_encode_tensor_map(void* map, ...) {
  if (map) std::memset(map, 0, 128);
  return 0;  // CUDA_SUCCESS
}

// The answer of both driver entry point queries, cudaGetDriverEntryPoint (deprecated since
// CUDA 12.5) and cudaGetDriverEntryPointByVersion (its replacement), whichever the library
// calls (kernels/include/vb_cuda_wgmma.cuh picks by CUDART_VERSION): the tensor-map encoders
// are the stand-in above; any other symbol is refused and recorded as unanswered under the
// name of the call `api` that asked. No place for the answer (`fn` null) is
// cudaErrorInvalidValue, as the runtime answers it.
cudaError_t answer_driver_entry_point(const char* api, const char* sym, void** fn,
                                      cudaDriverEntryPointQueryResult* q) {
  if (!fn) return cudaErrorInvalidValue;
  const std::string s = sym ? sym : "";
  if (s == "cuTensorMapEncodeTiled" || s == "cuTensorMapEncodeIm2col") {
    *fn = reinterpret_cast<void*>(&fake_encode_tensor_map);
    if (q) *q = cudaDriverEntryPointSuccess;
    return cudaSuccess;
  }
  st().unanswered.push_back(std::string(api) + "(" + s + ")");
  *fn = nullptr;
  if (q) *q = cudaDriverEntryPointSymbolNotFound;
  return cudaErrorSymbolNotFound;
}

}  // namespace

extern "C" {

// ---- nvcc's registration and launch entry points (crt/host_runtime.h, device_functions.h) ----
void** __cudaRegisterFatBinary(void*) {
  return &st().fatbin_handle;
}
void __cudaRegisterFatBinaryEnd(void**) {}
void __cudaUnregisterFatBinary(void**) {}
void __cudaRegisterFunction(void**, const char* hostFun, char*, const char* deviceName, int,
                            uint3*, uint3*, dim3*, dim3*, int*) {
  st().names[hostFun] = deviceName;
}
void __cudaRegisterVar(void**, char*, char*, const char*, int, size_t, int, int) {}
void __cudaRegisterManagedVar(void**, void**, char*, const char*, int, size_t, int, int) {}
char __cudaInitModule(void**) {
  return 1;
}
unsigned __cudaPushCallConfiguration(dim3 grid, dim3 block, size_t smem, struct CUstream_st* s) {
  st().cfg_grid = grid;
  st().cfg_block = block;
  st().cfg_smem = smem;
  st().cfg_stream = s;
  return 0;
}
cudaError_t __cudaPopCallConfiguration(dim3* grid, dim3* block, size_t* smem, void* stream) {
  *grid = st().cfg_grid;
  *block = st().cfg_block;
  *smem = st().cfg_smem;
  *static_cast<void**>(stream) = st().cfg_stream;
  return cudaSuccess;
}
cudaError_t __cudaGetKernel(cudaKernel_t* k, const void* fun) {
  *k = reinterpret_cast<cudaKernel_t>(const_cast<void*>(fun));
  return cudaSuccess;
}
cudaError_t __cudaLaunchKernel(cudaKernel_t k, dim3 g, dim3 b, void**, size_t smem, cudaStream_t) {
  return record_launch(reinterpret_cast<const void*>(k), g, b, smem, dim3(1, 1, 1));
}
cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t k, dim3 g, dim3 b, void**, size_t smem,
                                   cudaStream_t) {
  return record_launch(reinterpret_cast<const void*>(k), g, b, smem, dim3(1, 1, 1));
}

// ---- the runtime API the starters and variants use -----------------------------------------
cudaError_t cudaLaunchKernel(const void* f, dim3 g, dim3 b, void**, size_t smem, cudaStream_t) {
  return record_launch(f, g, b, smem, dim3(1, 1, 1));
}
cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t* cfg, const void* f, void**) {
  dim3 cluster(1, 1, 1);
  for (unsigned i = 0; i < cfg->numAttrs; ++i)
    if (cfg->attrs[i].id == cudaLaunchAttributeClusterDimension)
      cluster = dim3(cfg->attrs[i].val.clusterDim.x, cfg->attrs[i].val.clusterDim.y,
                     cfg->attrs[i].val.clusterDim.z);
  return record_launch(f, cfg->gridDim, cfg->blockDim, cfg->dynamicSmemBytes, cluster);
}
cudaError_t cudaGetDevice(int* d) {
  *d = 0;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int) {
  return cudaSuccess;
}
cudaError_t cudaDeviceGetAttribute(int* v, cudaDeviceAttr attr, int) {
  auto it = st().attributes.find(static_cast<int>(attr));
  if (it == st().attributes.end()) {
    st().unanswered.push_back("cudaDeviceGetAttribute(" + std::to_string(static_cast<int>(attr)) + ")");
    return st().last = cudaErrorInvalidValue;
  }
  *v = it->second;
  return cudaSuccess;
}
cudaError_t cudaFuncSetAttribute(const void* f, cudaFuncAttribute attr, int value) {
  if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize) {
    const KernelResources* r = resources_of(f);
    const long stat = r ? r->smem_bytes : 0;
    if (value < 0 || stat + value > st().limits.shared_memory_per_block_bytes)
      return st().last = cudaErrorInvalidValue;
  }
  return cudaSuccess;
}
cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* a, const void* f) {
  const KernelResources* r = resources_of(f);
  if (!r) {
    st().unanswered.push_back("cudaFuncGetAttributes(" + kernel_name(f) + ")");
    return st().last = cudaErrorInvalidDeviceFunction;
  }
  std::memset(a, 0, sizeof(*a));
  a->numRegs = r->registers;
  a->sharedSizeBytes = static_cast<size_t>(r->smem_bytes);
  a->localSizeBytes = static_cast<size_t>(r->local_bytes);
  a->maxThreadsPerBlock = r->max_threads;
  a->maxDynamicSharedSizeBytes =
      static_cast<int>(st().limits.shared_memory_per_block_bytes - r->smem_bytes);
  const auto cc = st().attributes.find(cudaDevAttrComputeCapabilityMajor);
  const auto mi = st().attributes.find(cudaDevAttrComputeCapabilityMinor);
  if (cc != st().attributes.end() && mi != st().attributes.end())
    a->ptxVersion = a->binaryVersion = cc->second * 10 + mi->second;
  return cudaSuccess;
}
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int* n, const void* f,
                                                                   int block, size_t smem,
                                                                   unsigned) {
  const KernelResources* r = resources_of(f);
  if (!r) {
    st().unanswered.push_back("cudaOccupancyMaxActiveBlocksPerMultiprocessor(" + kernel_name(f) + ")");
    return st().last = cudaErrorInvalidDeviceFunction;
  }
  const auto occ = vb::analysis::compute_occupancy(
      {block, r->registers, r->smem_bytes, static_cast<long>(smem)}, st().limits);
  *n = occ.blocks_per_sm;
  return cudaSuccess;
}
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* n, const void* f, int block,
                                                          size_t smem) {
  return cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(n, f, block, smem, 0);
}
cudaError_t cudaGetLastError() {
  const cudaError_t e = st().last;
  st().last = cudaSuccess;
  return e;
}
cudaError_t cudaPeekAtLastError() {
  return st().last;
}
const char* cudaGetErrorString(cudaError_t e) {
  return e == cudaSuccess ? "no error" : "error reported by vladbud-launch-record (a stand-in runtime)";
}
const char* cudaGetErrorName(cudaError_t e) {
  return e == cudaSuccess ? "cudaSuccess" : "cudaErrorStandIn";
}
cudaError_t cudaMallocAsync(void** p, size_t bytes, cudaStream_t) {
  *p = reserve(bytes);
  st().allocations.push_back({{"bytes", bytes}});
  return *p ? cudaSuccess : (st().last = cudaErrorMemoryAllocation);
}
cudaError_t cudaMalloc(void** p, size_t bytes) {
  return cudaMallocAsync(p, bytes, nullptr);
}
cudaError_t cudaFreeAsync(void*, cudaStream_t) {
  return cudaSuccess;
}
cudaError_t cudaFree(void*) {
  return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void*, int, size_t bytes, cudaStream_t) {
  st().memsets.push_back({{"bytes", bytes}});
  return cudaSuccess;
}
cudaError_t cudaMemset(void* p, int v, size_t bytes) {
  return cudaMemsetAsync(p, v, bytes, nullptr);
}
// Both entry point queries are defined: a library built against CUDA < 12.5 calls the first,
// a newer one the second; neither calls the other (the first is deprecated).
cudaError_t cudaGetDriverEntryPoint(const char* sym, void** fn, unsigned long long,
                                    cudaDriverEntryPointQueryResult* q) {
  return answer_driver_entry_point("cudaGetDriverEntryPoint", sym, fn, q);
}
cudaError_t cudaGetDriverEntryPointByVersion(const char* sym, void** fn, unsigned int,
                                             unsigned long long, cudaDriverEntryPointQueryResult* q) {
  return answer_driver_entry_point("cudaGetDriverEntryPointByVersion", sym, fn, q);
}

}  // extern "C"

namespace {

DLDataType dl_dtype(const std::string& d) {
  if (d == "fp32") return {kDLFloat, 32, 1};
  if (d == "fp16") return {kDLFloat, 16, 1};
  if (d == "bf16") return {kDLBfloat, 16, 1};
  if (d == "int64") return {kDLInt, 64, 1};
  if (d == "int32") return {kDLInt, 32, 1};
  throw std::invalid_argument("unknown dtype \"" + d + "\" (want fp32, fp16, bf16, int64, int32)");
}

struct FakeTensor {
  std::vector<int64_t> shape;
  DLTensor t{};
};

std::vector<FakeTensor> make_tensors(const nlohmann::json& list) {
  std::vector<FakeTensor> v(list.size());
  for (size_t i = 0; i < list.size(); ++i) {
    v[i].shape = list[i].at("shape").get<std::vector<int64_t>>();
    const DLDataType dt = dl_dtype(list[i].at("dtype").get<std::string>());
    size_t bytes = dt.bits / 8;
    for (auto d : v[i].shape) bytes *= static_cast<size_t>(d);
    v[i].t.data = reserve(bytes);
    if (!v[i].t.data) throw std::runtime_error("cannot reserve address space for a tensor");
    v[i].t.device = {kDLCUDA, 0};
    v[i].t.ndim = static_cast<int32_t>(v[i].shape.size());
    v[i].t.dtype = dt;
    v[i].t.shape = v[i].shape.data();
    v[i].t.strides = nullptr;
    v[i].t.byte_offset = 0;
  }
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: vladbud-launch-record REQUEST.json (see the file's header)\n");
    return 2;
  }
  nlohmann::json req;
  std::vector<FakeTensor> in, out;
  std::vector<double> attrs;
  try {
    std::ifstream f(argv[1]);
    if (!f) throw std::runtime_error(std::string("cannot read ") + argv[1]);
    req = nlohmann::json::parse(f);
    for (auto& [k, v] : req.at("device_attributes").items()) st().attributes[std::stoi(k)] = v.get<int>();
    const auto& l = req.at("limits");
    auto& L = st().limits;
    L.warp_size = l.at("warp_size");
    L.max_warps_per_sm = l.at("max_warps_per_sm");
    L.max_blocks_per_sm = l.at("max_blocks_per_sm");
    L.registers_per_sm = l.at("registers_per_sm");
    L.registers_per_block = l.at("registers_per_block");
    L.max_registers_per_thread = l.at("max_registers_per_thread");
    L.shared_memory_per_sm_bytes = l.at("shared_memory_per_sm_bytes");
    L.shared_memory_per_block_bytes = l.at("shared_memory_per_block_bytes");
    L.reserved_shared_memory_per_block_bytes = l.at("reserved_shared_memory_per_block_bytes");
    L.max_threads_per_block = l.at("max_threads_per_block");
    for (auto& [name, k] : req.at("kernels").items())
      st().kernels[name] = {k.at("registers").get<int>(), k.at("smem_bytes").get<long>(),
                            k.value("local_bytes", 0L), k.value("max_threads", 1024)};
    in = make_tensors(req.at("inputs"));
    out = make_tensors(req.at("outputs"));
    attrs = req.at("attrs").get<std::vector<double>>();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "vladbud-launch-record: bad request: %s\n", e.what());
    return 2;
  }
  nlohmann::json res{{"ok", false}};
  std::string sandbox;  // what of the sandbox could not be set up ("" = all of it)
  auto note = [&](const std::string& e) {
    if (!e.empty()) sandbox += (sandbox.empty() ? "" : "; ") + e;
  };
  // The library's host code is a candidate's. Under root it runs as a uid of its own, as a
  // runner does (RunnerClient::sandbox_id): no writing the user's files (the build cache,
  // ceilings, results), nothing root's capabilities would let it reach. The library is opened
  // first (the build cache may be closed to that uid) and loaded through its descriptor.
  const std::string library = req.at("library").get<std::string>();
  const int lib_fd = ::open(library.c_str(), O_RDONLY | O_CLOEXEC);
  const std::string load = lib_fd >= 0 ? "/proc/self/fd/" + std::to_string(lib_fd) : library;
  if (::geteuid() == 0) {
    const unsigned id = vb::RunnerClient::sandbox_ids().for_pid(::getpid());
    if (::setgroups(0, nullptr) != 0 || ::setgid(id) != 0 || ::setuid(id) != 0 ||
        ::geteuid() != id) {
      // Never run a candidate's host code as root: no record instead.
      res["error"] = "cannot drop root to uid " + std::to_string(id) + " before running the "
                     "candidate's host code: " + std::strerror(errno);
      std::printf("%s\n", res.dump().c_str());
      std::fflush(stdout);
      _exit(0);
    }
  }
  // No processes of its own, no reach into other processes (as in vladbud-runner).
  note(vb::forbid_new_processes());
  ::prctl(PR_SET_DUMPABLE, 0);
  note(vb::forbid_reaching_other_processes());
  if (!sandbox.empty()) res["sandbox"] = sandbox;
  void* lib = dlopen(load.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    res["error"] = std::string("dlopen: ") + dlerror() +
                   " (a CUDA runtime function this stand-in does not provide?)";
  } else {
    using RunFn = int (*)(const DLTensor*, int, DLTensor*, int, const double*, int, void*);
    using ErrFn = const char* (*)();
    auto run = reinterpret_cast<RunFn>(dlsym(lib, "vb_kernel_run"));
    auto err = reinterpret_cast<ErrFn>(dlsym(lib, "vb_kernel_last_error"));
    if (!run) {
      res["error"] = "the library exports no vb_kernel_run (DESIGN §3)";
    } else {
      std::vector<DLTensor> ti, to;
      for (auto& t : in) ti.push_back(t.t);
      for (auto& t : out) to.push_back(t.t);
      const int rc = run(ti.data(), static_cast<int>(ti.size()), to.data(),
                         static_cast<int>(to.size()), attrs.data(),
                         static_cast<int>(attrs.size()), nullptr);
      res["rc"] = rc;
      res["ok"] = rc == 0;
      if (rc != 0) res["error"] = err ? std::string(err()) : std::string("nonzero return");
    }
  }
  res["launches"] = st().launches;
  res["memsets"] = st().memsets;
  res["allocations"] = st().allocations;
  res["unanswered"] = st().unanswered;
  std::printf("%s\n", res.dump().c_str());
  std::fflush(stdout);
  _exit(0);  // the library's static destructors may call back into the stand-in runtime
}
