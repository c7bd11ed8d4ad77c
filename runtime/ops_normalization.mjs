// ops_normalization.mjs — the wasm runtime's JavaScript operators that normalise over some axes:
// Softmax and LogSoftmax (before opset 13 the input is coerced to 2-D at `axis`, default 1; from
// 13 on along `axis`, default -1; the maximum subtracted first), BatchNormalization (inference:
// `epsilon`; training_mode 1 and spatial 0 refused), InstanceNormalization (per (n, c) over the
// spatial dims) and LayerNormalization (`axis` -1, `epsilon` 1e-5, `stash_type` 1; Scale and the
// optional B broadcast to X; output 0 only, since a package step has one output). Semantics and
// refusals are graph/kernels/normalization.cpp's: everything in double, rounded once.

import { broadcastOffsets, broadcastShape, checkedAxis, fail, floatAttr, floatInput, intAttr, normalizeAxis, product, sameShape, shapeText } from './ops_common.mjs';

/** Softmax and LogSoftmax. */
export function softmax(type, attrs, inputs, opset) {
  const x = floatInput(type, inputs, 0, 'input');
  const log = type === 'LogSoftmax';
  const rank = x.shape.length;
  const coerce2d = opset < 13;
  const axis = normalizeAxis(type, attrs.axis ?? (coerce2d ? 1 : -1), rank);
  // Softmax-13 normalises along `axis`; Softmax-1/-11 flattens to 2-D [prod(d[:axis]),
  // prod(d[axis:])] and normalises each row.
  const outer = product(x.shape, 0, axis);
  const length = coerce2d ? product(x.shape, axis) : x.shape[axis];
  const inner = coerce2d ? 1 : product(x.shape, axis + 1);
  const y = new Float32Array(x.data.length);
  for (let o = 0; o < outer; ++o) {
    for (let k = 0; k < inner; ++k) {
      const base = o * length * inner + k;
      let max = -Infinity;
      for (let l = 0; l < length; ++l) max = Math.max(max, x.data[base + l * inner]);
      let sum = 0;
      for (let l = 0; l < length; ++l) sum += Math.exp(x.data[base + l * inner] - max);
      if (log) {
        const logSum = Math.log(sum);
        for (let l = 0; l < length; ++l) y[base + l * inner] = x.data[base + l * inner] - max - logSum;
      } else {
        for (let l = 0; l < length; ++l) y[base + l * inner] = Math.exp(x.data[base + l * inner] - max) / sum;
      }
    }
  }
  return y;
}

/** BatchNormalization in inference: y = (x − mean) / sqrt(var + ε) · scale + B per channel. */
export function batchNormalization(type, attrs, inputs) {
  if (intAttr(type, attrs, 'training_mode', 0) !== 0) fail(type, 'training_mode 1 is not run (the reference executor runs inference)');
  if (intAttr(type, attrs, 'spatial', 1) !== 1) fail(type, 'spatial 0 (per-element statistics, opset < 9) is not supported');
  const x = floatInput(type, inputs, 0, 'X');
  if (x.shape.length < 2) fail(type, `X has shape ${shapeText(x.shape)}; it needs [N, C, ...]`);
  const channels = x.shape[1];
  const params = ['scale', 'B', 'input_mean', 'input_var'].map((name, i) => {
    const p = floatInput(type, inputs, i + 1, name);
    if (!sameShape(p.shape, [channels])) fail(type, `${name} has shape ${shapeText(p.shape)}, expected [${channels}]`);
    return p.data;
  });
  const epsilon = floatAttr(type, attrs, 'epsilon', 1e-5);
  const size = product(x.shape, 2);
  const y = new Float32Array(x.data.length);
  for (let n = 0; n < x.shape[0]; ++n) {
    for (let c = 0; c < channels; ++c) {
      const scale = params[0][c] / Math.sqrt(params[3][c] + epsilon);
      const shift = params[1][c] - params[2][c] * scale;
      const base = (n * channels + c) * size;
      for (let i = 0; i < size; ++i) y[base + i] = x.data[base + i] * scale + shift;
    }
  }
  return y;
}

/** InstanceNormalization: each (n, c) plane normalised by its own mean and variance. */
export function instanceNormalization(type, attrs, inputs) {
  const x = floatInput(type, inputs, 0, 'input');
  if (x.shape.length < 3) fail(type, `input has shape ${shapeText(x.shape)}; it needs [N, C, spatial...]`);
  const channels = x.shape[1];
  const scale = floatInput(type, inputs, 1, 'scale');
  const bias = floatInput(type, inputs, 2, 'B');
  if (!sameShape(scale.shape, [channels]) || !sameShape(bias.shape, scale.shape)) {
    fail(type, `scale ${shapeText(scale.shape)} and B ${shapeText(bias.shape)} must be [${channels}]`);
  }
  const epsilon = floatAttr(type, attrs, 'epsilon', 1e-5);
  const size = product(x.shape, 2);
  const y = new Float32Array(x.data.length);
  for (let p = 0; p < x.shape[0] * channels; ++p) {
    const base = p * size;
    let mean = 0;
    for (let i = 0; i < size; ++i) mean += x.data[base + i];
    mean /= size;
    let variance = 0;
    for (let i = 0; i < size; ++i) variance += (x.data[base + i] - mean) * (x.data[base + i] - mean);
    variance /= size;
    const c = p % channels;
    const k = scale.data[c] / Math.sqrt(variance + epsilon);
    for (let i = 0; i < size; ++i) y[base + i] = (x.data[base + i] - mean) * k + bias.data[c];
  }
  return y;
}

/**
 * LayerNormalization over the axes from `axis` on. The optional outputs Mean and InvStdDev are
 * not produced: a package's op step has one output (model.mjs), output 0.
 */
export function layerNormalization(type, attrs, inputs) {
  const x = floatInput(type, inputs, 0, 'X');
  const scale = floatInput(type, inputs, 1, 'Scale');
  const bias = inputs[2];
  if (bias && Array.isArray(bias.ints)) fail(type, 'B must be float32');
  const stash = intAttr(type, attrs, 'stash_type', 1);
  if (stash !== 1) fail(type, `stash_type ${stash} is not 1 (float32; the executor computes in double anyway)`);
  const axis = checkedAxis(type, intAttr(type, attrs, 'axis', -1), x.shape.length, 'axis');
  const epsilon = floatAttr(type, attrs, 'epsilon', 1e-5);
  const outer = product(x.shape, 0, axis);
  const size = product(x.shape, axis);
  // Scale and B broadcast (unidirectionally) to X; in practice they are X.shape[axis:].
  for (const p of [scale, bias]) {
    if (p && !sameShape(broadcastShape(type, x.shape, p.shape), x.shape)) {
      fail(type, `Scale / B ${shapeText(p.shape)} does not broadcast to X ${shapeText(x.shape)}`);
    }
  }
  const mean = new Float64Array(outer);
  const invStd = new Float64Array(outer);
  for (let r = 0; r < outer; ++r) {
    const base = r * size;
    let m = 0;
    for (let i = 0; i < size; ++i) m += x.data[base + i];
    m /= size;
    let variance = 0;
    for (let i = 0; i < size; ++i) variance += (x.data[base + i] - m) * (x.data[base + i] - m);
    variance /= size;
    mean[r] = m;
    invStd[r] = 1 / Math.sqrt(variance + epsilon);
  }
  const scaleAt = broadcastOffsets(scale.shape, x.shape);
  const biasAt = bias ? broadcastOffsets(bias.shape, x.shape) : null;
  const y = new Float32Array(x.data.length);
  for (let o = 0; o < y.length; ++o) {
    const r = Math.floor(o / size);
    let v = (x.data[o] - mean[r]) * invStd[r] * scale.data[scaleAt[o]];
    if (bias) v += bias.data[biasAt[o]];
    y[o] = v;
  }
  return y;
}
