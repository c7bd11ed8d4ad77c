// ops_common.mjs — what every family of runtime/ops_*.mjs shares: the error convention, shape
// arithmetic (products, row-major strides, numpy's broadcast), reading attributes and inputs.
// These mirror the helpers of the C++ reference executor (graph/executor.cpp's kernels
// namespace, graph/kernels/kernels.hpp), so that a JavaScript operator refuses what the reference
// refuses with the same reason. Every message starts with the op type (`${type}: why`), which
// model.mjs's StepError and tests/run_js_ops.mjs pass on as they are.
//
// An operand is {data: Float32Array, shape: number[]}, or for an int64 constant (model.mjs's
// operand()) {data, ints: number[], shape: [ints.length]}: its `shape` is always 1-D, so an
// operator that needs the real shape of an int tensor derives it from its output shape.

export const product = (dims, from = 0, to = dims.length) => {
  let p = 1;
  for (let i = from; i < to; ++i) p *= dims[i];
  return p;
};

export function fail(type, message) {
  throw new Error(`${type}: ${message}`);
}

/** "[1,3,224,224]", as the reference's shape_text. */
export const shapeText = (shape) => `[${shape.join(',')}]`;

export const sameShape = (a, b) => a.length === b.length && a.every((d, i) => d === b[i]);

export function normalizeAxis(type, axis, rank, extra = 0) {
  const a = axis < 0 ? axis + rank + extra : axis;
  if (!Number.isInteger(a) || a < 0 || a >= rank + extra) fail(type, `axis ${axis} is outside the input's rank ${rank}`);
  return a;
}

/**
 * `axis` in [-rank, rank + extra) made non-negative, with the reference's message (its
 * normalize_axis; note that a negative axis adds `rank`, not rank + extra, as there).
 */
export function checkedAxis(type, axis, rank, what = 'axis', extra = 0) {
  if (!Number.isInteger(axis) || axis < -rank || axis >= rank + extra) {
    fail(type, `${what} ${axis} is outside [${-rank}, ${rank + extra - 1}] for a rank-${rank} input`);
  }
  return axis < 0 ? axis + rank : axis;
}

/** Row-major strides of `shape`. */
export function stridesOf(shape) {
  const strides = new Array(shape.length).fill(1);
  for (let i = shape.length - 1; i > 0; --i) strides[i - 1] = strides[i] * shape[i];
  return strides;
}

/** Steps the row-major multi-index `index` into `shape` to the next element (last axis fastest). */
export function nextIndex(index, shape) {
  for (let d = index.length - 1; d >= 0; --d) {
    if (++index[d] < shape[d]) return;
    index[d] = 0;
  }
}

/** numpy's broadcast of two shapes (right-aligned; a dimension of 1 stretches). */
export function broadcastShape(type, a, b) {
  const rank = Math.max(a.length, b.length);
  const out = new Array(rank);
  for (let i = 0; i < rank; ++i) {
    const ad = i + a.length >= rank ? a[i + a.length - rank] : 1;
    const bd = i + b.length >= rank ? b[i + b.length - rank] : 1;
    if (ad !== bd && ad !== 1 && bd !== 1) fail(type, `shapes [${a}] and [${b}] do not broadcast`);
    out[i] = ad === 1 ? bd : ad;
  }
  return out;
}

/** Strides of `shape` (right-aligned) over the broadcast shape `out`: 0 where it stretches. */
export function broadcastStrides(shape, out) {
  const strides = new Array(out.length).fill(0);
  let stride = 1;
  for (let i = shape.length - 1; i >= 0; --i) {
    strides[i + out.length - shape.length] = shape[i] === 1 ? 0 : stride;
    stride *= shape[i];
  }
  return strides;
}

/**
 * For every element of `out` (row-major), the flat index of the element of a tensor of shape
 * `shape` (which broadcasts to `out`) that it reads: the reference's for_each_broadcast, as an
 * array so that the loops that use it stay plain.
 */
export function broadcastOffsets(shape, out) {
  const n = product(out);
  const offsets = new Int32Array(n);
  if (n === 0 || out.length === 0) return offsets;
  const strides = broadcastStrides(shape, out);
  const rank = out.length;
  const inner = out[rank - 1];
  const innerStride = strides[rank - 1];
  const index = new Array(rank - 1).fill(0);
  for (let r = 0, o = 0, rows = n / inner; r < rows; ++r) {
    let off = 0;
    for (let i = 0; i + 1 < rank; ++i) off += index[i] * strides[i];
    for (let j = 0; j < inner; ++j, ++o) offsets[o] = off + j * innerStride;
    for (let i = rank - 2; i >= 0; --i) {  // odometer over the outer dimensions
      if (++index[i] < out[i]) break;
      index[i] = 0;
    }
  }
  return offsets;
}

// ---- attributes: ints as numbers, floats as numbers, strings, lists as arrays ---------------

export function intAttr(type, attrs, key, fallback) {
  const v = attrs[key];
  if (v === undefined) return fallback;
  if (!Number.isInteger(v)) fail(type, `attribute '${key}' ${JSON.stringify(v)} is not an int`);
  return v;
}

/** A float attribute as the reference reads it: a float32 (Node::get_float), so rounded. */
export function floatAttr(type, attrs, key, fallback) {
  const v = attrs[key];
  if (v === undefined) return Math.fround(fallback);
  if (typeof v !== 'number') fail(type, `attribute '${key}' ${JSON.stringify(v)} is not a float`);
  return Math.fround(v);
}

export function stringAttr(type, attrs, key, fallback) {
  const v = attrs[key];
  if (v === undefined) return fallback;
  if (typeof v !== 'string') fail(type, `attribute '${key}' ${JSON.stringify(v)} is not a string`);
  return v;
}

export function intsAttr(type, attrs, key, fallback) {
  const v = attrs[key];
  if (v === undefined) return fallback;
  if (!Array.isArray(v) || !v.every(Number.isInteger)) fail(type, `attribute '${key}' ${JSON.stringify(v)} is not a list of ints`);
  return v;
}

export function floatsAttr(type, attrs, key, fallback) {
  const v = attrs[key];
  if (v === undefined) return fallback;
  if (!Array.isArray(v) || !v.every((f) => typeof f === 'number')) fail(type, `attribute '${key}' ${JSON.stringify(v)} is not a list of floats`);
  return v.map(Math.fround);
}

// ---- inputs -------------------------------------------------------------------------------

/** Input `i` of any element type; throws naming `what` when absent (KernelContext::input). */
export function input(type, inputs, i, what) {
  const v = inputs[i];
  if (!v) fail(type, `needs input ${i} (${what})`);
  return v;
}

/**
 * Input `i` as float32 (KernelContext::float_input): an int64 constant there is refused, as the
 * reference refuses an int tensor where the operator computes on floats.
 */
export function floatInput(type, inputs, i, what) {
  const v = input(type, inputs, i, what);
  if (Array.isArray(v.ints)) fail(type, `input ${i} (${what}) is int64; this operator runs on float32`);
  return v;
}

/** The values of an integer tensor of rank 0 or 1 (int_list): only an int64 constant has them. */
export function intList(type, v, what) {
  if (!Array.isArray(v.ints)) fail(type, `${what} must be an integer tensor of rank 0 or 1, not float32 ${shapeText(v.shape)}`);
  return v.ints;
}

/** The value of a one-element tensor, float or int (scalar_of). */
export function scalarOf(type, v, what) {
  if (v.data.length !== 1) fail(type, `${what} must hold one value, not ${shapeText(v.shape)}`);
  return Array.isArray(v.ints) ? v.ints[0] : v.data[0];
}

/**
 * An operand of a broadcasting op as {data, shape}: an int64 constant reads its exact ints (an
 * int exponent of Pow-12 beyond 2^24), and one of a single value is a scalar, since model.mjs
 * gives every int constant a 1-D shape and a [1] would raise the output's rank.
 */
export function broadcastOperand(v) {
  if (!Array.isArray(v.ints)) return v;
  return { data: Float64Array.from(v.ints), shape: v.ints.length === 1 ? [] : v.shape };
}

/** The values of an operand as exact numbers: an int constant's ints, else its floats. */
export const valuesOf = (v) => (Array.isArray(v.ints) ? v.ints : v.data);
