/// \file seeded_random.hpp
/// Seeded inputs that any agent — C++ or JavaScript — regenerates bit for bit.
///
/// Generator: splitmix64 (Steele, Lea, Flood, "Fast splittable pseudorandom number generators",
/// OOPSLA 2014; constants as in Vigna's reference C code):
///   state += 0x9E3779B97F4A7C15; z = state;
///   z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9; z = (z ^ (z >> 27)) * 0x94D049BB133111EB;
///   output z ^ (z >> 31)                      (all arithmetic modulo 2^64)
/// Tensor `tensor_id` of a measurement with seed `seed` starts from
///   state = seed ^ (tensor_id · 0xD1B54A32D192ED03)   (mod 2^64)
/// and element i takes the i-th output x, mapped to fp32 exactly as
///   value = (float)(x >> 40) · 2^-23 − 1.0f           (a multiple of 2^-23 in [−1, 1))
/// Both steps are exact in fp32, so every language gets the same bits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace webtune {

/// One splitmix64 step: advances `state` and returns the next 64-bit output.
uint64_t splitmix64_next(uint64_t& state);

/// The fp32 value of one generator output, in [−1, 1).
float splitmix64_to_float(uint64_t output);

/// `count` elements of tensor `tensor_id` (0 data, 1 weight) for `seed`, as described above.
std::vector<float> seeded_tensor(uint64_t seed, int tensor_id, int64_t count);

}  // namespace webtune
