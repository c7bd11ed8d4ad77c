// ops_linear.mjs — the wasm runtime's JavaScript operators whose core is a sum of products:
// Conv and FusedConv (direct convolution over 1 to 3 spatial dims with group, strides,
// dilations, pads, auto_pad: graph/kernels/conv_pool.cpp's conv), ConvTranspose (its
// conv_transpose), Gemm / FusedGemm and MatMul / FusedMatMul (graph/kernels/matmul.cpp: Gemm-13,
// numpy.matmul with batch broadcasting and 1-D operands). Products accumulate in double in the
// reference's order and are rounded once.
//
// The fused operators are webtune's (graph.hpp's fused-operator convention): the main inputs,
// then the bias [channels] if the epilogue has one, then the residual (the output's shape) if it
// has one; the attribute `epilogue` is the JSON object of codegen/epilogue.hpp's Epilogue
// ({"bias", "activation", "clip_min", "clip_max", "residual"}, every field optional), applied to
// each accumulator as Epilogue::apply does: v = acc (+ bias[channel]) (+ residual[i] before the
// activation), v = act(v), (+ residual[i] after it). The channel is the output's dim 1 for
// FusedConv and its last dimension (the column) for FusedGemm and FusedMatMul.

import { fail, floatAttr, floatInput, intAttr, intsAttr, nextIndex, product, sameShape, shapeText, stringAttr } from './ops_common.mjs';
import { poolGeometry } from './ops_pool.mjs';

// ---- the epilogue -------------------------------------------------------------------------

const EPILOGUE_FIELDS = ['bias', 'activation', 'clip_min', 'clip_max', 'residual'];
const ACTIVATIONS = ['none', 'relu', 'clip', 'hard_swish', 'silu', 'sigmoid', 'hard_sigmoid'];

/** The shortest decimal that reads back as the float32 `v` (Epilogue::suffix's numbers). */
function shortestFloat(v) {
  for (let digits = 1; digits <= 9; ++digits) {
    const text = Number(v.toPrecision(digits));
    if (Math.fround(text) === v) return String(text);
  }
  return String(v);
}

/**
 * The epilogue of a fused node from its attribute `epilogue` (Epilogue::from_json, then
 * validate()): unknown fields and values are refused; clip bounds are float32 and need the
 * activation clip; "after_activation" without an activation is "before_activation" (the same
 * values), as from_json normalises it.
 */
export function parseEpilogue(type, value) {
  const e = { bias: false, activation: 'none', clipMin: 0, clipMax: 6, residual: 'none' };
  if (value === undefined) return e;
  if (value === null || typeof value !== 'object' || Array.isArray(value)) fail(type, `epilogue ${JSON.stringify(value)} is not a JSON object`);
  for (const key of Object.keys(value)) {
    if (!EPILOGUE_FIELDS.includes(key)) fail(type, `epilogue: unknown field '${key}' (fields: ${EPILOGUE_FIELDS.join(', ')})`);
  }
  if (value.bias !== undefined) {
    if (typeof value.bias !== 'boolean') fail(type, "epilogue: 'bias' must be true or false");
    e.bias = value.bias;
  }
  for (const key of ['activation', 'residual']) {
    if (value[key] !== undefined && typeof value[key] !== 'string') fail(type, `epilogue: '${key}' must be a string`);
  }
  e.activation = value.activation ?? 'none';
  if (!ACTIVATIONS.includes(e.activation)) fail(type, `epilogue: activation '${e.activation}' is not one of ${ACTIVATIONS.join(', ')}`);
  if (e.activation === 'clip') {
    for (const key of ['clip_min', 'clip_max']) {
      if (value[key] !== undefined && typeof value[key] !== 'number') fail(type, `epilogue: '${key}' must be a number`);
    }
    e.clipMin = Math.fround(value.clip_min ?? 0);
    e.clipMax = Math.fround(value.clip_max ?? 6);
  } else if (value.clip_min !== undefined || value.clip_max !== undefined) {
    fail(type, "epilogue: clip_min / clip_max need activation 'clip'");
  }
  const residual = value.residual ?? 'none';
  if (residual === 'none' || residual === 'before_activation') e.residual = residual;
  else if (residual === 'after_activation') e.residual = e.activation === 'none' ? 'before_activation' : residual;
  else fail(type, `epilogue: residual '${residual}' is not one of none, before_activation, after_activation`);
  if (e.activation === 'clip' && !(Number.isFinite(e.clipMin) && Number.isFinite(e.clipMax) && e.clipMin <= e.clipMax)) {
    fail(type, `epilogue: clip(${shortestFloat(e.clipMin)}, ${shortestFloat(e.clipMax)}) needs finite bounds with min <= max`);
  }
  return e;
}

/** Epilogue::suffix(): "+bias+residual+relu", "+bias+clip(0,6)", "" for none. */
function epilogueSuffix(e) {
  let s = e.bias ? '+bias' : '';
  if (e.residual === 'before_activation') s += '+residual';
  if (e.activation === 'clip') s += `+clip(${shortestFloat(e.clipMin)},${shortestFloat(e.clipMax)})`;
  else if (e.activation !== 'none') s += `+${e.activation}`;
  if (e.residual === 'after_activation') s += '+residual';
  return s;
}

const extraInputs = (e) => (e.bias ? 1 : 0) + (e.residual !== 'none' ? 1 : 0);

/** Epilogue::apply in double; std::max / std::min's orders, so NaN and −0 come out as there. */
function applyEpilogue(e, v, bias, residual) {
  if (e.bias) v += bias;
  if (e.residual === 'before_activation') v += residual;
  if (e.activation === 'relu') {
    v = v < 0 ? 0 : v;
  } else if (e.activation === 'clip') {
    v = v < e.clipMin ? e.clipMin : v;
    v = e.clipMax < v ? e.clipMax : v;
  } else if (e.activation === 'hard_swish') {
    let gate = v + 3 < 0 ? 0 : v + 3;
    gate = 6 < gate ? 6 : gate;
    v = (v * gate) / 6;
  } else if (e.activation === 'silu') {
    v /= 1 + Math.exp(-v);
  } else if (e.activation === 'sigmoid') {
    v = 1 / (1 + Math.exp(-v));
  } else if (e.activation === 'hard_sigmoid') {
    let gate = v + 3 < 0 ? 0 : v + 3;
    v = (6 < gate ? 6 : gate) / 6;
  }
  if (e.residual === 'after_activation') v += residual;
  return v;
}

/** The epilogue of a fused node, checked against its input count (2 main inputs + extras). */
function fusedEpilogue(type, attrs, inputs) {
  const e = parseEpilogue(type, attrs.epilogue);
  if (inputs.length !== 2 + extraInputs(e)) fail(type, `has ${inputs.length} inputs; its epilogue '${epilogueSuffix(e)}' needs ${2 + extraInputs(e)}`);
  return e;
}

/** Binds the bias (input 2) and residual (input 2 or 3) of `e` (kernels' epilogue_inputs). */
function epilogueInputs(type, inputs, e, channels, outShape, note = '') {
  const bound = { bias: null, residual: null };
  if (e.bias) {
    const b = floatInput(type, inputs, 2, 'bias');
    if (!sameShape(b.shape, [channels])) fail(type, `bias has shape ${shapeText(b.shape)}, expected [${channels}]${note}`);
    bound.bias = b.data;
  }
  if (e.residual !== 'none') {
    const r = floatInput(type, inputs, e.bias ? 3 : 2, 'residual');
    if (!sameShape(r.shape, outShape)) fail(type, `residual has shape ${shapeText(r.shape)}, expected the output's ${shapeText(outShape)}`);
    bound.residual = r.data;
  }
  return bound;
}

// ---- Conv, FusedConv, ConvTranspose -------------------------------------------------------

/** The output positions o in [lo, hi) whose tap o·s + offset lies in [0, n). */
function tapRange(offset, s, n, out) {
  const lo = offset >= 0 ? 0 : Math.floor((-offset + s - 1) / s);
  const last = n - 1 - offset;
  const hi = last < 0 ? 0 : Math.min(out, Math.floor(last / s) + 1);
  return [Math.min(lo, hi), hi];
}

/** The checks Conv and ConvTranspose share on X, W, group and kernel_shape. */
function convOperands(type, attrs, inputs, layout) {
  const x = floatInput(type, inputs, 0, 'X');
  const w = floatInput(type, inputs, 1, 'W');
  if (x.shape.length < 3 || w.shape.length !== x.shape.length) {
    fail(type, `X ${shapeText(x.shape)} and W ${shapeText(w.shape)} must be [N, C, spatial...] and ${layout} of the same rank`);
  }
  const kernel = w.shape.slice(2);
  const kernelShape = intsAttr(type, attrs, 'kernel_shape', undefined);
  if (kernelShape !== undefined && !sameShape(kernelShape, kernel)) {
    fail(type, `kernel_shape ${shapeText(kernelShape)} differs from W's spatial dimensions ${shapeText(kernel)}`);
  }
  return { x, w, kernel, group: intAttr(type, attrs, 'group', 1) };
}

/** Conv (optional bias B, input 2) and FusedConv (its epilogue). */
export function conv(type, attrs, inputs) {
  const fused = type === 'FusedConv';
  if (fused) {
    // onnxruntime's com.microsoft FusedConv spells its activation so; this one is webtune's.
    for (const key of ['activation', 'activation_params']) {
      if (attrs[key] !== undefined) fail(type, `attribute '${key}' is onnxruntime's FusedConv; webtune's FusedConv takes its activation in 'epilogue'`);
    }
  }
  const { x, w, group, kernel } = convOperands(type, attrs, inputs, '[M, C/group, kernel...]');
  const [batch, channels] = x.shape;
  const filters = w.shape[0];
  if (!(group >= 1) || channels % group !== 0 || filters % group !== 0 || w.shape[1] * group !== channels) {
    fail(type, `group ${group} does not fit X ${shapeText(x.shape)} and W ${shapeText(w.shape)} (C and M must divide by group, W's dim 1 must be C/group)`);
  }
  if (x.shape.length > 5) fail(type, `the input has ${x.shape.length - 2} spatial dimensions; the reference executor runs 1-D, 2-D and 3-D windows`);
  const g = poolGeometry(type, attrs, x.shape.slice(2), { kernel, pool: false });
  const e = fused ? fusedEpilogue(type, attrs, inputs) : { ...parseEpilogue(type, undefined), bias: Boolean(inputs[2]) };
  const outShape = [batch, filters, ...g.out.slice(3 - g.rank)];
  const { bias, residual } = epilogueInputs(type, inputs, e, filters, outShape);

  const X = x.data;
  const W = w.data;
  const y = new Float32Array(product(outShape));
  const cg = channels / group;
  const mg = filters / group;
  // The geometry in locals (the loops below are the op's whole cost).
  const [I0, I1, I2] = g.in;
  const [K0, K1, K2] = g.k;
  const [S0, S1, S2] = g.s;
  const [D0, D1, D2] = g.d;
  const [P0, P1, P2] = g.pb;
  const [O0, O1, O2] = g.out;
  const inSize = I0 * I1 * I2;
  const outSize = O0 * O1 * O2;
  const taps = K0 * K1 * K2;
  // Per tap of each axis, the output positions [lo, hi) whose input position lies inside.
  const ranges = (K, D, P, S, I, O) => {
    const lo = new Int32Array(K);
    const hi = new Int32Array(K);
    for (let k = 0; k < K; ++k) [lo[k], hi[k]] = tapRange(k * D - P, S, I, O);
    return [lo, hi];
  };
  const [dLo, dHi] = ranges(K0, D0, P0, S0, I0, O0);
  const [hLo, hHi] = ranges(K1, D1, P1, S1, I1, O1);
  const [wLo, wHi] = ranges(K2, D2, P2, S2, I2, O2);
  // One output plane accumulates in double, over c, kd, kh, kw in the reference's order.
  const acc = new Float64Array(outSize);
  for (let n = 0; n < batch; ++n) {
    for (let m = 0; m < filters; ++m) {
      const grp = Math.floor(m / mg);
      acc.fill(0);
      for (let c = 0; c < cg; ++c) {
        const xc = (n * channels + grp * cg + c) * inSize;
        const wc = (m * cg + c) * taps;
        for (let kd = 0; kd < K0; ++kd) {
          const odLo = dLo[kd], odHi = dHi[kd];
          for (let kh = 0; kh < K1; ++kh) {
            const ohLo = hLo[kh], ohHi = hHi[kh];
            for (let kw = 0; kw < K2; ++kw) {
              const owLo = wLo[kw], owHi = wHi[kw];
              if (owLo >= owHi) continue;
              const wOff = kw * D2 - P2;
              const wv = W[wc + (kd * K1 + kh) * K2 + kw];
              for (let od = odLo; od < odHi; ++od) {
                const id = od * S0 + kd * D0 - P0;
                for (let oh = ohLo; oh < ohHi; ++oh) {
                  const ih = oh * S1 + kh * D1 - P1;
                  const xr = xc + (id * I1 + ih) * I2 + wOff;
                  const ar = (od * O1 + oh) * O2;
                  if (S2 === 1) {
                    for (let ow = owLo; ow < owHi; ++ow) acc[ar + ow] += wv * X[xr + ow];
                  } else {
                    for (let ow = owLo; ow < owHi; ++ow) acc[ar + ow] += wv * X[xr + ow * S2];
                  }
                }
              }
            }
          }
        }
      }
      const base = (n * filters + m) * outSize;
      const b = bias ? bias[m] : 0;
      for (let i = 0; i < outSize; ++i) y[base + i] = applyEpilogue(e, acc[i], b, residual ? residual[base + i] : 0);
    }
  }
  return y;
}

/**
 * ConvTranspose-11: X [N, C, spatial...], W [C, M/group, kernel...], optional B [M]. Each input
 * position i scatters x · w[k] to output position i·stride + k·dilation − pad_begin. With
 * output_shape (or auto_pad SAME_*, output in·stride) the total padding follows from it, the odd
 * one at the end for SAME_UPPER and at the beginning otherwise; an output larger than the
 * scatter reaches ends in zeros (bias only).
 */
export function convTranspose(type, attrs, inputs) {
  const { x, w, group, kernel } = convOperands(type, attrs, inputs, '[C, M/group, kernel...]');
  const r = x.shape.length - 2;
  if (r > 3) fail(type, `the input has ${r} spatial dimensions; the reference executor runs 1-D, 2-D and 3-D windows`);
  const [batch, channels] = x.shape;
  if (!(group >= 1) || channels % group !== 0 || w.shape[0] !== channels) {
    fail(type, `group ${group} does not fit X ${shapeText(x.shape)} and W ${shapeText(w.shape)} (C must divide by group, W's dim 0 must be C)`);
  }
  const mg = w.shape[1];
  const filters = mg * group;
  const cg = channels / group;
  const sized = (key, size, fill) => {
    const v = intsAttr(type, attrs, key, new Array(size).fill(fill));
    if (v.length !== size) fail(type, `attribute '${key}' ${shapeText(v)} has ${v.length} values; a ${r}-D window needs ${size}`);
    return v;
  };
  const strides = sized('strides', r, 1);
  const dilations = sized('dilations', r, 1);
  const outPad = sized('output_padding', r, 0);
  const pads = sized('pads', 2 * r, 0);
  let outShapeAttr = intsAttr(type, attrs, 'output_shape', []);
  if (outShapeAttr.length === r + 2) outShapeAttr = outShapeAttr.slice(2);  // some exporters give N and C too
  if (outShapeAttr.length && outShapeAttr.length !== r) fail(type, `output_shape ${shapeText(outShapeAttr)} does not have ${r} spatial dimensions`);
  const autoPad = stringAttr(type, attrs, 'auto_pad', 'NOTSET');
  if (!['NOTSET', 'VALID', 'SAME_UPPER', 'SAME_LOWER'].includes(autoPad)) fail(type, `auto_pad '${autoPad}' is not one of NOTSET, VALID, SAME_UPPER, SAME_LOWER`);

  const g = { in: [1, 1, 1], k: [1, 1, 1], s: [1, 1, 1], d: [1, 1, 1], pb: [0, 0, 0], out: [1, 1, 1] };
  const off = 3 - r;
  for (let j = 0; j < r; ++j) {
    const i = off + j;
    g.in[i] = x.shape[2 + j];
    g.k[i] = kernel[j];
    g.s[i] = strides[j];
    g.d[i] = dilations[j];
    if (g.k[i] < 1 || g.s[i] < 1 || g.d[i] < 1) fail(type, 'kernel, strides and dilations must be positive');
    const full = g.s[i] * (g.in[i] - 1) + outPad[j] + (g.k[i] - 1) * g.d[i] + 1;
    if (outShapeAttr.length || autoPad === 'SAME_UPPER' || autoPad === 'SAME_LOWER') {
      g.out[i] = outShapeAttr.length ? outShapeAttr[j] : g.in[i] * g.s[i];
      const total = full - g.out[i];
      if (total < 0) g.pb[i] = 0;  // the output reaches past the scatter: zeros at the end
      else g.pb[i] = autoPad === 'SAME_UPPER' ? Math.floor(total / 2) : total - Math.floor(total / 2);
    } else {
      const [pb, pe] = autoPad === 'NOTSET' ? [pads[j], pads[j + r]] : [0, 0];
      g.pb[i] = pb;
      g.out[i] = full - pb - pe;
    }
    if (g.out[i] < 1) fail(type, `the output would have a dimension of ${g.out[i]}`);
  }
  const outShape = [batch, filters, ...g.out.slice(off)];
  const { bias } = epilogueInputs(type, inputs, { bias: Boolean(inputs[2]), residual: 'none' }, filters, outShape);

  const X = x.data;
  const W = w.data;
  const y = new Float32Array(product(outShape));
  const inSize = g.in[0] * g.in[1] * g.in[2];
  const outSize = g.out[0] * g.out[1] * g.out[2];
  const taps = g.k[0] * g.k[1] * g.k[2];
  const acc = new Float64Array(outSize);
  for (let n = 0; n < batch; ++n) {
    for (let m = 0; m < filters; ++m) {
      const grp = Math.floor(m / mg);
      const ml = m % mg;
      acc.fill(bias ? bias[m] : 0);
      for (let c = 0; c < cg; ++c) {
        const ch = grp * cg + c;
        const xc = (n * channels + ch) * inSize;
        const wc = (ch * mg + ml) * taps;
        for (let id = 0; id < g.in[0]; ++id) {
          for (let ih = 0; ih < g.in[1]; ++ih) {
            for (let iw = 0; iw < g.in[2]; ++iw) {
              const xv = X[xc + (id * g.in[1] + ih) * g.in[2] + iw];
              for (let kd = 0; kd < g.k[0]; ++kd) {
                const od = id * g.s[0] + kd * g.d[0] - g.pb[0];
                if (od < 0 || od >= g.out[0]) continue;
                for (let kh = 0; kh < g.k[1]; ++kh) {
                  const oh = ih * g.s[1] + kh * g.d[1] - g.pb[1];
                  if (oh < 0 || oh >= g.out[1]) continue;
                  for (let kw = 0; kw < g.k[2]; ++kw) {
                    const ow = iw * g.s[2] + kw * g.d[2] - g.pb[2];
                    if (ow < 0 || ow >= g.out[2]) continue;
                    acc[(od * g.out[1] + oh) * g.out[2] + ow] += xv * W[wc + (kd * g.k[1] + kh) * g.k[2] + kw];
                  }
                }
              }
            }
          }
        }
      }
      y.set(acc, (n * filters + m) * outSize);
    }
  }
  return y;
}

// ---- Gemm, FusedGemm, MatMul, FusedMatMul --------------------------------------------------

/** y[i] = epilogue(acc[i]) with the channel the output's last dimension (matmul.cpp's finish_fused). */
function finishFused(type, attrs, inputs, acc, outShape) {
  const e = fusedEpilogue(type, attrs, inputs);
  const channels = outShape.length ? outShape[outShape.length - 1] : 1;
  const { bias, residual } = epilogueInputs(type, inputs, e, channels, outShape, " (the output's last dimension)");
  const y = new Float32Array(acc.length);
  for (let i = 0; i < acc.length; ++i) y[i] = applyEpilogue(e, acc[i], bias ? bias[i % channels] : 0, residual ? residual[i] : 0);
  return y;
}

/** Gemm-13: alpha · A' · B' + beta · C (C broadcast to [M, N]); FusedGemm: A' · B' + epilogue. */
export function gemm(type, attrs, inputs) {
  const fused = type === 'FusedGemm';
  const a = floatInput(type, inputs, 0, 'A');
  const b = floatInput(type, inputs, 1, 'B');
  if (a.shape.length !== 2 || b.shape.length !== 2) fail(type, `A ${shapeText(a.shape)} and B ${shapeText(b.shape)} must be matrices`);
  const transA = intAttr(type, attrs, 'transA', 0);
  const transB = intAttr(type, attrs, 'transB', 0);
  if ((transA !== 0 && transA !== 1) || (transB !== 0 && transB !== 1)) fail(type, 'transA / transB must be 0 or 1');
  const alpha = floatAttr(type, attrs, 'alpha', 1);
  const beta = floatAttr(type, attrs, 'beta', 1);
  const M = transA ? a.shape[1] : a.shape[0];
  const K = transA ? a.shape[0] : a.shape[1];
  const N = transB ? b.shape[0] : b.shape[1];
  if ((transB ? b.shape[1] : b.shape[0]) !== K) {
    fail(type, `A ${shapeText(a.shape)}${transA ? ' (transposed)' : ''} and B ${shapeText(b.shape)}${transB ? ' (transposed)' : ''} have different inner dimensions`);
  }
  const A = a.data;
  const B = b.data;
  // Element strides of A' [M, K] and B' [K, N] over the stored matrices.
  const [am, ak] = transA ? [1, M] : [K, 1];
  const [bk, bn] = transB ? [1, K] : [N, 1];
  const acc = new Float64Array(M * N);
  for (let m = 0; m < M; ++m) {
    const row = m * N;
    for (let k = 0; k < K; ++k) {
      const av = A[m * am + k * ak];
      const bRow = k * bk;
      for (let n = 0; n < N; ++n) acc[row + n] += av * B[bRow + n * bn];
    }
  }
  const outShape = [M, N];
  if (fused) {
    // The fusion pass moved C into the epilogue's bias and scaled nothing (COMMON convention).
    if (alpha !== 1 || beta !== 1) fail(type, 'alpha and beta must be 1 in a fused Gemm (the epilogue adds its bias unscaled)');
    return finishFused(type, attrs, inputs, acc, outShape);
  }
  const c = inputs[2];
  const cStrides = [0, 0];  // C's strides over [M, N]; 0 where broadcast
  if (c) {
    if (Array.isArray(c.ints)) fail(type, 'C is int64, not float32');
    const bad = () => fail(type, `C has shape ${shapeText(c.shape)}; it must broadcast to [M, N] = ${shapeText(outShape)}`);
    if (c.shape.length > 2) bad();
    const off = 2 - c.shape.length;
    let stride = 1;
    for (let i = 1; i >= off; --i) {
      const dim = c.shape[i - off];
      if (dim !== 1 && dim !== outShape[i]) bad();
      cStrides[i] = dim === 1 ? 0 : stride;
      stride *= dim;
    }
  }
  const y = new Float32Array(M * N);
  for (let m = 0; m < M; ++m) {
    for (let n = 0; n < N; ++n) {
      let v = alpha * acc[m * N + n];
      if (c) v += beta * c.data[m * cStrides[0] + n * cStrides[1]];
      y[m * N + n] = v;
    }
  }
  return y;
}

/** MatMul-13 (numpy.matmul) and FusedMatMul (its product + epilogue). */
export function matmul(type, attrs, inputs) {
  const fused = type === 'FusedMatMul';
  const a = floatInput(type, inputs, 0, 'A');
  const b = floatInput(type, inputs, 1, 'B');
  if (!a.shape.length || !b.shape.length) fail(type, "MatMul's inputs must have rank 1 or more");
  // A 1-D A is [1, K] and a 1-D B is [K, 1]; the added dimension is removed from the result.
  // Batch dimensions (all but the last two) broadcast.
  const as = a.shape.length === 1 ? [1, ...a.shape] : a.shape;
  const bs = b.shape.length === 1 ? [...b.shape, 1] : b.shape;
  const M = as[as.length - 2];
  const K = as[as.length - 1];
  const N = bs[bs.length - 1];
  if (bs[bs.length - 2] !== K) fail(type, `A ${shapeText(a.shape)} and B ${shapeText(b.shape)} have different inner dimensions`);
  const batchRank = Math.max(as.length, bs.length) - 2;
  const batch = new Array(batchRank);
  const aStrides = new Array(batchRank).fill(0);
  const bStrides = new Array(batchRank).fill(0);
  let aStride = M * K;
  let bStride = K * N;
  for (let i = batchRank - 1; i >= 0; --i) {
    const ai = i - (batchRank - (as.length - 2));
    const bi = i - (batchRank - (bs.length - 2));
    const ad = ai >= 0 ? as[ai] : 1;
    const bd = bi >= 0 ? bs[bi] : 1;
    if (ad !== bd && ad !== 1 && bd !== 1) fail(type, `the batch dimensions of A ${shapeText(a.shape)} and B ${shapeText(b.shape)} do not broadcast`);
    batch[i] = Math.max(ad, bd);
    if (ad !== 1) aStrides[i] = aStride;
    if (bd !== 1) bStrides[i] = bStride;
    aStride *= ad;
    bStride *= bd;
  }
  const batches = product(batch);
  const A = a.data;
  const B = b.data;
  const acc = new Float64Array(batches * M * N);
  const index = new Array(batchRank).fill(0);
  for (let t = 0; t < batches; ++t) {
    let aOff = 0;
    let bOff = 0;
    for (let i = 0; i < batchRank; ++i) {
      aOff += index[i] * aStrides[i];
      bOff += index[i] * bStrides[i];
    }
    const accOff = t * M * N;
    for (let m = 0; m < M; ++m) {
      const row = accOff + m * N;
      for (let k = 0; k < K; ++k) {
        const av = A[aOff + m * K + k];
        const bRow = bOff + k * N;
        for (let n = 0; n < N; ++n) acc[row + n] += av * B[bRow + n];
      }
    }
    nextIndex(index, batch);
  }
  const outShape = [...batch];
  if (a.shape.length > 1) outShape.push(M);
  if (b.shape.length > 1) outShape.push(N);
  if (fused) return finishFused(type, attrs, inputs, acc, outShape);
  return Float32Array.from(acc);
}

