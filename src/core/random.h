// Counter-based random numbers for input generation: value i of stream `seed` depends only on
// (seed, i), so tensors are generated in parallel and identically on every machine.
// Generator: SplitMix64 (Steele, Lea, Flood, "Fast splittable pseudorandom number generators",
// OOPSLA 2014); normals by Box-Muller.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace vb {

/// SplitMix64 finaliser of x.
std::uint64_t splitmix64(std::uint64_t x);

/// Uniform double in [0, 1) for element i of stream `seed` (53 random bits).
double uniform01(std::uint64_t seed, std::uint64_t i);

/// Standard normal for element i of stream `seed`.
double normal01(std::uint64_t seed, std::uint64_t i);

/// The two standard normals of Box-Muller pair `pair`: normal01(seed, 2*pair) and
/// normal01(seed, 2*pair + 1).
void normal_pair(std::uint64_t seed, std::uint64_t pair, double* z0, double* z1);

/// Derives an independent stream seed from a base seed and a tag (e.g. an input index).
std::uint64_t derive_seed(std::uint64_t seed, std::uint64_t tag);

/// Fills t with mean + std * N(0,1), rounded to t's dtype. Parallel.
void fill_normal(const TensorView& t, std::uint64_t seed, double mean = 0.0, double std = 1.0);

/// Fills t with values uniform in [lo, hi), rounded to t's dtype. Parallel.
void fill_uniform(const TensorView& t, std::uint64_t seed, double lo, double hi);

/// Fills an int64 tensor with integers uniform in [lo, hi). Parallel.
void fill_int_uniform(const TensorView& t, std::uint64_t seed, std::int64_t lo, std::int64_t hi);

/// Fills t with the constant x (rounded to t's dtype).
void fill_constant(const TensorView& t, double x);

}  // namespace vb
