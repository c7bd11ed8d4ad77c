// ops_reduce.mjs — the wasm runtime's JavaScript reductions: ReduceSum, ReduceMean, ReduceMax,
// ReduceMin, ReduceProd, ReduceL1, ReduceL2, ReduceSumSquare, ReduceLogSum, ReduceLogSumExp, as
// graph/kernels/reduce.cpp runs them on float32: `axes` is input 1 (an int64 constant: ReduceSum
// from opset 13, every Reduce from 18) or else the attribute; no axes reduces all of them unless
// `noop_with_empty_axes` (then the input passes through); negative axes count from the end, an
// axis listed twice is refused; `keepdims` only changes the output's shape, not its values (the
// output is row-major either way). Accumulation in double, rounded once; Max / Min propagate
// NaN; LogSumExp subtracts each group's maximum first so that exp does not overflow.

import { broadcastOffsets, checkedAxis, fail, intList, intsAttr, product } from './ops_common.mjs';

export const REDUCE_TYPES = Object.freeze(['ReduceSum', 'ReduceMean', 'ReduceMax', 'ReduceMin', 'ReduceProd', 'ReduceL1',
  'ReduceL2', 'ReduceSumSquare', 'ReduceLogSum', 'ReduceLogSumExp']);

export function reduce(type, attrs, inputs) {
  const op = type.slice(6);  // "Sum", "Mean", ...
  const x = inputs[0];
  const rank = x.shape.length;
  const axes = inputs[1] ? intList(type, inputs[1], 'axes') : intsAttr(type, attrs, 'axes', []);
  if (axes.length === 0 && (attrs.noop_with_empty_axes ?? 0) !== 0) return Float32Array.from(x.data);
  const reduced = new Array(rank).fill(axes.length === 0);
  for (const a of axes) {
    const i = checkedAxis(type, a, rank, 'axis');
    if (reduced[i]) fail(type, `axis ${a} is listed twice`);
    reduced[i] = true;
  }
  const kept = x.shape.map((d, i) => (reduced[i] ? 1 : d));
  const outN = product(kept);
  const count = outN ? x.data.length / outN : 0;
  // at[i]: the output element that input element i reduces into.
  const at = broadcastOffsets(kept, x.shape);
  const d = x.data;
  const acc = new Float64Array(outN).fill(op === 'Prod' ? 1 : op === 'Max' ? -Infinity : op === 'Min' ? Infinity : 0);
  const n = d.length;
  if (op === 'Sum' || op === 'Mean' || op === 'LogSum') {
    for (let i = 0; i < n; ++i) acc[at[i]] += d[i];
  } else if (op === 'Prod') {
    for (let i = 0; i < n; ++i) acc[at[i]] *= d[i];
  } else if (op === 'Max') {
    for (let i = 0; i < n; ++i) {
      const v = d[i], a = acc[at[i]];
      acc[at[i]] = v !== v || a !== a ? NaN : a < v ? v : a;  // std::max(a, v)
    }
  } else if (op === 'Min') {
    for (let i = 0; i < n; ++i) {
      const v = d[i], a = acc[at[i]];
      acc[at[i]] = v !== v || a !== a ? NaN : v < a ? v : a;  // std::min(a, v)
    }
  } else if (op === 'L1') {
    for (let i = 0; i < n; ++i) acc[at[i]] += Math.abs(d[i]);
  } else if (op === 'L2' || op === 'SumSquare') {
    for (let i = 0; i < n; ++i) acc[at[i]] += d[i] * d[i];
  } else if (op === 'LogSumExp') {
    const shift = new Float64Array(outN).fill(-Infinity);
    // std::max(shift, v): a NaN never becomes the shift (it reaches the sum through exp instead).
    for (let i = 0; i < n; ++i) if (shift[at[i]] < d[i]) shift[at[i]] = d[i];
    for (let o = 0; o < outN; ++o) if (shift[o] === Infinity || shift[o] === -Infinity) shift[o] = 0;
    for (let i = 0; i < n; ++i) acc[at[i]] += Math.exp(d[i] - shift[at[i]]);
    for (let o = 0; o < outN; ++o) acc[o] = Math.log(acc[o]) + shift[o];
  } else {
    fail(type, 'has no reduce kernel');
  }
  if (op === 'Mean') for (let o = 0; o < outN; ++o) acc[o] /= count;
  else if (op === 'L2') for (let o = 0; o < outN; ++o) acc[o] = Math.sqrt(acc[o]);
  else if (op === 'LogSum') for (let o = 0; o < outN; ++o) acc[o] = Math.log(acc[o]);
  return Float32Array.from(acc);
}
