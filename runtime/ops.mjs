// ops.mjs — the operators a wasm model package runs in JavaScript (model.mjs; docs/package.md:
// an op step with "kernel": null and "op": {"type", "attributes", "opset"}): the operators no
// tuned kernel covers. This file is the entry: one dispatch table, OPS, from op type to its
// body in a file per concept —
//   ops_pool.mjs           MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool (and the
//                          window geometry Conv shares);
//   ops_elementwise.mjs    maps of one value (Relu ... Gelu, Abs, Neg, Sign), Clip, PRelu, Add /
//                          Sub / Mul / Div / Pow with numpy broadcasting, Max / Min / Sum / Mean;
//   ops_normalization.mjs  Softmax, LogSoftmax, BatchNormalization, InstanceNormalization,
//                          LayerNormalization;
//   ops_reduce.mjs         the ten Reduce* ops;
//   ops_index.mjs          Gather, Slice, Pad;
//   ops_shape.mjs          Transpose, Concat, Expand, Tile and the aliases (a copy);
//   ops_resize.mjs         Resize, Upsample;
//   ops_linear.mjs         Conv, FusedConv, ConvTranspose, Gemm, FusedGemm, MatMul, FusedMatMul;
//   ops_common.mjs         what they share (errors, shapes, broadcasting, attribute reading).
// Semantics are the CPU reference executor's (graph/kernels/*.cpp, after the ONNX operator
// docs), attribute by attribute, with its refusals; accumulation in double as there.
//
// runOp(type, attributes, inputs, outShape, opset) → Float32Array; `inputs` are, in the node's
// input order, {data: Float32Array, shape: number[]}, {data, ints, shape: [n]} for an int64
// constant, or undefined for an omitted optional input. Throws an Error whose message starts
// with the op type for an op type or an attribute it does not handle, or shapes that do not fit.

import { product, fail } from './ops_common.mjs';
import { binary, map, MAP_TYPES, pow, prelu, unary, variadic } from './ops_elementwise.mjs';
import { gather, pad, slice } from './ops_index.mjs';
import { conv, convTranspose, gemm, matmul } from './ops_linear.mjs';
import { batchNormalization, instanceNormalization, layerNormalization, softmax } from './ops_normalization.mjs';
import { globalAveragePool, globalMaxPool, pool } from './ops_pool.mjs';
import { reduce, REDUCE_TYPES } from './ops_reduce.mjs';
import { resize } from './ops_resize.mjs';
import { alias, concat, dropout, expand, tile, transpose } from './ops_shape.mjs';

export { broadcastShape } from './ops_common.mjs';
export { poolGeometry } from './ops_pool.mjs';

const binaryOp = (type) => (attrs, inputs) => {
  if (!inputs[1]) fail(type, 'needs two inputs');
  return binary(type, inputs[0], inputs[1]);
};
const activation = (type) => (attrs, inputs) => unary(type, attrs, inputs[0], inputs);
const mapOp = (type) => (attrs, inputs) => map(type, attrs, inputs);
const reduceOp = (type) => (attrs, inputs) => reduce(type, attrs, inputs);
const aliasOp = (type) => (attrs, inputs) => alias(type, inputs[0]);

/** Op type → (attrs, inputs, outShape, opset) → Float32Array. */
const OPS = {
  MaxPool: (attrs, inputs, outShape) => {
    // Only Y is produced (a package step has one output); storage_order only orders the
    // Indices output, so 1 runs as 0 does (as in the reference); other values are refused.
    const storageOrder = attrs.storage_order ?? 0;
    if (storageOrder !== 0 && storageOrder !== 1) fail('MaxPool', `storage_order ${storageOrder} is not 0 or 1`);
    return pool('MaxPool', attrs, inputs[0], outShape);
  },
  AveragePool: (attrs, inputs, outShape) => pool('AveragePool', attrs, inputs[0], outShape),
  GlobalAveragePool: (attrs, inputs) => globalAveragePool('GlobalAveragePool', inputs[0]),
  GlobalMaxPool: (attrs, inputs) => globalMaxPool('GlobalMaxPool', inputs[0]),

  Add: binaryOp('Add'),
  Sub: binaryOp('Sub'),
  Mul: binaryOp('Mul'),
  Div: binaryOp('Div'),
  Pow: (attrs, inputs) => pow('Pow', inputs),
  Max: (attrs, inputs) => variadic('Max', inputs),
  Min: (attrs, inputs) => variadic('Min', inputs),
  Sum: (attrs, inputs) => variadic('Sum', inputs),
  Mean: (attrs, inputs) => variadic('Mean', inputs),
  PRelu: (attrs, inputs) => prelu('PRelu', inputs),
  Relu: activation('Relu'),
  Clip: activation('Clip'),
  Sigmoid: activation('Sigmoid'),
  HardSigmoid: activation('HardSigmoid'),
  HardSwish: activation('HardSwish'),
  ...Object.fromEntries(MAP_TYPES.map((type) => [type, mapOp(type)])),

  Softmax: (attrs, inputs, outShape, opset) => softmax('Softmax', attrs, inputs, opset),
  LogSoftmax: (attrs, inputs, outShape, opset) => softmax('LogSoftmax', attrs, inputs, opset),
  BatchNormalization: (attrs, inputs) => batchNormalization('BatchNormalization', attrs, inputs),
  InstanceNormalization: (attrs, inputs) => instanceNormalization('InstanceNormalization', attrs, inputs),
  LayerNormalization: (attrs, inputs) => layerNormalization('LayerNormalization', attrs, inputs),

  ...Object.fromEntries(REDUCE_TYPES.map((type) => [type, reduceOp(type)])),

  Gather: (attrs, inputs) => gather('Gather', attrs, inputs),
  Slice: (attrs, inputs) => slice('Slice', attrs, inputs),
  Pad: (attrs, inputs) => pad('Pad', attrs, inputs),

  Concat: (attrs, inputs) => concat('Concat', attrs, inputs),
  Transpose: (attrs, inputs) => transpose('Transpose', attrs, inputs[0]),
  Expand: (attrs, inputs) => expand('Expand', inputs),
  Tile: (attrs, inputs) => tile('Tile', inputs),
  Reshape: aliasOp('Reshape'),
  Flatten: aliasOp('Flatten'),
  Identity: aliasOp('Identity'),
  Dropout: (attrs, inputs) => dropout('Dropout', inputs),
  Squeeze: aliasOp('Squeeze'),
  Unsqueeze: aliasOp('Unsqueeze'),

  Resize: (attrs, inputs, outShape, opset) => resize('Resize', attrs, inputs, opset),
  Upsample: (attrs, inputs, outShape, opset) => resize('Upsample', attrs, inputs, opset),

  Conv: (attrs, inputs) => conv('Conv', attrs, inputs),
  FusedConv: (attrs, inputs) => conv('FusedConv', attrs, inputs),
  ConvTranspose: (attrs, inputs) => convTranspose('ConvTranspose', attrs, inputs),
  Gemm: (attrs, inputs) => gemm('Gemm', attrs, inputs),
  FusedGemm: (attrs, inputs) => gemm('FusedGemm', attrs, inputs),
  MatMul: (attrs, inputs) => matmul('MatMul', attrs, inputs),
  FusedMatMul: (attrs, inputs) => matmul('FusedMatMul', attrs, inputs),
};

/** The op types runOp runs, sorted. */
export const OP_TYPES = Object.freeze(Object.keys(OPS).sort());

/**
 * Runs one operator: `type` (ONNX op type), `attributes` (name → number, string, array or, for
 * the fused ops' epilogue, object), `inputs` (node order; see the file comment), `outShape`
 * (the output value's shape: what the op computes must have its element count), `opset` (the
 * model's default-domain opset: Softmax's and LogSoftmax's axis rule, Resize-10's legacy form;
 * 13 unless given). Returns the row-major output.
 */
export function runOp(type, attributes, inputs, outShape, opset = 13) {
  const attrs = attributes || {};
  if (!Object.hasOwn(OPS, type)) fail(type, `is not an operator the wasm runtime runs (it runs ${OP_TYPES.join(', ')})`);
  if (!inputs[0]) fail(type, 'has no input');
  const y = OPS[type](attrs, inputs, outShape, opset);
  if (outShape && y.length !== product(outShape)) {
    fail(type, `computes ${y.length} elements, its output value [${outShape}] holds ${product(outShape)}`);
  }
  return y;
}
