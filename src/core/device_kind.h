// The kind of device a kernel runs on, as generic code may ask it (cf. ggml's
// ggml_backend_dev_type: CPU, GPU, ...). Code above the backend interface branches on the kind,
// never on a backend's name (DESIGN §1). It lives in core/ because kernel types (their benchmark
// sizes) and backends both use it.
#pragma once

namespace vb {

/// Where a kernel runs: the host CPU (the runner calls it on arena memory) or a GPU (the runner
/// stages the arena through device memory).
enum class DeviceKind { Host, Gpu };

/// "host" or "gpu" (for messages and JSON).
inline const char* device_kind_name(DeviceKind k) {
  return k == DeviceKind::Gpu ? "gpu" : "host";
}

}  // namespace vb
