// seeded_random.mjs — the seeded inputs of a measurement, bit for bit as the C++ generator
// (codegen/include/codegen/seeded_random.hpp documents it): splitmix64, tensor `id` starting from
// state = seed ^ (id · 0xD1B54A32D192ED03), element = (float)(x >> 40) · 2^-23 − 1.
//
// 64-bit arithmetic uses BigInt with BigInt.asUintN(64, ·) for the modulo. The value mapping is
// exact in double too (a 24-bit integer times a power of two, minus 1), and the result is a
// multiple of 2^-23 in [−1, 1), so storing it in a Float32Array changes no bit.

const MASK_GOLDEN = 0x9e3779b97f4a7c15n;
const MUL_1 = 0xbf58476d1ce4e5b9n;
const MUL_2 = 0x94d049bb133111ebn;
const TENSOR_MUL = 0xd1b54a32d192ed03n;

/** One splitmix64 step: returns [next state, output], both BigInt in [0, 2^64). */
export function splitmix64Next(state) {
  const next = BigInt.asUintN(64, state + MASK_GOLDEN);
  let z = next;
  z = BigInt.asUintN(64, (z ^ (z >> 30n)) * MUL_1);
  z = BigInt.asUintN(64, (z ^ (z >> 27n)) * MUL_2);
  return [next, z ^ (z >> 31n)];
}

/** The fp32 value (as a JS number) of one generator output, in [−1, 1). */
export function splitmix64ToFloat(output) {
  return Number(output >> 40n) * (1 / 8388608) - 1;
}

/**
 * `count` elements of tensor `tensorId` (0 data, 1 weight) for `seed` (BigInt, or a number
 * below 2^53), as a Float32Array.
 */
export function seededTensor(seed, tensorId, count) {
  let state = BigInt.asUintN(64, BigInt(seed) ^ BigInt.asUintN(64, BigInt(tensorId) * TENSOR_MUL));
  const out = new Float32Array(count);
  for (let i = 0; i < count; ++i) {
    state = BigInt.asUintN(64, state + MASK_GOLDEN);
    let z = state;
    z = BigInt.asUintN(64, (z ^ (z >> 30n)) * MUL_1);
    z = BigInt.asUintN(64, (z ^ (z >> 27n)) * MUL_2);
    out[i] = Number((z ^ (z >> 31n)) >> 40n) * (1 / 8388608) - 1;
  }
  return out;
}

// A tuning task measures many configs with the same seed and shapes: keep the last few tensors
// instead of regenerating them (BigInt costs ~1 µs per element).
const cache = new Map();
const CACHE_ENTRIES = 4;

/** seededTensor through a small cache; callers must not modify the returned array. */
export function cachedSeededTensor(seed, tensorId, count) {
  const key = `${BigInt(seed)}/${tensorId}/${count}`;
  let value = cache.get(key);
  if (value) {
    cache.delete(key);  // re-insert: most recently used last
  } else {
    value = seededTensor(seed, tensorId, count);
    if (cache.size >= CACHE_ENTRIES) cache.delete(cache.keys().next().value);
  }
  cache.set(key, value);
  return value;
}
