// ops_resize.mjs — the wasm runtime's JavaScript Resize (10+) and Upsample (7 to 9) on float32,
// any rank, as graph/kernels/resize.cpp runs them: each output value is the sum over one tap
// per axis of the product of their weights, in double, rounded once.
//  - Resize-11 and later: inputs X, roi, scales, sizes (an omitted or empty input is absent;
//    sizes wins); `mode` nearest / linear / cubic; `coordinate_transformation_mode` half_pixel
//    (default), pytorch_half_pixel, align_corners, asymmetric, tf_half_pixel_for_nearest (or
//    tf_half_pixel_for_nn), tf_crop_and_resize (roi, `extrapolation_value`); `nearest_mode`
//    round_prefer_floor (default), round_prefer_ceil, floor, ceil; `cubic_coeff_a` (-0.75),
//    `exclude_outside`. out = floor(in · scale) for scales, scale = out / in for sizes; taps
//    beyond the input repeat its edge.
//  - Resize-10 (inputs X, scales) and Upsample (the `scales` attribute in opset 7, input 1 in
//    9): mode nearest / linear ("bilinear" accepted), asymmetric coordinates; nearest takes
//    floor(x / scale) when enlarging and ceil when shrinking, as onnxruntime does.

import { fail, floatAttr, floatInput, floatsAttr, input, intAttr, intList, product, shapeText, stridesOf, stringAttr } from './ops_common.mjs';

const TRANSFORMS = 'half_pixel, pytorch_half_pixel, align_corners, asymmetric, tf_half_pixel_for_nearest, tf_crop_and_resize';

/** The four cubic convolution weights of points at distances 1 + r, r, 1 - r, 2 - r. */
function cubicWeights(r, a) {
  const near = (t) => ((a + 2) * t - (a + 3)) * t * t + 1;  // |t| <= 1
  const far = (t) => ((a * t - 5 * a) * t + 8 * a) * t - 4 * a;  // 1 < |t| < 2
  return [far(r + 1), near(r), near(1 - r), far(2 - r)];
}

/**
 * The taps {index, weight} of output position x along an axis of `n` input elements, or [] when
 * it lies outside the crop (tf_crop_and_resize).
 */
function tapsOf(type, x, n, scale, outWidth, roiStart, roiEnd, opt) {
  const t = opt.legacy ? 'asymmetric' : opt.transform;
  let xOri;
  if (t === 'half_pixel') {
    xOri = (x + 0.5) / scale - 0.5;
  } else if (t === 'pytorch_half_pixel') {
    xOri = outWidth === 1 ? -0.5 : (x + 0.5) / scale - 0.5;
  } else if (t === 'align_corners') {
    xOri = outWidth === 1 ? 0 : (x * (n - 1)) / (outWidth - 1);
  } else if (t === 'asymmetric') {
    xOri = x / scale;
  } else if (t === 'tf_half_pixel_for_nearest' || t === 'tf_half_pixel_for_nn') {
    xOri = (x + 0.5) / scale;
  } else if (t === 'tf_crop_and_resize') {
    const span = (roiEnd - roiStart) * (n - 1);
    xOri = outWidth === 1 ? span / 2 : (x * span) / (outWidth - 1);
    xOri += roiStart * (n - 1);
    if (xOri < 0 || xOri > n - 1) return [];
  } else {
    fail(type, `coordinate_transformation_mode '${t}' is not one of ${TRANSFORMS}`);
  }
  const clamp = (i) => Math.min(Math.max(i, 0), n - 1);
  // base + r = xOri with r in (0, 1]: the reference prefers the point left of xOri.
  const base = Math.ceil(xOri) - 1;
  const r = xOri - base;
  if (opt.mode === 'nearest') {
    let i;
    if (opt.legacy) i = scale < 1 ? Math.ceil(xOri) : Math.trunc(xOri);
    else if (r === 1) i = base + 1;
    else if (opt.nearest === 'round_prefer_floor') i = r <= 0.5 ? base : base + 1;
    else if (opt.nearest === 'round_prefer_ceil') i = r < 0.5 ? base : base + 1;
    else if (opt.nearest === 'floor') i = base;
    else if (opt.nearest === 'ceil') i = base + 1;
    else fail(type, `nearest_mode '${opt.nearest}' is not one of round_prefer_floor, round_prefer_ceil, floor, ceil`);
    return [{ index: clamp(i), weight: 1 }];
  }
  if (opt.mode === 'linear') {
    const taps = [];
    if (r !== 1) taps.push({ index: clamp(base), weight: 1 - r });
    taps.push({ index: clamp(base + 1), weight: r });
    return taps;
  }
  // cubic: points base - 1 .. base + 2
  const w = cubicWeights(r, opt.cubicA);
  const taps = [];
  let sum = 0;
  for (let k = 0; k < 4; ++k) {
    const i = base - 1 + k;
    if (opt.excludeOutside && (i < 0 || i >= n)) continue;
    taps.push({ index: clamp(i), weight: w[k] });
    sum += w[k];
  }
  if (opt.excludeOutside) for (const tap of taps) tap.weight /= sum;
  return taps;
}

/** A float list input (roi, scales) as numbers, or [] when absent or empty. */
function floatList(type, v, what) {
  if (!v) return [];
  if (Array.isArray(v.ints)) fail(type, `${what} must be float32`);
  return Array.from(v.data);
}

export function resize(type, attrs, inputs, opset) {
  const x = floatInput(type, inputs, 0, 'X');
  const rank = x.shape.length;
  const opt = {
    legacy: type === 'Upsample' || opset < 11,
    mode: stringAttr(type, attrs, 'mode', 'nearest'),
    transform: 'half_pixel',
    nearest: 'round_prefer_floor',
    cubicA: -0.75,
    excludeOutside: false,
  };
  if (opt.legacy && opt.mode === 'bilinear') opt.mode = 'linear';
  if (opt.mode !== 'nearest' && opt.mode !== 'linear' && (opt.legacy || opt.mode !== 'cubic')) {
    fail(type, `mode '${opt.mode}' is not one of nearest, linear${opt.legacy ? '' : ', cubic'}`);
  }
  let scales;
  let roi = [];
  let sizes = [];
  if (opt.legacy) {
    scales = inputs.length > 1 ? floatList(type, input(type, inputs, 1, 'scales'), 'scales') : floatsAttr(type, attrs, 'scales', []);
  } else {
    opt.transform = stringAttr(type, attrs, 'coordinate_transformation_mode', 'half_pixel');
    opt.nearest = stringAttr(type, attrs, 'nearest_mode', 'round_prefer_floor');
    opt.cubicA = floatAttr(type, attrs, 'cubic_coeff_a', -0.75);
    opt.excludeOutside = intAttr(type, attrs, 'exclude_outside', 0) !== 0;
    roi = floatList(type, inputs[1], 'roi');
    scales = floatList(type, inputs[2], 'scales');
    if (inputs[3]) sizes = intList(type, inputs[3], 'sizes');
  }
  if (sizes.length === 0 && scales.length === 0) fail(type, 'needs scales or sizes');
  if (sizes.length !== 0 && sizes.length !== rank) fail(type, `sizes ${shapeText(sizes)} does not have one value per axis of X ${shapeText(x.shape)}`);
  if (sizes.length === 0 && scales.length !== rank) fail(type, `scales has ${scales.length} values for X ${shapeText(x.shape)}`);
  const crop = !opt.legacy && opt.transform === 'tf_crop_and_resize';
  if (crop && roi.length !== 2 * rank) fail(type, `tf_crop_and_resize needs roi of ${2 * rank} values`);
  const extrapolation = floatAttr(type, attrs, 'extrapolation_value', 0);

  const shape = new Array(rank);
  const taps = [];
  for (let d = 0; d < rank; ++d) {
    const n = x.shape[d];
    let scale;
    let outWidth;
    if (sizes.length) {
      shape[d] = sizes[d];
      scale = sizes[d] / n;
      outWidth = sizes[d];
    } else {
      scale = scales[d];
      if (!(scale > 0)) fail(type, `scale ${scale} is not positive`);
      outWidth = scale * n;
      shape[d] = Math.floor(outWidth);
    }
    if (shape[d] < 0 || (n === 0 && shape[d] > 0)) fail(type, `cannot resize axis ${d} of ${n} to ${shape[d]}`);
    const axisTaps = [];
    for (let o = 0; o < shape[d]; ++o) axisTaps.push(tapsOf(type, o, n, scale, outWidth, crop ? roi[d] : 0, crop ? roi[d + rank] : 1, opt));
    taps.push(axisTaps);
  }
  const strides = stridesOf(x.shape);
  const y = new Float32Array(product(shape));
  if (y.length === 0) return y;
  const index = new Array(rank).fill(0);
  const at = new Array(rank);
  const k = new Array(rank);
  for (let o = 0; o < y.length; ++o) {
    let outside = false;
    for (let d = 0; d < rank; ++d) {
      at[d] = taps[d][index[d]];
      outside = outside || at[d].length === 0;
    }
    let sum = 0;
    if (outside) {
      sum = extrapolation;
    } else {
      // Every combination of one tap per axis (an odometer over the taps).
      k.fill(0);
      for (;;) {
        let w = 1;
        let offset = 0;
        for (let d = 0; d < rank; ++d) {
          const tap = at[d][k[d]];
          w *= tap.weight;
          offset += tap.index * strides[d];
        }
        sum += w * x.data[offset];
        let d = rank - 1;
        for (; d >= 0; --d) {
          if (++k[d] < at[d].length) break;
          k[d] = 0;
        }
        if (d < 0) break;
      }
    }
    y[o] = sum;
    for (let d = rank - 1; d >= 0; --d) {
      if (++index[d] < shape[d]) break;
      index[d] = 0;
    }
  }
  return y;
}
