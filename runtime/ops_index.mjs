// ops_index.mjs — the wasm runtime's JavaScript operators that pick elements by index, as
// graph/kernels/index_ops.cpp runs them:
//  - Gather (`axis`; int64 constant indices, negative from the end, out of range refused);
//  - Slice: opset 1's attributes starts / ends / axes, and from opset 10 on the inputs starts,
//    ends, axes, steps (the node's input count tells which form, as the reference decides);
//    negative starts / ends count from the end, bounds beyond the axis (INT64_MAX, INT64_MIN)
//    are clamped, negative steps run backwards;
//  - Pad: `mode` constant / reflect / edge; `pads` (and `value`) attributes before opset 11,
//    the inputs pads, constant_value (and opset 18's axes) from 11 on; negative pads crop.
// Index lists are int64 constants ({ints}); a float tensor there is refused, as int_list does.

import { checkedAxis, fail, floatAttr, input, intAttr, intList, intsAttr, product, scalarOf, shapeText, stridesOf, stringAttr } from './ops_common.mjs';

/** Index `i` of an axis of `n` elements, negative from the end; throws when outside. */
function checkedIndex(type, i, n) {
  if (!Number.isInteger(i) || i < -n || i >= n) fail(type, `index ${i} is outside [${-n}, ${n - 1}]`);
  return i < 0 ? i + n : i;
}

/**
 * Gather: the output is data.shape[:axis] + indices.shape + data.shape[axis+1:]; its values do
 * not depend on how the indices are shaped (model.mjs gives them flat), only on their order.
 */
export function gather(type, attrs, inputs) {
  const x = input(type, inputs, 0, 'data');
  const idx = input(type, inputs, 1, 'indices');
  if (!Array.isArray(idx.ints)) fail(type, 'indices must be int64 or int32, not float32');
  if (x.shape.length === 0) fail(type, 'data is a scalar; Gather needs rank >= 1');
  const axis = checkedAxis(type, intAttr(type, attrs, 'axis', 0), x.shape.length, 'axis');
  const outer = product(x.shape, 0, axis);
  const n = x.shape[axis];
  const inner = product(x.shape, axis + 1);
  const rows = idx.ints.map((i) => checkedIndex(type, i, n));
  const y = new Float32Array(outer * rows.length * inner);
  let o = 0;
  for (let r = 0; r < outer; ++r) {
    for (const row of rows) {
      const from = (r * n + row) * inner;
      y.set(x.data.subarray(from, from + inner), o);
      o += inner;
    }
  }
  return y;
}

/** The box of `x` starting at `begin` with element steps `step` and extent `shape`, row-major. */
function stridedCopy(x, begin, step, shape) {
  const rank = x.shape.length;
  const strides = stridesOf(x.shape);
  const y = new Float32Array(product(shape));
  if (y.length === 0) return y;
  let base = 0;
  for (let d = 0; d < rank; ++d) base += begin[d] * strides[d];
  if (rank === 0) {
    y[0] = x.data[base];
    return y;
  }
  const inner = shape[rank - 1];
  const innerStep = step[rank - 1] * strides[rank - 1];
  const index = new Array(rank - 1).fill(0);
  for (let o = 0; o < y.length; o += inner) {
    let offset = base;
    for (let d = 0; d + 1 < rank; ++d) offset += index[d] * step[d] * strides[d];
    for (let j = 0; j < inner; ++j) y[o + j] = x.data[offset + j * innerStep];
    for (let d = rank - 2; d >= 0; --d) {
      if (++index[d] < shape[d]) break;
      index[d] = 0;
    }
  }
  return y;
}

export function slice(type, attrs, inputs) {
  const x = input(type, inputs, 0, 'data');
  const rank = x.shape.length;
  let starts;
  let ends;
  let axes = [];
  let steps = [];
  if (inputs.length > 1) {  // Slice-10 and later: inputs
    starts = intList(type, input(type, inputs, 1, 'starts'), 'starts');
    ends = intList(type, input(type, inputs, 2, 'ends'), 'ends');
    if (inputs[3]) axes = intList(type, inputs[3], 'axes');
    if (inputs[4]) steps = intList(type, inputs[4], 'steps');
  } else {  // Slice-1: attributes
    if (attrs.starts === undefined || attrs.ends === undefined) fail(type, 'needs starts and ends (attributes before opset 10, inputs from 10 on)');
    starts = intsAttr(type, attrs, 'starts', []);
    ends = intsAttr(type, attrs, 'ends', []);
    axes = intsAttr(type, attrs, 'axes', []);
  }
  if (axes.length === 0) axes = starts.map((_, i) => i);
  if (steps.length === 0) steps = starts.map(() => 1);
  if (ends.length !== starts.length || axes.length !== starts.length || steps.length !== starts.length) {
    fail(type, `starts ${shapeText(starts)}, ends ${shapeText(ends)}, axes ${shapeText(axes)} and steps ${shapeText(steps)} must have one length`);
  }
  const begin = new Array(rank).fill(0);
  const step = new Array(rank).fill(1);
  const shape = [...x.shape];
  const seen = new Array(rank).fill(false);
  for (let i = 0; i < starts.length; ++i) {
    const a = checkedAxis(type, axes[i], rank, 'axis');
    if (seen[a]) fail(type, `axis ${axes[i]} is listed twice`);
    seen[a] = true;
    const dim = x.shape[a];
    const s = steps[i];
    if (s === 0) fail(type, `step 0 on axis ${axes[i]}`);
    let start = starts[i];
    let end = ends[i];
    if (start < 0) start += dim;
    if (end < 0) end += dim;
    const clamp = (v, lo, hi) => Math.min(Math.max(v, lo), hi);
    let length;
    if (s > 0) {
      start = clamp(start, 0, dim);
      end = clamp(end, 0, dim);
      length = end > start ? Math.floor((end - start + s - 1) / s) : 0;
    } else {
      start = clamp(start, 0, dim - 1);
      end = clamp(end, -1, dim - 1);
      length = start > end ? Math.floor((start - end - s - 1) / -s) : 0;
    }
    begin[a] = length ? start : 0;
    step[a] = s;
    shape[a] = length;
  }
  return stridedCopy(x, begin, step, shape);
}

export function pad(type, attrs, inputs) {
  const x = input(type, inputs, 0, 'data');
  const rank = x.shape.length;
  const mode = stringAttr(type, attrs, 'mode', 'constant');
  if (mode !== 'constant' && mode !== 'reflect' && mode !== 'edge') fail(type, `mode '${mode}' is not constant, reflect or edge`);
  let pads;
  let value = 0;
  let axes = [];
  if (inputs.length > 1) {  // Pad-11 and later
    pads = intList(type, input(type, inputs, 1, 'pads'), 'pads');
    if (inputs[2]) value = scalarOf(type, inputs[2], 'constant_value');
    if (inputs[3]) axes = intList(type, inputs[3], 'axes');
  } else {
    if (attrs.pads === undefined) fail(type, 'needs pads (an attribute before opset 11, input 1 from 11 on)');
    pads = intsAttr(type, attrs, 'pads', []);
    value = floatAttr(type, attrs, 'value', 0);
  }
  if (axes.length === 0) axes = x.shape.map((_, i) => i);
  if (pads.length !== 2 * axes.length) {
    fail(type, `pads ${shapeText(pads)} has ${pads.length} values; ${axes.length} axes need ${2 * axes.length}`);
  }
  const pb = new Array(rank).fill(0);
  const pe = new Array(rank).fill(0);
  axes.forEach((axis, i) => {
    const a = checkedAxis(type, axis, rank, 'axis');
    pb[a] = pads[i];
    pe[a] = pads[i + axes.length];
  });
  // For each axis, the input position of every output position (-1: the constant).
  const from = [];
  const shape = new Array(rank);
  for (let d = 0; d < rank; ++d) {
    const n = x.shape[d];
    const out = n + pb[d] + pe[d];
    if (out < 0) fail(type, `pads ${shapeText(pads)} crop more than axis ${d} has`);
    shape[d] = out;
    const positions = new Int32Array(out);
    for (let o = 0; o < out; ++o) {
      let i = o - pb[d];
      if (i < 0 || i >= n) {
        if (mode === 'constant') {
          i = -1;
        } else if (n === 0) {
          fail(type, `mode ${mode} pads an empty axis ${d}`);
        } else if (mode === 'edge' || n === 1) {
          i = Math.min(Math.max(i, 0), n - 1);
        } else {  // reflect, mirrored about the first and last element as often as needed
          const period = 2 * (n - 1);
          i %= period;
          if (i < 0) i += period;
          if (i >= n) i = period - i;
        }
      }
      positions[o] = i;
    }
    from.push(positions);
  }
  const strides = stridesOf(x.shape);
  const y = new Float32Array(product(shape));
  if (y.length === 0) return y;
  const index = new Array(rank).fill(0);
  for (let o = 0; o < y.length; ++o) {
    let offset = 0;
    let inside = true;
    for (let d = 0; d < rank && inside; ++d) {
      const i = from[d][index[d]];
      inside = i >= 0;
      offset += i * strides[d];
    }
    y[o] = inside ? x.data[offset] : value;
    for (let d = rank - 1; d >= 0; --d) {
      if (++index[d] < shape[d]) break;
      index[d] = 0;
    }
  }
  return y;
}
