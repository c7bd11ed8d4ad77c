// ops.mjs — the operators a wasm model package runs in JavaScript (model.mjs; docs/package.md:
// an op step with "kernel": null and "op": {"type", "attributes"}): MaxPool, AveragePool,
// GlobalAveragePool, Add / Sub / Mul / Div with numpy broadcasting, Relu, Clip, Sigmoid,
// HardSigmoid, HardSwish, Concat, Softmax, Transpose, and the shape-only Reshape, Flatten,
// Identity, Dropout, Squeeze, Unsqueeze (a copy). Semantics are the CPU reference executor's
// (graph/kernels/*.cpp, after the ONNX operator docs): window geometry with pads, auto_pad,
// dilations and ceil_mode as conv_pool.cpp computes it, accumulation in double as there.
//
// runOp(type, attributes, inputs, outShape) → Float32Array; `inputs` are {data: Float32Array,
// shape: number[]} in the node's input order. Throws an Error naming the op for an op type or
// an attribute it does not handle, or shapes that do not fit.

const product = (dims, from = 0, to = dims.length) => {
  let p = 1;
  for (let i = from; i < to; ++i) p *= dims[i];
  return p;
};

function fail(type, message) {
  throw new Error(`${type}: ${message}`);
}

function normalizeAxis(type, axis, rank, extra = 0) {
  const a = axis < 0 ? axis + rank + extra : axis;
  if (!Number.isInteger(a) || a < 0 || a >= rank + extra) fail(type, `axis ${axis} is outside the input's rank ${rank}`);
  return a;
}

/** The window geometry of a pool over spatial dims `inSpatial` (conv_pool.cpp geometry()). */
export function poolGeometry(type, attrs, inSpatial) {
  const r = inSpatial.length;
  if (r < 1 || r > 3) fail(type, `the input has ${r} spatial dimensions; pools run 1-D to 3-D windows`);
  const kernel = attrs.kernel_shape;
  if (!Array.isArray(kernel) || kernel.length !== r) fail(type, `kernel_shape ${JSON.stringify(kernel)} does not match the input's ${r} spatial dimensions`);
  const get = (key, size, fill) => {
    const v = attrs[key] ?? new Array(size).fill(fill);
    if (!Array.isArray(v) || v.length !== size) fail(type, `attribute '${key}' ${JSON.stringify(v)} needs ${size} values`);
    return v;
  };
  const strides = get('strides', r, 1);
  const dilations = get('dilations', r, 1);
  const pads = get('pads', 2 * r, 0);
  const autoPad = attrs.auto_pad ?? 'NOTSET';
  const ceilMode = attrs.ceil_mode ?? 0;
  const g = { rank: r, in: [1, 1, 1], k: [1, 1, 1], s: [1, 1, 1], d: [1, 1, 1], pb: [0, 0, 0], pe: [0, 0, 0], out: [1, 1, 1] };
  const off = 3 - r;
  for (let j = 0; j < r; ++j) {
    const i = off + j;
    g.in[i] = inSpatial[j];
    g.k[i] = kernel[j];
    g.s[i] = strides[j];
    g.d[i] = dilations[j];
    if (g.k[i] < 1 || g.s[i] < 1 || g.d[i] < 1) fail(type, 'kernel, stride and dilation must be positive');
    const effK = (g.k[i] - 1) * g.d[i] + 1;
    if (autoPad === 'NOTSET') {
      g.pb[i] = pads[j];
      g.pe[i] = pads[j + r];
      const span = g.in[i] + g.pb[i] + g.pe[i] - effK;
      if (span < 0) fail(type, 'the window is larger than the padded input');
      if (ceilMode) {
        g.out[i] = Math.floor((span + g.s[i] - 1) / g.s[i]) + 1;
        if ((g.out[i] - 1) * g.s[i] >= g.in[i] + g.pb[i]) --g.out[i];
      } else {
        g.out[i] = Math.floor(span / g.s[i]) + 1;
      }
    } else if (autoPad === 'VALID') {
      if (g.in[i] < effK) fail(type, 'the window is larger than the input with auto_pad VALID');
      g.out[i] = Math.floor((g.in[i] - effK) / g.s[i]) + 1;
    } else if (autoPad === 'SAME_UPPER' || autoPad === 'SAME_LOWER') {
      g.out[i] = Math.ceil(g.in[i] / g.s[i]);
      const total = Math.max(0, (g.out[i] - 1) * g.s[i] + effK - g.in[i]);
      const small = Math.floor(total / 2);
      g.pb[i] = autoPad === 'SAME_UPPER' ? small : total - small;
      g.pe[i] = total - g.pb[i];
    } else {
      fail(type, `auto_pad '${autoPad}' is not one of NOTSET, VALID, SAME_UPPER, SAME_LOWER`);
    }
  }
  return g;
}

/**
 * MaxPool over 2-D windows without dilation (every CNN's stem pool): per output the window's
 * rows and columns are clamped to the input once, so the inner loops read with plain indices.
 * The same values as pool() (the first maximum wins; a window with no input element gives
 * −Infinity) at a tenth of its time: ResNet-18's 3×3 stride-2 pool over 64×112×112 took 21.5 ms
 * in pool() in headless Chromium (2026-11-27), about a quarter of the model.
 */
function maxPool2d(g, data, planes) {
  const [, H, W] = g.in;
  const [, OH, OW] = g.out;
  const [, KH, KW] = g.k;
  const [, SH, SW] = g.s;
  const [, PH, PW] = g.pb;
  const y = new Float32Array(planes * OH * OW);
  let o = 0;
  for (let p = 0; p < planes; ++p) {
    const base = p * H * W;
    for (let oh = 0; oh < OH; ++oh) {
      const hStart = oh * SH - PH;
      const h0 = Math.max(hStart, 0);
      const h1 = Math.min(hStart + KH, H);
      for (let ow = 0; ow < OW; ++ow, ++o) {
        const wStart = ow * SW - PW;
        const w0 = Math.max(wStart, 0);
        const w1 = Math.min(wStart + KW, W);
        if (h0 >= h1 || w0 >= w1) {
          y[o] = -Infinity;
          continue;
        }
        const first = base + h0 * W + w0;
        let best = data[first];
        if (h1 - h0 === 3 && w1 - w0 === 3) {
          // The 3×3 window of every CNN's stem pool, whole: straight-line code.
          let v;
          const r1 = first + W, r2 = r1 + W;
          if ((v = data[first + 1]) > best) best = v;
          if ((v = data[first + 2]) > best) best = v;
          if ((v = data[r1]) > best) best = v;
          if ((v = data[r1 + 1]) > best) best = v;
          if ((v = data[r1 + 2]) > best) best = v;
          if ((v = data[r2]) > best) best = v;
          if ((v = data[r2 + 1]) > best) best = v;
          if ((v = data[r2 + 2]) > best) best = v;
        } else {
          for (let ih = h0; ih < h1; ++ih) {
            const row = base + ih * W;
            for (let iw = ih === h0 ? w0 + 1 : w0; iw < w1; ++iw) {
              const v = data[row + iw];
              if (v > best) best = v;
            }
          }
        }
        y[o] = best;
      }
    }
  }
  return y;
}

function pool(type, attrs, x, outShape) {
  if (x.shape.length < 3) fail(type, `X has shape [${x.shape}]; a pool needs [N, C, spatial...]`);
  const g = poolGeometry(type, attrs, x.shape.slice(2));
  const expected = [x.shape[0], x.shape[1], ...g.out.slice(3 - g.rank)];
  if (outShape && JSON.stringify(expected) !== JSON.stringify(outShape)) {
    fail(type, `computes an output of [${expected}], the package says [${outShape}]`);
  }
  const planes = x.shape[0] * x.shape[1];
  if (type === 'MaxPool' && g.rank === 2 && g.d[1] === 1 && g.d[2] === 1) return maxPool2d(g, x.data, planes);
  const inSize = g.in[0] * g.in[1] * g.in[2];
  const outSize = g.out[0] * g.out[1] * g.out[2];
  const y = new Float32Array(planes * outSize);
  const max = type === 'MaxPool';
  const includePad = Boolean(attrs.count_include_pad);
  const counted = (pos, i) => (includePad ? pos >= -g.pb[i] && pos < g.in[i] + g.pe[i] : pos >= 0 && pos < g.in[i]);
  const inside = (pos, i) => pos >= 0 && pos < g.in[i];
  for (let p = 0; p < planes; ++p) {
    const base = p * inSize;
    let o = p * outSize;
    for (let od = 0; od < g.out[0]; ++od) {
      for (let oh = 0; oh < g.out[1]; ++oh) {
        for (let ow = 0; ow < g.out[2]; ++ow, ++o) {
          let best = -Infinity;
          let found = false;
          let sum = 0;
          let count = 0;
          for (let kd = 0; kd < g.k[0]; ++kd) {
            const id = od * g.s[0] - g.pb[0] + kd * g.d[0];
            if (max ? !inside(id, 0) : !counted(id, 0)) continue;
            for (let kh = 0; kh < g.k[1]; ++kh) {
              const ih = oh * g.s[1] - g.pb[1] + kh * g.d[1];
              if (max ? !inside(ih, 1) : !counted(ih, 1)) continue;
              for (let kw = 0; kw < g.k[2]; ++kw) {
                const iw = ow * g.s[2] - g.pb[2] + kw * g.d[2];
                if (max ? !inside(iw, 2) : !counted(iw, 2)) continue;
                const real = inside(id, 0) && inside(ih, 1) && inside(iw, 2);
                if (max) {
                  const v = x.data[base + (id * g.in[1] + ih) * g.in[2] + iw];
                  // The first maximum wins (as the reference and onnxruntime do).
                  if (!found || v > best) {
                    best = v;
                    found = true;
                  }
                } else {
                  ++count;
                  if (real) sum += x.data[base + (id * g.in[1] + ih) * g.in[2] + iw];
                }
              }
            }
          }
          y[o] = max ? best : (count ? sum / count : 0);
        }
      }
    }
  }
  return y;
}

function globalAveragePool(type, x) {
  if (x.shape.length < 3) fail(type, `X has shape [${x.shape}]; a pool needs [N, C, spatial...]`);
  const planes = x.shape[0] * x.shape[1];
  const size = product(x.shape, 2);
  const y = new Float32Array(planes);
  for (let p = 0; p < planes; ++p) {
    let sum = 0;
    for (let i = 0; i < size; ++i) sum += x.data[p * size + i];
    y[p] = sum / size;
  }
  return y;
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

function broadcastStrides(shape, out) {
  const strides = new Array(out.length).fill(0);
  let stride = 1;
  for (let i = shape.length - 1; i >= 0; --i) {
    strides[i + out.length - shape.length] = shape[i] === 1 ? 0 : stride;
    stride *= shape[i];
  }
  return strides;
}

const BINARY = {
  Add: (p, q) => p + q,
  Sub: (p, q) => p - q,
  Mul: (p, q) => p * q,
  Div: (p, q) => p / q,
};

function binary(type, a, b) {
  const op = BINARY[type];
  const shape = broadcastShape(type, a.shape, b.shape);
  const n = product(shape);
  const y = new Float32Array(n);
  if (n === 0) return y;
  if (a.data.length === n && b.data.length === n) {  // same shape: no index arithmetic
    for (let i = 0; i < n; ++i) y[i] = op(a.data[i], b.data[i]);
    return y;
  }
  if (shape.length === 0) {
    y[0] = op(a.data[0], b.data[0]);
    return y;
  }
  const sa = broadcastStrides(a.shape, shape);
  const sb = broadcastStrides(b.shape, shape);
  const rank = shape.length;
  const inner = shape[rank - 1];
  const ia = sa[rank - 1];
  const ib = sb[rank - 1];
  const index = new Array(rank - 1).fill(0);
  const rows = product(shape, 0, rank - 1);
  for (let r = 0; r < rows; ++r) {
    let aOff = 0;
    let bOff = 0;
    for (let i = 0; i + 1 < rank; ++i) {
      aOff += index[i] * sa[i];
      bOff += index[i] * sb[i];
    }
    const out = r * inner;
    for (let j = 0; j < inner; ++j) y[out + j] = op(a.data[aOff + j * ia], b.data[bOff + j * ib]);
    for (let i = rank - 2; i >= 0; --i) {
      if (++index[i] < shape[i]) break;
      index[i] = 0;
    }
  }
  return y;
}

function unary(type, attrs, x, inputs) {
  const n = x.data.length;
  const y = new Float32Array(n);
  const d = x.data;
  if (type === 'Relu') {
    for (let i = 0; i < n; ++i) y[i] = d[i] > 0 ? d[i] : 0;
  } else if (type === 'Sigmoid') {
    for (let i = 0; i < n; ++i) y[i] = 1 / (1 + Math.exp(-d[i]));
  } else if (type === 'HardSigmoid') {
    const alpha = Math.fround(attrs.alpha ?? 0.2);
    const beta = Math.fround(attrs.beta ?? 0.5);
    for (let i = 0; i < n; ++i) y[i] = Math.max(0, Math.min(1, Math.fround(Math.fround(alpha * d[i]) + beta)));
  } else if (type === 'HardSwish') {
    for (let i = 0; i < n; ++i) y[i] = d[i] * Math.max(0, Math.min(1, Math.fround(Math.fround(d[i] / 6) + 0.5)));
  } else if (type === 'Clip') {
    // Opset < 11: attributes min / max; from 11 on: optional scalar inputs 1 and 2.
    let lo = attrs.min ?? -Infinity;
    let hi = attrs.max ?? Infinity;
    for (const [i, name] of [[1, 'min'], [2, 'max']]) {
      const v = inputs[i];
      if (!v) continue;
      if (v.data.length !== 1) fail(type, `${name} must be a scalar, not [${v.shape}]`);
      if (i === 1) lo = v.data[0];
      else hi = v.data[0];
    }
    lo = Math.fround(lo);
    hi = Math.fround(hi);
    // numpy.clip's order: with lo > hi every value becomes hi.
    for (let i = 0; i < n; ++i) y[i] = Math.min(Math.max(d[i], lo), hi);
  }
  return y;
}

function softmax(type, attrs, x, opset) {
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
      for (let l = 0; l < length; ++l) y[base + l * inner] = Math.exp(x.data[base + l * inner] - max) / sum;
    }
  }
  return y;
}

function transpose(type, attrs, x) {
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

function concat(type, attrs, inputs) {
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

/** The op types runOp runs. */
export const OP_TYPES = Object.freeze(['MaxPool', 'AveragePool', 'GlobalAveragePool', 'Add', 'Sub',
  'Mul', 'Div', 'Relu', 'Clip', 'Sigmoid', 'HardSigmoid', 'HardSwish', 'Concat', 'Softmax',
  'Transpose', 'Reshape', 'Flatten', 'Identity', 'Dropout', 'Squeeze', 'Unsqueeze']);

/**
 * Runs one operator: `type` (ONNX op type), `attributes` (name → number, string or array),
 * `inputs` ([{data, shape}], node order), `outShape` (the output value's shape, checked against
 * what the op computes), `opset` (Softmax's semantics; 13 unless given). Returns the row-major
 * output.
 */
export function runOp(type, attributes, inputs, outShape, opset = 13) {
  const attrs = attributes || {};
  const x = inputs[0];
  if (!x) fail(type, 'has no input');
  let y;
  switch (type) {
    case 'MaxPool':
    case 'AveragePool':
      if (type === 'MaxPool' && (attrs.storage_order ?? 0) !== 0) fail(type, 'the Indices output (storage_order) is not run');
      y = pool(type, attrs, x, outShape);
      break;
    case 'GlobalAveragePool':
      y = globalAveragePool(type, x);
      break;
    case 'Add': case 'Sub': case 'Mul': case 'Div':
      if (!inputs[1]) fail(type, 'needs two inputs');
      y = binary(type, x, inputs[1]);
      break;
    case 'Relu': case 'Clip': case 'Sigmoid': case 'HardSigmoid': case 'HardSwish':
      y = unary(type, attrs, x, inputs);
      break;
    case 'Concat':
      y = concat(type, attrs, inputs);
      break;
    case 'Softmax':
      y = softmax(type, attrs, x, opset);
      break;
    case 'Transpose':
      y = transpose(type, attrs, x);
      break;
    case 'Reshape': case 'Flatten': case 'Identity': case 'Dropout': case 'Squeeze': case 'Unsqueeze':
      y = Float32Array.from(x.data);
      break;
    default:
      fail(type, `is not an operator the wasm runtime runs (it runs ${OP_TYPES.join(', ')})`);
  }
  if (outShape && y.length !== product(outShape)) {
    fail(type, `computes ${y.length} elements, its output value [${outShape}] holds ${product(outShape)}`);
  }
  return y;
}
