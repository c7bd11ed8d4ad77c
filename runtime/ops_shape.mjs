// ops_shape.mjs — the wasm runtime's JavaScript operators that move data without computing, as
// graph/kernels/shape_ops.cpp runs them: Transpose (`perm`, default reversed), Concat (`axis`),
// Expand (8+: the bidirectional broadcast of X with the int64 constant `shape`), Tile (6+: int64
// constant `repeats`, one per axis, none negative), and the aliases Reshape, Flatten, Identity,
// Dropout (inference; training with a nonzero ratio refused), Squeeze, Unsqueeze: their output
// is the input's data in the same order, so they copy it (the new shape is the package's).

import { broadcastOffsets, broadcastOperand, broadcastShape, fail, input, intList, normalizeAxis, product, shapeText, stridesOf, valuesOf } from './ops_common.mjs';

export function transpose(type, attrs, x) {
  const rank = x.shape.length;
  const perm = attrs.perm ?? Array.from({ length: rank }, (_, i) => rank - 1 - i);
  const sorted = [...perm].sort((p, q) => p - q);
  if (perm.length !== rank || sorted.some((v, i) => v !== i)) fail(type, `perm [${perm}] is not a permutation of ${rank} axes`);
  const inStrides = new Array(rank).fill(1);
  for (let i = rank - 1; i > 0; --i) inStrides[i - 1] = inStrides[i] * x.shape[i];
  const shape = perm.map((p) => x.shape[p]);
  const strides = perm.map((p) => inStrides[p]);
  const y = new Float32Array(x.data.length);
  const index = new Array(rank).fill(0);
  for (let o = 0; o < y.length; ++o) {
    let offset = 0;
    for (let i = 0; i < rank; ++i) offset += index[i] * strides[i];
    y[o] = x.data[offset];
    for (let i = rank - 1; i >= 0; --i) {
      if (++index[i] < shape[i]) break;
      index[i] = 0;
    }
  }
  return y;
}

export function concat(type, attrs, inputs) {
  if (!inputs.length) fail(type, 'has no inputs');
  if (attrs.axis === undefined) fail(type, 'needs the attribute axis');
  const first = inputs[0];
  const rank = first.shape.length;
  const axis = normalizeAxis(type, attrs.axis, rank);
  let total = 0;
  inputs.forEach((v, i) => {
    const fits = v.shape.length === rank && v.shape.every((d, k) => k === axis || d === first.shape[k]);
    if (!fits) fail(type, `input ${i} [${v.shape}] does not concatenate with input 0 [${first.shape}] along axis ${axis}`);
    total += product(v.shape);
  });
  const outer = product(first.shape, 0, axis);
  const y = new Float32Array(total);
  let o = 0;
  for (let r = 0; r < outer; ++r) {
    for (const v of inputs) {
      const block = product(v.shape, axis);
      y.set(v.data.subarray(r * block, (r + 1) * block), o);
      o += block;
    }
  }
  return y;
}

/** Reshape, Flatten, Identity, Dropout, Squeeze, Unsqueeze: the data as it is. */
export function alias(type, x) {
  return Float32Array.from(x.data);
}

/**
 * Dropout in inference: the identity. Dropout-12/13's optional inputs ratio (default 0.5) and
 * training_mode: training with a nonzero ratio would draw random numbers, which the reference
 * refuses (shape_ops.cpp's dropout), so this does too.
 */
export function dropout(type, inputs) {
  const x = input(type, inputs, 0, 'data');
  const training = inputs[2];
  if (training && training.data.length && training.data[0] !== 0) {
    const ratio = inputs[1] ? valuesOf(inputs[1])[0] : 0.5;
    // std::to_string's six decimals, as the reference's message.
    if (ratio !== 0) fail(type, `training_mode is true with ratio ${Number(ratio).toFixed(6)}: random dropout is not run (the reference executor runs inference)`);
  }
  return Float32Array.from(x.data);
}

export function expand(type, inputs) {
  const x = broadcastOperand(input(type, inputs, 0, 'input'));
  const target = intList(type, input(type, inputs, 1, 'shape'), 'shape');
  const shape = broadcastShape(type, x.shape, target);  // bidirectional: a 1 in `shape` keeps x's dim
  const at = broadcastOffsets(x.shape, shape);
  const y = new Float32Array(at.length);
  for (let o = 0; o < y.length; ++o) y[o] = x.data[at[o]];
  return y;
}

export function tile(type, inputs) {
  const x = input(type, inputs, 0, 'input');
  const repeats = intList(type, input(type, inputs, 1, 'repeats'), 'repeats');
  const rank = x.shape.length;
  if (repeats.length !== rank) fail(type, `repeats ${shapeText(repeats)} has ${repeats.length} values for a rank-${rank} input`);
  if (repeats.some((r) => r < 0)) fail(type, `repeats ${shapeText(repeats)} has a negative value`);
  const shape = x.shape.map((d, i) => d * repeats[i]);
  const strides = stridesOf(x.shape);
  const y = new Float32Array(product(shape));
  if (y.length === 0) return y;
  const index = new Array(rank).fill(0);
  for (let o = 0; o < y.length; ++o) {
    let offset = 0;
    for (let i = 0; i < rank; ++i) offset += (index[i] % x.shape[i]) * strides[i];
    y[o] = x.data[offset];
    for (let i = rank - 1; i >= 0; --i) {
      if (++index[i] < shape[i]) break;
      index[i] = 0;
    }
  }
  return y;
}
