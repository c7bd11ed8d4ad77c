// ops.test.mjs — node --test checks of the wasm runtime's JavaScript operators (runtime/ops.mjs)
// against small cases computed by hand (the semantics of graph/kernels/*.cpp).
import assert from 'node:assert/strict';
import test from 'node:test';

import { broadcastShape, poolGeometry, runOp } from '../ops.mjs';

const t = (shape, values) => ({ shape, data: Float32Array.from(values) });
const product = (dims) => dims.reduce((p, d) => p * d, 1);
const close = (actual, expected, tol = 1e-6) => {
  assert.equal(actual.length, expected.length);
  expected.forEach((e, i) => assert.ok(Math.abs(actual[i] - e) <= tol, `[${i}] ${actual[i]} vs ${e}`));
};

// A 1×1×4×4 plane 1 … 16.
const plane = t([1, 1, 4, 4], Array.from({ length: 16 }, (_, i) => i + 1));

test('MaxPool: 2×2 stride 2, 3×3 stride 2 pad 1 (ResNet\'s stem), ceil_mode', () => {
  assert.deepEqual([...runOp('MaxPool', { kernel_shape: [2, 2], strides: [2, 2] }, [plane], [1, 1, 2, 2])], [6, 8, 14, 16]);
  // Padding never wins: windows at the border take the max over the real taps only.
  assert.deepEqual([...runOp('MaxPool', { kernel_shape: [3, 3], strides: [2, 2], pads: [1, 1, 1, 1] }, [plane], [1, 1, 2, 2])],
    [6, 8, 14, 16]);
  const neg = t([1, 1, 1, 3], [-5, -1, -7]);
  assert.deepEqual([...runOp('MaxPool', { kernel_shape: [1, 2], pads: [0, 1, 0, 1] }, [neg], [1, 1, 1, 4])], [-5, -1, -1, -7]);
  // 5 wide, window 2 stride 2: floor gives 2 outputs, ceil_mode 3 (the last window half outside).
  const row = t([1, 1, 1, 5], [1, 2, 3, 4, 5]);
  assert.deepEqual([...runOp('MaxPool', { kernel_shape: [1, 2], strides: [1, 2], ceil_mode: 1 }, [row], [1, 1, 1, 3])], [2, 4, 5]);
  assert.throws(() => runOp('MaxPool', { kernel_shape: [2, 2], strides: [2, 2] }, [plane], [1, 1, 3, 3]), /MaxPool: computes an output of \[1,1,2,2\]/);
});

test('MaxPool over 2-D windows matches a brute-force window scan on random shapes, pads and strides', () => {
  let seed = 7;
  const rand = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648);
  const int = (lo, hi) => lo + Math.floor(rand() * (hi - lo + 1));
  for (let round = 0; round < 60; ++round) {
    const [C, H, W] = [int(1, 3), int(1, 9), int(1, 9)];
    const kh = int(1, Math.min(H, 4)), kw = int(1, Math.min(W, 4));
    const sh = int(1, 3), sw = int(1, 3);
    const pads = [int(0, kh - 1), int(0, kw - 1), int(0, kh - 1), int(0, kw - 1)];
    const ceil = int(0, 1);
    const data = Float32Array.from({ length: C * H * W }, () => Math.round(rand() * 40 - 20));
    const out = (n, k, s, pb, pe) => {
      const span = n + pb + pe - k;
      let o = ceil ? Math.floor((span + s - 1) / s) + 1 : Math.floor(span / s) + 1;
      if (ceil && (o - 1) * s >= n + pb) --o;
      return o;
    };
    const OH = out(H, kh, sh, pads[0], pads[2]), OW = out(W, kw, sw, pads[1], pads[3]);
    const want = [];
    for (let c = 0; c < C; ++c) {
      for (let oh = 0; oh < OH; ++oh) {
        for (let ow = 0; ow < OW; ++ow) {
          let best = -Infinity;
          for (let r = 0; r < kh; ++r) {
            for (let q = 0; q < kw; ++q) {
              const ih = oh * sh - pads[0] + r, iw = ow * sw - pads[1] + q;
              if (ih >= 0 && ih < H && iw >= 0 && iw < W) best = Math.max(best, data[(c * H + ih) * W + iw]);
            }
          }
          want.push(best);
        }
      }
    }
    const attrs = { kernel_shape: [kh, kw], strides: [sh, sw], pads, ceil_mode: ceil };
    const got = runOp('MaxPool', attrs, [{ data, shape: [1, C, H, W] }], [1, C, OH, OW]);
    assert.deepEqual([...got], want, JSON.stringify({ C, H, W, ...attrs }));
  }
});

test('AveragePool: count_include_pad 0 and 1, SAME_UPPER', () => {
  const attrs = { kernel_shape: [3, 3], strides: [2, 2], pads: [1, 1, 1, 1] };
  // Windows over 1,2,5,6 (4 real taps), 2,3,4,6,7,8, 5,6,9,10,13,14 and the 9 of the bottom
  // right; with the pad counted every divisor is 9.
  close(runOp('AveragePool', attrs, [plane], [1, 1, 2, 2]), [3.5, 30 / 6, 57 / 6, 99 / 9]);
  close(runOp('AveragePool', { ...attrs, count_include_pad: 1 }, [plane], [1, 1, 2, 2]),
    [14 / 9, (2 + 3 + 4 + 6 + 7 + 8) / 9, (5 + 6 + 9 + 10 + 13 + 14) / 9, (6 + 7 + 8 + 10 + 11 + 12 + 14 + 15 + 16) / 9]);
  // SAME_UPPER, 4 wide, window 3 stride 1: total pad 2 split 1 / 1.
  const g = poolGeometry('AveragePool', { kernel_shape: [3], auto_pad: 'SAME_UPPER' }, [4]);
  assert.deepEqual([g.out[2], g.pb[2], g.pe[2]], [4, 1, 1]);
  const g2 = poolGeometry('AveragePool', { kernel_shape: [2], strides: [1], auto_pad: 'SAME_LOWER' }, [4]);
  assert.deepEqual([g2.out[2], g2.pb[2], g2.pe[2]], [4, 1, 0]);
});

test('GlobalAveragePool averages each plane', () => {
  const x = t([1, 2, 2, 2], [1, 2, 3, 4, 10, 20, 30, 40]);
  assert.deepEqual([...runOp('GlobalAveragePool', {}, [x], [1, 2, 1, 1])], [2.5, 25]);
});

test('binary ops broadcast as numpy does', () => {
  const a = t([2, 3], [1, 2, 3, 4, 5, 6]);
  assert.deepEqual([...runOp('Add', {}, [a, t([3], [10, 20, 30])], [2, 3])], [11, 22, 33, 14, 25, 36]);
  assert.deepEqual([...runOp('Sub', {}, [a, t([2, 1], [1, 2])], [2, 3])], [0, 1, 2, 2, 3, 4]);
  assert.deepEqual([...runOp('Mul', {}, [t([], [2]), a], [2, 3])], [2, 4, 6, 8, 10, 12]);
  assert.deepEqual([...runOp('Div', {}, [a, a], [2, 3])], [1, 1, 1, 1, 1, 1]);
  // [1,2,1,1] against [1,2,2,1]: a per-channel scale (broadcast in both directions).
  const x = t([1, 2, 2, 1], [1, 2, 3, 4]);
  assert.deepEqual([...runOp('Mul', {}, [x, t([1, 2, 1, 1], [10, 100])], [1, 2, 2, 1])], [10, 20, 300, 400]);
  assert.deepEqual(broadcastShape('Add', [3, 1], [1, 4]), [3, 4]);
  assert.throws(() => runOp('Add', {}, [a, t([2], [1, 2])], [2, 3]), /Add: shapes \[2,3\] and \[2\] do not broadcast/);
});

test('activations: Relu, Clip (attribute and input styles), Sigmoid, HardSigmoid, HardSwish', () => {
  const x = t([5], [-4, -1, 0, 1, 4]);
  assert.deepEqual([...runOp('Relu', {}, [x], [5])], [0, 0, 0, 1, 4]);
  assert.deepEqual([...runOp('Clip', { min: 0, max: 6 }, [t([3], [-1, 3, 7])], [3])], [0, 3, 6]);
  assert.deepEqual([...runOp('Clip', {}, [t([3], [-1, 3, 7]), t([], [0]), t([], [6])], [3])], [0, 3, 6]);
  assert.deepEqual([...runOp('Clip', {}, [t([3], [-1, 3, 7]), undefined, t([], [2])], [3])], [-1, 2, 2]);
  close(runOp('Sigmoid', {}, [x], [5]), [-4, -1, 0, 1, 4].map((v) => 1 / (1 + Math.exp(-v))));
  close(runOp('HardSigmoid', {}, [x], [5]), [0, 0.3, 0.5, 0.7, 1]);
  close(runOp('HardSigmoid', { alpha: 0.5, beta: 0 }, [x], [5]), [0, 0, 0, 0.5, 1]);
  // x · clamp(x/6 + 0.5, 0, 1): -4 → 0, -1 → -1/3, 1 → 2/3, 4 → 4.
  close(runOp('HardSwish', {}, [x], [5]), [-0, -1 / 3, 0, 2 / 3, 4]);
});

test('Concat along channels and along the last axis', () => {
  const a = t([1, 1, 2], [1, 2]);
  const b = t([1, 2, 2], [3, 4, 5, 6]);
  assert.deepEqual([...runOp('Concat', { axis: 1 }, [a, b], [1, 3, 2])], [1, 2, 3, 4, 5, 6]);
  const c = t([2, 1], [7, 8]);
  const d = t([2, 2], [1, 2, 3, 4]);
  assert.deepEqual([...runOp('Concat', { axis: -1 }, [c, d], [2, 3])], [7, 1, 2, 8, 3, 4]);
  assert.throws(() => runOp('Concat', { axis: 0 }, [a, b], [2, 1, 2]), /does not concatenate/);
});

test('Softmax: opset 13 along an axis, opset < 13 over the flattened tail', () => {
  const x = t([2, 2], [0, Math.log(3), 1, 1]);
  close(runOp('Softmax', {}, [x], [2, 2]), [0.25, 0.75, 0.5, 0.5]);
  close(runOp('Softmax', { axis: 0 }, [t([2, 1], [0, Math.log(3)])], [2, 1]), [0.25, 0.75]);
  // Opset 11, axis 1 over [1,2,2]: one row of 4.
  const y = t([1, 2, 2], [0, 0, 0, Math.log(5)]);
  close(runOp('Softmax', { axis: 1 }, [y], [1, 2, 2], 11), [1 / 8, 1 / 8, 1 / 8, 5 / 8]);
  // Large values do not overflow (the maximum is subtracted first).
  close(runOp('Softmax', {}, [t([2], [1000, 1000])], [2]), [0.5, 0.5]);
});

test('Transpose: default reversal and an NCHW → NHWC perm', () => {
  const x = t([2, 3], [1, 2, 3, 4, 5, 6]);
  assert.deepEqual([...runOp('Transpose', {}, [x], [3, 2])], [1, 4, 2, 5, 3, 6]);
  const nchw = t([1, 2, 1, 2], [1, 2, 3, 4]);  // c0: 1 2, c1: 3 4
  assert.deepEqual([...runOp('Transpose', { perm: [0, 2, 3, 1] }, [nchw], [1, 1, 2, 2])], [1, 3, 2, 4]);
  assert.throws(() => runOp('Transpose', { perm: [0, 0] }, [x], [2, 3]), /not a permutation/);
});

test('unknown ops and wrong output sizes are refused by name', () => {
  // (Gather was the example of an unknown op until the runtime ran it.)
  assert.throws(() => runOp('NonMaxSuppression', {}, [t([1], [1])], [1]), /NonMaxSuppression: is not an operator the wasm runtime runs/);
  assert.throws(() => runOp('Relu', {}, [t([2], [1, 2])], [3]), /Relu: computes 2 elements/);
  assert.deepEqual([...runOp('Flatten', { axis: 1 }, [t([1, 2, 1], [5, 6])], [1, 2])], [5, 6]);
});

// ---- the operators added with the split of ops.mjs into ops_*.mjs ---------------------------

/** An int64 constant operand, as model.mjs's operand() builds it. */
const ints = (values) => ({ data: Float32Array.from(values), ints: values, shape: [values.length] });
const run = (type, attrs, inputs, outShape, opset) => [...runOp(type, attrs, inputs, outShape, opset)];

test('OP_TYPES: one sorted list of what the dispatch table runs', async () => {
  const { OP_TYPES } = await import('../ops.mjs');
  assert.deepEqual([...OP_TYPES], [...OP_TYPES].sort());
  for (const type of ['Abs', 'Gelu', 'Pow', 'ReduceLogSumExp', 'LayerNormalization', 'Resize', 'Upsample', 'FusedConv', 'FusedMatMul', 'ConvTranspose', 'Dropout']) {
    assert.ok(OP_TYPES.includes(type), type);
  }
  assert.ok(Object.isFrozen(OP_TYPES));
  // A type not in the table is refused by name, whether or not it has inputs; so is a prototype key.
  assert.throws(() => runOp('constructor', {}, [t([1], [1])], [1]), /^Error: constructor: is not an operator the wasm runtime runs \(it runs Abs, Add, /);
  assert.throws(() => runOp('Relu', {}, [undefined], [1]), /Relu: has no input/);
});

test('maps of one value: Abs, Neg, Sign, Floor, Ceil, Round (half to even), Reciprocal, Exp, Log, Sqrt, Tanh', () => {
  close(runOp('Abs', {}, [t([3], [-2, 0, 1.5])], [3]), [2, 0, 1.5]);
  close(runOp('Neg', {}, [t([3], [-2, 0, 1.5])], [3]), [2, 0, -1.5]);
  const sign = run('Sign', {}, [t([4], [-2, 0, 3, NaN])], [4]);
  assert.deepEqual(sign.slice(0, 3), [-1, 0, 1]);
  assert.ok(Number.isNaN(sign[3]));
  assert.deepEqual(run('Floor', {}, [t([3], [-1.5, 0.5, 2])], [3]), [-2, 0, 2]);
  assert.deepEqual(run('Ceil', {}, [t([3], [-1.5, 0.5, 2])], [3]), [-1, 1, 2]);
  // Ties go to the even neighbour (std::nearbyint), and -0.5 rounds to -0.
  const round = run('Round', {}, [t([8], [0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 2.4, 2.6])], [8]);
  assert.deepEqual(round, [0, 2, 2, -0, -2, -2, 2, 3]);
  assert.ok(Object.is(round[3], -0));
  assert.deepEqual(run('Reciprocal', {}, [t([2], [4, -0.5])], [2]), [0.25, -2]);
  close(runOp('Exp', {}, [t([2], [1, -1])], [2]), [2.718281828459045, 0.36787944117144233]);
  close(runOp('Log', {}, [t([2], [1, Math.E])], [2]), [0, 1]);
  assert.deepEqual(run('Sqrt', {}, [t([2], [9, 0.25])], [2]), [3, 0.5]);
  close(runOp('Tanh', {}, [t([2], [0.5, -20])], [2]), [0.46211715726000974, -1]);
  // Maps that run on float32 refuse an int64 constant, as float_input does.
  assert.throws(() => runOp('Tanh', {}, [ints([1])], [1]), /Tanh: input 0 \(X\) is int64; this operator runs on float32/);
});

test('maps with attributes: LeakyRelu, Elu, Selu, Softplus, Softsign, Erf, Gelu (none / tanh)', () => {
  // LeakyRelu's default alpha is the float32 0.01.
  assert.deepEqual(run('LeakyRelu', {}, [t([2], [-2, 3])], [2]), [Math.fround(Math.fround(0.01) * -2), 3]);
  assert.deepEqual(run('LeakyRelu', { alpha: 0.5 }, [t([2], [-2, 3])], [2]), [-1, 3]);
  close(runOp('Elu', {}, [t([2], [-1, 2])], [2]), [-0.6321205588285577, 2]);
  close(runOp('Elu', { alpha: 2 }, [t([1], [-1])], [1]), [-1.2642411176571153]);
  // Selu's defaults: gamma 1.0507010221…, alpha 1.6732631921…
  close(runOp('Selu', {}, [t([2], [1, -1])], [2]), [1.0507010221481323, -1.1113307378125628]);
  close(runOp('Selu', { alpha: 2, gamma: 3 }, [t([2], [1, -1])], [2]), [3, 6 * -0.6321205588285577]);
  // Softplus neither overflows nor loses the small values: log(1 + e^x).
  close(runOp('Softplus', {}, [t([3], [0, -1000, 1000])], [3]), [Math.LN2, 0, 1000]);
  close(runOp('Softsign', {}, [t([2], [1, -3])], [2]), [0.5, -0.75]);
  // erf (fdlibm's algorithm): published values.
  close(runOp('Erf', {}, [t([5], [0.5, 1, -2, 3, 7])], [5]), [0.5204998778130465, 0.8427007929497149, -0.9953222650189527, 0.9999779095030014, 1]);
  close(runOp('Gelu', {}, [t([2], [1, -1])], [2]), [0.8413447460685429, -0.15865525393145707]);
  close(runOp('Gelu', { approximate: 'tanh' }, [t([1], [1])], [1]), [0.8411919906082768]);
  assert.throws(() => runOp('Gelu', { approximate: 'fast' }, [t([1], [1])], [1]), /Gelu: approximate 'fast' is not "none" or "tanh"/);
  // HardSigmoid of NaN is 1, as std::max(0, std::min(1, NaN)) gives.
  assert.deepEqual(run('HardSigmoid', {}, [t([1], [NaN])], [1]), [1]);
  // Clip is either the attribute form or the input form, not both.
  assert.throws(() => runOp('Clip', { min: 0 }, [t([1], [1]), t([], [0])], [1]), /Clip: has both min\/max attributes/);
});

test('binary ops over random broadcast shapes match a per-element oracle, every operator in turn', () => {
  // The written-out loops (ops_elementwise.mjs binaryRow) with merged dimensions against a
  // plain index computation per output element, for shapes of rank 0..5 whose dimensions are
  // 1 or stretched at random in either operand (a per-channel scale [1,C,1,1], row and column
  // vectors, scalars), the operators interleaved so that a shared call site would turn
  // megamorphic. NaN operands check Max / Min's propagation.
  let seed = 7;
  const rand = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648);
  const ops = {
    Add: (p, q) => p + q, Sub: (p, q) => p - q, Mul: (p, q) => p * q, Div: (p, q) => p / q,
    Max: (p, q) => (Number.isNaN(p) || Number.isNaN(q) ? NaN : Math.max(p, q)),
    Min: (p, q) => (Number.isNaN(p) || Number.isNaN(q) ? NaN : Math.min(p, q)),
    Pow: (p, q) => Math.pow(p, q),
  };
  const valuesFor = (n, type) => Array.from({ length: n }, () => {
    if (type !== 'Pow' && rand() < 0.05) return NaN;
    return type === 'Pow' ? 0.5 + rand() * 2 : rand() * 8 - 4;
  });
  let cases = 0;
  for (let round = 0; round < 60; ++round) {
    for (const type of Object.keys(ops)) {
      const rank = Math.floor(rand() * 6);
      const out = Array.from({ length: rank }, () => 1 + Math.floor(rand() * 5));
      const pick = () => out.map((d) => (rand() < 0.4 ? 1 : d));
      const ashape = pick().slice(Math.floor(rand() * (rank + 1)));  // right-aligned: may be shorter
      const bshape = pick();
      const full = out.map((d, i) => {
        const ad = i - (rank - ashape.length) >= 0 ? ashape[i - (rank - ashape.length)] : 1;
        return Math.max(ad, bshape[i]);
      });
      const a = t(ashape, valuesFor(product(ashape), type));
      const b = t(bshape, valuesFor(product(bshape), type));
      const y = runOp(type, {}, [a, b], full);
      const n = product(full);
      assert.equal(y.length, n, `${type} [${ashape}] · [${bshape}]`);
      const idx = new Array(rank).fill(0);
      for (let o = 0; o < n; ++o) {
        let r = o;
        for (let i = rank - 1; i >= 0; --i) { idx[i] = r % full[i]; r = Math.floor(r / full[i]); }
        const at = (shape) => {
          let off = 0;
          for (let i = 0; i < shape.length; ++i) {
            const d = shape[i];
            off = off * d + (d === 1 ? 0 : idx[i + rank - shape.length]);
          }
          return off;
        };
        const expected = Math.fround(ops[type](a.data[at(ashape)], b.data[at(bshape)]));
        const got = y[o];
        assert.ok(Object.is(got, expected) || (Number.isNaN(got) && Number.isNaN(expected)),
          `${type} [${ashape}] · [${bshape}] at ${o}: ${got} vs ${expected}`);
      }
      cases += 1;
    }
  }
  assert.equal(cases, 60 * 7);
});

test('Pow, PRelu and the variadic Max / Min / Sum / Mean broadcast as numpy does', () => {
  // [2,1] ** [2]: [[2^2, 2^0.5], [3^2, 3^0.5]].
  close(runOp('Pow', {}, [t([2, 1], [2, 3]), t([2], [2, 0.5])], [2, 2]), [4, Math.SQRT2, 9, Math.sqrt(3)]);
  // An int64 exponent constant (Pow-12) of one value is a scalar.
  assert.deepEqual(run('Pow', {}, [t([3], [1, 2, 3]), ints([2])], [3]), [1, 4, 9]);
  // PRelu: the slope [2,1] stretches over X [1,2,2] (per channel row).
  assert.deepEqual(run('PRelu', {}, [t([1, 2, 2], [-1, 2, -3, 4]), t([2, 1], [0.5, 0.25])], [1, 2, 2]), [-0.5, 2, -0.75, 4]);
  assert.throws(() => runOp('PRelu', {}, [t([2], [1, 2]), t([2, 2], [1, 1, 1, 1])], [2]), /PRelu: slope \[2,2\] does not broadcast to X \[2\]/);
  assert.throws(() => runOp('PRelu', {}, [t([2], [1, 2]), t([3], [1, 1, 1])], [2]), /PRelu: shapes \[2\] and \[3\] do not broadcast/);
  // Max / Min propagate NaN; [2] against [2,1] gives [2,2].
  const a = t([2], [1, 5]);
  const b = t([2, 1], [3, NaN]);
  const max = run('Max', {}, [a, b], [2, 2]);
  assert.deepEqual(max.slice(0, 2), [3, 5]);
  assert.ok(max.slice(2).every(Number.isNaN));
  assert.deepEqual(run('Min', {}, [a, b], [2, 2]).slice(0, 2), [1, 3]);
  assert.deepEqual(run('Max', {}, [t([2], [1, -1])], [2]), [1, -1]);  // one input: a copy
  assert.deepEqual(run('Sum', {}, [t([2], [1, 2]), t([2], [10, 20]), t([1], [100])], [2]), [111, 122]);
  assert.deepEqual(run('Mean', {}, [t([2], [1, 2]), t([2], [10, 20]), t([1], [100])], [2]), [37, Math.fround(122 / 3)]);
  assert.throws(() => runOp('Sum', {}, [t([2], [1, 2]), t([3], [1, 2, 3])], [2]), /Sum: shapes \[2\] and \[3\] do not broadcast/);
});

test('reductions: axes as attribute or input, keepdims, noop_with_empty_axes, NaN, and the ten kinds', () => {
  const x = t([2, 3], [1, 2, 3, 4, 5, 6]);
  assert.deepEqual(run('ReduceSum', { axes: [1], keepdims: 0 }, [x], [2]), [6, 15]);
  assert.deepEqual(run('ReduceSum', {}, [x, ints([0])], [1, 3]), [5, 7, 9]);  // ReduceSum-13's input
  assert.deepEqual(run('ReduceSum', {}, [x], [1, 1]), [21]);  // no axes: all of them
  assert.deepEqual(run('ReduceSum', { noop_with_empty_axes: 1 }, [x, ints([])], [2, 3]), [1, 2, 3, 4, 5, 6]);
  assert.deepEqual(run('ReduceMean', { axes: [-1] }, [x], [2, 1]), [2, 5]);
  assert.deepEqual(run('ReduceMax', { axes: [1] }, [x], [2, 1]), [3, 6]);
  assert.deepEqual(run('ReduceMin', { axes: [0] }, [x], [1, 3]), [1, 2, 3]);
  assert.deepEqual(run('ReduceProd', { axes: [1] }, [x], [2, 1]), [6, 120]);
  const y = t([2, 3], [3, -4, 0, 1, 2, -2]);
  assert.deepEqual(run('ReduceL1', { axes: [1] }, [y], [2, 1]), [7, 5]);
  assert.deepEqual(run('ReduceL2', { axes: [1] }, [y], [2, 1]), [5, 3]);
  assert.deepEqual(run('ReduceSumSquare', { axes: [1] }, [y], [2, 1]), [25, 9]);
  close(runOp('ReduceLogSum', { axes: [1] }, [x], [2, 1]), [Math.log(6), Math.log(15)]);
  // LogSumExp subtracts the maximum first: 1000 + log 2 rather than Infinity.
  close(runOp('ReduceLogSumExp', { axes: [1] }, [t([2, 2], [1000, 1000, 0, Math.log(3)])], [2, 1]), [Math.fround(1000 + Math.LN2), Math.log(4)]);
  assert.ok(Number.isNaN(runOp('ReduceMax', {}, [t([3], [1, NaN, 3])], [1])[0]));
  assert.throws(() => runOp('ReduceSum', { axes: [1, -1] }, [x], [2, 1]), /ReduceSum: axis -1 is listed twice/);
  assert.throws(() => runOp('ReduceMean', { axes: [2] }, [x], [2, 1]), /ReduceMean: axis 2 is outside \[-2, 1\] for a rank-2 input/);
  assert.throws(() => runOp('ReduceSum', {}, [x, t([1], [1])], [2, 1]), /ReduceSum: axes must be an integer tensor of rank 0 or 1/);
});

test('GlobalMaxPool, and the pool attributes the reference refuses', () => {
  assert.deepEqual(run('GlobalMaxPool', {}, [t([1, 2, 2, 2], [1, 5, 3, 2, -1, -4, -2, -3])], [1, 2, 1, 1]), [5, -1]);
  assert.throws(() => runOp('GlobalMaxPool', {}, [t([2, 2], [1, 2, 3, 4])], [2, 2]), /GlobalMaxPool: X has shape \[2,2\]; a pool needs/);
  assert.throws(() => runOp('MaxPool', { kernel_shape: [2, 2], pads: [-1, 0, 0, 0] }, [plane], [1, 1, 2, 3]), /MaxPool: pads \[-1,0,0,0\] has a negative value/);
  assert.throws(() => runOp('MaxPool', { kernel_shape: [2, 2], ceil_mode: 2 }, [plane], [1, 1, 3, 3]), /MaxPool: ceil_mode 2 is not 0 or 1/);
  assert.throws(() => runOp('AveragePool', { kernel_shape: [2, 2], count_include_pad: 2 }, [plane], [1, 1, 3, 3]), /AveragePool: count_include_pad 2 is not 0 or 1/);
  assert.throws(() => runOp('MaxPool', {}, [plane], [1, 1, 3, 3]), /MaxPool: needs the attribute kernel_shape/);
  // storage_order only orders the Indices output, which a package step never has: 1 runs as 0.
  assert.deepEqual(run('MaxPool', { kernel_shape: [2, 2], strides: [2, 2], storage_order: 1 }, [plane], [1, 1, 2, 2]), [6, 8, 14, 16]);
  assert.throws(() => runOp('MaxPool', { kernel_shape: [2, 2], storage_order: 2 }, [plane], [1, 1, 3, 3]), /MaxPool: storage_order 2 is not 0 or 1/);
});

test('BatchNormalization, InstanceNormalization, LayerNormalization, LogSoftmax', () => {
  // Channel 0: (x - 1) / 2 · 1 + 0; channel 1: (x - 3) / 1 · 2 + 1 (epsilon 0).
  const bn = [t([2], [1, 2]), t([2], [0, 1]), t([2], [1, 3]), t([2], [4, 1])];
  assert.deepEqual(run('BatchNormalization', { epsilon: 0 }, [t([1, 2, 1, 2], [1, 2, 3, 4]), ...bn], [1, 2, 1, 2]), [0, 0.5, 1, 3]);
  assert.throws(() => runOp('BatchNormalization', { training_mode: 1 }, [t([1, 2], [1, 2]), ...bn], [1, 2]), /BatchNormalization: training_mode 1 is not run/);
  assert.throws(() => runOp('BatchNormalization', { spatial: 0 }, [t([1, 2], [1, 2]), ...bn], [1, 2]), /BatchNormalization: spatial 0 .* is not supported/);
  assert.throws(() => runOp('BatchNormalization', {}, [t([1, 3], [1, 2, 3]), ...bn], [1, 3]), /BatchNormalization: scale has shape \[2\], expected \[3\]/);
  assert.throws(() => runOp('BatchNormalization', {}, [t([1, 2], [1, 2]), ...bn.slice(0, 3)], [1, 2]), /BatchNormalization: needs input 4 \(input_var\)/);
  // Per plane: [1, 3] has mean 2 and variance 1; [10, 10] has variance 0, so only B remains.
  close(runOp('InstanceNormalization', {}, [t([1, 2, 2], [1, 3, 10, 10]), t([2], [2, 1]), t([2], [0, 5])], [1, 2, 2]),
    [-2 / Math.sqrt(1 + Math.fround(1e-5)), 2 / Math.sqrt(1 + Math.fround(1e-5)), 5, 5]);
  assert.throws(() => runOp('InstanceNormalization', {}, [t([1, 2], [1, 2]), t([2], [1, 1]), t([2], [0, 0])], [1, 2]), /InstanceNormalization: input has shape \[1,2\]; it needs/);
  assert.throws(() => runOp('InstanceNormalization', {}, [t([1, 2, 1], [1, 2]), t([2], [1, 1]), t([1], [0])], [1, 2, 1]), /InstanceNormalization: scale \[2\] and B \[1\] must be \[2\]/);
  // Rows [1, 3] and [0, 4] both normalise to [-1, 1]; Scale [1, 2] and B [0, 10] per column.
  const ln = t([2, 2], [1, 3, 0, 4]);
  assert.deepEqual(run('LayerNormalization', { epsilon: 0 }, [ln, t([2], [1, 2]), t([2], [0, 10])], [2, 2]), [-1, 12, -1, 12]);
  assert.deepEqual(run('LayerNormalization', { epsilon: 0, axis: 1 }, [ln, t([1], [3])], [2, 2]), [-3, 3, -3, 3]);
  // axis 0: one group of all four (mean 2, variance 2.5).
  close(runOp('LayerNormalization', { epsilon: 0, axis: 0 }, [ln, t([1], [1])], [2, 2]), [-1, 1, -2, 2].map((v) => v / Math.sqrt(2.5)));
  assert.throws(() => runOp('LayerNormalization', { stash_type: 0 }, [ln, t([2], [1, 1])], [2, 2]), /LayerNormalization: stash_type 0 is not 1/);
  assert.throws(() => runOp('LayerNormalization', { axis: 2 }, [ln, t([2], [1, 1])], [2, 2]), /LayerNormalization: axis 2 is outside \[-2, 1\]/);
  assert.throws(() => runOp('LayerNormalization', {}, [ln, t([3], [1, 1, 1])], [2, 2]), /LayerNormalization: shapes \[2,2\] and \[3\] do not broadcast/);
  assert.throws(() => runOp('LayerNormalization', {}, [ln, t([2, 2, 2], [1, 1, 1, 1, 1, 1, 1, 1])], [2, 2]), /LayerNormalization: Scale \/ B \[2,2,2\] does not broadcast to X \[2,2\]/);
  assert.throws(() => runOp('LayerNormalization', {}, [ln, t([2], [1, 1]), ints([0, 0])], [2, 2]), /LayerNormalization: B must be float32/);
  close(runOp('LogSoftmax', {}, [t([2], [0, Math.log(3)])], [2]), [Math.log(0.25), Math.log(0.75)]);
  // Opset 11 coerces [1,2,2] at axis 1 to one row of 4.
  close(runOp('LogSoftmax', { axis: 1 }, [t([1, 2, 2], [0, 0, 0, Math.log(5)])], [1, 2, 2], 11), [1 / 8, 1 / 8, 1 / 8, 5 / 8].map(Math.log));
  close(runOp('LogSoftmax', {}, [t([2], [1000, 1000])], [2]), [-Math.LN2, -Math.LN2]);
});

test('Gather: axis, negative indices, the output shape from the indices\' count; out of range refused', () => {
  const x = t([3, 2], [1, 2, 3, 4, 5, 6]);
  assert.deepEqual(run('Gather', {}, [x, ints([2, 0, -1])], [3, 2]), [5, 6, 1, 2, 5, 6]);
  assert.deepEqual(run('Gather', { axis: 1 }, [x, ints([1])], [3, 1]), [2, 4, 6]);
  // Indices of shape [2, 2] (model.mjs gives them flat): the output [2, 2, 2].
  assert.deepEqual(run('Gather', {}, [x, ints([0, 1, 1, 2])], [2, 2, 2]), [1, 2, 3, 4, 3, 4, 5, 6]);
  assert.deepEqual(run('Gather', { axis: -1 }, [x, ints([0])], [3]), [1, 3, 5]);  // scalar index
  assert.throws(() => runOp('Gather', {}, [x, ints([3])], [1, 2]), /Gather: index 3 is outside \[-3, 2\]/);
  assert.throws(() => runOp('Gather', {}, [x, ints([-4])], [1, 2]), /Gather: index -4 is outside/);
  assert.throws(() => runOp('Gather', {}, [x, t([1], [0])], [1, 2]), /Gather: indices must be int64 or int32, not float32/);
  assert.throws(() => runOp('Gather', {}, [t([], [1]), ints([0])], [1]), /Gather: data is a scalar/);
  assert.throws(() => runOp('Gather', {}, [x], [1]), /Gather: needs input 1 \(indices\)/);
  assert.throws(() => runOp('Gather', { axis: 2 }, [x, ints([0])], [3]), /Gather: axis 2 is outside \[-2, 1\]/);
});

test('Slice: the opset 10 inputs (negative steps, INT64 bounds clamped) and the opset 1 attributes', () => {
  const x = t([2, 4], [1, 2, 3, 4, 5, 6, 7, 8]);
  assert.deepEqual(run('Slice', {}, [x, ints([0, 1]), ints([2, 3])], [2, 2]), [2, 3, 6, 7]);
  // Backwards from the last row and column, every second column, to before the start.
  assert.deepEqual(run('Slice', {}, [x, ints([1, -1]), ints([-9223372036854775807, -9223372036854775807]), ints([0, 1]), ints([-1, -2])], [2, 2]), [8, 6, 4, 2]);
  assert.deepEqual(run('Slice', {}, [x, ints([1]), ints([9223372036854775807]), ints([-1])], [2, 3]), [2, 3, 4, 6, 7, 8]);
  assert.deepEqual(run('Slice', {}, [x, ints([3]), ints([1]), ints([1])], [2, 0]), []);  // empty
  assert.deepEqual(run('Slice', {}, [x, ints([0]), ints([4]), undefined, ints([3])], [1, 4]), [1, 2, 3, 4]);
  assert.deepEqual(run('Slice', { starts: [1], ends: [2], axes: [0] }, [x], [1, 4], 1), [5, 6, 7, 8]);
  assert.throws(() => runOp('Slice', {}, [x], [1, 4], 1), /Slice: needs starts and ends/);
  assert.throws(() => runOp('Slice', {}, [x, ints([0]), ints([1]), ints([0]), ints([0])], [1, 4]), /Slice: step 0 on axis 0/);
  assert.throws(() => runOp('Slice', {}, [x, ints([0, 0]), ints([1, 1]), ints([1, -1])], [2, 1]), /Slice: axis -1 is listed twice/);
  assert.throws(() => runOp('Slice', {}, [x, ints([0, 0]), ints([1])], [1, 4]), /Slice: starts \[0,0\], ends \[1\], axes \[0,1\] and steps \[1,1\] must have one length/);
  assert.throws(() => runOp('Slice', {}, [x, t([1], [0]), ints([1])], [1, 4]), /Slice: starts must be an integer tensor of rank 0 or 1/);
  assert.throws(() => runOp('Slice', {}, [x, ints([0]), ints([1]), ints([2])], [1, 4]), /Slice: axis 2 is outside/);
});

test('Pad: constant (input and attribute forms), reflect, edge, negative pads crop', () => {
  const x = t([2, 2], [1, 2, 3, 4]);
  // pads [begin0, begin1, end0, end1] = [0, 1, 1, 0] with 9.
  assert.deepEqual(run('Pad', {}, [x, ints([0, 1, 1, 0]), t([1], [9])], [3, 3]), [9, 1, 2, 9, 3, 4, 9, 9, 9]);
  assert.deepEqual(run('Pad', {}, [x, ints([0, 1, 0, 0])], [2, 3]), [0, 1, 2, 0, 3, 4]);
  assert.deepEqual(run('Pad', { pads: [1, 0, 0, 0], value: 7 }, [x], [3, 2], 2), [7, 7, 1, 2, 3, 4]);
  const row = t([1, 3], [1, 2, 3]);
  assert.deepEqual(run('Pad', { mode: 'reflect' }, [row, ints([0, 2, 0, 2])], [1, 7]), [3, 2, 1, 2, 3, 2, 1]);
  assert.deepEqual(run('Pad', { mode: 'edge' }, [row, ints([0, 2, 0, 1])], [1, 6]), [1, 1, 1, 2, 3, 3]);
  assert.deepEqual(run('Pad', {}, [row, ints([0, -1, 0, 1])], [1, 3]), [2, 3, 0]);
  // Opset 18's axes input: pads for axis 1 only.
  assert.deepEqual(run('Pad', {}, [x, ints([1, 0]), undefined, ints([-1])], [2, 3]), [0, 1, 2, 0, 3, 4]);
  assert.throws(() => runOp('Pad', { mode: 'wrap' }, [x, ints([0, 0, 0, 0])], [2, 2]), /Pad: mode 'wrap' is not constant, reflect or edge/);
  assert.throws(() => runOp('Pad', {}, [x, ints([0, 1])], [2, 3]), /Pad: pads \[0,1\] has 2 values; 2 axes need 4/);
  assert.throws(() => runOp('Pad', {}, [x, ints([0, -2, 0, -1])], [2, 0]), /Pad: pads \[0,-2,0,-1\] crop more than axis 1 has/);
  assert.throws(() => runOp('Pad', {}, [x], [2, 2], 2), /Pad: needs pads/);
  assert.throws(() => runOp('Pad', { mode: 'edge' }, [t([0], []), ints([1, 1])], [2]), /Pad: mode edge pads an empty axis 0/);
  assert.throws(() => runOp('Pad', {}, [x, ints([0, 0, 0, 0]), t([2], [1, 2])], [2, 2]), /Pad: constant_value must hold one value, not \[2\]/);
});

test('Expand, Tile, and Dropout in inference', () => {
  // [3,1] against [2,1,2]: bidirectional, [2,3,2].
  assert.deepEqual(run('Expand', {}, [t([3, 1], [1, 2, 3]), ints([2, 1, 2])], [2, 3, 2]), [1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3]);
  assert.deepEqual(run('Expand', {}, [t([2], [1, 2]), ints([1])], [2]), [1, 2]);  // a 1 keeps the dim
  assert.throws(() => runOp('Expand', {}, [t([3], [1, 2, 3]), ints([2])], [3]), /Expand: shapes \[3\] and \[2\] do not broadcast/);
  assert.deepEqual(run('Tile', {}, [t([2, 2], [1, 2, 3, 4]), ints([1, 2])], [2, 4]), [1, 2, 1, 2, 3, 4, 3, 4]);
  assert.deepEqual(run('Tile', {}, [t([2], [1, 2]), ints([2])], [4]), [1, 2, 1, 2]);
  assert.throws(() => runOp('Tile', {}, [t([2, 2], [1, 2, 3, 4]), ints([2])], [4, 2]), /Tile: repeats \[2\] has 1 values for a rank-2 input/);
  assert.throws(() => runOp('Tile', {}, [t([2], [1, 2]), ints([-1])], [0]), /Tile: repeats \[-1\] has a negative value/);
  // Dropout-12: training_mode true with a nonzero ratio would be random; ratio 0 is the identity.
  assert.deepEqual(run('Dropout', {}, [t([2], [1, 2]), t([], [0]), ints([1])], [2]), [1, 2]);
  assert.deepEqual(run('Dropout', {}, [t([2], [1, 2]), t([], [0.5]), ints([0])], [2]), [1, 2]);
  assert.throws(() => runOp('Dropout', {}, [t([2], [1, 2]), undefined, ints([1])], [2]), /Dropout: training_mode is true with ratio 0\.500000: random dropout is not run/);
});

test('Resize: nearest / linear / cubic, the coordinate modes, sizes, crop; Resize-10 and Upsample', () => {
  const two = t([1, 2], [1, 2]);
  // half_pixel (default) nearest, round_prefer_floor: positions -0.25, 0.25, 0.75, 1.25.
  assert.deepEqual(run('Resize', {}, [two, undefined, t([2], [1, 2])], [1, 4]), [1, 1, 2, 2]);
  // The classic bilinear 2x of [[1, 2], [3, 4]] (half_pixel, the edges repeated).
  assert.deepEqual(run('Resize', { mode: 'linear' }, [t([1, 1, 2, 2], [1, 2, 3, 4]), t([0], []), t([4], [1, 1, 2, 2])], [1, 1, 4, 4]),
    [1, 1.25, 1.75, 2, 1.5, 1.75, 2.25, 2.5, 2.5, 2.75, 3.25, 3.5, 3, 3.25, 3.75, 4]);
  // sizes: 4 → 2 (scale 0.5) samples 0.5 and 2.5.
  assert.deepEqual(run('Resize', { mode: 'linear' }, [t([1, 4], [1, 2, 3, 4]), undefined, undefined, ints([1, 2])], [1, 2]), [1.5, 3.5]);
  assert.deepEqual(run('Resize', { mode: 'linear', coordinate_transformation_mode: 'align_corners' }, [t([1, 2], [0, 3]), undefined, undefined, ints([1, 4])], [1, 4]), [0, 1, 2, 3]);
  assert.deepEqual(run('Resize', { coordinate_transformation_mode: 'asymmetric', nearest_mode: 'ceil' }, [t([1, 3], [1, 2, 3]), undefined, t([2], [1, 2])], [1, 6]), [1, 2, 2, 3, 3, 3]);
  // Cubic (a = -0.75) with align_corners: the samples at the input points, and between them
  // -0.09375·p0 + 0.59375·p1 + 0.59375·p2 - 0.09375·p3 (the edge repeated).
  assert.deepEqual(run('Resize', { mode: 'cubic', coordinate_transformation_mode: 'align_corners' }, [t([1, 3], [1, 4, 9]), undefined, undefined, ints([1, 5])], [1, 5]), [1, 2.03125, 4, 6.78125, 9]);
  // The cubic weights sum to 1, with and without exclude_outside.
  close(runOp('Resize', { mode: 'cubic', exclude_outside: 1 }, [t([1, 3], [5, 5, 5]), undefined, t([2], [1, 2])], [1, 6]), [5, 5, 5, 5, 5, 5]);
  // tf_crop_and_resize: roi [0, 0, 1, 1.5] reaches past the last element there: extrapolation_value.
  assert.deepEqual(run('Resize', { mode: 'linear', coordinate_transformation_mode: 'tf_crop_and_resize', extrapolation_value: 9 },
    [t([1, 3], [1, 2, 3]), t([4], [0, 0, 1, 1.5]), undefined, ints([1, 4])], [1, 4]), [1, 2, 3, 9]);
  // Resize-10 (opset 10): asymmetric, nearest takes ceil when shrinking, floor when enlarging.
  assert.deepEqual(run('Resize', {}, [t([1, 4], [1, 2, 3, 4]), t([2], [1, 0.5])], [1, 2], 10), [1, 3]);
  assert.deepEqual(run('Resize', { mode: 'linear' }, [two, t([2], [1, 2])], [1, 4], 10), [1, 1.5, 2, 2]);
  // Upsample-9 (scales input) and -7 (scales attribute; "bilinear").
  assert.deepEqual(run('Upsample', {}, [two, t([2], [1, 2])], [1, 4], 9), [1, 1, 2, 2]);
  assert.deepEqual(run('Upsample', { mode: 'bilinear', scales: [1, 2] }, [two], [1, 4], 7), [1, 1.5, 2, 2]);
  const scales = t([2], [1, 2]);
  assert.throws(() => runOp('Resize', { mode: 'area' }, [two, undefined, scales], [1, 4]), /Resize: mode 'area' is not one of nearest, linear, cubic/);
  assert.throws(() => runOp('Upsample', { mode: 'cubic' }, [two, scales], [1, 4], 9), /Upsample: mode 'cubic' is not one of nearest, linear$/);
  assert.throws(() => runOp('Resize', {}, [two, undefined, t([0], [])], [1, 4]), /Resize: needs scales or sizes/);
  assert.throws(() => runOp('Resize', {}, [two, undefined, undefined, ints([4])], [4]), /Resize: sizes \[4\] does not have one value per axis of X \[1,2\]/);
  assert.throws(() => runOp('Resize', {}, [two, undefined, t([1], [2])], [1, 4]), /Resize: scales has 1 values for X \[1,2\]/);
  assert.throws(() => runOp('Resize', { coordinate_transformation_mode: 'tf_crop_and_resize' }, [two, t([2], [0, 1]), scales], [1, 4]), /Resize: tf_crop_and_resize needs roi of 4 values/);
  assert.throws(() => runOp('Resize', {}, [two, undefined, t([2], [1, 0])], [1, 0]), /Resize: scale 0 is not positive/);
  assert.throws(() => runOp('Resize', { coordinate_transformation_mode: 'centre' }, [two, undefined, scales], [1, 4]), /Resize: coordinate_transformation_mode 'centre' is not one of/);
  assert.throws(() => runOp('Resize', { nearest_mode: 'up' }, [two, undefined, scales], [1, 4]), /Resize: nearest_mode 'up' is not one of/);
  assert.throws(() => runOp('Resize', {}, [two, undefined, ints([1, 2])], [1, 4]), /Resize: scales must be float32/);
  assert.throws(() => runOp('Resize', {}, [two, undefined, undefined, t([2], [1, 4])], [1, 4]), /Resize: sizes must be an integer tensor/);
});

test('Conv: bias, asymmetric pads, group, strides with dilation, SAME_UPPER, 3-D; refusals', () => {
  const x3 = t([1, 1, 3, 3], [1, 2, 3, 4, 5, 6, 7, 8, 9]);
  const ones = t([1, 1, 2, 2], [1, 1, 1, 1]);
  // Each output sums a 2x2 window, plus 10 (graph_executor_test's ConvByHand).
  assert.deepEqual(run('Conv', {}, [x3, ones, t([1], [10])], [1, 1, 2, 2]), [22, 26, 34, 38]);
  // Pads top 1, left 0, bottom 0, right 1: padded [[0,0,0],[1,2,0],[3,4,0]].
  assert.deepEqual(run('Conv', { pads: [1, 0, 0, 1] }, [t([1, 1, 2, 2], [1, 2, 3, 4]), ones], [1, 1, 2, 2]), [3, 2, 10, 6]);
  // Depthwise (group 2): channel c times W[c].
  assert.deepEqual(run('Conv', { group: 2 }, [t([1, 2, 1, 2], [1, 2, 3, 4]), t([2, 1, 1, 1], [10, 100])], [1, 2, 1, 2]), [10, 20, 300, 400]);
  // 1-D, kernel 2 with dilation 2 (effective 3), stride 2: x0 + x2, x2 + x4.
  assert.deepEqual(run('Conv', { dilations: [2], strides: [2] }, [t([1, 1, 5], [1, 2, 3, 4, 5]), t([1, 1, 2], [1, 1])], [1, 1, 2]), [4, 8]);
  assert.deepEqual(run('Conv', { auto_pad: 'SAME_UPPER' }, [t([1, 1, 4], [1, 2, 3, 4]), t([1, 1, 3], [1, 1, 1])], [1, 1, 4]), [3, 6, 9, 7]);
  assert.deepEqual(run('Conv', {}, [t([1, 1, 2, 2, 2], [1, 2, 3, 4, 5, 6, 7, 8]), t([1, 1, 2, 2, 2], [1, 1, 1, 1, 1, 1, 1, 1])], [1, 1, 1, 1, 1]), [36]);
  // Two filters over two channels: [sum of channel 0, sum of channel 1 minus channel 0].
  assert.deepEqual(run('Conv', {}, [t([1, 2, 1, 1], [3, 5]), t([2, 2, 1, 1], [1, 0, -1, 1])], [1, 2, 1, 1]), [3, 2]);
  assert.throws(() => runOp('Conv', {}, [x3, t([1, 2, 2], [1, 1, 1, 1])], [1, 1, 2, 2]), /Conv: X \[1,1,3,3\] and W \[1,2,2\] must be/);
  assert.throws(() => runOp('Conv', { group: 2 }, [x3, ones], [1, 1, 2, 2]), /Conv: group 2 does not fit X/);
  assert.throws(() => runOp('Conv', { kernel_shape: [3, 3] }, [x3, ones], [1, 1, 2, 2]), /Conv: kernel_shape \[3,3\] differs from W's spatial dimensions \[2,2\]/);
  assert.throws(() => runOp('Conv', {}, [x3, ones, t([2], [1, 2])], [1, 1, 2, 2]), /Conv: bias has shape \[2\], expected \[1\]/);
  assert.throws(() => runOp('Conv', { strides: [1] }, [x3, ones], [1, 1, 2, 2]), /Conv: attribute 'strides' \[1\] needs 2 values/);
  assert.throws(() => runOp('Conv', { auto_pad: 'SAME' }, [x3, ones], [1, 1, 2, 2]), /Conv: auto_pad 'SAME' is not one of/);
  assert.throws(() => runOp('Conv', {}, [x3, t([1, 1, 4, 4], new Array(16).fill(1))], [1, 1, 1, 1]), /Conv: the window is larger than the padded input/);
});

test('FusedConv: the epilogue (bias, clip, relu, hard_swish, residual before / after) and its refusals', () => {
  const x3 = t([1, 1, 3, 3], [1, 2, 3, 4, 5, 6, 7, 8, 9]);
  const ones = t([1, 1, 2, 2], [1, 1, 1, 1]);
  const bias = t([1], [10]);
  const residual = t([1, 1, 2, 2], [-100, 0, 0, 0]);
  // Window sums 12, 16, 24, 28.
  assert.deepEqual(run('FusedConv', {}, [x3, ones], [1, 1, 2, 2]), [12, 16, 24, 28]);
  assert.deepEqual(run('FusedConv', { epilogue: { bias: true, activation: 'clip', clip_min: 0, clip_max: 30 } }, [x3, ones, bias], [1, 1, 2, 2]), [22, 26, 30, 30]);
  assert.deepEqual(run('FusedConv', { epilogue: { bias: true, activation: 'relu', residual: 'before_activation' } }, [x3, ones, bias, residual], [1, 1, 2, 2]), [0, 26, 34, 38]);
  assert.deepEqual(run('FusedConv', { epilogue: { bias: true, activation: 'clip', clip_max: 30, residual: 'after_activation' } }, [x3, ones, bias, residual], [1, 1, 2, 2]), [-78, 26, 30, 30]);
  assert.deepEqual(run('FusedConv', { epilogue: { residual: 'after_activation' } }, [x3, ones, residual], [1, 1, 2, 2]), [-88, 16, 24, 28]);
  // hard_swish: v · min(max(v + 3, 0), 6) / 6 on a 1x1 identity convolution.
  close(runOp('FusedConv', { epilogue: { activation: 'hard_swish' } }, [t([1, 1, 1, 4], [-4, -1, 1, 4]), t([1, 1, 1, 1], [1])], [1, 1, 1, 4]), [0, -1 / 3, 2 / 3, 4]);
  // The other attributes are Conv's.
  assert.deepEqual(run('FusedConv', { strides: [2, 2], epilogue: { bias: true } }, [x3, ones, bias], [1, 1, 1, 1]), [22]);
  const refuse = (epilogue, re, inputs = [x3, ones, bias]) => assert.throws(() => runOp('FusedConv', { epilogue }, inputs, [1, 1, 2, 2]), re);
  refuse({ bias: true, scale: 2 }, /FusedConv: epilogue: unknown field 'scale' \(fields: bias, activation, clip_min, clip_max, residual\)/);
  refuse({ activation: 'gelu' }, /FusedConv: epilogue: activation 'gelu' is not one of none, relu, clip, hard_swish/, [x3, ones]);
  refuse({ residual: 'sideways' }, /FusedConv: epilogue: residual 'sideways' is not one of none, before_activation, after_activation/, [x3, ones, residual]);
  refuse({ activation: 'relu', clip_max: 6 }, /FusedConv: epilogue: clip_min \/ clip_max need activation 'clip'/, [x3, ones]);
  refuse({ activation: 'clip', clip_min: 6, clip_max: 0 }, /FusedConv: epilogue: clip\(6, 0\) needs finite bounds with min <= max/, [x3, ones]);
  refuse({ bias: 'yes' }, /FusedConv: epilogue: 'bias' must be true or false/);
  refuse({ activation: 1 }, /FusedConv: epilogue: 'activation' must be a string/, [x3, ones]);
  refuse('+bias', /FusedConv: epilogue "\+bias" is not a JSON object/);
  refuse({ bias: true, activation: 'clip', clip_max: 6.5 }, /FusedConv: has 2 inputs; its epilogue '\+bias\+clip\(0,6\.5\)' needs 3/, [x3, ones]);
  refuse({}, /FusedConv: has 3 inputs; its epilogue '' needs 2/);
  refuse({ bias: true }, /FusedConv: bias has shape \[2\], expected \[1\]/, [x3, ones, t([2], [1, 2])]);
  refuse({ residual: 'before_activation' }, /FusedConv: residual has shape \[4\], expected the output's \[1,1,2,2\]/, [x3, ones, t([4], [0, 0, 0, 0])]);
  assert.throws(() => runOp('FusedConv', { activation: 'Relu' }, [x3, ones], [1, 1, 2, 2]), /FusedConv: attribute 'activation' is onnxruntime's FusedConv/);
});

test('ConvTranspose: strides, pads, output_padding, output_shape, auto_pad, group, bias', () => {
  const x = t([1, 1, 2], [1, 2]);
  const w = t([1, 1, 3], [1, 1, 1]);
  // x0 scatters to 0..2, x1 to 2..4 (stride 2): [1, 1, 3, 2, 2].
  assert.deepEqual(run('ConvTranspose', { strides: [2] }, [x, w], [1, 1, 5]), [1, 1, 3, 2, 2]);
  assert.deepEqual(run('ConvTranspose', { strides: [2], pads: [1, 1] }, [x, w], [1, 1, 3]), [1, 3, 2]);
  assert.deepEqual(run('ConvTranspose', { strides: [2], output_padding: [1] }, [x, w, t([1], [5])], [1, 1, 6]), [6, 6, 8, 7, 7, 5]);
  assert.deepEqual(run('ConvTranspose', { strides: [2], output_shape: [6] }, [x, w], [1, 1, 6]), [1, 1, 3, 2, 2, 0]);
  assert.deepEqual(run('ConvTranspose', { strides: [2], output_shape: [1, 1, 4] }, [x, w], [1, 1, 4]), [1, 3, 2, 2]);
  assert.deepEqual(run('ConvTranspose', { strides: [2], auto_pad: 'SAME_UPPER' }, [x, w], [1, 1, 4]), [1, 1, 3, 2]);
  assert.deepEqual(run('ConvTranspose', { strides: [2], auto_pad: 'SAME_LOWER' }, [x, w], [1, 1, 4]), [1, 3, 2, 2]);
  // group 2: each channel scatters into its own output channel.
  assert.deepEqual(run('ConvTranspose', { group: 2 }, [t([1, 2, 1], [1, 2]), t([2, 1, 1], [3, 4])], [1, 2, 1]), [3, 8]);
  // 2-D: one input scattered over a 2x2 kernel.
  assert.deepEqual(run('ConvTranspose', {}, [t([1, 1, 1, 1], [2]), t([1, 1, 2, 2], [1, 2, 3, 4])], [1, 1, 2, 2]), [2, 4, 6, 8]);
  assert.throws(() => runOp('ConvTranspose', {}, [t([1, 2, 2], [1, 2, 3, 4]), w], [1, 1, 4]), /ConvTranspose: group 1 does not fit X \[1,2,2\] and W \[1,1,3\] \(C must divide by group, W's dim 0 must be C\)/);
  assert.throws(() => runOp('ConvTranspose', { output_shape: [4, 4] }, [x, w], [1, 1, 4]), /ConvTranspose: output_shape \[4,4\] does not have 1 spatial dimensions/);
  assert.throws(() => runOp('ConvTranspose', { pads: [2, 2] }, [x, w], [1, 1, 0]), /ConvTranspose: the output would have a dimension of 0/);
  assert.throws(() => runOp('ConvTranspose', { output_padding: [1, 1] }, [x, w], [1, 1, 4]), /ConvTranspose: attribute 'output_padding' \[1,1\] has 2 values; a 1-D window needs 1/);
  assert.throws(() => runOp('ConvTranspose', {}, [x, w, t([2], [1, 2])], [1, 1, 4]), /ConvTranspose: bias has shape \[2\], expected \[1\]/);
});

test('Gemm and FusedGemm: transA / transB, alpha, beta, C broadcast; the fused epilogue per column', () => {
  const a = t([2, 3], [1, 2, 3, 4, 5, 6]);
  const b = t([3, 2], [1, 0, 0, 1, 1, 1]);
  assert.deepEqual(run('Gemm', {}, [a, b], [2, 2]), [4, 5, 10, 11]);
  assert.deepEqual(run('Gemm', { transA: 1 }, [t([3, 2], [1, 4, 2, 5, 3, 6]), b], [2, 2]), [4, 5, 10, 11]);
  assert.deepEqual(run('Gemm', { transB: 1 }, [a, t([2, 3], [1, 0, 1, 0, 1, 1])], [2, 2]), [4, 5, 10, 11]);
  assert.deepEqual(run('Gemm', { alpha: 2, beta: 0.5 }, [a, b, t([2], [10, 20])], [2, 2]), [13, 20, 25, 32]);
  assert.deepEqual(run('Gemm', {}, [a, b, t([2, 1], [1, 2])], [2, 2]), [5, 6, 12, 13]);
  assert.deepEqual(run('Gemm', {}, [a, b, t([1], [1])], [2, 2]), [5, 6, 11, 12]);
  assert.deepEqual(run('FusedGemm', { epilogue: { bias: true, activation: 'relu' } }, [a, b, t([2], [1, -100])], [2, 2]), [5, 0, 11, 0]);
  assert.deepEqual(run('FusedGemm', { transB: 1, epilogue: { residual: 'before_activation' } }, [a, t([2, 3], [1, 0, 1, 0, 1, 1]), t([2, 2], [1, 1, 1, 1])], [2, 2]), [5, 6, 11, 12]);
  assert.throws(() => runOp('FusedGemm', { alpha: 2, epilogue: { bias: true } }, [a, b, t([2], [1, 1])], [2, 2]), /FusedGemm: alpha and beta must be 1 in a fused Gemm/);
  assert.throws(() => runOp('FusedGemm', { epilogue: { bias: true } }, [a, b, t([3], [1, 1, 1])], [2, 2]), /FusedGemm: bias has shape \[3\], expected \[2\] \(the output's last dimension\)/);
  assert.throws(() => runOp('Gemm', {}, [t([3], [1, 2, 3]), b], [1, 2]), /Gemm: A \[3\] and B \[3,2\] must be matrices/);
  assert.throws(() => runOp('Gemm', { transA: 2 }, [a, b], [2, 2]), /Gemm: transA \/ transB must be 0 or 1/);
  assert.throws(() => runOp('Gemm', { transB: 1 }, [a, b], [2, 3]), /Gemm: A \[2,3\] and B \[3,2\] \(transposed\) have different inner dimensions/);
  assert.throws(() => runOp('Gemm', {}, [a, b, t([3], [1, 2, 3])], [2, 2]), /Gemm: C has shape \[3\]; it must broadcast to \[M, N\] = \[2,2\]/);
  assert.throws(() => runOp('Gemm', {}, [a, b, ints([1, 2])], [2, 2]), /Gemm: C is int64, not float32/);
});

test('MatMul and FusedMatMul: numpy batch broadcasting, 1-D operands, the epilogue per column', () => {
  const a = t([2, 3], [1, 2, 3, 4, 5, 6]);
  const b = t([3, 2], [1, 0, 0, 1, 1, 1]);
  assert.deepEqual(run('MatMul', {}, [a, b], [2, 2]), [4, 5, 10, 11]);
  assert.deepEqual(run('MatMul', {}, [t([3], [1, 2, 3]), b], [2]), [4, 5]);  // [1,K] then dropped
  assert.deepEqual(run('MatMul', {}, [a, t([3], [1, 1, 1])], [2]), [6, 15]);  // [K,1] then dropped
  assert.deepEqual(run('MatMul', {}, [t([2], [1, 2]), t([2], [3, 4])], []), [11]);
  // A [2,1,2] · B [2,1]: two batches of A against one B.
  assert.deepEqual(run('MatMul', {}, [t([2, 1, 2], [1, 2, 3, 4]), t([2, 1], [1, 1])], [2, 1, 1]), [3, 7]);
  // A [1,2] against B [3,2,1]: one A against three batches of B.
  assert.deepEqual(run('MatMul', {}, [t([1, 2], [1, 2]), t([3, 2, 1], [1, 0, 0, 1, 1, 1])], [3, 1, 1]), [1, 2, 3]);
  // [2,1,1,2] · [3,2,1] broadcast to a [2,3] batch.
  assert.deepEqual(run('MatMul', {}, [t([2, 1, 1, 2], [1, 2, 3, 4]), t([3, 2, 1], [1, 0, 0, 1, 1, 1])], [2, 3, 1, 1]), [1, 2, 3, 3, 4, 7]);
  assert.deepEqual(run('FusedMatMul', { epilogue: { bias: true } }, [a, b, t([2], [100, 200])], [2, 2]), [104, 205, 110, 211]);
  assert.deepEqual(run('FusedMatMul', { epilogue: { bias: true, activation: 'clip', clip_min: 5, clip_max: 10, residual: 'after_activation' } },
    [a, b, t([2], [0, 0]), t([2, 2], [1, 2, 3, 4])], [2, 2]), [6, 7, 13, 14]);
  assert.throws(() => runOp('MatMul', {}, [a, a], [2, 3]), /MatMul: A \[2,3\] and B \[2,3\] have different inner dimensions/);
  assert.throws(() => runOp('MatMul', {}, [t([2, 1, 2], [1, 2, 3, 4]), t([3, 2, 1], [1, 0, 0, 1, 1, 1])], [2, 1, 1]), /MatMul: the batch dimensions of A \[2,1,2\] and B \[3,2,1\] do not broadcast/);
  assert.throws(() => runOp('MatMul', {}, [t([], [1]), b], [2]), /MatMul: MatMul's inputs must have rank 1 or more/);
  assert.throws(() => runOp('FusedMatMul', { epilogue: { residual: 'before_activation' } }, [a, b], [2, 2]), /FusedMatMul: has 2 inputs; its epilogue '\+residual' needs 3/);
});

test('Conv matches a brute-force sum on random shapes, groups, strides, dilations and pads (1-D to 3-D)', () => {
  let seed = 11;
  const rand = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648);
  const int = (lo, hi) => lo + Math.floor(rand() * (hi - lo + 1));
  for (let round = 0; round < 40; ++round) {
    const r = int(1, 3);
    const group = int(1, 2);
    const C = group * int(1, 2), M = group * int(1, 2), N = int(1, 2);
    const inS = [], k = [], s = [], d = [], pb = [], pe = [], out = [];
    for (let j = 0; j < r; ++j) {
      inS.push(int(1, 6));
      d.push(int(1, 2));
      k.push(int(1, 3));
      s.push(int(1, 3));
      pb.push(int(0, 2));
      pe.push(int(0, 2));
      const span = inS[j] + pb[j] + pe[j] - ((k[j] - 1) * d[j] + 1);
      if (span < 0) k[j] = 1;  // keep the window inside the padded input
      out.push(Math.floor((inS[j] + pb[j] + pe[j] - ((k[j] - 1) * d[j] + 1)) / s[j]) + 1);
    }
    const xShape = [N, C, ...inS], wShape = [M, C / group, ...k], yShape = [N, M, ...out];
    const x = Float32Array.from({ length: product(xShape) }, () => Math.round(rand() * 20 - 10));
    const w = Float32Array.from({ length: product(wShape) }, () => Math.round(rand() * 6 - 3));
    const bias = Float32Array.from({ length: M }, () => Math.round(rand() * 10 - 5));
    const strides = (shape) => shape.map((_, i) => product(shape.slice(i + 1)));
    const [xs, ws] = [strides(xShape), strides(wShape)];
    const want = [];
    const each = (dims, f, at = []) => (at.length === dims.length ? f(at) : [...Array(dims[at.length]).keys()].forEach((i) => each(dims, f, [...at, i])));
    each([N, M, ...out], ([n, m, ...o]) => {
      let sum = 0;
      const g = Math.floor(m / (M / group));
      for (let c = 0; c < C / group; ++c) {
        each(k, (kk) => {
          const pos = kk.map((q, j) => o[j] * s[j] - pb[j] + q * d[j]);
          if (pos.some((p, j) => p < 0 || p >= inS[j])) return;
          const xi = n * xs[0] + (g * (C / group) + c) * xs[1] + pos.reduce((a, p, j) => a + p * xs[2 + j], 0);
          const wi = m * ws[0] + c * ws[1] + kk.reduce((a, q, j) => a + q * ws[2 + j], 0);
          sum += x[xi] * w[wi];
        });
      }
      want.push(sum + bias[m]);
    });
    const attrs = { group, strides: s, dilations: d, pads: [...pb, ...pe] };
    const got = runOp('Conv', attrs, [{ data: x, shape: xShape }, { data: w, shape: wShape }, { data: bias, shape: [M] }], yShape);
    assert.deepEqual([...got], want, JSON.stringify({ xShape, wShape, ...attrs }));
  }
});

test('ConvTranspose is the adjoint of Conv: <ConvTranspose(x), y> = <x, Conv(y)> on random geometries', () => {
  let seed = 5;
  const rand = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648);
  const int = (lo, hi) => lo + Math.floor(rand() * (hi - lo + 1));
  for (let round = 0; round < 30; ++round) {
    const r = int(1, 2);
    const C = int(1, 3), M = int(1, 3);
    const inS = [], k = [], s = [], d = [], pads = new Array(2 * r);
    for (let j = 0; j < r; ++j) {
      inS.push(int(1, 4));
      k.push(int(1, 3));
      s.push(int(1, 3));
      d.push(int(1, 2));
      const full = s[j] * (inS[j] - 1) + (k[j] - 1) * d[j] + 1;
      pads[j] = int(0, Math.min(2, Math.floor((full - 1) / 2)));
      pads[j + r] = int(0, Math.min(2, Math.floor((full - 1) / 2)));
    }
    const outS = inS.map((n, j) => s[j] * (n - 1) + (k[j] - 1) * d[j] + 1 - pads[j] - pads[j + r]);
    const xShape = [1, C, ...inS], wShape = [C, M, ...k], yShape = [1, M, ...outS];
    const x = Float32Array.from({ length: product(xShape) }, () => Math.round(rand() * 8 - 4));
    const w = Float32Array.from({ length: product(wShape) }, () => Math.round(rand() * 6 - 3));
    const y = Float32Array.from({ length: product(yShape) }, () => Math.round(rand() * 8 - 4));
    const attrs = { strides: s, dilations: d, pads };
    const ct = runOp('ConvTranspose', attrs, [{ data: x, shape: xShape }, { data: w, shape: wShape }], yShape);
    // Conv with W read as [C, M, k...]: M channels in, C out, the same window.
    const cv = runOp('Conv', attrs, [{ data: y, shape: yShape }, { data: w, shape: wShape }], xShape);
    const dot = (p, q) => p.reduce((a, v, i) => a + v * q[i], 0);
    assert.equal(dot(ct, y), dot(x, cv), JSON.stringify({ xShape, wShape, ...attrs }));
  }
});
