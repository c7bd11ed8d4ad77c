// model.test.mjs — node --test checks of the model runtime (runtime/model.mjs) on wasm packages
// written here by hand (docs/package.md): a dense kernel (a hand-made WAT module, wat2wasm) with
// its weight written once, JavaScript op steps (Relu, a broadcast Add with a weight), an alias
// and a download, on one thread (the kernel runs on this thread) and on two (worker_threads,
// the agent's worker scheme); outputs are compared with values computed here. Broken packages
// reject load() (a module that does not compile, an op the runtime does not run, a missing file,
// another target) or run() (a trapping kernel) with an Error naming the step, its node and
// its kernel file.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import test from 'node:test';
import { pathToFileURL } from 'node:url';

import { load } from '../model.mjs';
import { denseWat, haveWat2wasm, trapWat, wat2wasm } from '../../browser-agent/test/wasm_modules.mjs';

const skip = haveWat2wasm() ? false : 'wat2wasm (wabt) is not installed';

/** fetch over file:// URLs (node's fetch has none). */
async function fileFetch(url) {
  const file = new URL(url);
  try {
    const bytes = fs.readFileSync(file);
    return new Response(bytes, { status: 200 });
  } catch {
    return new Response('', { status: 404 });
  }
}

const M = 2;
const K = 3;
const N = 2;
const X = Float32Array.from([1, -2, 3, -4, 5, -6]);   // [2,3]
const B = Float32Array.from([1, 2, -1, 0, 2, -3]);    // [3,2]
const BIAS = Float32Array.from([0.5, -100]);           // [2], broadcast over rows

/** relu(X·B) + BIAS, flattened: what the package computes. */
function expected() {
  const out = [];
  for (let i = 0; i < M; ++i) {
    for (let j = 0; j < N; ++j) {
      let acc = 0;
      for (let k = 0; k < K; ++k) acc += X[i * K + k] * B[k * N + j];
      out.push(Math.max(acc, 0) + BIAS[j]);
    }
  }
  return out;
}

/**
 * Writes a wasm package into a temporary directory; `wat` replaces the dense kernel's module
 * (bytes), `mutate(manifest)` edits the manifest and `mutateArtifact(artifact)` the kernel file.
 * Returns its file:// URL.
 */
function writePackage({ threads = 1, module = null, mutate = () => {}, mutateArtifact = () => {} } = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'webtune-package-'));
  fs.mkdirSync(path.join(dir, 'kernels'));
  const offsets = [0, 64, 128];
  const bytes = module || wat2wasm(denseWat({ M, N, K, threads, pages: 1, offsets }));
  const artifact = {
    target: 'wasm', source: Buffer.from(bytes).toString('base64'),
    inputs: [{ shape: [M, K], pack_axis: -1, width: M * K, height: 1 }, { shape: [K, N], pack_axis: -1, width: K * N, height: 1 }],
    output: { rows: M, cols: N, rows_per_item: 1, channels: 1, width: N, height: M },
    wasm: { threads, memory_pages: 1, offsets: [...offsets], simd: false },
  };
  mutateArtifact(artifact);
  fs.writeFileSync(path.join(dir, 'kernels', '000.json'), JSON.stringify(artifact));
  // weights.bin: B at 0, BIAS at 256 (256-byte aligned offsets).
  const weights = new Float32Array(128);
  weights.set(B, 0);
  weights.set(BIAS, 64);
  fs.writeFileSync(path.join(dir, 'weights.bin'), Buffer.from(weights.buffer));
  const manifest = {
    format: 'webtune-package', version: 1,
    model: { name: 'tiny', file: 'tiny.onnx', sha256: '' },
    target: 'wasm', artifact_target: 'wasm', device_key: '',
    inputs: [{ name: 'x', shape: [M, K], value: 0 }],
    outputs: [{ name: 'y', shape: [M * N], value: 4 }],
    tasks: [],
    slots: [{ id: 0, kind: 'array', floats: 6 }, { id: 1, kind: 'array', floats: 4 }],
    values: [
      { id: 0, name: 'x', shape: [M, K], storage: { kind: 'array', slot: 0 } },
      { id: 1, name: 'mm', shape: [M, N], storage: { kind: 'array', slot: 1 } },
      { id: 2, name: 'relu', shape: [M, N], storage: { kind: 'array', slot: 0 } },
      { id: 3, name: 'add', shape: [M, N], storage: { kind: 'array', slot: 1 } },
      { id: 4, name: 'y', shape: [M * N], storage: { kind: 'alias', of: 3 } },
    ],
    weights: [
      { id: 0, name: 'B', offset: 0, floats: K * N },
      { id: 1, name: 'bias', offset: 256, floats: N, shape: [N] },
    ],
    steps: [
      { kind: 'upload', value: 0 },
      { kind: 'kernel', role: 'task', kernel: 'kernels/000.json', node: '/MatMul', task: 'dense_1', inputs: [{ value: 0 }, { weight: 0 }], output: 1 },
      { kind: 'kernel', role: 'op', kernel: null, node: '/Relu', task: null, op: { type: 'Relu', attributes: {} }, inputs: [{ value: 1 }], output: 2 },
      { kind: 'kernel', role: 'op', kernel: null, node: '/Add', task: null, op: { type: 'Add', attributes: {} }, inputs: [{ value: 2 }, { weight: 1 }], output: 3 },
      { kind: 'alias', value: 4 },
      { kind: 'download', value: 4 },
    ],
    layout_transforms: 0, estimated_ms: null,
  };
  mutate(manifest);
  fs.writeFileSync(path.join(dir, 'manifest.json'), JSON.stringify(manifest));
  return { dir, url: pathToFileURL(`${dir}/`).href };
}

for (const threads of [1, 2]) {
  test(`a wasm package (dense kernel on ${threads} thread(s), Relu and Add in JavaScript) runs to the values computed here`, { skip }, async () => {
    const { dir, url } = writePackage({ threads });
    const m = await load(url, { fetch: fileFetch, target: 'wasm' });
    try {
      assert.equal(m.manifest.model.name, 'tiny');
      const y = await m.run(X);
      assert.ok(y instanceof Float32Array);
      assert.deepEqual([...y], expected());
      // A second run with another input: nothing is left over from the first.
      const y2 = await m.run(new Float32Array(6));
      assert.deepEqual([...y2], [0.5, -100, 0.5, -100]);
      assert.deepEqual([...(await m.run(X))], expected());
    } finally {
      m.dispose();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
}

test('profile() times every step of a run and returns the run\'s outputs', { skip }, async () => {
  const { dir, url } = writePackage({ threads: 1 });
  const m = await load(url, { fetch: fileFetch, target: 'wasm' });
  try {
    const p = await m.profile(X);
    assert.deepEqual([...p.outputs[0]], expected());
    assert.deepEqual(p.steps.map((t) => t.step), [0, 1, 2, 3, 4, 5]);
    assert.deepEqual(p.steps.map((t) => t.kind), ['upload', 'kernel', 'kernel', 'kernel', 'alias', 'download']);
    assert.deepEqual(p.steps.map((t) => t.role), [null, 'task', 'op', 'op', null, null]);
    assert.equal(p.steps[1].task, 'dense_1');
    assert.equal(p.steps[2].node, '/Relu');
    for (const t of p.steps) assert.ok(Number.isFinite(t.ms) && t.ms >= 0, `step ${t.step}: ${t.ms}`);
    const sum = p.steps.reduce((a, t) => a + t.ms, 0);
    assert.ok(p.total_ms >= sum - 1e-6, `total ${p.total_ms} < sum of steps ${sum}`);
    // Runs after a profile are plain runs, with the same values.
    assert.deepEqual([...(await m.run(X))], expected());
  } finally {
    m.dispose();
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

// The linear memory (docs/package.md "wasm linear memory"): slot 0 at 64 KiB, slot 1 and the
// weight B after it (each 64-byte aligned with 256 bytes of slack), the kernel built at those
// offsets; the JavaScript ops read the slots as views of the same memory.
const LINEAR = { pages: 2, slots: [65536, 65856], B: 66176, scratch: 66496 };

/** writePackage's package with a linear memory: its kernel placed, the manifest's wasm_memory. */
function writeLinearPackage({ threads, mutate = () => {}, pages = LINEAR.pages }) {
  const offsets = [LINEAR.slots[0], LINEAR.B, LINEAR.slots[1]];
  const module = wat2wasm(denseWat({ M, N, K, threads, pages, offsets, shared: true }));
  return writePackage({
    threads,
    module,
    mutateArtifact: (a) => {
      a.wasm.offsets = offsets;
      a.wasm.memory_pages = pages;
      if (threads === 1) a.wasm.shared_memory = true;
    },
    mutate: (m) => {
      m.wasm_memory = { pages: LINEAR.pages, shared: true, slot_offsets: LINEAR.slots, weight_offsets: [LINEAR.B, -1], scratch_offset: LINEAR.scratch };
      mutate(m);
    },
  });
}

for (const threads of [1, 2]) {
  test(`a linear-memory package (dense on ${threads} thread(s)) runs with its slots in one memory`, { skip }, async () => {
    const { dir, url } = writeLinearPackage({ threads });
    let workers = 0;
    const { Worker } = await import('node:worker_threads');
    const workerUrl = new URL('../wasm_worker.mjs', import.meta.url);
    const m = await load(url, { fetch: fileFetch, target: 'wasm', workerFactory: () => { workers += 1; return new Worker(workerUrl); } });
    try {
      assert.deepEqual([...(await m.run(X))], expected());
      assert.deepEqual([...(await m.run(X))], expected());
      // The page is tid 0 of a threaded kernel: one helper worker for T = 2, none for T = 1.
      assert.equal(workers, threads - 1);
    } finally {
      m.dispose();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
}

test('a linear-memory package whose kernel imports other pages, or whose offsets leave the memory, is refused at load', { skip }, async () => {
  const cases = [
    [{ pages: 3 }, /kernel kernels\/000.json imports 3 pages, the package's linear memory has 2/],
    [{ mutate: (m) => { m.wasm_memory.slot_offsets = [LINEAR.slots[0], 2 * 65536 - 8]; } }, /slot 1 \(4 floats at byte 131064\) does not lie 64-byte aligned inside the 131072 bytes/],
    [{ mutate: (m) => { m.wasm_memory.weight_offsets = [LINEAR.B]; } }, /weight_offsets must give one offset per weight \(2\)/],
  ];
  for (const [options, pattern] of cases) {
    const { dir, url } = writeLinearPackage({ threads: 1, ...options });
    try {
      await assert.rejects(load(url, { fetch: fileFetch, target: 'wasm' }), pattern);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }
});

test('two threaded kernels (T = 2 and T = 3) share one pool of two helper workers', { skip }, async () => {
  const W2 = Float32Array.from([1, 2, 3, 4]);  // [2,2]
  const second = wat2wasm(denseWat({ M, N: 2, K: 2, threads: 3, pages: 1, offsets: [0, 64, 128] }));
  const { dir, url } = writePackage({
    threads: 2,
    mutate: (m) => {
      m.weights.push({ id: 2, name: 'W2', offset: 512, floats: 4, shape: [2, 2] });
      m.values.push({ id: 5, name: 'z', shape: [M, 2], storage: { kind: 'array', slot: 0 } });
      m.steps.splice(m.steps.length - 2, 2,
        { kind: 'kernel', role: 'task', kernel: 'kernels/001.json', node: '/MatMul2', task: 'dense_2', inputs: [{ value: 3 }, { weight: 2 }], output: 5 },
        { kind: 'download', value: 5 });
      m.outputs = [{ name: 'z', shape: [M, 2], value: 5 }];
    },
  });
  try {
    const artifact = JSON.parse(fs.readFileSync(path.join(dir, 'kernels', '000.json')));
    artifact.source = Buffer.from(second).toString('base64');
    artifact.inputs = [{ shape: [M, 2], pack_axis: -1, width: 4, height: 1 }, { shape: [2, 2], pack_axis: -1, width: 4, height: 1 }];
    artifact.wasm.threads = 3;
    fs.writeFileSync(path.join(dir, 'kernels', '001.json'), JSON.stringify(artifact));
    const bytes = fs.readFileSync(path.join(dir, 'weights.bin'));
    const weights = new Float32Array(bytes.buffer, bytes.byteOffset, bytes.length / 4);
    const grown = new Float32Array(132);
    grown.set(weights);
    grown.set(W2, 128);
    fs.writeFileSync(path.join(dir, 'weights.bin'), Buffer.from(grown.buffer));
    let workers = 0;
    const { Worker } = await import('node:worker_threads');
    const url2 = new URL('../wasm_worker.mjs', import.meta.url);
    const m = await load(url, { fetch: fileFetch, workerFactory: () => { workers += 1; return new Worker(url2); } });
    try {
      const a = expected();  // [2,2] row-major
      const z = [a[0] * 1 + a[1] * 3, a[0] * 2 + a[1] * 4, a[2] * 1 + a[3] * 3, a[2] * 2 + a[3] * 4];
      assert.deepEqual([...(await m.run(X))], z);
      assert.deepEqual([...(await m.run(X))], z);
      assert.equal(workers, 2);  // the page is tid 0 of both
    } finally {
      m.dispose();
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

for (const threads of [1, 2]) test(`a kernel that traps (${threads} thread(s)) rejects the run naming its step, node and kernel file`, { skip }, async () => {
  // On 2 threads the helper traps: the leader reports it for the whole execution.
  const module = wat2wasm(trapWat({ threads, pages: 1, trapTid: threads - 1 }));
  const { dir, url } = writePackage({ threads, module });
  try {
    const m = await load(url, { fetch: fileFetch });
    await assert.rejects(m.run(X), (e) => {
      assert.match(e.message, /task step 1 of node '\/MatMul' \(kernel kernels\/000\.json\) failed: RUNTIME_DEVICE: the kernel trapped/);
      assert.equal(e.step, 1);
      assert.equal(e.node, '/MatMul');
      assert.equal(e.kernel, 'kernels/000.json');
      return true;
    });
    // It fails again, never a silently wrong output.
    await assert.rejects(m.run(X), /the kernel trapped/);
    m.dispose();
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('a module that does not compile rejects load as COMPILE_DEVICE of its step', async () => {
  const { dir, url } = writePackage({ module: Uint8Array.from([0, 0x61, 0x73, 0x6d, 1, 0, 0, 0, 0xff]) });
  try {
    await assert.rejects(load(url, { fetch: fileFetch }),
      /task step 1 of node '\/MatMul' \(kernel kernels\/000\.json\) failed: COMPILE_DEVICE: WebAssembly\.compile failed/);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('a kernel that asks for scratch buffers (gles-compute k_groups) rejects load as INSTANTIATION of its step', async () => {
  // Refused before the module is compiled: these bytes would not compile either.
  const { dir, url } = writePackage({
    module: Uint8Array.from([0, 0x61, 0x73, 0x6d, 1, 0, 0, 0, 0xff]),
    mutateArtifact: (a) => { a.scratch_floats = 8; a.scratch_counters = 1; },
  });
  try {
    await assert.rejects(load(url, { fetch: fileFetch }), (e) => {
      assert.equal(e.step, 1);
      assert.equal(e.kernel, 'kernels/000.json');
      assert.match(e.message, /task step 1 of node '\/MatMul' \(kernel kernels\/000\.json\) failed: INSTANTIATION: the kernel asks for scratch buffers \(scratch_floats 8, scratch_counters 1\), which the wasm runner does not provide/);
      return true;
    });
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('a JavaScript op the runtime does not run rejects load naming its step and op', { skip }, async () => {
  const { dir, url } = writePackage({
    mutate: (m) => { m.steps[3].op.type = 'NonMaxSuppression'; },
  });
  try {
    await assert.rejects(load(url, { fetch: fileFetch }),
      /op step 3 of node '\/Add' \(op NonMaxSuppression in JavaScript\) failed: NonMaxSuppression: is not an operator the wasm runtime runs/);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('another target, a missing kernel file, a bad format and a wrong input are refused', { skip }, async () => {
  const { dir, url } = writePackage();
  try {
    await assert.rejects(load(url, { fetch: fileFetch, target: 'webgpu' }), /is for target 'wasm', not 'webgpu'/);
    const m = await load(url, { fetch: fileFetch });
    await assert.rejects(m.run(new Float32Array(5)), /input 'x' has 5 elements; its shape \[2,3\] needs 6/);
    m.dispose();
    fs.rmSync(path.join(dir, 'kernels', '000.json'));
    await assert.rejects(load(url, { fetch: fileFetch }), /cannot fetch kernel kernels\/000\.json .*HTTP 404/);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
  const other = writePackage({ mutate: (m) => { m.version = 2; } });
  try {
    await assert.rejects(load(other.url, { fetch: fileFetch }), /the package's manifest: version 2 is not 1/);
  } finally {
    fs.rmSync(other.dir, { recursive: true, force: true });
  }
});
