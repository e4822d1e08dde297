// VladBud kernel libraries as compiled torch ops (DESIGN §3): torch.ops.vladbud.<type>.
//
// A kernel library exports
//   int vb_kernel_run(const DLTensor* inputs, int n_inputs, DLTensor* outputs, int n_outputs,
//                     const double* attrs, int n_attrs, void* stream);
//   const char* vb_kernel_last_error(void);
// This extension defines the nine ops of the kernel types (TORCH_LIBRARY(vladbud)) with CPU and
// CUDA kernels that call the library bound for the type, and Meta kernels (SymInt-aware, so fake
// tensors, dynamic shapes, torch.compile and CUDA-graph capture need no Python per call).
//
// Per call: the inputs are made contiguous, the output is allocated with at::empty (the kernel
// never allocates), DLTensor structs are filled straight from the at::Tensors (no DLPack
// capsules) and vb_kernel_run is called once, with torch's current CUDA stream for CUDA tensors
// (no host synchronization). A library bound with device "cpu" serving CUDA tensors is staged
// through host memory (synchronous copies; not capturable in a CUDA graph).
//
// The binding registry is also here (ops of the `vladbud_registry` namespace, called by
// python/vladbud/kernels.py): _bind(type, path, device), _bind_shape(type, key, path, device),
// _unbind_all(), _calls(reset) -> counts, _bound(type), _bound_shape(type, key).
//
// Per-shape bindings (matmul): _bind_shape("matmul", [N, K], path, device) serves the calls whose
// B operand is [K, N] (the weight shape (N, K) of an nn.Linear) with that library; other calls
// go to the type's _bind library. verify binds each extracted folder's best kernel at its own
// shape this way (python/vladbud/verify.py).
// No CUDA headers are needed: the stream comes from c10's device-guard interface, so the same
// source builds with a CPU-only toolchain and runs with CUDA tensors when torch has CUDA.

#include <ATen/core/Tensor.h>
#include <ATen/dlpack.h>
#include <ATen/ops/empty.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <dlfcn.h>
#include <torch/csrc/autograd/autograd_not_implemented_fallback.h>
#include <torch/library.h>

#include <array>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <string>
#include <vector>

namespace {

using RunFn = int (*)(const DLTensor*, int, DLTensor*, int, const double*, int, void*);
using ErrFn = const char* (*)();

// The nine kernel types, in the order of the counters returned by _calls (kernels.py TYPES).
enum Op : int {
  kMatmul,
  kSoftmax,
  kLayernorm,
  kRmsnorm,
  kFlashAttention,
  kFusedMlp,
  kCrossEntropy,
  kRotaryEmbedding,
  kReduce,
  kNumOps
};
constexpr std::array<const char*, kNumOps> kNames = {
    "matmul",    "softmax",       "layernorm",        "rmsnorm", "flash_attention",
    "fused_mlp", "cross_entropy", "rotary_embedding", "reduce"};

// One loaded library serving one type. dlclose'd when the last call using it has finished and
// it has been replaced or unbound (shared_ptr).
struct Binding {
  std::string type, path;
  bool cpu_backend = true;  // the kernel reads host memory (device "cpu")
  void* handle = nullptr;
  RunFn run = nullptr;
  ErrFn last_error = nullptr;
  ~Binding() {
    if (handle) dlclose(handle);
  }
};

std::mutex g_mu;
std::array<std::shared_ptr<const Binding>, kNumOps> g_bound;
// Per-shape bindings of matmul, keyed by (N, K) of its B operand [K, N].
std::map<std::pair<int64_t, int64_t>, std::shared_ptr<const Binding>> g_matmul_by_shape;
std::array<std::atomic<int64_t>, kNumOps> g_calls{};

int op_of(const std::string& type) {
  for (int i = 0; i < kNumOps; ++i)
    if (type == kNames[i]) return i;
  std::string all;
  for (const char* n : kNames) all += std::string(all.empty() ? "" : ", ") + n;
  TORCH_CHECK(false, "vladbud: unknown kernel type '", type, "' (one of ", all, ")");
}

// ---- registry ops ------------------------------------------------------------------------------

// Binds `path` to `type`; device "cpu" (the kernel reads host memory) or "cuda"/"cuda:N" (device
// memory, torch's current stream). An earlier binding of the type is dropped first (so a rebuilt
// library at the same path is really reloaded); when the new one fails to load, the type is left
// unbound and the error names dlopen's message.
// Loads `path` as a Binding of `type` (dlopen + the two symbols); raises naming the problem.
std::shared_ptr<const Binding> load_binding(const std::string& type, const std::string& path,
                                            const std::string& device) {
  const bool cpu = device == "cpu";
  TORCH_CHECK(cpu || device.rfind("cuda", 0) == 0, "vladbud.kernels.bind: device must be 'cpu' or 'cuda', got '",
              device, "'");
  auto b = std::make_shared<Binding>();
  b->type = type;
  b->path = path;
  b->cpu_backend = cpu;
  dlerror();
  b->handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!b->handle) {
    const char* e = dlerror();
    TORCH_CHECK(false, "vladbud.kernels.bind(", type, "): cannot load ", path, ": ", e ? e : "dlopen failed");
  }
  b->run = reinterpret_cast<RunFn>(dlsym(b->handle, "vb_kernel_run"));
  TORCH_CHECK(b->run, "vladbud.kernels.bind(", type, "): ", path, " does not export vb_kernel_run");
  b->last_error = reinterpret_cast<ErrFn>(dlsym(b->handle, "vb_kernel_last_error"));
  return b;
}

void bind_op(const std::string& type, const std::string& path, const std::string& device) {
  const int op = op_of(type);
  {
    std::lock_guard<std::mutex> lock(g_mu);
    g_bound[op].reset();  // dropped first, so that a rebuilt library at the same path reloads
  }
  auto b = load_binding(type, path, device);
  std::lock_guard<std::mutex> lock(g_mu);
  g_bound[op] = std::move(b);
}

// The (N, K) key of a per-shape binding; only matmul has one.
std::pair<int64_t, int64_t> shape_key(const std::string& type, const std::vector<int64_t>& key) {
  TORCH_CHECK(op_of(type) == kMatmul, "vladbud.kernels.bind_shape: only matmul has per-shape "
              "bindings (keyed by its weight shape (N, K)); bind ", type, " with bind()");
  TORCH_CHECK(key.size() == 2 && key[0] > 0 && key[1] > 0,
              "vladbud.kernels.bind_shape: the key must be [N, K] with two positive integers");
  return {key[0], key[1]};
}

void bind_shape_op(const std::string& type, const std::vector<int64_t>& key, const std::string& path,
                   const std::string& device) {
  const auto k = shape_key(type, key);
  {
    std::lock_guard<std::mutex> lock(g_mu);
    g_matmul_by_shape.erase(k);
  }
  auto b = load_binding(type, path, device);
  std::lock_guard<std::mutex> lock(g_mu);
  g_matmul_by_shape[k] = std::move(b);
}

std::string bound_shape_op(const std::string& type, const std::vector<int64_t>& key) {
  const auto k = shape_key(type, key);
  std::lock_guard<std::mutex> lock(g_mu);
  const auto it = g_matmul_by_shape.find(k);
  return it == g_matmul_by_shape.end() ? std::string() : it->second->path;
}

void unbind_all_op() {
  std::lock_guard<std::mutex> lock(g_mu);
  for (auto& b : g_bound) b.reset();
  g_matmul_by_shape.clear();
}

// Call counts per type (kNames order); reset=true zeroes them after reading.
std::vector<int64_t> calls_op(bool reset) {
  std::vector<int64_t> v(kNumOps);
  for (int i = 0; i < kNumOps; ++i) v[i] = reset ? g_calls[i].exchange(0) : g_calls[i].load();
  return v;
}

// Path of the library bound to `type` ("" when none).
std::string bound_op(const std::string& type) {
  const int op = op_of(type);
  std::lock_guard<std::mutex> lock(g_mu);
  return g_bound[op] ? g_bound[op]->path : std::string();
}

// ---- one kernel call ---------------------------------------------------------------------------

DLDataType dl_dtype(const at::Tensor& t) {
  DLDataType d{0, 0, 1};
  switch (t.scalar_type()) {
    case at::kFloat: d = {kDLFloat, 32, 1}; break;
    case at::kDouble: d = {kDLFloat, 64, 1}; break;
    case at::kHalf: d = {kDLFloat, 16, 1}; break;
    case at::kBFloat16: d = {kDLBfloat, 16, 1}; break;
    case at::kLong: d = {kDLInt, 64, 1}; break;
    case at::kInt: d = {kDLInt, 32, 1}; break;
    case at::kShort: d = {kDLInt, 16, 1}; break;
    case at::kChar: d = {kDLInt, 8, 1}; break;
    case at::kByte: d = {kDLUInt, 8, 1}; break;
    case at::kBool: d = {kDLBool, 8, 1}; break;
    default: TORCH_CHECK(false, "vladbud: dtype ", t.scalar_type(), " has no DLPack code here");
  }
  return d;
}

// The DLTensor view of a contiguous tensor: its sizes/strides arrays are borrowed (valid while
// `t` is alive and unchanged).
DLTensor dl_of(const at::Tensor& t, void* data) {
  DLTensor d;
  d.data = data;
  d.device.device_type = t.is_cuda() ? kDLCUDA : kDLCPU;
  d.device.device_id = t.is_cuda() ? t.get_device() : 0;
  d.ndim = static_cast<int32_t>(t.dim());
  d.dtype = dl_dtype(t);
  d.shape = const_cast<int64_t*>(t.sizes().data());
  d.strides = const_cast<int64_t*>(t.strides().data());
  d.byte_offset = 0;
  return d;
}

constexpr int kMaxIn = 4;

[[noreturn]] void fail_unbound(int op) {
  TORCH_CHECK(false, "vladbud::", kNames[op], ": no kernel library bound for ", kNames[op],
              " (call vladbud.kernels.bind(\"", kNames[op], "\", path, device) first)");
}

// Calls the library bound to `op` on contiguous `ins` (ABI order) writing `out` (contiguous,
// allocated by the caller on its home device), with the float attributes.
void call_kernel(int op, const at::Tensor* const* ins, int n_in, const at::Tensor& out,
                 const double* attrs, int n_attrs) {
  std::shared_ptr<const Binding> b;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    b = g_bound[op];
    if (op == kMatmul && !g_matmul_by_shape.empty() && n_in >= 2 && ins[1]->dim() == 2) {
      const auto it = g_matmul_by_shape.find({ins[1]->size(1), ins[1]->size(0)});  // B [K, N]
      if (it != g_matmul_by_shape.end()) b = it->second;
    }
  }
  if (!b) fail_unbound(op);
  g_calls[op].fetch_add(1, std::memory_order_relaxed);

  const bool staged = b->cpu_backend && !out.is_cpu();
  std::array<at::Tensor, kMaxIn> owned;  // inputs copied to contiguous / host memory
  std::array<DLTensor, kMaxIn> din;
  at::Tensor host_out;
  for (int i = 0; i < n_in; ++i) {
    const at::Tensor* t = ins[i];
    // One device for every operand (a kernel reads its inputs through raw pointers on the
    // output's device: a tensor elsewhere would be read as garbage or fault).
    TORCH_CHECK(t->device() == out.device(), "vladbud::", kNames[op], ": input ", i, " is on ",
                t->device(), " but the output is on ", out.device(),
                "; move every input to one device (e.g. .to(", out.device(), "))");
    if (staged && !t->is_cpu()) {
      owned[i] = t->to(at::TensorOptions().device(at::kCPU), /*non_blocking=*/false, /*copy=*/false,
                       at::MemoryFormat::Contiguous);
      t = &owned[i];
    } else if (!t->is_contiguous()) {
      owned[i] = t->contiguous();
      t = &owned[i];
    }
    din[i] = dl_of(*t, const_cast<void*>(t->const_data_ptr()));
  }
  const at::Tensor& kout = staged ? (host_out = at::empty(out.sizes(), out.options().device(at::kCPU))) : out;
  DLTensor dout = dl_of(kout, kout.mutable_data_ptr());

  int rc;
  if (kout.is_cuda()) {
    const c10::DeviceGuard guard(kout.device());
    const auto* impl = c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA);
    void* stream = impl->getStreamNativeHandle(impl->getStream(kout.device()));
    rc = b->run(din.data(), n_in, &dout, 1, attrs, n_attrs, stream);
  } else {
    rc = b->run(din.data(), n_in, &dout, 1, attrs, n_attrs, nullptr);
  }
  if (rc != 0) {
    const char* msg = b->last_error ? b->last_error() : nullptr;
    TORCH_CHECK(false, "vladbud ", b->type, " kernel ", b->path, " failed (rc ", rc,
                "): ", msg && *msg ? msg : "no message");
  }
  if (staged) const_cast<at::Tensor&>(out).copy_(host_out);
}

// ---- output allocation (shared by the real and the Meta kernels; SymInt-aware) ------------------

at::Tensor same_shape(const at::Tensor& x) { return at::empty_symint(x.sym_sizes(), x.options()); }

at::Tensor out_matmul(const at::Tensor& a, const at::Tensor& b) {
  return at::empty_symint({a.sym_size(0), b.sym_size(1)}, a.options());
}
at::Tensor out_fused_mlp(const at::Tensor& x, const at::Tensor& w_down) {
  return at::empty_symint({x.sym_size(0), w_down.sym_size(0)}, x.options());
}
at::Tensor out_cross_entropy(const at::Tensor& logits) {
  return at::empty({}, logits.options().dtype(at::kFloat));
}
at::Tensor out_reduce(const at::Tensor& x) { return at::empty_symint({x.sym_size(0)}, x.options()); }

// ---- the ops: Meta (shapes only) and real (CPU and CUDA dispatch keys) ---------------------------

at::Tensor matmul_meta(const at::Tensor& a, const at::Tensor& b) { return out_matmul(a, b); }
at::Tensor matmul_impl(const at::Tensor& a, const at::Tensor& b) {
  at::Tensor c = out_matmul(a, b);
  const at::Tensor* in[] = {&a, &b};
  call_kernel(kMatmul, in, 2, c, nullptr, 0);
  return c;
}

at::Tensor softmax_meta(const at::Tensor& x) { return same_shape(x); }
at::Tensor softmax_impl(const at::Tensor& x) {
  at::Tensor y = same_shape(x);
  const at::Tensor* in[] = {&x};
  call_kernel(kSoftmax, in, 1, y, nullptr, 0);
  return y;
}

at::Tensor layernorm_meta(const at::Tensor& x, const at::Tensor&, const at::Tensor&, double) {
  return same_shape(x);
}
at::Tensor layernorm_impl(const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias, double eps) {
  at::Tensor y = same_shape(x);
  const at::Tensor* in[] = {&x, &w, &bias};
  const double attrs[] = {eps};
  call_kernel(kLayernorm, in, 3, y, attrs, 1);
  return y;
}

at::Tensor rmsnorm_meta(const at::Tensor& x, const at::Tensor&, double) { return same_shape(x); }
at::Tensor rmsnorm_impl(const at::Tensor& x, const at::Tensor& w, double eps) {
  at::Tensor y = same_shape(x);
  const at::Tensor* in[] = {&x, &w};
  const double attrs[] = {eps};
  call_kernel(kRmsnorm, in, 2, y, attrs, 1);
  return y;
}

// flash_attention's shapes (DESIGN §2): q [B,H,S,D], k and v [B,H_kv,S,D] with H_kv >= 1 dividing
// H (grouped-query attention: query head h reads KV head h / (H/H_kv); H_kv = H is multi-head
// attention), one dtype; o is q's shape. Raises (RuntimeError in Python) naming the tensor and the
// rule. SymInt-aware: under fake tensors / dynamic shapes the checks guard on the symbols.
void check_attention_shapes(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  TORCH_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4,
              "vladbud::flash_attention: q, k, v must be 4-D [B,H,S,D], [B,H_kv,S,D], [B,H_kv,S,D]; got ",
              q.dim(), "-D, ", k.dim(), "-D, ", v.dim(), "-D");
  TORCH_CHECK(q.scalar_type() == at::kHalf || q.scalar_type() == at::kBFloat16 || q.scalar_type() == at::kFloat,
              "vladbud::flash_attention: q, k, v must be float16, bfloat16 or float32; got ", q.scalar_type(),
              " (cast them, e.g. q.float())");
  TORCH_CHECK(k.scalar_type() == q.scalar_type() && v.scalar_type() == q.scalar_type(),
              "vladbud::flash_attention: q, k, v must have one dtype; got ", q.scalar_type(), ", ",
              k.scalar_type(), ", ", v.scalar_type());
  TORCH_CHECK(k.sym_sizes() == v.sym_sizes(), "vladbud::flash_attention: k and v must have one shape [B,H_kv,S,D]; got k ",
              k.sym_sizes(), ", v ", v.sym_sizes());
  TORCH_CHECK(k.sym_size(0) == q.sym_size(0) && k.sym_size(2) == q.sym_size(2) && k.sym_size(3) == q.sym_size(3),
              "vladbud::flash_attention: k/v ", k.sym_sizes(), " must match q ", q.sym_sizes(),
              " in B (dim 0), S (dim 2) and D (dim 3)");
  const c10::SymInt& H = q.sym_size(1);
  const c10::SymInt& Hkv = k.sym_size(1);
  TORCH_CHECK(Hkv >= 1 && H % Hkv == 0, "vladbud::flash_attention: k/v have ", Hkv, " KV heads (dim 1) and q has ", H,
              " query heads: grouped-query attention needs H % H_kv == 0 (query head h reads KV head h // (H / H_kv));"
              " pass K/V with a divisor of H heads, or expand them to H heads");
}

at::Tensor flash_attention_meta(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double, double) {
  check_attention_shapes(q, k, v);
  return same_shape(q);
}
at::Tensor flash_attention_impl(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double causal,
                                double sm_scale) {
  check_attention_shapes(q, k, v);
  at::Tensor o = same_shape(q);
  const at::Tensor* in[] = {&q, &k, &v};
  const double attrs[] = {causal, sm_scale};
  call_kernel(kFlashAttention, in, 3, o, attrs, 2);
  return o;
}

at::Tensor fused_mlp_meta(const at::Tensor& x, const at::Tensor&, const at::Tensor&, const at::Tensor& w_down) {
  return out_fused_mlp(x, w_down);
}
at::Tensor fused_mlp_impl(const at::Tensor& x, const at::Tensor& w_gate, const at::Tensor& w_up,
                          const at::Tensor& w_down) {
  at::Tensor y = out_fused_mlp(x, w_down);
  const at::Tensor* in[] = {&x, &w_gate, &w_up, &w_down};
  call_kernel(kFusedMlp, in, 4, y, nullptr, 0);
  return y;
}

at::Tensor cross_entropy_meta(const at::Tensor& logits, const at::Tensor&, double) {
  return out_cross_entropy(logits);
}
at::Tensor cross_entropy_impl(const at::Tensor& logits, const at::Tensor& targets, double ignore_index) {
  at::Tensor loss = out_cross_entropy(logits);
  const at::Tensor* in[] = {&logits, &targets};
  const double attrs[] = {ignore_index};
  call_kernel(kCrossEntropy, in, 2, loss, attrs, 1);
  return loss;
}

at::Tensor rotary_embedding_meta(const at::Tensor& x, const at::Tensor&, const at::Tensor&, double) {
  return same_shape(x);
}
at::Tensor rotary_embedding_impl(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin,
                                 double interleaved) {
  at::Tensor y = same_shape(x);
  const at::Tensor* in[] = {&x, &cos, &sin};
  const double attrs[] = {interleaved};
  call_kernel(kRotaryEmbedding, in, 3, y, attrs, 1);
  return y;
}

at::Tensor reduce_meta(const at::Tensor& x) { return out_reduce(x); }
at::Tensor reduce_impl(const at::Tensor& x) {
  at::Tensor y = out_reduce(x);
  const at::Tensor* in[] = {&x};
  call_kernel(kReduce, in, 1, y, nullptr, 0);
  return y;
}

}  // namespace

// Schemas: exactly those of the former torch.library.custom_op definitions (kernels.py).
TORCH_LIBRARY(vladbud, m) {
  const std::vector<at::Tag> tags = {at::Tag::pt2_compliant_tag};
  m.def("matmul(Tensor a, Tensor b) -> Tensor", tags);
  m.def("softmax(Tensor x) -> Tensor", tags);
  m.def("layernorm(Tensor x, Tensor weight, Tensor bias, float eps) -> Tensor", tags);
  m.def("rmsnorm(Tensor x, Tensor weight, float eps) -> Tensor", tags);
  m.def("flash_attention(Tensor q, Tensor k, Tensor v, float causal, float sm_scale) -> Tensor", tags);
  m.def("fused_mlp(Tensor x, Tensor w_gate, Tensor w_up, Tensor w_down) -> Tensor", tags);
  m.def("cross_entropy(Tensor logits, Tensor targets, float ignore_index) -> Tensor", tags);
  m.def("rotary_embedding(Tensor x, Tensor cos, Tensor sin, float interleaved) -> Tensor", tags);
  m.def("reduce(Tensor x) -> Tensor", tags);
}

#define VB_IMPLS(SUFFIX)                                  \
  m.impl("matmul", TORCH_FN(matmul_##SUFFIX));                     \
  m.impl("softmax", TORCH_FN(softmax_##SUFFIX));                   \
  m.impl("layernorm", TORCH_FN(layernorm_##SUFFIX));               \
  m.impl("rmsnorm", TORCH_FN(rmsnorm_##SUFFIX));                   \
  m.impl("flash_attention", TORCH_FN(flash_attention_##SUFFIX));   \
  m.impl("fused_mlp", TORCH_FN(fused_mlp_##SUFFIX));               \
  m.impl("cross_entropy", TORCH_FN(cross_entropy_##SUFFIX));       \
  m.impl("rotary_embedding", TORCH_FN(rotary_embedding_##SUFFIX)); \
  m.impl("reduce", TORCH_FN(reduce_##SUFFIX));

TORCH_LIBRARY_IMPL(vladbud, CPU, m) { VB_IMPLS(impl) }
TORCH_LIBRARY_IMPL(vladbud, CUDA, m) { VB_IMPLS(impl) }
TORCH_LIBRARY_IMPL(vladbud, Meta, m) { VB_IMPLS(meta) }

// No derivative formulas: a forward with inputs that require grad works, its backward raises
// (as the former custom ops without register_autograd did).
TORCH_LIBRARY_IMPL(vladbud, Autograd, m) {
  for (const char* n : kNames) m.impl(n, torch::autograd::autogradNotImplementedFallback());
}

// The binding registry (python/vladbud/kernels.py wraps these; not meant to be called directly).
TORCH_LIBRARY(vladbud_registry, m) {
  m.def("_bind(str kernel_type, str path, str device) -> ()", &bind_op);
  m.def("_unbind_all() -> ()", &unbind_all_op);
  m.def("_calls(bool reset=False) -> int[]", &calls_op);
  m.def("_bound(str kernel_type) -> str", &bound_op);
  m.def("_bind_shape(str kernel_type, int[] key, str path, str device) -> ()", &bind_shape_op);
  m.def("_bound_shape(str kernel_type, int[] key) -> str", &bound_shape_op);
}
