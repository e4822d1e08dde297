#include "targets/roofline.h"

#include <cmath>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

namespace vb {

RooflinePoint roofline_point(const Ceilings& c, DType dtype, double flops, double bytes,
                             double seconds) {
  if (!(seconds > 0) || !std::isfinite(seconds))
    throw std::invalid_argument(
        fmt::format("roofline_point: seconds must be > 0, got {}", seconds));
  if (!(flops >= 0) || !std::isfinite(flops) || !(bytes >= 0) || !std::isfinite(bytes))
    throw std::invalid_argument(fmt::format(
        "roofline_point: flops and bytes must be finite and >= 0, got {} and {}", flops, bytes));
  if (flops == 0 && bytes == 0)
    throw std::invalid_argument("roofline_point: a run with no FLOPs and no bytes has no place");
  if (!(c.mem_bw_gbs > 0) || !std::isfinite(c.mem_bw_gbs))
    throw std::invalid_argument("roofline_point: the ceilings have no memory bandwidth");
  const double peak_tflops = c.peak_for(dtype);  // throws std::invalid_argument when missing

  RooflinePoint p;
  p.ridge_point = (peak_tflops * 1e12) / (c.mem_bw_gbs * 1e9);
  p.arithmetic_intensity = bytes > 0 ? flops / bytes : std::numeric_limits<double>::infinity();
  p.achieved_tflops = flops / seconds / 1e12;
  p.achieved_gbs = bytes / seconds / 1e9;
  if (p.arithmetic_intensity < p.ridge_point) {
    p.bound = "memory";
    p.ceiling = c.mem_bw_gbs;
    p.pct_peak = p.achieved_gbs / c.mem_bw_gbs * 100.0;
  } else {
    p.bound = "compute";
    p.ceiling = peak_tflops;
    p.pct_peak = p.achieved_tflops / peak_tflops * 100.0;
  }
  return p;
}

}  // namespace vb
