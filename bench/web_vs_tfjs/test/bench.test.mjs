// bench.test.mjs — bench/web_vs_tfjs: its task helpers (tasks.mjs), TensorFlow.js's side in a
// real headless Chromium (session.mjs, page.mjs: the fused ops compute webtune's epilogue
// semantics on every backend, tfjs wasm runs the thread count asked for, both timing modes),
// and bench.mjs end to end on a plain row with a stored webtune wasm artifact.
//
//   node --test bench/web_vs_tfjs/test/
//
// Needs Chromium (WEBTUNE_CHROMIUM or /usr/bin/chromium) and the tfjs packages in node_modules.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import test from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

import { openSession } from '../session.mjs';
import { floorCells } from '../floor.mjs';
import { epilogueSuffix, flopsOf, loadTasks, mathOf, tensorFloats } from '../tasks.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '../../..');

function workloadFile(dir, name, tasks) {
  const file = path.join(dir, name);
  fs.writeFileSync(file, JSON.stringify({ name, tasks }));
  return file;
}

test('tasks.mjs: tasks by name from workload files, with their epilogue', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'web-bench-tasks-'));
  try {
    const a = workloadFile(dir, 'a.json', [
      { name: 'P1', op: 'conv2d', C: 32, H: 112, W: 112, K: 16, R: 1, epilogue: { bias: true } },
      { name: 'D1', op: 'depthwise_conv2d', C: 32, H: 112, W: 112, R: 3, stride: 1, pad: 1,
        epilogue: { bias: true, activation: 'clip', clip_min: 0, clip_max: 6 } },
    ]);
    const b = workloadFile(dir, 'b.json', [
      { name: 'F2', op: 'conv2d', N: 1, C: 64, H: 56, W: 56, K: 64, R: 3, S: 3, stride: 1, pad: 1,
        epilogue: { bias: true, activation: 'relu', residual: 'before_activation' } },
    ]);
    const tasks = loadTasks([a, b], ['D1', 'F2']);
    assert.deepEqual(tasks.map((t) => t.name), ['D1', 'F2']);
    assert.equal(tasks[0].workload_file, a);
    assert.equal(epilogueSuffix(tasks[0]), '+bias+clip(0,6)');
    assert.equal(epilogueSuffix(tasks[1]), '+bias+residual+relu');
    assert.equal(epilogueSuffix(loadTasks([a], ['P1'])[0]), '+bias');
    assert.deepEqual(loadTasks([a, b], ['all']).map((t) => t.name), ['P1', 'D1', 'F2']);
    assert.throws(() => loadTasks([a], ['F2']), /unknown task 'F2'/);
    const clash = workloadFile(dir, 'c.json', [{ name: 'P1', op: 'conv2d', C: 32, H: 112, W: 112, K: 16, R: 1 }]);
    assert.throws(() => loadTasks([a, clash], ['P1']), /defined differently/);
    assert.throws(() => loadTasks([path.join(dir, 'none.json')], ['P1']), /cannot read workload file/);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('tasks.mjs: FLOPs of the main op and the canonical math', () => {
  assert.equal(flopsOf({ op: 'dense', M: 512, N: 512, K: 512 }), 2 * 512 ** 3);
  // ResNet-18 C2: 1×64×56×56 → 64, 3×3, stride 1, pad 1.
  assert.equal(flopsOf({ op: 'conv2d', N: 1, C: 64, H: 56, W: 56, K: 64, R: 3, S: 3, stride: 1, pad: 1 }),
    2 * 64 * 56 * 56 * 64 * 9);
  // A depthwise 3×3 stride 2 of MobileNet-v2: 96×112×112 → 96×56×56.
  assert.equal(flopsOf({ op: 'depthwise_conv2d', C: 96, H: 112, W: 112, R: 3, stride: 2, pad: 1 }), 2 * 96 * 56 * 56 * 9);
  // The data tensors the device-floor probe copies: input and output floats, weights left out.
  assert.deepEqual(tensorFloats({ op: 'depthwise_conv2d', C: 96, H: 112, W: 112, R: 3, stride: 2, pad: 1 }),
    { in_floats: 96 * 112 * 112, out_floats: 96 * 56 * 56 });
  assert.deepEqual(tensorFloats({ op: 'conv2d', N: 1, C: 3, H: 224, W: 224, K: 32, R: 3, stride: 2, pad: 1 }),
    { in_floats: 3 * 224 * 224, out_floats: 32 * 112 * 112 });
  assert.deepEqual(tensorFloats({ op: 'dense', M: 6, N: 10, K: 7 }), { in_floats: 42, out_floats: 60 });
  // Defaults (N 1, S = R, stride 1, pad 0, no epilogue) compare equal to spelled-out values...
  assert.deepEqual(mathOf({ op: 'conv2d', name: 'x', C: 8, H: 9, W: 9, K: 4, R: 3, occurrences: 2 }),
    mathOf({ op: 'conv2d', N: 1, C: 8, H: 9, W: 9, K: 4, R: 3, S: 3, stride: 1, pad: 0, epilogue: { activation: 'none' } }));
  // ...and an epilogue makes other math.
  assert.notDeepEqual(mathOf({ op: 'dense', M: 4, N: 4, K: 4 }), mathOf({ op: 'dense', M: 4, N: 4, K: 4, epilogue: { bias: true } }));
  assert.notDeepEqual(mathOf({ op: 'dense', M: 4, N: 4, K: 4, epilogue: { activation: 'clip', clip_max: 6 } }),
    mathOf({ op: 'dense', M: 4, N: 4, K: 4, epilogue: { activation: 'clip', clip_max: 5 } }));
});

test('floor.mjs: what a short cell needs, and its verdict', () => {
  // medians in ms: [webtune, tfjs] per column
  const row = (task, ms, flops = 1e7) => ({
    task, target: 'webgpu', target_ratio: 3, flops,
    modes: Object.fromEntries(Object.entries(ms).map(([m, [w, t]]) => [m, { webtune: { median_s: w / 1e3 }, tfjs: { median_s: t / 1e3 } }])),
  });
  const run = { rows: [
    // meets 3× in both columns: no cell
    row('OK', { fence: [2, 7], readback: [3, 9.5], batched: [1, 4] }),
    // fence: fixed 2 ms, tfjs 4.5 ms → need 4.5 / 3 − 2 < 0: no kernel can
    row('NONE', { fence: [3, 4.5], readback: [3.5, 15], batched: [1, 2] }),
    // fence: fixed 1 ms, tfjs 6 ms → need 1 ms, kernel now 2 ms: 2× faster, unless the floor is 1.5 ms
    row('FAST', { fence: [3, 6], readback: [2.5, 12], batched: [2, 4] }),
    { task: 'SKIPPED', skipped: true, modes: {} },
  ] };
  const cells = floorCells(run);
  assert.deepEqual(cells.map((c) => [c.task, c.mode, c.verdict]), [['NONE', 'fence', 'none can'], ['FAST', 'fence', 'faster']]);
  const fast = cells[1];
  assert.ok(Math.abs(fast.need_s - 1e-3) < 1e-12 && Math.abs(fast.speedup - 2) < 1e-9);
  assert.ok(Math.abs(fast.fixed_s.webtune - 1e-3) < 1e-12 && Math.abs(fast.fixed_s.tfjs - 2e-3) < 1e-12);
  assert.ok(Math.abs(fast.zero_kernel - 6) < 1e-9);
  assert.equal(fast.floor_s, null);
  assert.ok(cells[0].need_s <= 0);
  assert.equal(cells[0].speedup, null);
  // With a probe: copy 1.5 ms, or FLOPs at the peak rate (1e7 FLOP at 10 GFLOP/s = 1 ms): floor 1.5 ms > need.
  const floor = { alu_gflops: { webgpu: 10 }, rows: { FAST: { flops: 1e7, webgpu: { copy_ms: 1.5 } } } };
  const withFloor = floorCells(run, floor).find((c) => c.task === 'FAST');
  assert.equal(withFloor.verdict, 'below floor');
  assert.ok(Math.abs(withFloor.floor_s - 1.5e-3) < 1e-12);
  assert.ok(Math.abs(withFloor.of_peak - 1) < 1e-9);  // 1e7 FLOP in 1 ms is 10 GFLOP/s, the peak
  // The compute side binds when it is the larger: at 2 GFLOP/s the floor is 5 ms.
  const slowAlu = floorCells(run, { ...floor, alu_gflops: { webgpu: 2 } }).find((c) => c.task === 'FAST');
  assert.ok(Math.abs(slowAlu.floor_s - 5e-3) < 1e-12);
  // A probe of another target does not apply.
  assert.equal(floorCells(run, { alu_gflops: { webgl2: 10 }, rows: { FAST: { flops: 1e7, webgl2: { copy_ms: 1.5 } } } })[1].verdict, 'faster');
});

// Small shapes (a JS loop recomputes them) covering every epilogue part and each op.
const EPILOGUES = {
  plain: {},
  bias: { bias: true },
  bias_relu: { bias: true, activation: 'relu' },
  bias_relu6: { bias: true, activation: 'clip', clip_min: 0, clip_max: 6 },
  bias_clip_other: { bias: true, activation: 'clip', clip_min: -0.5, clip_max: 0.25 },
  bias_hard_swish: { bias: true, activation: 'hard_swish' },
  bias_residual_relu: { bias: true, activation: 'relu', residual: 'before_activation' },
  bias_relu_residual: { bias: true, activation: 'relu', residual: 'after_activation' },
  residual: { residual: 'after_activation' },
};
const OPS = {
  dense: { op: 'dense', M: 6, N: 10, K: 7 },
  conv2d: { op: 'conv2d', N: 1, C: 3, H: 7, W: 7, K: 5, R: 3, S: 3, stride: 1, pad: 1 },
  conv2d_s2: { op: 'conv2d', N: 1, C: 4, H: 9, W: 9, K: 6, R: 3, S: 3, stride: 2, pad: 1 },
  depthwise: { op: 'depthwise_conv2d', N: 1, C: 8, H: 7, W: 7, R: 3, S: 3, stride: 1, pad: 1 },
  depthwise_s2: { op: 'depthwise_conv2d', N: 1, C: 8, H: 9, W: 9, R: 3, S: 3, stride: 2, pad: 1 },
};

test('the bench scripts: --help, and a malformed command line is a usage error, not a stack trace', async () => {
  const scripts = ['bench/web_vs_tfjs/bench.mjs', 'bench/web_vs_tfjs/summarize.mjs',
    'bench/model_vs_web/bench.mjs', 'bench/model_vs_web/summarize.mjs'];
  const run = (args) => promisify(execFile)(process.execPath, args, { cwd: root })
    .then(({ stdout, stderr }) => ({ code: 0, stdout, stderr }), (e) => ({ code: e.code, stdout: e.stdout, stderr: e.stderr }));
  for (const script of scripts) {
    const help = await run([script, '--help']);
    assert.equal(help.code, 0, `${script} --help`);
    assert.match(help.stdout, new RegExp(`^usage: node ${script} `), `${script} --help prints its usage`);
    const bogus = await run([script, '--no-such-flag']);
    assert.equal(bogus.code, 2, `${script} --no-such-flag exits 2`);
    assert.match(bogus.stderr, /^(bench|summarize): Unknown option '--no-such-flag'/, script);
    assert.match(bogus.stderr, /\nusage: node /, `${script}: the usage follows the error`);
    assert.doesNotMatch(bogus.stderr, /\n\s+at /, `${script}: no stack trace`);
  }
  // A flag that takes a value, given none.
  const missing = await run(['bench/web_vs_tfjs/bench.mjs', '--artifacts']);
  assert.equal(missing.code, 2);
  assert.match(missing.stderr, /^bench: Option '--artifacts <value>' argument missing/);
});

test('the bench page in headless Chromium', async (t) => {
  const session = await openSession();
  t.after(() => session.close());
  const { page } = session;

  for (const backend of ['webgl', 'webgpu', 'wasm']) {
    await t.test(`${backend}: tfjs's fused ops compute the workload's epilogue`, async (tb) => {
      for (const [opName, shape] of Object.entries(OPS)) {
        for (const [epName, epilogue] of Object.entries(EPILOGUES)) {
          if (opName.endsWith('_s2') && !['bias_relu6', 'plain'].includes(epName)) continue;
          await tb.test(`${opName}_${epName}`, async () => {
            const w = { name: `${opName}_${epName}`, ...shape, epilogue };
            const r = await page.evaluate((b, wl) => window.bench.checkTfjs(b, wl), backend, w);
            assert.ok(r.max_abs_err <= 1e-3, `${backend} ${w.name}: max |tfjs - reference| = ${r.max_abs_err} (${r.ops})`);
            if (epilogue.bias) assert.match(r.ops, /^tf\.fused\./);
            if (epilogue.residual) assert.match(r.ops, /tf\.add\(residual\)/);
          });
        }
      }
    });
  }

  await t.test('tfjs wasm runs the thread count asked for (its hardwareConcurrency/2 cap lifted)', async () => {
    const w = { name: 'c', ...OPS.conv2d, epilogue: EPILOGUES.bias_relu };
    for (const threads of [2, 1, 3]) {
      const r = await page.evaluate((wl, n) => window.bench.checkTfjs('wasm', wl, { threads: n }), w, threads);
      assert.equal(r.threads, threads);
      assert.ok(r.max_abs_err <= 1e-3, `max |tfjs - reference| = ${r.max_abs_err}`);
    }
    // The page's navigator reads the real count again afterwards.
    const hc = await page.evaluate(() => navigator.hardwareConcurrency);
    assert.equal(hc, (await page.evaluate(() => window.bench.environment())).hardware_concurrency);
  });

  await t.test('runTfjs times every mode and refuses an unknown one', async () => {
    const w = { name: 'd', op: 'dense', M: 64, N: 64, K: 64, epilogue: { bias: true, activation: 'relu' } };
    for (const backend of ['webgl', 'webgpu', 'wasm']) {
      for (const mode of ['fence', 'readback', 'batched']) {
        const r = await page.evaluate((b, wl, md) => window.bench.runTfjs(b, wl, 2 * 64 ** 3, { repeat: 3, warmup: 1, mode: md, batch: 4 }),
          backend, w, mode);
        assert.equal(r.mode, mode);
        assert.equal(r.runs, mode === 'batched' ? 4 : 1);
        assert.equal(r.costs_s.length, 3);
        assert.ok(r.costs_s.every((c) => c > 0), `${backend} ${mode}: ${r.costs_s}`);
        assert.equal(r.ops, 'tf.fused.matMul(bias, relu)');
      }
    }
    await assert.rejects(page.evaluate(() => window.bench.runTfjs('wasm', { op: 'dense', M: 4, N: 4, K: 4 }, 128, { mode: 'sync' })),
      /mode is fence, readback, batched, not 'sync'/);
  });
});

// A stored fragment-stage kernel with 8 render targets (MobileNet-v2's DW9, 2026-11-28): its
// read-back goes through one pixel-pack buffer (runtime/webgl2.mjs startReadOutput), and the
// executor checks the first timed read-back against the reference samples, so a target read to
// the wrong offset fails here as WRONG_ANSWER.
const MRT = path.join(root, 'bench/results/web-2026-11-28-webgl2/artifacts/webgl2-DW9.json');

test('webgl2 read-back of 8 render targets through one pixel-pack buffer', { skip: fs.existsSync(MRT) ? false : `no ${MRT}` }, async () => {
  const session = await openSession();
  try {
    const record = JSON.parse(fs.readFileSync(MRT, 'utf8'));
    assert.equal(record.artifact.output.rows_per_item, 8);
    for (const mode of ['readback', 'fence', 'batched']) {
      const r = await session.page.evaluate((rec, md) => window.bench.runWebtune(rec, { repeat: 3, mode: md, batch: 4 }), record, mode);
      assert.equal(r.costs_s.length, 3, mode);
      assert.equal(r.runs, mode === 'batched' ? 4 : 1, mode);
      assert.ok(r.costs_s.every((c) => c > 0), `${mode}: ${r.costs_s}`);
    }
  } finally {
    await session.close();
  }
});

// The read-back of GLKernel (runtime/webgl2.mjs) on outputs made here: 13 rows × 8 columns in 4
// render targets, each output element's value its row-major index. Render targets one block
// row wide (2 × 4 texels) are read straight into row-major order (readsRowMajor: rows 13–15 of
// the last, partial block are left out); a flat layout 4 texels wide (4 × 2) is unpacked. Both
// must give the indices 0 … 103, as readOutput's synchronous read does.
test('webgl2 read-back into row-major order, and unpacked, give the same output', async () => {
  const session = await openSession();
  try {
    const results = await session.page.evaluate(async () => {
      const { GLKernel } = await import('/runtime/webgl2.mjs');
      const gl = new OffscreenCanvas(1, 1).getContext('webgl2');
      gl.getExtension('EXT_color_buffer_float');
      const read = (width, height) => {
        // item t = px.y·width + px.x is block row t / 2, column block t % 2 (2 column blocks);
        // target j holds row 4·rb + j, columns 4·cb … 4·cb + 3
        let outs = '', body = '';
        for (let j = 0; j < 4; ++j) {
          outs += `layout(location = ${j}) out vec4 o${j};\n`;
          body += `o${j} = vec4(float((rb * 4 + ${j}) * 8 + cb * 4)) + vec4(0.0, 1.0, 2.0, 3.0);\n`;
        }
        const source = `#version 300 es\nprecision highp float;\n${outs}void main() {\n` +
          `ivec2 px = ivec2(gl_FragCoord.xy);\nint t = px.y * ${width} + px.x;\n` +
          `int rb = t / 2;\nint cb = t - rb * 2;\n${body}}\n`;
        const artifact = { target: 'gles-frag', source, inputs: [],
                           output: { rows: 13, cols: 8, rows_per_item: 4, channels: 4, width, height } };
        const k = new GLKernel(gl, artifact);
        try {
          k.compile();
          k.createOutputs(0);
          k.runOnce();
          k.startReadOutput();
          const queued = Array.from(k.finishReadOutput());
          return { rowMajor: k.packedRowMajor, queued, sync: Array.from(k.readOutput()) };
        } finally {
          k.release();
        }
      };
      return { blockRow: read(2, 4), flat: read(4, 2) };
    });
    const indices = Array.from({ length: 13 * 8 }, (_, i) => i);
    assert.equal(results.blockRow.rowMajor, true);
    assert.equal(results.flat.rowMajor, false);
    for (const [name, r] of Object.entries(results)) {
      assert.deepEqual(r.queued, indices, `${name}: queued read-back`);
      assert.deepEqual(r.sync, indices, `${name}: synchronous read`);
    }
  } finally {
    await session.close();
  }
});

// Stored artifacts of dense 512 (tuned on 2026-11-22; the wasm kernel uses 2 threads): bench.mjs
// compares each target in both modes, and tfjs wasm gets the kernel's thread count.
const STORED = path.join(root, 'bench/results/web-2026-11-22-vertex/artifacts');
const TARGETS = ['webgl2', 'webgpu', 'wasm'];
const stored = (target) => path.join(STORED, `${target}-dense512.json`);

// webtune's wasm kernels run as a package runs them (page.mjs runWasmOnPage, --wasm-runner
// page): tid 0 on the page's thread, one helper worker for the stored 2-thread dense 512 kernel,
// the output checked against the record's reference samples before any timing. A record whose
// samples are off by 1 must be refused as WRONG_ANSWER, not timed.
test('wasm kernels timed on the page\'s thread with a helper pool, checked first', { skip: fs.existsSync(stored('wasm')) ? false : `no ${STORED}` }, async () => {
  const session = await openSession();
  try {
    const record = JSON.parse(fs.readFileSync(stored('wasm'), 'utf8'));
    assert.equal(record.artifact.wasm.threads, 2);
    for (const mode of ['fence', 'readback', 'batched']) {
      const r = await session.page.evaluate((rec, md) => window.bench.runWebtune(rec, { repeat: 3, mode: md, batch: 4, wasmRunner: 'page' }), record, mode);
      assert.equal(r.runner, 'page', mode);
      assert.equal(r.threads, 2, mode);
      assert.equal(r.helpers, 1, mode);
      assert.equal(r.costs_s.length, 3, mode);
      assert.equal(r.runs, mode === 'batched' ? 4 : 1, mode);
      assert.ok(r.costs_s.every((c) => c > 0 && c < 1), `${mode}: ${r.costs_s}`);
    }
    assert.ok(record.samples.length > 0);
    // A sample is [index, value, magnitude, tolerance]; the tolerance here is about 0.35.
    const wrong = { ...record, samples: record.samples.map(([i, v, m, tol]) => [i, v + 1, m, tol]) };
    await assert.rejects(session.page.evaluate((rec) => window.bench.runWebtune(rec, { repeat: 3, wasmRunner: 'page' }), wrong),
      /sampled outputs differ from the reference/);
    await assert.rejects(session.page.evaluate((rec) => window.bench.runWebtune(rec, { wasmRunner: 'worker' }), record),
      /wasmRunner is agent or page/);
  } finally {
    await session.close();
  }
});

test('bench.mjs end to end on a plain row', { skip: TARGETS.every((t) => fs.existsSync(stored(t))) ? false : `no ${STORED}` }, async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'web-bench-e2e-'));
  try {
    for (const target of TARGETS) fs.copyFileSync(stored(target), path.join(dir, `${target}-dense512.json`));
    const out = path.join(dir, 'out.json');
    const { stdout } = await promisify(execFile)(process.execPath, [
      path.join(root, 'bench/web_vs_tfjs/bench.mjs'), '--artifacts', dir, '--out', out,
      '--tasks', 'dense512', '--targets', TARGETS.join(','), '--rounds', '2', '--repeat', '5'], { timeout: 800000 });
    assert.match(stdout, /fence: webtune .* read-back: webtune .* batched ×16: webtune/);
    const result = JSON.parse(fs.readFileSync(out, 'utf8'));
    assert.deepEqual(result.rows.map((r) => r.target), TARGETS);
    for (const row of result.rows) {
      assert.equal(row.skipped, null, row.target);
      const threads = JSON.parse(fs.readFileSync(stored(row.target), 'utf8')).artifact.wasm?.threads;
      if (row.target === 'wasm') assert.equal(row.tfjs_threads, threads);
      for (const mode of ['fence', 'readback', 'batched']) {
        const m = row.modes[mode];
        assert.equal(m.webtune.costs_s.length, 10, `${row.target} ${mode}`);
        assert.equal(m.webtune.runs, mode === 'batched' ? 16 : 1, `${row.target} ${mode}`);
        assert.equal(m.tfjs.costs_s.length, 10, `${row.target} ${mode}`);
        if (row.target === 'wasm') assert.equal(m.tfjs.threads, threads, mode);
        assert.ok(m.ratio > 0 && Number.isFinite(m.ratio), `${row.target} ${mode} ratio ${m.ratio}`);
        assert.equal(m.round_ratios.length, 2);
      }
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
