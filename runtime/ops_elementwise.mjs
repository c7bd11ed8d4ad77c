// ops_elementwise.mjs — the wasm runtime's JavaScript operators that map each value by itself or
// combine tensors element by element with numpy's multidirectional broadcast:
//  - maps of one value (graph/kernels/activations.cpp, elementwise.cpp's signed_unary): Relu,
//    Sigmoid, HardSigmoid, HardSwish, Clip, LeakyRelu, Reciprocal, Floor, Ceil, Round (half to
//    even), Tanh, Exp, Log, Sqrt, Erf, Softplus, Softsign, Elu, Selu, Gelu, Abs, Neg, Sign;
//  - PRelu (the slope broadcast to X, unidirectionally, as activations.cpp's prelu);
//  - Add, Sub, Mul, Div, Pow and the variadic Max, Min, Sum, Mean (elementwise.cpp).
// Where the reference computes in float32 (Relu, HardSigmoid, HardSwish, LeakyRelu, Reciprocal,
// Floor, Ceil, Round, Clip, PRelu, Add..Div, Max, Min, Sum, Mean) one operation on float32
// operands computed in double and rounded once to float32 (the Float32Array store) is the
// float32 result, since a double holds more than twice float32's precision; the ops the
// reference evaluates in double (Sigmoid, Tanh, Exp, Log, Sqrt, Erf, Softplus, Softsign, Elu,
// Selu, Gelu, Pow) are evaluated in double here and rounded once too. Float attributes are read
// as float32 (Math.fround), as Node::get_float reads them.

import { broadcastOffsets, broadcastOperand, broadcastShape, broadcastStrides, fail, floatAttr, floatInput, input, product, sameShape, shapeText, stringAttr } from './ops_common.mjs';

const BINARY = {
  Add: (p, q) => p + q,
  Sub: (p, q) => p - q,
  Mul: (p, q) => p * q,
  Div: (p, q) => p / q,
  Pow: (p, q) => Math.pow(p, q),
  // Max / Min propagate NaN, as numpy (and elementwise.cpp's max_of / min_of) do.
  Max: (p, q) => (p !== p || q !== q ? NaN : p < q ? q : p),
  Min: (p, q) => (p !== p || q !== q ? NaN : q < p ? q : p),
  // Sum / Mean add in float32 in input order (each partial sum is stored as float32).
  Sum: (p, q) => p + q,
  Mean: (p, q) => p + q,
};

/**
 * The broadcast of `shape` with operand strides `sa`, `sb` (broadcastStrides) with every
 * dimension of 1 dropped and neighbouring dimensions merged where both operands step through
 * them as through one (stride of the outer = stride of the inner × its size, 0 = 0 included):
 * [1, 144, 56, 56] · [1, 144, 1, 1] becomes [144, 3136] with strides [3136, 1] and [1, 0], so
 * the inner loop runs over a whole plane instead of one row. Returns {dims, sa, sb}.
 */
function coalesced(shape, sa, sb) {
  const dims = [];
  const ca = [];
  const cb = [];
  for (let i = shape.length - 1; i >= 0; --i) {
    if (shape[i] === 1) continue;
    const last = dims.length - 1;
    if (last >= 0 && sa[i] === ca[last] * dims[last] && sb[i] === cb[last] * dims[last]) {
      dims[last] *= shape[i];
    } else {
      dims.push(shape[i]);
      ca.push(sa[i]);
      cb.push(sb[i]);
    }
  }
  return { dims: dims.reverse(), sa: ca.reverse(), sb: cb.reverse() };
}

/**
 * y[o + j] = op(A[ao + j·ia], B[bo + j·ib]) for j < n. The loop is written out per operator:
 * one loop that calls `op` runs about 12 ns an element once the model has sent two operators
 * through it (V8's call site turns megamorphic), against about 1 ns written out (measured with
 * Node 20 on a [1, 144, 56, 56] · [1, 144, 1, 1] Mul, EfficientNet's squeeze-excite gate).
 * `op` is called only for the operators without a loop of their own (Pow) and for a caller's own.
 */
function binaryRow(code, op, y, o, A, ao, ia, B, bo, ib, n) {
  switch (code) {
    case 1: for (let j = 0; j < n; ++j) y[o + j] = A[ao + j * ia] + B[bo + j * ib]; return;
    case 2: for (let j = 0; j < n; ++j) y[o + j] = A[ao + j * ia] - B[bo + j * ib]; return;
    case 3: for (let j = 0; j < n; ++j) y[o + j] = A[ao + j * ia] * B[bo + j * ib]; return;
    case 4: for (let j = 0; j < n; ++j) y[o + j] = A[ao + j * ia] / B[bo + j * ib]; return;
    case 5:
      for (let j = 0; j < n; ++j) {
        const p = A[ao + j * ia];
        const q = B[bo + j * ib];
        y[o + j] = p !== p || q !== q ? NaN : p < q ? q : p;
      }
      return;
    case 6:
      for (let j = 0; j < n; ++j) {
        const p = A[ao + j * ia];
        const q = B[bo + j * ib];
        y[o + j] = p !== p || q !== q ? NaN : q < p ? q : p;
      }
      return;
    default: for (let j = 0; j < n; ++j) y[o + j] = op(A[ao + j * ia], B[bo + j * ib]);
  }
}

/** binaryRow's code of each operator with a loop of its own (Sum and Mean add, as BINARY). */
const ROW_CODE = { Add: 1, Sum: 1, Mean: 1, Sub: 2, Mul: 3, Div: 4, Max: 5, Min: 6 };

/** y = op(a, b) over the broadcast of a's and b's shapes (op defaults to the type's). */
export function binary(type, a, b, op = BINARY[type]) {
  const shape = broadcastShape(type, a.shape, b.shape);
  const n = product(shape);
  const y = new Float32Array(n);
  if (n === 0) return y;
  const code = op === BINARY[type] ? ROW_CODE[type] ?? 0 : 0;
  if (a.data.length === n && b.data.length === n) {  // same shape: no index arithmetic
    binaryRow(code, op, y, 0, a.data, 0, 1, b.data, 0, 1, n);
    return y;
  }
  const { dims, sa, sb } = coalesced(shape, broadcastStrides(a.shape, shape), broadcastStrides(b.shape, shape));
  if (dims.length === 0) {  // every dimension 1: one element
    binaryRow(code, op, y, 0, a.data, 0, 0, b.data, 0, 0, 1);
    return y;
  }
  const rank = dims.length;
  const inner = dims[rank - 1];
  const ia = sa[rank - 1];
  const ib = sb[rank - 1];
  const index = new Array(rank - 1).fill(0);
  const rows = n / inner;
  let aOff = 0;
  let bOff = 0;
  for (let r = 0; r < rows; ++r) {
    binaryRow(code, op, y, r * inner, a.data, aOff, ia, b.data, bOff, ib, inner);
    for (let i = rank - 2; i >= 0; --i) {  // odometer over the outer dimensions
      aOff += sa[i];
      bOff += sb[i];
      if (++index[i] < dims[i]) break;
      aOff -= sa[i] * dims[i];
      bOff -= sb[i] * dims[i];
      index[i] = 0;
    }
  }
  return y;
}

/** Pow (7+; 12+ an int exponent): in double, rounded once (the result has the base's type, float32). */
export function pow(type, inputs) {
  const a = input(type, inputs, 0, 'A');
  const b = input(type, inputs, 1, 'B');
  return binary(type, broadcastOperand(a), broadcastOperand(b));
}

/** Max, Min, Sum, Mean over 1 or more inputs, folded left to right as elementwise.cpp's variadic. */
export function variadic(type, inputs) {
  if (!inputs.length) fail(type, 'needs at least one input');
  let acc = broadcastOperand(input(type, inputs, 0, 'data_0'));
  let data = Float32Array.from(acc.data);
  let shape = acc.shape;
  for (let k = 1; k < inputs.length; ++k) {
    const b = broadcastOperand(input(type, inputs, k, 'data_i'));
    const out = broadcastShape(type, shape, b.shape);
    data = binary(type, { data, shape }, b);
    shape = out;
  }
  if (type === 'Mean') {
    const n = inputs.length;
    for (let i = 0; i < data.length; ++i) data[i] /= n;
  }
  return data;
}

/** PRelu: y = x < 0 ? slope · x : x, the slope stretching to X's shape (never the other way). */
export function prelu(type, inputs) {
  const x = floatInput(type, inputs, 0, 'X');
  const slope = floatInput(type, inputs, 1, 'slope');
  if (!sameShape(broadcastShape(type, x.shape, slope.shape), x.shape)) {
    fail(type, `slope ${shapeText(slope.shape)} does not broadcast to X ${shapeText(x.shape)}`);
  }
  const at = broadcastOffsets(slope.shape, x.shape);
  const y = new Float32Array(x.data.length);
  for (let i = 0; i < y.length; ++i) {
    const v = x.data[i];
    y[i] = v < 0 ? slope.data[at[i]] * v : v;
  }
  return y;
}

// ---- erf ------------------------------------------------------------------------------------
// JavaScript has no Math.erf. This is fdlibm's s_erf.c algorithm (Sun Microsystems, 1993:
// "Permission to use, copy, modify, and distribute this software is freely granted, provided
// that this notice is preserved"), the one glibc's erf descends from, with its published
// coefficients: rational approximations on [0, 0.84375), [0.84375, 1.25), [1.25, 1/0.35),
// [1/0.35, 6) and 1 beyond, accurate to under one unit in the last place of a double, so that
// Erf and Gelu round to the float32 the reference's std::erf gives.

const ERX = 8.45062911510467529297e-01;
const EFX = 1.28379167095512586316e-01;
const EFX8 = 1.02703333676410069053e+00;
const PP = [1.28379167095512558561e-01, -3.25042107247001499370e-01, -2.84817495755985104766e-02, -5.77027029648944159157e-03, -2.37630166566501626084e-05];
const QQ = [3.97917223959155352819e-01, 6.50222499887672944485e-02, 5.08130628187576562776e-03, 1.32494738004321644526e-04, -3.96022827877536812320e-06];
const PA = [-2.36211856075265944077e-03, 4.14856118683748331666e-01, -3.72207876035701323847e-01, 3.18346619901161753674e-01, -1.10894694282396677476e-01, 3.54783043256182359371e-02, -2.16637559486879084300e-03];
const QA = [1.06420880400844228286e-01, 5.40397917702171048937e-01, 7.18286544141962662868e-02, 1.26171219808761642112e-01, 1.36370839120290507362e-02, 1.19844998467991074170e-02];
const RA = [-9.86494403484714822705e-03, -6.93858572707181764372e-01, -1.05586262253232909814e+01, -6.23753324503260060396e+01, -1.62396669462573470355e+02, -1.84605092906711035994e+02, -8.12874355063065934246e+01, -9.81432934416914548592e+00];
const SA = [1.96512716674392571292e+01, 1.37657754143519042600e+02, 4.34565877475229228821e+02, 6.45387271733267880336e+02, 4.29008140027567833386e+02, 1.08635005541779435134e+02, 6.57024977031928170135e+00, -6.04244152148580987438e-02];
const RB = [-9.86494292470009928597e-03, -7.99283237680523006574e-01, -1.77579549177547519889e+01, -1.60636384855821916062e+02, -6.37566443368389627722e+02, -1.02509513161107724954e+03, -4.83519191608651397019e+02];
const SB = [3.03380607434824582924e+01, 3.25792512996573918826e+02, 1.53672958608443695994e+03, 3.19985821950859553908e+03, 2.55305040643316442583e+03, 4.74528541206955367215e+02, -2.24409524465858183362e+01];

/** c[0] + z·(c[1] + z·(...)) (Horner), with `one` added in front for the 1 + z·Q(z) forms. */
function horner(c, z, one = false) {
  let r = c[c.length - 1];
  for (let i = c.length - 2; i >= 0; --i) r = c[i] + z * r;
  return one ? 1 + z * r : r;
}

const bits = new Float64Array(1);
const words = new Uint32Array(bits.buffer);
const LOW_WORD = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1 ? 0 : 1;

export function erf(x) {
  if (x !== x) return NaN;
  if (x === 0) return x;  // keeps -0
  const ax = Math.abs(x);
  let r;
  if (ax < 0.84375) {
    if (ax < 2 ** -28) {
      r = ax < 2.848094538889218e-306 ? 0.125 * (8 * ax + EFX8 * ax) : ax + EFX * ax;
    } else {
      const z = ax * ax;
      r = ax + ax * (horner(PP, z) / horner(QQ, z, true));
    }
  } else if (ax < 1.25) {
    const s = ax - 1;
    r = ERX + horner(PA, s) / horner(QA, s, true);
  } else if (ax >= 6) {
    r = 1;
  } else {
    const s = 1 / (ax * ax);
    const [R, S] = ax < 1 / 0.35 ? [horner(RA, s), horner(SA, s, true)] : [horner(RB, s), horner(SB, s, true)];
    // z: ax with the low 32 bits of its mantissa cleared, so that z·z is exact.
    bits[0] = ax;
    words[LOW_WORD] = 0;
    const z = bits[0];
    r = 1 - (Math.exp(-z * z - 0.5625) * Math.exp((z - ax) * (z + ax) + R / S)) / ax;
  }
  return x < 0 ? -r : r;
}

// ---- maps of one value --------------------------------------------------------------------

/** nearbyint in the default rounding mode: to nearest, ties to even; −0 and −0.4 give −0. */
function roundHalfEven(v) {
  const a = Math.abs(v);
  if (!(a < 2 ** 52)) return v;  // NaN, ±Infinity, and values already integral
  // Adding and removing 2^52 rounds to an integer with the hardware's ties-to-even rule.
  const r = (a + 2 ** 52) - 2 ** 52;
  return v < 0 || Object.is(v, -0) ? -r : r;
}

/** Maps of one float32 value whose function does not depend on other inputs: type → (attrs) → f. */
const MAPS = {
  LeakyRelu: (type, attrs) => {
    const alpha = floatAttr(type, attrs, 'alpha', 0.01);
    return (v) => (v < 0 ? alpha * v : v);
  },
  Reciprocal: () => (v) => 1 / v,
  Floor: () => Math.floor,
  Ceil: () => Math.ceil,
  Round: () => roundHalfEven,
  Tanh: () => Math.tanh,
  Exp: () => Math.exp,
  Log: () => Math.log,
  Sqrt: () => Math.sqrt,
  Erf: () => erf,
  // log(1 + e^x) without overflow.
  Softplus: () => (v) => (v > 0 ? v + Math.log1p(Math.exp(-v)) : Math.log1p(Math.exp(v))),
  Softsign: () => (v) => v / (1 + Math.abs(v)),
  Elu: (type, attrs) => {
    const alpha = floatAttr(type, attrs, 'alpha', 1);
    return (v) => (v < 0 ? alpha * Math.expm1(v) : v);
  },
  Selu: (type, attrs) => {
    // The defaults are ONNX's float32 constants, as activations.cpp spells them.
    const alpha = floatAttr(type, attrs, 'alpha', 1.67326319217681884765625);
    const gamma = floatAttr(type, attrs, 'gamma', 1.05070102214813232421875);
    return (v) => gamma * (v > 0 ? v : alpha * Math.expm1(v));
  },
  Gelu: (type, attrs) => {
    const approximate = stringAttr(type, attrs, 'approximate', 'none');
    if (approximate === 'none') return (v) => 0.5 * v * (1 + erf(v / Math.SQRT2));
    if (approximate === 'tanh') {
      const k = Math.sqrt(2 / Math.PI);
      return (v) => 0.5 * v * (1 + Math.tanh(k * (v + 0.044715 * v * v * v)));
    }
    return fail(type, `approximate '${approximate}' is not "none" or "tanh"`);
  },
  // elementwise.cpp's signed_unary on float32: Sign keeps NaN and ±0.
  Abs: () => Math.abs,
  Neg: () => (v) => -v,
  Sign: () => (v) => (v > 0 ? 1 : v < 0 ? -1 : v),
};

/** The op types of maps(): those of MAPS. */
export const MAP_TYPES = Object.freeze(Object.keys(MAPS));

/** One of MAPS on X (input 0). Abs, Neg and Sign take any element type, as the reference. */
export function map(type, attrs, inputs) {
  const signed = type === 'Abs' || type === 'Neg' || type === 'Sign';
  const x = signed ? input(type, inputs, 0, 'X') : floatInput(type, inputs, 0, 'X');
  const f = MAPS[type](type, attrs);
  const n = x.data.length;
  const y = new Float32Array(n);
  for (let i = 0; i < n; ++i) y[i] = f(x.data[i]);
  return y;
}

/** Relu, Sigmoid, HardSigmoid, HardSwish and Clip (the runtime's first activations). */
export function unary(type, attrs, x, inputs) {
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
    // std::max(0, std::min(1, t)): a NaN t gives 1, as there (Math.min would keep the NaN).
    for (let i = 0; i < n; ++i) {
      const v = Math.fround(Math.fround(alpha * d[i]) + beta);
      const t = v < 1 ? v : 1;
      y[i] = 0 < t ? t : 0;
    }
  } else if (type === 'HardSwish') {
    for (let i = 0; i < n; ++i) y[i] = d[i] * Math.max(0, Math.min(1, Math.fround(Math.fround(d[i] / 6) + 0.5)));
  } else if (type === 'Clip') {
    // Opset < 11: attributes min / max; from 11 on: optional scalar inputs 1 and 2.
    if ((attrs.min !== undefined || attrs.max !== undefined) && inputs.length > 1) {
      fail(type, 'has both min/max attributes (opset < 11) and bound inputs (opset >= 11)');
    }
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
