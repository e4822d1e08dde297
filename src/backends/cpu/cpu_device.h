// The host CPU as a Device (backends/device.h): the cpu backend's kernels run here, in the
// runner's host flavour, timed by the host clock against the CPU's measured ceilings.
#pragma once

#include "backends/device.h"

namespace vb {

/// The local host CPU.
const Device& cpu_device();

}  // namespace vb
