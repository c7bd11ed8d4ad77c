// model_vs_web.test.mjs — bench/model_vs_web's browser-independent parts: the ONNX reader
// (onnx.mjs) on models built here byte by byte (no file of ../shared needed), the tfjs planner's
// graph mapping and weight re-layout checked without tfjs (a recording stand-in for `tf`), the
// row verdicts and table of bench.mjs, its handling of engines that fail (benchModel against a
// stand-in for the page), and the thread count read from a webtune wasm package.
//
//   node --test bench/model_vs_web/test/model_vs_web.test.mjs

import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import test from 'node:test';

import { DataType, parseModel, serializeModel, tensorValues } from '../onnx.mjs';
import { benchModel, chooseThreads, formatProfile, formatTable, median, packageThreads, reason, rowSummary, threadsText } from '../bench.mjs';
import { planTfjsModel } from '../tfjs_model.mjs';

/** A tiny ResNet-like block: Conv+Relu, depthwise Conv+Clip(0,6), Add, MaxPool, GAP, Flatten, Gemm. */
function tinyModel({ asFloatData = false } = {}) {
  const w1 = Array.from({ length: 4 * 2 * 3 * 3 }, (_, i) => (i % 7) - 3);  // [M=4, C=2, 3, 3]
  const wd = Array.from({ length: 4 * 1 * 3 * 3 }, (_, i) => i / 10);      // depthwise [4, 1, 3, 3]
  const fc = Array.from({ length: 3 * 4 }, (_, i) => i);                     // [N=3, K=4], transB
  return serializeModel({
    nodes: [
      { opType: 'Conv', inputs: ['input', 'w1', 'b1'], outputs: ['c1'], name: 'conv1',
        attributes: { group: 1, kernel_shape: [3, 3], pads: [1, 1, 1, 1], strides: [1, 1], dilations: [1, 1] } },
      { opType: 'Relu', inputs: ['c1'], outputs: ['r1'], name: 'relu1' },
      { opType: 'Conv', inputs: ['r1', 'wd'], outputs: ['c2'], name: 'dw',
        attributes: { group: 4, kernel_shape: [3, 3], pads: [1, 1, 1, 1], strides: [1, 1] } },
      { opType: 'Constant', inputs: [], outputs: ['lo'], name: 'lo', attributes: { value: { name: '', dims: [], values: [0] } } },
      { opType: 'Clip', inputs: ['c2', 'lo', 'hi'], outputs: ['k2'], name: 'clip' },
      { opType: 'Add', inputs: ['k2', 'r1'], outputs: ['a'], name: 'add' },
      { opType: 'MaxPool', inputs: ['a'], outputs: ['p'], name: 'pool',
        attributes: { kernel_shape: [3, 3], strides: [2, 2], pads: [1, 1, 1, 1], ceil_mode: 0 } },
      { opType: 'GlobalAveragePool', inputs: ['p'], outputs: ['g'], name: 'gap' },
      { opType: 'Flatten', inputs: ['g'], outputs: ['f'], name: 'flatten', attributes: { axis: 1 } },
      { opType: 'Gemm', inputs: ['f', 'fc', 'fcb'], outputs: ['logits'], name: 'fc', attributes: { alpha: 1.0, beta: 1.0, transB: 1 } },
    ],
    initializers: [
      { name: 'w1', dims: [4, 2, 3, 3], values: w1, asFloatData },
      { name: 'b1', dims: [4], values: [0.5, -0.5, 1, -1], asFloatData },
      { name: 'wd', dims: [4, 1, 3, 3], values: wd, asFloatData },
      { name: 'hi', dims: [], values: [6] },
      { name: 'fc', dims: [3, 4], values: fc },
      { name: 'fcb', dims: [3], values: [1, 2, 3] },
      { name: 'shape', dims: [2], values: [1, -1], dataType: DataType.INT64 },
    ],
    inputs: [{ name: 'input', shape: [1, 2, 8, 8] }],
    outputs: [{ name: 'logits', shape: [1, 3] }],
  });
}

test('onnx.mjs: a model written here reads back (nodes, attributes, initializers, shapes)', () => {
  for (const asFloatData of [false, true]) {
    const m = parseModel(tinyModel({ asFloatData }));
    assert.equal(m.irVersion, 7);
    assert.deepEqual(m.opsets, { '': 13 });
    const g = m.graph;
    assert.deepEqual(g.inputs, [{ name: 'input', elemType: 1, shape: [1, 2, 8, 8] }]);
    assert.deepEqual(g.outputs.map((o) => [o.name, o.shape]), [['logits', [1, 3]]]);
    assert.deepEqual(g.nodes.map((n) => n.opType),
      ['Conv', 'Relu', 'Conv', 'Constant', 'Clip', 'Add', 'MaxPool', 'GlobalAveragePool', 'Flatten', 'Gemm']);
    const conv = g.nodes[0];
    assert.deepEqual(conv.inputs, ['input', 'w1', 'b1']);
    assert.deepEqual(conv.attributes, { group: 1, kernel_shape: [3, 3], pads: [1, 1, 1, 1], strides: [1, 1], dilations: [1, 1] });
    assert.equal(g.nodes[9].attributes.transB, 1);
    assert.equal(g.nodes[9].attributes.alpha, 1);
    const w1 = tensorValues(g.initializers.get('w1'));
    assert.ok(w1 instanceof Float32Array);
    assert.deepEqual([...w1.slice(0, 8)], [-3, -2, -1, 0, 1, 2, 3, -3]);
    assert.deepEqual(g.initializers.get('w1').dims, [4, 2, 3, 3]);
    assert.deepEqual(tensorValues(g.initializers.get('shape')), [1, -1]);  // negative int64 kept
    assert.deepEqual([...tensorValues(g.nodes[3].attributes.value)], [0]);  // Constant's tensor
  }
});

test('onnx.mjs: a truncated file and bad tensors are refused with the place named', () => {
  const bytes = tinyModel();
  assert.throws(() => parseModel(bytes.subarray(0, bytes.length - 7)), /onnx: .* at byte \d+/);
  assert.throws(() => parseModel(new Uint8Array([0x08, 0x07])), /no graph/);
  assert.throws(() => tensorValues({ name: 'w', dims: [2, 2], dataType: DataType.FLOAT, floatData: [1, 2, 3], raw: null }),
    /tensor 'w' has 3 values for dims \[2,2\]/);
  assert.throws(() => tensorValues({ name: 'h', dims: [1], dataType: 10, raw: new Uint8Array(2) }), /tensor 'h' has data type 10/);
  assert.throws(() => tensorValues({ name: 'e', dims: [1], dataType: 1, external: true }), /external file/);
});

/** A stand-in for `tf` that records calls and keeps shapes and the tensors' values (no math). */
function recordingTf() {
  const calls = [];
  const tensor = (shape, values = null) => ({ shape, rank: shape.length, values, dispose() {} });
  const tf = {
    calls,
    getBackend: () => 'recording',
    tensor: (values, shape) => tensor(shape, values),
    tidy: (f) => f(),
    transpose: (x, perm) => { calls.push(['transpose', perm]); return tensor(perm.map((p) => x.shape[p])); },
    relu: (x) => { calls.push(['relu']); return x; },
    relu6: (x) => { calls.push(['relu6']); return x; },
    clipByValue: (x, lo, hi) => { calls.push(['clip', lo, hi]); return x; },
    add: (a) => { calls.push(['add']); return a; },
    maxPool: (x, k, s, pad) => {
      calls.push(['maxPool', k, s, pad]);
      const o = (d) => Math.floor((d + 2 * pad - k[0]) / s[0]) + 1;
      return tensor([x.shape[0], o(x.shape[1]), o(x.shape[2]), x.shape[3]]);
    },
    mean: (x, axes) => { calls.push(['mean', axes]); return tensor([x.shape[0], 1, 1, x.shape[3]]); },
    reshape: (x, shape) => { calls.push(['reshape', shape]); return tensor([x.shape[0], x.shape.slice(1).reduce((a, b) => a * b, 1)]); },
    fused: {
      conv2d: (a) => { calls.push(['conv2d', a.filter.shape, a.filter.values, a.bias?.values, a.activation, a.pad]); return tensor([...a.x.shape.slice(0, 3), a.filter.shape[3]]); },
      depthwiseConv2d: (a) => { calls.push(['depthwiseConv2d', a.filter.shape, a.filter.values, a.bias, a.activation]); return a.x; },
      matMul: (a) => { calls.push(['matMul', a.b.shape, a.b.values, a.bias?.values, a.transposeB]); return tensor([1, a.b.shape[1]]); },
    },
  };
  return tf;
}

test('tfjs_model.mjs: ONNX ops become fused NHWC tfjs ops with re-laid-out weights', async () => {
  const plan = planTfjsModel(tinyModel(), 'tiny');
  assert.deepEqual(plan.ops, {
    'tf.fused.conv2d(bias, relu)': 1, 'tf.fused.depthwiseConv2d(no bias, relu6)': 1, 'tf.add': 1,
    'tf.maxPool': 1, 'tf.mean': 1, 'tf.reshape': 1, 'tf.fused.matMul(bias)': 1,
  });
  const tf = recordingTf();
  const inst = plan.instantiate(tf);
  await assert.rejects(inst.run(new Float32Array(5)), /takes 128 floats, not 5/);
  tf.calls.length = 0;
  // run() reads y.data(): give the recording output a data() method through tidy's result.
  tf.tidy = (f) => { const y = f(); y.data = async () => new Float32Array(3); return y; };
  const out = await inst.run(new Float32Array(128));
  assert.equal(out.length, 3);
  const [transpose, conv, dw, add, pool, mean, reshape, matMul] = tf.calls;
  assert.deepEqual(transpose, ['transpose', [0, 2, 3, 1]]);  // NCHW input → NHWC
  // Conv: OIHW [4,2,3,3] → HWIO [3,3,2,4]; element (m, c, h, w) lands at ((h·3 + w)·2 + c)·4 + m.
  assert.equal(conv[0], 'conv2d');
  assert.deepEqual(conv[1], [3, 3, 2, 4]);
  const w1 = Array.from({ length: 72 }, (_, i) => (i % 7) - 3);
  for (const [m, c, h, w] of [[0, 0, 0, 0], [3, 1, 2, 1], [2, 0, 1, 2]]) {
    assert.equal(conv[2][((h * 3 + w) * 2 + c) * 4 + m], w1[((m * 2 + c) * 3 + h) * 3 + w]);
  }
  assert.deepEqual([...conv[3]], [0.5, -0.5, 1, -1]);
  assert.equal(conv[4], 'relu');  // Relu fused (the Conv's only consumer)
  assert.deepEqual(conv[5], [[0, 0], [1, 1], [1, 1], [0, 0]]);
  // Depthwise [4,1,3,3] → [3,3,4,1]: (c, h, w) at (h·3 + w)·4 + c; Clip(0, 6) fused as relu6.
  assert.deepEqual(dw[1], [3, 3, 4, 1]);
  assert.ok(Math.abs(dw[2][(2 * 3 + 1) * 4 + 3] - (3 * 9 + 2 * 3 + 1) / 10) < 1e-6);
  assert.equal(dw[3], undefined);
  assert.equal(dw[4], 'relu6');
  assert.deepEqual(add, ['add']);
  assert.deepEqual(pool, ['maxPool', [3, 3], [2, 2], 1]);
  assert.deepEqual(mean, ['mean', [1, 2]]);
  assert.deepEqual(reshape, ['reshape', [1, -1]]);
  // Gemm transB: B [3, 4] transposed to [4, 3] at build time; element (n, k) at k·3 + n.
  assert.deepEqual(matMul[1], [4, 3]);
  assert.equal(matMul[2][2 * 3 + 1], 1 * 4 + 2);
  assert.deepEqual([...matMul[3]], [1, 2, 3]);
  assert.equal(matMul[4], false);
});

test('tfjs_model.mjs: unsupported graphs are refused naming the node', () => {
  const bad = serializeModel({
    nodes: [{ opType: 'Softsign', inputs: ['input'], outputs: ['y'], name: 'odd' }],
    inputs: [{ name: 'input', shape: [1, 1, 2, 2] }], outputs: [{ name: 'y', shape: [1, 1, 2, 2] }],
  });
  assert.throws(() => planTfjsModel(bad), /node 'odd' \(Softsign\): no TensorFlow.js mapping/);
  const hardSigmoid = serializeModel({
    nodes: [{ opType: 'HardSigmoid', inputs: ['input'], outputs: ['y'], name: 'hs' }],
    inputs: [{ name: 'input', shape: [1, 1, 2, 2] }], outputs: [{ name: 'y', shape: [1, 1, 2, 2] }],
  });
  assert.throws(() => planTfjsModel(hardSigmoid), /node 'hs' \(HardSigmoid\): no TensorFlow.js mapping/);
  const ceil = serializeModel({
    nodes: [{ opType: 'MaxPool', inputs: ['input'], outputs: ['y'], name: 'pool', attributes: { kernel_shape: [2, 2], strides: [2, 2], ceil_mode: 1 } }],
    inputs: [{ name: 'input', shape: [1, 1, 3, 3] }], outputs: [{ name: 'y', shape: [1, 1, 2, 2] }],
  });
  assert.throws(() => planTfjsModel(ceil), /node 'pool' \(MaxPool\): ceil_mode 1 is not handled/);
  const grouped = serializeModel({
    nodes: [{ opType: 'Conv', inputs: ['input', 'w'], outputs: ['y'], name: 'g2', attributes: { group: 2, kernel_shape: [1, 1] } }],
    initializers: [{ name: 'w', dims: [4, 2, 1, 1], values: new Array(8).fill(1) }],
    inputs: [{ name: 'input', shape: [1, 4, 2, 2] }], outputs: [{ name: 'y', shape: [1, 4, 2, 2] }],
  });
  assert.throws(() => planTfjsModel(grouped), /node 'g2' \(Conv\): group 2 with C 4, M 4/);
  const dyn = serializeModel({
    nodes: [{ opType: 'Relu', inputs: ['input'], outputs: ['y'] }],
    inputs: [{ name: 'input', shape: ['N', 3, 4, 4] }], outputs: [{ name: 'y', shape: ['N', 3, 4, 4] }],
  });
  assert.throws(() => planTfjsModel(dyn), /not a fixed 4-D NCHW shape/);
});

test('bench.mjs: row verdicts against the faster anchor, "—" without webtune', () => {
  assert.equal(median([3, 1, 2]), 2);
  assert.equal(median([4, 1, 2, 3]), 2.5);
  const row = rowSummary('webgpu', {
    'webtune-webgpu': { median_ms: 100 }, 'ort-webgpu': { median_ms: 300 }, 'ort-webgpu-jsep': { error: 'x' },
    'tfjs-webgpu': { median_ms: 250 },
  });
  assert.equal(row.fastest_anchor, 'tfjs-webgpu');
  assert.equal(row.speedup_vs_fastest, 2.5);
  assert.equal(row.met, true);
  assert.equal(row.speedups['ort-webgpu'], 3);
  const wasm = rowSummary('wasm', { 'webtune-wasm': { median_ms: 100 }, 'ort-wasm': { median_ms: 110 }, 'tfjs-wasm': { median_ms: 150 } });
  assert.equal(wasm.met, false);  // 1.1× < 1.2×
  const none = rowSummary('webgl2', { 'webtune-webgl2': { error: 'no --webtune-packages' }, 'ort-webgl': { median_ms: 10 }, 'tfjs-webgl': { median_ms: 20 } });
  assert.equal(none.fastest_anchor, 'ort-webgl');
  assert.equal(none.speedup_vs_fastest, null);
  assert.equal(none.met, null);
  const check = { max_abs_err: 1e-6, tolerance: 1e-3, ok: true };
  const table = formatTable([{
    model: 'm', rows: [none],
    engines: {
      'webtune-webgl2': { error: 'no --webtune-packages' },
      'ort-webgl': { median_ms: 10, samples_ms: [10, 10], round_medians_ms: [9, 11], check },
      'tfjs-webgl': { median_ms: 20, samples_ms: [20], round_medians_ms: [20], check: { ...check, ok: false, max_abs_err: 0.5 } },
    },
  }]);
  assert.match(table, /m +webgl2 +webtune-webgl2 +— \(no --webtune-packages\)/);
  assert.match(table, /ort-webgl +10\.0 +9\.0–11\.0 +2 +1\.0e-6 \/ 1\.0e-3 +—/);
  assert.match(table, /5\.0e-1 \/ 1\.0e-3 WRONG/);
  assert.match(table, /m webgl2: webtune — ms; faster anchor ort-webgl 10\.0 ms; speedup — \(goal ≥ 2×\)/);
});

test('bench.mjs: a webtune wasm package\'s thread count is its kernels\' maximum', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'model-bench-'));
  try {
    assert.equal(packageThreads(dir), null);
    fs.mkdirSync(path.join(dir, 'kernels'));
    fs.writeFileSync(path.join(dir, 'kernels', '000.json'), JSON.stringify({ target: 'wasm', wasm: { threads: 1 } }));
    fs.writeFileSync(path.join(dir, 'kernels', '001.json'), JSON.stringify({ target: 'wasm', wasm: { threads: 2 } }));
    fs.writeFileSync(path.join(dir, 'kernels', '002.json'), JSON.stringify({ target: 'wasm' }));
    assert.equal(packageThreads(dir), 2);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('formatProfile prints the sums by step kind and one line per slowest step', () => {
  const text = formatProfile('resnet18', 'webtune-webgl2', {
    total_ms: 12.5, steps_count: 40,
    by: { upload: 0.5, task: 10, op: 1.25, download: 0.75, alias: 0 },
    steps: [{ step: 7, ms: 3.25, kind: 'kernel', role: 'task', task: 'C4', node: '/conv4' },
      { step: 0, ms: 0.5, kind: 'upload', role: null, task: null, node: null }],
  });
  assert.equal(text.split('\n').length, 3);
  assert.match(text, /^profile resnet18 webtune-webgl2: 40 steps, each run alone: 12\.50 ms \(upload 0\.50, task kernels 10\.00, op and relayout kernels 1\.25, download 0\.75\)/);
  assert.match(text.split('\n')[1], /step {4}7 {6}3\.25 ms {2}kernel\/task {2}C4 {2}\/conv4$/);
  assert.match(text.split('\n')[2], /step {4}0 {6}0\.50 ms {2}upload {2}- {2}$/);
});

test('formatProfile sums the non-task kernels by operator when the profile has them', () => {
  const text = formatProfile('efficientnet_b0', 'webtune-wasm', {
    total_ms: 40, steps_count: 118,
    by: { upload: 0.1, task: 30, op: 9.5, download: 0.1, alias: 0 },
    by_op: { Mul: { steps: 16, ms: 6.25 }, GlobalAveragePool: { steps: 17, ms: 3.25 } },
    steps: [{ step: 20, ms: 1.5, kind: 'kernel', role: 'op', task: null, node: '/se/Mul' }],
  });
  const lines = text.split('\n');
  assert.equal(lines.length, 3);
  assert.equal(lines[1], '  non-task kernels by operator: Mul 6.25 ms (16), GlobalAveragePool 3.25 ms (17)');
  assert.match(lines[2], /step {3}20 {6}1\.50 ms {2}kernel\/op {2}- {2}\/se\/Mul$/);
});

/**
 * A stand-in for the page's window.bench (bench.mjs pageApi()): `behaviour[engine]` is 'ok',
 * 'refuse' (prepare rejects, as ORT does for an operator it lacks), 'wrong' (the check fails),
 * 'run' (time() rejects in the second round); loadModel reports the tfjs builder's refusal for
 * model 'hsig' (as page.mjs does) and rejects for model 'gone'. Records the calls.
 */
function fakePage(behaviour) {
  const calls = [];
  const check = (ok) => ({ max_abs_err: ok ? 1e-7 : 0.5, tolerance: 1e-3, ok });
  const timedRounds = {};
  return {
    calls,
    async loadModel(m) {
      calls.push(['loadModel', m]);
      if (m === 'gone') throw new Error('cannot fetch /models/gone.onnx: HTTP 404\n    at fetchBytes (page.mjs:70)');
      return m === 'hsig'
        ? { name: m, tfjs_ops: null, tfjs_refused: "tfjs model: node 'hs' (HardSigmoid): no TensorFlow.js mapping in bench/model_vs_web/tfjs_model.mjs" }
        : { name: m, tfjs_ops: { 'tf.relu': 1 }, tfjs_refused: null };
    },
    async probeThreads(engine, m, { counts, runs }) {
      calls.push(['probeThreads', engine, m, counts, runs]);
      if (engine.startsWith('tfjs') && m === 'hsig') throw new Error("tfjs model: node 'hs' (HardSigmoid): no TensorFlow.js mapping in bench/model_vs_web/tfjs_model.mjs");
      // 1 thread: 60 ms (tfjs: wrong output), 2 threads: 40 ms, more: 45 ms.
      return counts.map((t) => (engine === 'tfjs-wasm' && t === 1
        ? { threads: t, error: 'wrong output on 1 threads: max abs error 0.5 > 0.001' }
        : { threads: t, samples_ms: Array(runs).fill(t === 1 ? 60 : t === 2 ? 40 : 45), engine_threads: t }));
    },
    async prepare(engine, m, options) {
      calls.push(['prepare', engine, m, options]);
      if (engine.startsWith('tfjs') && m === 'hsig') throw new Error("tfjs model: node 'hs' (HardSigmoid): no TensorFlow.js mapping in bench/model_vs_web/tfjs_model.mjs");
      if (behaviour[engine] === 'refuse') throw new Error("Can't create a session. ERROR_CODE: 9, ERROR_MESSAGE: Could not find an implementation for HardSigmoid(6) node with name 'hs'");
      return { engine, model: m, info: {}, check: check(behaviour[engine] !== 'wrong'), load_ms: 5, first_run_ms: 2 };
    },
    async time(engine, m, runs) {
      calls.push(['time', engine, m]);
      timedRounds[engine] = (timedRounds[engine] ?? 0) + 1;
      if (behaviour[engine] === 'run' && timedRounds[engine] === 2) throw new Error('RuntimeError: memory access out of bounds');
      return Array.from({ length: runs }, () => ({ 'webtune-webgl2': 10, 'ort-webgl': 30, 'tfjs-webgl': 25, 'ort-wasm': 40, 'tfjs-wasm': 50 })[engine]);
    },
    async release(engine, m) { calls.push(['release', engine, m]); },
    async profile() { throw new Error('no profile'); },
    async dropModel(m) { calls.push(['dropModel', m]); },
  };
}

test('bench.mjs: every engine failure is that engine "refused: <reason>" for the model; the other engines and models run', async () => {
  const behaviour = { 'ort-webgl': 'refuse', 'tfjs-webgl': 'wrong', 'webtune-webgl2': 'ok', 'ort-wasm': 'ok', 'tfjs-wasm': 'run' };
  const page = fakePage(behaviour);
  const cfg = {
    targets: ['webgl2', 'wasm'], engines: Object.keys(behaviour), rounds: 3, runs: 2, warmup: 0, settleMs: 0,
    sleep: async () => {}, webtunePackage: () => null, anchorThreads: 'best', maxThreads: 3,
  };
  const log = [];
  const models = [];
  for (const m of ['tiny', 'gone', 'hsig']) models.push(await benchModel(page, m, cfg, (l) => log.push(l)));
  const [tiny, gone, hsig] = models;
  // ORT refuses an operator at session creation; tfjs's output is wrong; tfjs wasm's run throws in round 2.
  assert.match(tiny.engines['ort-webgl'].refused, /^Can't create a session\. .*HardSigmoid/);
  assert.equal(tiny.engines['ort-webgl'].refused_at, 'prepare');
  assert.equal(tiny.engines['tfjs-webgl'].refused, 'wrong output: max abs error 0.5 > 0.001');
  assert.equal(tiny.engines['tfjs-webgl'].refused_at, 'check');
  assert.equal(tiny.engines['tfjs-wasm'].refused, 'run failed in round 2: RuntimeError: memory access out of bounds');
  assert.equal(tiny.engines['tfjs-wasm'].median_ms, null);
  assert.deepEqual(tiny.engines['tfjs-wasm'].samples_ms, [50, 50]);  // round 1's, kept in the JSON
  assert.ok(page.calls.some(([f, e, m]) => f === 'release' && e === 'tfjs-wasm' && m === 'tiny'));
  // The others are timed in every round, and the rows are computed without the refused ones.
  assert.equal(tiny.engines['webtune-webgl2'].samples_ms.length, 6);
  assert.equal(tiny.engines['ort-wasm'].samples_ms.length, 6);
  assert.equal(page.calls.filter(([f, e]) => f === 'time' && e === 'tfjs-wasm').length, 2);  // not after it failed
  assert.deepEqual(tiny.rows.map((r) => [r.target, r.fastest_anchor]), [['webgl2', null], ['wasm', 'ort-wasm']]);
  // A model that cannot be loaded: every engine refused with the reason (first line), the next model runs.
  for (const e of Object.keys(behaviour)) {
    assert.equal(gone.engines[e].refused, 'cannot load the model: cannot fetch /models/gone.onnx: HTTP 404', e);
    assert.equal(gone.engines[e].refused_at, 'load');
  }
  assert.ok(!page.calls.some(([f, , m]) => f === 'prepare' && m === 'gone'));
  // The tfjs builder's refusal: the tfjs engines refused with it, ORT's wasm engine timed.
  assert.match(hsig.engines['tfjs-wasm'].refused, /node 'hs' \(HardSigmoid\): no TensorFlow.js mapping/);
  assert.equal(hsig.engines['tfjs-wasm'].refused_at, 'threads');
  assert.match(hsig.engines['tfjs-webgl'].refused, /node 'hs' \(HardSigmoid\)/);
  assert.equal(hsig.engines['ort-wasm'].median_ms, 40);
  assert.equal(hsig.rows.find((r) => r.target === 'wasm').fastest_anchor, 'ort-wasm');
  assert.ok(log.some((l) => /hsig: the tfjs builder refuses the graph: .*HardSigmoid/.test(l)));
  // The table: one "refused: <reason>" line per refused engine, figures for the rest.
  const table = formatTable(models);
  assert.match(table, /tiny +webgl2 +ort-webgl +refused: Can't create a session\. ERROR_CODE: 9, ERROR_MESSAGE: Could not find an implementation for HardSigmoid\(6\) node with name 'hs'$/m);
  assert.match(table, /tiny +webgl2 +tfjs-webgl +refused: wrong output: max abs error 0\.5 > 0\.001$/m);
  assert.match(table, /tiny +wasm +tfjs-wasm +refused: run failed in round 2: RuntimeError: memory access out of bounds$/m);
  assert.match(table, /tiny +wasm +ort-wasm +40\.0 +40\.0–40\.0 +6 /);
  assert.match(table, /gone +wasm +ort-wasm +refused: cannot load the model: cannot fetch/);
  assert.match(table, /hsig +wasm +tfjs-wasm +refused: tfjs model: node 'hs' \(HardSigmoid\)/);
  assert.match(table, /hsig +wasm +ort-wasm +40\.0 /);
  assert.match(table, /tiny webgl2: webtune 10\.0 ms; faster anchor — — ms/);
  assert.equal(reason(new Error('a\n  b')), 'a');
  assert.equal(reason('x  y'), 'x y');
});

test('bench.mjs: --anchor-threads best probes 1..N per wasm anchor and keeps the fastest; N is used as given', async () => {
  assert.deepEqual(chooseThreads([{ threads: 1, samples_ms: [30, 10, 20] }, { threads: 2, samples_ms: [12, 15, 9] }, { threads: 3, error: 'x' }]),
    { threads: 2, median_ms: 12 });
  assert.deepEqual(chooseThreads([{ threads: 1, samples_ms: [5] }, { threads: 2, samples_ms: [5] }]), { threads: 1, median_ms: 5 });  // a tie: fewer threads
  assert.equal(chooseThreads([{ threads: 1, error: 'x' }]), null);
  const behaviour = { 'webtune-wasm': 'ok', 'ort-wasm': 'ok', 'tfjs-wasm': 'ok' };
  const cfg = {
    targets: ['wasm'], engines: Object.keys(behaviour), rounds: 1, runs: 1, warmup: 0, settleMs: 0,
    sleep: async () => {}, webtunePackage: () => null, webtuneThreads: { tiny: 2 }, maxThreads: 3,
  };
  const page = fakePage(behaviour);
  const best = await benchModel(page, 'tiny', { ...cfg, anchorThreads: 'best' }, () => {});
  // Each anchor probed on 1, 2, 3 threads, 3 runs each, then prepared on the fastest (2).
  assert.deepEqual(page.calls.filter(([f]) => f === 'probeThreads').map(([, e, , counts, runs]) => [e, counts, runs]),
    [['ort-wasm', [1, 2, 3], 3], ['tfjs-wasm', [1, 2, 3], 3]]);
  for (const e of ['ort-wasm', 'tfjs-wasm']) {
    assert.equal(page.calls.find(([f, en]) => f === 'prepare' && en === e)[3].threads, 2, e);
    assert.equal(best.engines[e].threads.chosen, 2);
    assert.equal(best.engines[e].threads.from, 'best of 1..3');
    assert.equal(best.engines[e].threads.probe.length, 3);
  }
  assert.equal(page.calls.find(([f, en]) => f === 'prepare' && en === 'webtune-wasm')[3].threads, undefined);
  assert.equal(threadsText('ort-wasm', best.engines['ort-wasm']), '2 (best of 1..3; medians 1: 60.0 ms, 2: 40.0 ms, 3: 45.0 ms)');
  assert.equal(threadsText('tfjs-wasm', best.engines['tfjs-wasm']), '2 (best of 1..3; medians 1: failed, 2: 40.0 ms, 3: 45.0 ms)');
  const table = formatTable([best]).split('\n');
  assert.equal(table[1], 'tiny: webtune-wasm threads: 2 (its kernels), ort-wasm threads: 2 (best of 1..3; medians 1: 60.0 ms, 2: 40.0 ms, 3: 45.0 ms), ' +
    'tfjs-wasm threads: 2 (best of 1..3; medians 1: failed, 2: 40.0 ms, 3: 45.0 ms)');
  assert.match(table[2], /^model +target +engine/);
  // --anchor-threads 1: no probe, both anchors prepared on 1 thread.
  const fixed = fakePage(behaviour);
  const one = await benchModel(fixed, 'tiny', { ...cfg, anchorThreads: 1 }, () => {});
  assert.ok(!fixed.calls.some(([f]) => f === 'probeThreads'));
  for (const e of ['ort-wasm', 'tfjs-wasm']) assert.equal(fixed.calls.find(([f, en]) => f === 'prepare' && en === e)[3].threads, 1, e);
  assert.match(formatTable([one]).split('\n')[1], /ort-wasm threads: 1 \(--anchor-threads 1\), tfjs-wasm threads: 1 \(--anchor-threads 1\)$/);
  // Every count failing: the anchor is refused with the (one) reason.
  const failing = fakePage(behaviour);
  failing.probeThreads = async (e, m, { counts }) => counts.map((t) => ({ threads: t, error: "Can't create a session. ERROR_CODE: 9\nmore" }));
  const none = await benchModel(failing, 'tiny', { ...cfg, anchorThreads: 'best' }, () => {});
  assert.equal(none.engines['ort-wasm'].refused, "Can't create a session. ERROR_CODE: 9");
  assert.equal(none.engines['ort-wasm'].refused_at, 'threads');
  assert.equal(none.engines['webtune-wasm'].samples_ms.length, 1);
});
