// browser.test.mjs — bench/model_vs_web end to end in a real headless Chromium, on a small CNN
// built in the test (no ../shared needed): every op kind of the shared models (Conv + Relu,
// depthwise Conv + Clip(0, 6) with Constant bounds, 1×1 Conv, Add, MaxPool with padding,
// GlobalAveragePool, Flatten, Gemm with transB), its logits computed here by a plain NCHW
// reference. bench.mjs runs onnxruntime-web (wasm, webgl) and TensorFlow.js (wasm, webgl) and a
// stub webtune package (returns the reference logits; exercises the package path), and the test
// asserts that every engine passed the output check and was timed, the wasm anchors on 2 threads
// (--anchor-threads 2, webtune's count). A second
// run feeds a model that the tfjs builder cannot translate (Conv + HardSigmoid), one whose file
// is cut short, and the small CNN: the tfjs engines of the first and every engine of the second
// are reported "refused: <reason>", and the other engines and the third model are still timed;
// that run's wasm anchors pick their threads (--anchor-threads best: each of 1..hardwareConcurrency
// timed, the fastest kept and stated under the table's header).
//
//   node --test bench/model_vs_web/test/browser.test.mjs
//
// Needs Chromium (WEBTUNE_CHROMIUM or /usr/bin/chromium), onnxruntime-web and the tfjs packages
// in node_modules.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import test from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

import { DataType, serializeModel } from '../onnx.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const bench = path.resolve(here, '../bench.mjs');

function seeded(seed) {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32 - 0.5;
  };
}
const randoms = (n, seed, scale = 1) => {
  const r = seeded(seed);
  return Array.from({ length: n }, () => Math.fround(r() * scale));
};

/** NCHW conv with symmetric pad, groups; x [C, H, W]. */
function conv(x, [C, H, W], w, [M, Cg, k], b, stride, pad, group) {
  const OH = Math.floor((H + 2 * pad - k) / stride) + 1;
  const OW = Math.floor((W + 2 * pad - k) / stride) + 1;
  const out = new Float64Array(M * OH * OW);
  const perGroup = M / group;
  for (let m = 0; m < M; ++m) {
    const g = Math.floor(m / perGroup);
    for (let oh = 0; oh < OH; ++oh) {
      for (let ow = 0; ow < OW; ++ow) {
        let acc = b ? b[m] : 0;
        for (let c = 0; c < Cg; ++c) {
          for (let r = 0; r < k; ++r) {
            for (let s = 0; s < k; ++s) {
              const ih = oh * stride - pad + r;
              const iw = ow * stride - pad + s;
              if (ih < 0 || iw < 0 || ih >= H || iw >= W) continue;
              acc += x[((g * Cg + c) * H + ih) * W + iw] * w[((m * Cg + c) * k + r) * k + s];
            }
          }
        }
        out[(m * OH + oh) * OW + ow] = acc;
      }
    }
  }
  return [out, [M, OH, OW]];
}

function tinyCnn() {
  const C0 = 3;
  const H0 = 16;
  const C = 8;
  const N = 10;
  const w1 = randoms(C * C0 * 9, 1, 0.6);
  const b1 = randoms(C, 2, 0.2);
  const wd = randoms(C * 9, 3, 0.8);
  const bd = randoms(C, 4, 0.2);
  const wp = randoms(C * C, 5, 0.7);
  const bp = randoms(C, 6, 0.2);
  const fc = randoms(N * C, 7, 0.8);
  const fcb = randoms(N, 8, 0.1);
  const bytes = serializeModel({
    nodes: [
      { opType: 'Conv', inputs: ['input', 'w1', 'b1'], outputs: ['c1'], attributes: { group: 1, kernel_shape: [3, 3], pads: [1, 1, 1, 1], strides: [2, 2] } },
      { opType: 'Relu', inputs: ['c1'], outputs: ['r1'] },
      { opType: 'Conv', inputs: ['r1', 'wd', 'bd'], outputs: ['c2'], attributes: { group: C, kernel_shape: [3, 3], pads: [1, 1, 1, 1], strides: [1, 1] } },
      { opType: 'Constant', inputs: [], outputs: ['lo'], attributes: { value: { name: '', dims: [], values: [0] } } },
      { opType: 'Constant', inputs: [], outputs: ['hi'], attributes: { value: { name: '', dims: [], values: [6] } } },
      { opType: 'Clip', inputs: ['c2', 'lo', 'hi'], outputs: ['k2'] },
      { opType: 'Conv', inputs: ['k2', 'wp', 'bp'], outputs: ['c3'], attributes: { group: 1, kernel_shape: [1, 1], pads: [0, 0, 0, 0], strides: [1, 1] } },
      { opType: 'Add', inputs: ['c3', 'r1'], outputs: ['a'] },
      { opType: 'Relu', inputs: ['a'], outputs: ['ra'] },
      { opType: 'MaxPool', inputs: ['ra'], outputs: ['p'], attributes: { kernel_shape: [3, 3], strides: [2, 2], pads: [1, 1, 1, 1] } },
      { opType: 'GlobalAveragePool', inputs: ['p'], outputs: ['g'] },
      { opType: 'Flatten', inputs: ['g'], outputs: ['f'], attributes: { axis: 1 } },
      { opType: 'Gemm', inputs: ['f', 'fc', 'fcb'], outputs: ['logits'], attributes: { transB: 1 } },
    ],
    initializers: [
      { name: 'w1', dims: [C, C0, 3, 3], values: w1 }, { name: 'b1', dims: [C], values: b1 },
      { name: 'wd', dims: [C, 1, 3, 3], values: wd }, { name: 'bd', dims: [C], values: bd },
      { name: 'wp', dims: [C, C, 1, 1], values: wp }, { name: 'bp', dims: [C], values: bp },
      { name: 'fc', dims: [N, C], values: fc, dataType: DataType.FLOAT }, { name: 'fcb', dims: [N], values: fcb },
    ],
    inputs: [{ name: 'input', shape: [1, C0, H0, H0] }],
    outputs: [{ name: 'logits', shape: [1, N] }],
  });
  const input = Float32Array.from(randoms(C0 * H0 * H0, 9, 4));
  // The reference, NCHW in double.
  const [c1, s1] = conv(input, [C0, H0, H0], w1, [C, C0, 3], b1, 2, 1, 1);
  const r1 = c1.map((v) => Math.max(v, 0));
  const [c2] = conv(r1, s1, wd, [C, 1, 3], bd, 1, 1, C);
  const k2 = c2.map((v) => Math.min(Math.max(v, 0), 6));
  const [c3] = conv(k2, s1, wp, [C, C, 1], bp, 1, 0, 1);
  const ra = c3.map((v, i) => Math.max(v + r1[i], 0));
  const [, H1, W1] = s1;
  const PH = Math.floor((H1 + 2 - 3) / 2) + 1;
  const pooled = new Float64Array(C);  // GlobalAveragePool of the MaxPool
  for (let c = 0; c < C; ++c) {
    for (let oh = 0; oh < PH; ++oh) {
      for (let ow = 0; ow < PH; ++ow) {
        let m = -Infinity;
        for (let r = 0; r < 3; ++r) {
          for (let s = 0; s < 3; ++s) {
            const ih = oh * 2 - 1 + r;
            const iw = ow * 2 - 1 + s;
            if (ih >= 0 && iw >= 0 && ih < H1 && iw < W1) m = Math.max(m, ra[(c * H1 + ih) * W1 + iw]);
          }
        }
        pooled[c] += m / (PH * PH);
      }
    }
  }
  const logits = Float32Array.from({ length: N }, (_, n) => fcb[n] + pooled.reduce((acc, v, c) => acc + v * fc[n * C + c], 0));
  return { bytes, input, logits };
}

test('bench.mjs on a small CNN: ORT and tfjs engines pass the check and are timed; the webtune package path', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'model-bench-browser-'));
  try {
    const { bytes, input, logits } = tinyCnn();
    const models = path.join(dir, 'models');
    fs.mkdirSync(models);
    fs.writeFileSync(path.join(models, 'tiny.onnx'), bytes);
    fs.writeFileSync(path.join(models, 'tiny.input.f32'), Buffer.from(input.buffer));
    fs.writeFileSync(path.join(models, 'tiny.logits.f32'), Buffer.from(logits.buffer));
    // A stub webtune wasm package: the documented API (load(baseUrl) → {run, dispose}), whose
    // run returns the reference logits; its one kernel says 2 threads.
    const pkg = path.join(dir, 'packages', 'tiny-wasm');
    fs.mkdirSync(path.join(pkg, 'kernels'), { recursive: true });
    fs.writeFileSync(path.join(pkg, 'kernels', '000.json'), JSON.stringify({ target: 'wasm', wasm: { threads: 2 } }));
    fs.writeFileSync(path.join(pkg, 'model.mjs'), `
      export async function load(baseUrl) {
        const r = await fetch(new URL('/models/tiny.logits.f32', baseUrl));
        const logits = new Float32Array(await r.arrayBuffer());
        return { manifest: { target: 'wasm' }, run: async () => logits.slice(), dispose() {} };
      }`);
    const out = path.join(dir, 'result.json');
    const { stdout } = await promisify(execFile)(process.execPath, [
      bench, '--models', 'tiny', '--models-dir', models, '--webtune-packages', path.join(dir, 'packages'),
      '--targets', 'webgl2,wasm', '--engines', 'webtune-wasm,ort-wasm,tfjs-wasm,ort-webgl,tfjs-webgl',
      '--anchor-threads', '2', '--rounds', '2', '--runs', '2', '--warmup', '0', '--out', out,
    ], { timeout: 600000, maxBuffer: 1 << 24 });
    const result = JSON.parse(fs.readFileSync(out, 'utf8'));
    assert.equal(result.threads, 2);
    assert.match(result.threads_from, /webtune's wasm packages/);
    assert.equal(result.env.cross_origin_isolated, true);
    const [m] = result.models;
    for (const engine of ['webtune-wasm', 'ort-wasm', 'tfjs-wasm', 'ort-webgl', 'tfjs-webgl']) {
      const e = m.engines[engine];
      assert.ok(e, `${engine} ran`);
      assert.equal(e.error, undefined, `${engine}: ${e.error}`);
      assert.ok(e.check.ok, `${engine}: max abs error ${e.check.max_abs_err} > ${e.check.tolerance}`);
      assert.equal(e.samples_ms.length, 4, engine);
      assert.ok(e.median_ms > 0, engine);
    }
    assert.equal(m.engines['ort-wasm'].info.wasm_threads, 2);
    assert.equal(m.engines['ort-wasm'].info.pthread_workers, 1);
    assert.equal(m.engines['tfjs-wasm'].info.threads, 2);
    for (const engine of ['ort-wasm', 'tfjs-wasm']) assert.deepEqual(m.engines[engine].threads, { chosen: 2, from: '--anchor-threads 2' });
    assert.match(stdout, /^tiny: webtune-wasm threads: 2 \(its kernels\), ort-wasm threads: 2 \(--anchor-threads 2\), tfjs-wasm threads: 2 \(--anchor-threads 2\)$/m);
    assert.deepEqual(m.summary.tfjs_ops, {
      'tf.fused.conv2d(bias, relu)': 1, 'tf.fused.depthwiseConv2d(bias, relu6)': 1, 'tf.fused.conv2d(bias, linear)': 1,
      'tf.add': 1, 'tf.relu': 1, 'tf.maxPool': 1, 'tf.mean': 1, 'tf.reshape': 1, 'tf.fused.matMul(bias)': 1,
    });
    const wasm = m.rows.find((r) => r.target === 'wasm');
    assert.ok(wasm.speedup_vs_fastest > 0);
    assert.match(stdout, /tiny +wasm +webtune-wasm/);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

/** Conv 3×3 (3 → 4 channels) + HardSigmoid + GlobalAveragePool + Flatten + Gemm: tfjs_model.mjs has no HardSigmoid. */
function hardSigmoidModel() {
  const C0 = 3;
  const H0 = 8;
  const C = 4;
  const N = 5;
  const w = randoms(C * C0 * 9, 11, 0.6);
  const b = randoms(C, 12, 0.2);
  const fc = randoms(N * C, 13, 0.8);
  const fcb = randoms(N, 14, 0.1);
  const bytes = serializeModel({
    nodes: [
      { opType: 'Conv', inputs: ['input', 'w', 'b'], outputs: ['c'], attributes: { group: 1, kernel_shape: [3, 3], pads: [1, 1, 1, 1], strides: [1, 1] } },
      { opType: 'HardSigmoid', inputs: ['c'], outputs: ['h'], name: 'hsig', attributes: { alpha: 0.25, beta: 0.5 } },
      { opType: 'GlobalAveragePool', inputs: ['h'], outputs: ['g'] },
      { opType: 'Flatten', inputs: ['g'], outputs: ['f'], attributes: { axis: 1 } },
      { opType: 'Gemm', inputs: ['f', 'fc', 'fcb'], outputs: ['logits'], attributes: { transB: 1 } },
    ],
    initializers: [
      { name: 'w', dims: [C, C0, 3, 3], values: w }, { name: 'b', dims: [C], values: b },
      { name: 'fc', dims: [N, C], values: fc }, { name: 'fcb', dims: [N], values: fcb },
    ],
    inputs: [{ name: 'input', shape: [1, C0, H0, H0] }],
    outputs: [{ name: 'logits', shape: [1, N] }],
  });
  const input = Float32Array.from(randoms(C0 * H0 * H0, 15, 4));
  const [c] = conv(input, [C0, H0, H0], w, [C, C0, 3], b, 1, 1, 1);
  const pooled = new Float64Array(C);
  for (let i = 0; i < c.length; ++i) pooled[Math.floor(i / (H0 * H0))] += Math.min(1, Math.max(0, 0.25 * c[i] + 0.5)) / (H0 * H0);
  const logits = Float32Array.from({ length: N }, (_, n) => fcb[n] + pooled.reduce((acc, v, k) => acc + v * fc[n * C + k], 0));
  return { bytes, input, logits };
}

test('bench.mjs: an engine that cannot run a model is reported "refused: <reason>"; the others and the next models run', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'model-bench-refused-'));
  try {
    const models = path.join(dir, 'models');
    fs.mkdirSync(models);
    const write = (name, { bytes, input, logits }) => {
      fs.writeFileSync(path.join(models, `${name}.onnx`), bytes);
      fs.writeFileSync(path.join(models, `${name}.input.f32`), Buffer.from(input.buffer));
      fs.writeFileSync(path.join(models, `${name}.logits.f32`), Buffer.from(logits.buffer));
    };
    const tiny = tinyCnn();
    write('hsig', hardSigmoidModel());
    write('broken', { ...tiny, bytes: tiny.bytes.subarray(0, 100) });
    write('tiny', tiny);
    const out = path.join(dir, 'result.json');
    const { stdout } = await promisify(execFile)(process.execPath, [
      bench, '--models', 'hsig,broken,tiny', '--models-dir', models,
      '--targets', 'wasm', '--engines', 'ort-wasm,tfjs-wasm', '--threads', '2',
      '--rounds', '2', '--runs', '2', '--warmup', '0', '--settle-ms', '200', '--out', out,
    ], { timeout: 300000, maxBuffer: 1 << 24 });
    const result = JSON.parse(fs.readFileSync(out, 'utf8'));
    const [hsig, broken, small] = result.models;
    assert.deepEqual(result.models.map((m) => m.model), ['hsig', 'broken', 'tiny']);
    // The tfjs builder's refusal, with the node and op it names.
    assert.match(hsig.summary.tfjs_refused, /node 'hsig' \(HardSigmoid\): no TensorFlow.js mapping/);
    const refused = hsig.engines['tfjs-wasm'];
    assert.match(refused.refused, /node 'hsig' \(HardSigmoid\): no TensorFlow.js mapping/);
    assert.equal(refused.refused_at, 'threads');  // the first stage that needs the graph
    assert.equal(refused.median_ms, undefined);
    // ORT runs HardSigmoid: checked and timed on the same model.
    const ort = hsig.engines['ort-wasm'];
    assert.equal(ort.refused, undefined, ort.refused);
    assert.ok(ort.check.ok);
    assert.equal(ort.samples_ms.length, 4);
    assert.equal(hsig.rows[0].fastest_anchor, 'ort-wasm');
    // --anchor-threads best (the default): ORT and tfjs each timed on 1..hardwareConcurrency
    // threads, 3 runs after a checked warm-up, and run on the fastest count.
    const hc = result.env.hardware_concurrency;
    for (const [m, engine] of [[hsig, 'ort-wasm'], [small, 'ort-wasm'], [small, 'tfjs-wasm']]) {
      const t = m.engines[engine].threads;
      assert.equal(t.from, `best of 1..${hc}`);
      assert.deepEqual(t.probe.map((p) => p.threads), Array.from({ length: hc }, (_, i) => i + 1));
      for (const p of t.probe) {
        assert.equal(p.error, undefined, `${m.model} ${engine} on ${p.threads}: ${p.error}`);
        assert.equal(p.samples_ms.length, 3);
        assert.equal(p.engine_threads, p.threads);
      }
      const medians = t.probe.map((p) => [...p.samples_ms].sort((a, b) => a - b)[1]);
      assert.equal(t.chosen, t.probe[medians.indexOf(Math.min(...medians))].threads);
      const info = m.engines[engine].info;
      assert.equal(engine === 'ort-wasm' ? info.wasm_threads : info.threads, t.chosen, `${m.model} ${engine}`);
      assert.match(stdout, new RegExp(`^${m.model}: .*${engine} threads: ${t.chosen} \\(best of 1\\.\\.${hc}; medians 1: `, 'm'));
    }
    // A file cut short: every engine refused, with the reader's reason.
    for (const engine of ['ort-wasm', 'tfjs-wasm']) {
      assert.match(broken.engines[engine].refused, /^cannot load the model: onnx: .* at byte \d+/, engine);
      assert.equal(broken.engines[engine].refused_at, 'load');
    }
    // The model after them: both engines timed.
    for (const engine of ['ort-wasm', 'tfjs-wasm']) {
      assert.equal(small.engines[engine].refused, undefined, `${engine}: ${small.engines[engine].refused}`);
      assert.equal(small.engines[engine].samples_ms.length, 4, engine);
    }
    assert.match(stdout, /hsig +wasm +tfjs-wasm +refused: tfjs model: node 'hsig' \(HardSigmoid\): no TensorFlow.js mapping/);
    assert.match(stdout, /hsig +wasm +ort-wasm +\d+\.\d +/);
    assert.match(stdout, /broken +wasm +ort-wasm +refused: cannot load the model: onnx:/);
    assert.match(stdout, /tiny +wasm +tfjs-wasm +\d+\.\d +/);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
