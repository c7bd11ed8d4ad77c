// ops_pool.mjs — the window operators of the wasm runtime's JavaScript ops: MaxPool, AveragePool,
// GlobalAveragePool, GlobalMaxPool, and poolGeometry, the window geometry Conv and FusedConv
// (ops_linear.mjs) share. Semantics are graph/kernels/conv_pool.cpp's: geometry() for pads,
// auto_pad, strides, dilations and ceil_mode (the ONNX docs' formulas, with PyTorch's rule of
// dropping a ceil_mode window that starts in the end padding), the first maximum winning,
// AveragePool's divisor with and without count_include_pad, accumulation in double.

import { fail, product } from './ops_common.mjs';

/**
 * The window geometry over spatial dims `inSpatial` (conv_pool.cpp geometry()): padded at the
 * front to three dimensions (size 1, kernel 1, stride 1, no padding) so that 1-D, 2-D and 3-D
 * windows share one loop. `kernel` defaults to the attribute kernel_shape (pools; a convolution
 * passes its weight's spatial dims); `pool` says whether ceil_mode applies (pools only).
 */
export function poolGeometry(type, attrs, inSpatial, { kernel = attrs.kernel_shape, pool = true } = {}) {
  const r = inSpatial.length;
  if (r < 1 || r > 3) fail(type, `the input has ${r} spatial dimensions; pools run 1-D to 3-D windows`);
  if (kernel === undefined) fail(type, 'needs the attribute kernel_shape');
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
  const ceilMode = pool ? attrs.ceil_mode ?? 0 : 0;
  if (ceilMode !== 0 && ceilMode !== 1) fail(type, `ceil_mode ${ceilMode} is not 0 or 1`);
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
      if (g.pb[i] < 0 || g.pe[i] < 0) fail(type, `pads [${pads}] has a negative value`);
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

/** MaxPool and AveragePool: X [N, C, spatial...] → [N, C, out spatial...]. */
export function pool(type, attrs, x, outShape) {
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
  const includePad = attrs.count_include_pad ?? 0;
  if (!max && includePad !== 0 && includePad !== 1) fail(type, `count_include_pad ${includePad} is not 0 or 1`);
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

export function globalAveragePool(type, x) {
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


/** GlobalMaxPool: the maximum of each plane (std::max's order: a NaN never replaces the best). */
export function globalMaxPool(type, x) {
  if (x.shape.length < 3) fail(type, `X has shape [${x.shape}]; a pool needs [N, C, spatial...]`);
  const planes = x.shape[0] * x.shape[1];
  const size = product(x.shape, 2);
  const y = new Float32Array(planes);
  for (let p = 0; p < planes; ++p) {
    let best = -Infinity;
    for (let i = 0; i < size; ++i) {
      const v = x.data[p * size + i];
      if (best < v) best = v;
    }
    y[p] = best;
  }
  return y;
}
