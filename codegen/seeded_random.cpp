/// \file seeded_random.cpp
/// splitmix64 and its fp32 mapping; the constants are documented in the header.
#include "codegen/seeded_random.hpp"

namespace webtune {

uint64_t splitmix64_next(uint64_t& state) {
  state += 0x9E3779B97F4A7C15ull;
  uint64_t z = state;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

float splitmix64_to_float(uint64_t output) {
  // 24 high bits scaled by 2^-23 lie in [0, 2); subtracting 1 is exact in fp32.
  return static_cast<float>(output >> 40) * (1.0f / 8388608.0f) - 1.0f;
}

std::vector<float> seeded_tensor(uint64_t seed, int tensor_id, int64_t count) {
  uint64_t state = seed ^ (static_cast<uint64_t>(tensor_id) * 0xD1B54A32D192ED03ull);
  std::vector<float> out(static_cast<size_t>(count));
  for (float& value : out) value = splitmix64_to_float(splitmix64_next(state));
  return out;
}

}  // namespace webtune
