// ops.test.mjs — node --test checks of the wasm runtime's JavaScript operators (runtime/ops.mjs)
// against small cases computed by hand (the semantics of graph/kernels/*.cpp).
import assert from 'node:assert/strict';
import test from 'node:test';

import { broadcastShape, poolGeometry, runOp } from '../ops.mjs';

const t = (shape, values) => ({ shape, data: Float32Array.from(values) });
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
  assert.throws(() => runOp('Gather', {}, [t([1], [1])], [1]), /Gather: is not an operator the wasm runtime runs/);
  assert.throws(() => runOp('Relu', {}, [t([2], [1, 2])], [3]), /Relu: computes 2 elements/);
  assert.deepEqual([...runOp('Flatten', { axis: 1 }, [t([1, 2, 1], [5, 6])], [1, 2])], [5, 6]);
});
