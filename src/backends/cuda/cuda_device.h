// The first local NVIDIA GPU as a Device (backends/device.h): the cuda backend's kernels run
// there, in the runner's cuda flavour (device twin of the arena, device-event timing), against
// the GPU's measured ceilings (gpu_ceilings.h: the CUDA toolchain and the GPU probe).
#pragma once

#include "backends/device.h"

namespace vb {

/// The local NVIDIA GPU (device 0, the one the runner opens through the driver).
const Device& cuda_device();

}  // namespace vb
