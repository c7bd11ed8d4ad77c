// units.test.mjs — node --test checks of the agent's browser-independent modules: the seeded
// inputs against golden bits printed by the C++ generator (codegen/seeded_random.cpp), the large
// seed path, packing/unpacking layouts, and the sampled reference check.
import assert from 'node:assert/strict';
import test from 'node:test';

import { touchedFloat32Array } from '../../runtime/host_array.mjs';
import { pack, unpack } from '../../runtime/layout.mjs';
import { ErrorNo, checkInputShapes, checkSamples, inputNames, inputShapes, nextNumber, refuseScratch, timeEvaluator, workloadSizes } from '../measure.mjs';
import { seededTensor } from '../seeded_random.mjs';
import { shortRendererName } from '../webgl2.mjs';
import { shortAdapterName } from '../webgpu.mjs';

// seeded_tensor(seed, id, 5) from the C++ generator, as fp32 bit patterns.
const GOLDEN = [
  [0n, 0, '3f444150 be0c3b10 bf727746 3f711770 bf498cee'],
  [0n, 1, 'bf25e1b0 bda7a910 3d4e9760 be8f8adc 3dced150'],
  [42n, 0, '3ef75cc8 bf2e203a bee2b664 be9f8c7c bf6c8750'],
  [42n, 1, '3f11bb76 bf099996 bedbb000 bf7dc110 3e9e6128'],
  [0xFFFFFFFFFFFFFFFFn, 0, '3f49b2e2 3f533ff0 bf0fa010 be171268 3ed2811c'],
  [0xFFFFFFFFFFFFFFFFn, 1, 'be2d1af8 bf6ed5b2 bf68f90c bf214d82 bdc9a1b0'],
  [12345678901234567890n, 0, '3f72b3a8 3dee4bd0 bea6f108 bf016d2c be1feb60'],
  [12345678901234567890n, 1, 'bec680a0 3dbd4bb0 3e9afc10 bf577474 be786758'],
];

test('seeded tensors match the C++ generator bit for bit', () => {
  for (const [seed, id, hex] of GOLDEN) {
    const bits = new Uint32Array(seededTensor(seed, id, 5).buffer);
    assert.equal([...bits].map((x) => x.toString(16).padStart(8, '0')).join(' '), hex,
      `seed ${seed} tensor ${id}`);
  }
  // Small seeds may come as plain numbers.
  assert.deepEqual(seededTensor(42, 0, 5), seededTensor(42n, 0, 5));
});

test('pack: RGBA along the last axis, zero-padded, and R layouts copy', () => {
  const logical = Float32Array.from({ length: 2 * 5 }, (_, i) => i + 1);  // [2,5]
  const rgba = pack({ shape: [2, 5], pack_axis: 1, width: 2, height: 2 }, logical);
  assert.deepEqual([...rgba], [1, 2, 3, 4, 5, 0, 0, 0, 6, 7, 8, 9, 10, 0, 0, 0]);
  const columns = pack({ shape: [2, 5], pack_axis: 0, width: 5, height: 1 }, logical);
  assert.deepEqual([...columns.slice(0, 8)], [1, 6, 0, 0, 2, 7, 0, 0]);
  const red = pack({ shape: [2, 5], pack_axis: -1, width: 5, height: 2 }, logical);
  assert.deepEqual([...red], [...logical]);
  assert.throws(() => pack({ shape: [3, 5], pack_axis: -1, width: 5, height: 3 }, logical));
});

test('unpack: rows_per_item render targets back to row-major', () => {
  // 3x4 output, 2 rows per item, 4 channels: items = 2 row blocks x 1 col block.
  const out = { rows: 3, cols: 4, rows_per_item: 2, channels: 4, width: 1, height: 2 };
  const target0 = new Float32Array([0, 1, 2, 3, 8, 9, 10, 11]);  // rows 0 and 2
  const target1 = new Float32Array([4, 5, 6, 7, -1, -1, -1, -1]);  // row 1 (row 3 is padding)
  assert.deepEqual([...unpack(out, [target0, target1])], [...Array(12).keys()]);
});

/**
 * A 5x6 output, 2 rows per item, 4 channels: 2 col blocks (the second holds cols 4, 5 and two
 * padding floats), 3 row blocks; target j holds rows 2b + j, item t at floats 4t .. 4t + 3, and
 * output element i is i.
 */
function raggedTargets() {
  const out = { rows: 5, cols: 6, rows_per_item: 2, channels: 4, width: 6, height: 1 };
  const targets = [0, 1].map((j) => {
    const t = new Float32Array(6 * 4).fill(-1);
    for (let b = 0; b < 3; ++b) {
      const row = 2 * b + j;
      for (let col = 0; col < 6 && row < 5; ++col) t[(b * 2 + (col >> 2)) * 4 + (col & 3)] = row * 6 + col;
    }
    return t;
  });
  return { out, targets };
}

test('unpack: ragged column blocks, R targets, and a short target leaves NaN', () => {
  const { out, targets } = raggedTargets();
  assert.deepEqual([...unpack(out, targets)], [...Array(30).keys()]);
  // The same with one float a texel (R targets): 6 items of 1 col per row block.
  const red = { rows: 3, cols: 2, rows_per_item: 2, channels: 1, width: 4, height: 1 };
  assert.deepEqual([...unpack(red, [new Float32Array([0, 1, 4, 5]), new Float32Array([2, 3, -1, -1])])],
                   [0, 1, 2, 3, 4, 5]);
  // Target 1 three items short: row 3's second block (cols 4, 5) was never read back, so it
  // stays NaN (item 5 would be row 5, past the output).
  const short = unpack(out, [targets[0], targets[1].subarray(0, 3 * 4)]);
  assert.deepEqual([...short.subarray(0, 22)], [...Array(22).keys()]);
  assert.ok(short.subarray(22, 24).every(Number.isNaN));
  assert.deepEqual([...short.subarray(24)], [24, 25, 26, 27, 28, 29]);
});

/**
 * The feedback buffer of a vertex-stage kernel whose output is `rows` x `cols`, items of 2 rows x
 * 4 cols, item t = (row block)·(col blocks) + col block; row j of item t at floats
 * (t*2 + j)*4 .. +3 (OutputLayout in C++). Output element i is i; padding floats are -1.
 */
function feedbackBuffer(rows, cols) {
  const colBlocks = Math.ceil(cols / 4);
  const items = Math.ceil(rows / 2) * colBlocks;
  const buffer = new Float32Array(items * 2 * 4).fill(-1);
  for (let t = 0; t < items; ++t) {
    for (let j = 0; j < 2; ++j) {
      const row = Math.floor(t / colBlocks) * 2 + j;
      for (let c = 0; c < 4; ++c) {
        const col = (t % colBlocks) * 4 + c;
        if (row < rows && col < cols) buffer[(t * 2 + j) * 4 + c] = row * cols + col;
      }
    }
  }
  return buffer;
}

test('unpack: a transform feedback buffer interleaves the rows of each item', () => {
  // 3x8 output: 2 row blocks x 2 col blocks, row 3 is padding.
  const out = { rows: 3, cols: 8, rows_per_item: 2, channels: 4, width: 4, height: 1, feedback: true };
  const buffer = feedbackBuffer(3, 8);
  assert.equal(buffer[(1 * 2 + 1) * 4 + 2], 14, 'row 1, col 6: item 1, its row 1, float 2');
  assert.deepEqual([...unpack(out, [buffer])], [...Array(24).keys()]);
  assert.throws(() => unpack(out, [buffer, buffer]), /expected 1 feedback buffer, got 2/);
});

test('unpack: a feedback buffer with ragged column and row blocks, whole or short', () => {
  // 5x6 output: 3 row blocks x 2 col blocks (the second holds cols 4 and 5 and two padding
  // floats; row 5 of the last row block is padding).
  const out = { rows: 5, cols: 6, rows_per_item: 2, channels: 4, width: 6, height: 1, feedback: true };
  const buffer = feedbackBuffer(5, 6);
  // Every item captured: every element comes from the buffer, stale values all overwritten.
  const into = new Float32Array(30).fill(7);
  assert.equal(unpack(out, [buffer], into), into);
  assert.deepEqual([...into], [...Array(30).keys()]);
  // The last item missing: its rows' cols 4 and 5 (row 4 only; row 5 is padding) stay NaN.
  const short = unpack(out, [buffer.subarray(0, 5 * 2 * 4)], new Float32Array(30).fill(7));
  assert.deepEqual([...short.subarray(0, 28)], [...Array(28).keys()]);
  assert.ok(short.subarray(28).every(Number.isNaN), 'uncaptured floats are NaN, not stale');
});

test('unpack into a given array: the same values, into that array; a wrong length is refused', () => {
  const { out, targets } = raggedTargets();
  // Stale values in the destination must all be overwritten (here by the output or NaN).
  const into = new Float32Array(30).fill(7);
  assert.equal(unpack(out, targets, into), into);
  assert.deepEqual([...into], [...Array(30).keys()]);
  const shortInto = new Float32Array(30).fill(7);
  unpack(out, [targets[0], targets[1].subarray(0, 3 * 4)], shortInto);
  assert.ok(shortInto.subarray(22, 24).every(Number.isNaN), 'uncovered floats are NaN, not stale');
  assert.throws(() => unpack(out, targets, new Float32Array(29)), /destination holds 29 floats, the output 30/);
});

test('touchedFloat32Array: a new zeroed array every call, pages and tail included', () => {
  for (const length of [0, 1, 1023, 1024, 1025, 5000]) {
    const a = touchedFloat32Array(length);
    assert.ok(a instanceof Float32Array);
    assert.equal(a.length, length);
    assert.ok(a.every((v) => v === 0), `length ${length}: all zeros`);
  }
  const a = touchedFloat32Array(4096);
  const b = touchedFloat32Array(4096);
  assert.notEqual(a.buffer, b.buffer);
  assert.throws(() => touchedFloat32Array(-1), RangeError);
});

test('checkSamples applies the tolerance and refuses NaN', () => {
  const output = new Float32Array([1, 2, NaN]);
  assert.equal(checkSamples(output, [[0, 1.0000001, 1, 1e-5], [1, 2, 2, 1e-5]]).ok, true);
  const bad = checkSamples(output, [[1, 2.5, 2, 1e-3], [2, 0, 0, 1], [7, 0, 0, 1]]);
  assert.equal(bad.ok, false);
  assert.equal(bad.mismatches, 3);
  assert.match(bad.message, /^3 of 3 sampled outputs differ from the reference: output\[1\] = 2, expected 2.5 ± 0.001; output\[2\] = nan/);
  assert.match(bad.message, /output\[7\] missing/);
});

test('time_evaluator growth of number', () => {
  assert.equal(nextNumber(1, 0.001, 100), 101);  // 1 ms per run → fill 100 ms
  assert.equal(nextNumber(10, 0.099, 100), 16);  // nearly there: still ×1.618 (rounded)
});

test('a batch below the clock resolution is timed again with more runs, never a 0 cost', async () => {
  // A fake clock with 100 µs resolution over a 7 µs kernel: fewer than 15 runs read 0 s.
  const timeBatch = async (n) => Math.floor((n * 7e-6) / 1e-4) * 1e-4;
  const batches = [];
  const { costs } = await timeEvaluator({ number: 1, repeat: 3, min_repeat_ms: 0 }, timeBatch,
                                         (runs, perRun) => batches.push(perRun));
  assert.equal(costs.length, 3);
  for (const c of costs) assert.ok(c > 0, `cost ${c} must be positive`);
  assert.ok(batches.slice(0, 4).every((c) => c === 0));  // 1, 2, 4, 8 runs read 0
  assert.ok(Math.abs(costs[0] - 6.25e-6) < 1e-12);       // 16 runs read 100 µs
});

test('renderer names become short keys', () => {
  assert.equal(shortRendererName('ANGLE (Google, Vulkan 1.3.0 (SwiftShader Device (Subzero) (0x0000C0DE)), SwiftShader driver)'), 'swiftshader');
  assert.equal(shortRendererName('ANGLE (Mesa, llvmpipe (LLVM 15.0.6, 256 bits), OpenGL ES 3.2)'), 'llvmpipe');
  assert.equal(shortRendererName('ANGLE (NVIDIA Corporation, NVIDIA H200/PCIe/SSE2, OpenGL 4.5)'), 'nvidia-h200');
});

test('WebGPU adapter names make stable keys', () => {
  assert.equal(shortAdapterName({ vendor: 'google', architecture: 'swiftshader', description: '' }), 'swiftshader');
  assert.equal(shortAdapterName({ vendor: 'nvidia', architecture: 'hopper', description: 'NVIDIA H100 80GB HBM3' }),
    'nvidia-h100-80gb-hbm3');
  assert.equal(shortAdapterName({ vendor: 'intel', architecture: 'gen-12lp' }), 'intel-gen-12lp');
  assert.equal(shortAdapterName({}), 'unknown');
});

test('epilogue inputs follow data and weight, and a wrong residual shape is refused by name', () => {
  const conv = { op: 'conv2d', N: 1, C: 3, H: 7, W: 7, K: 5, R: 3, S: 3, stride: 2, pad: 1,
    epilogue: { bias: true, activation: 'relu', residual: 'before_activation' } };
  assert.deepEqual(inputShapes(conv), [[1, 3, 7, 7], [5, 3, 3, 3], [5], [1, 5, 4, 4]]);
  assert.deepEqual(inputNames(conv), ['data', 'weight', 'bias', 'residual']);
  assert.deepEqual(workloadSizes(conv).inputs, [147, 135, 5, 80]);
  const dense = { op: 'dense', M: 4, N: 6, K: 8, epilogue: { bias: false, activation: 'hard_swish', residual: 'after_activation' } };
  assert.deepEqual(inputShapes(dense), [[4, 8], [8, 6], [4, 6]]);
  assert.deepEqual(inputShapes({ op: 'dense', M: 4, N: 6, K: 8 }), [[4, 8], [8, 6]]);
  const layouts = inputShapes(conv).map((shape) => ({ shape, pack_axis: -1 }));
  checkInputShapes({ inputs: layouts }, conv);
  layouts[3] = { shape: [1, 5, 4, 3], pack_axis: -1 };
  assert.throws(() => checkInputShapes({ inputs: layouts }, conv),
    /artifact input 3 \(residual\) has shape \[1,5,4,3\] but the workload's residual is \[1,5,4,4\]/);
  assert.throws(() => checkInputShapes({ inputs: layouts.slice(0, 2) }, conv),
    /2 input layouts; the workload has 4 inputs \(data, weight, bias, residual\)/);
});

test('an artifact that asks for scratch buffers (gles-compute k_groups) is refused by name', () => {
  // Older artifacts have no scratch fields; zeros mean none.
  refuseScratch({ target: 'webgpu' }, 'WebGPU');
  refuseScratch({ target: 'webgpu', scratch_floats: 0, scratch_counters: 0 }, 'WebGPU');
  for (const scratch of [{ scratch_floats: 4096 }, { scratch_counters: 16 }, { scratch_floats: 8, scratch_counters: 1 }]) {
    assert.throws(() => refuseScratch({ target: 'webgpu', ...scratch }, 'WebGPU'), (e) => {
      assert.equal(e.errorNo, ErrorNo.INSTANTIATION);
      assert.match(e.message, /asks for scratch buffers \(scratch_floats \d+, scratch_counters \d+\), which WebGPU does not provide/);
      return true;
    }, JSON.stringify(scratch));
  }
});
