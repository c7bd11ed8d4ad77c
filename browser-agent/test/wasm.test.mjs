// wasm.test.mjs — node --test checks of the wasm executor (wasm.mjs + wasm_worker.mjs) in
// node 20, with worker_threads standing in for the browser's module workers: base64 decoding,
// the memory plan, T = 1 and T = 2 runs of a hand-made dense kernel against values computed
// here, and traps, link errors, corrupt modules and endless kernels as error results after which
// the executor goes on.
import assert from 'node:assert/strict';
import test from 'node:test';

import { ErrorNo } from '../measure.mjs';
import { seededTensor } from '../seeded_random.mjs';
import { CONTROL, PAGE_BYTES, POOL_RECYCLE, WARM_UP, WasmExecutor, createMemory, decodeBase64, memoryPlan, warmUpUntilSteady, writeFloats } from '../wasm.mjs';
import { denseWat, haveWat2wasm, loopWat, trapWat, wat2wasm } from './wasm_modules.mjs';

const skip = haveWat2wasm() ? false : 'wat2wasm (wabt) is not installed';

test('decodeBase64: standard padded base64 only', () => {
  assert.deepEqual([...decodeBase64('AGFzbQ==')], [0, 0x61, 0x73, 0x6d]);
  assert.deepEqual([...decodeBase64('AGFz\nbQEA')], [0, 0x61, 0x73, 0x6d, 1, 0]);
  assert.deepEqual([...decodeBase64('')], []);
  for (const bad of ['AGFzbQ', 'AGF-bQ==', 'AG=zbQ==', 'A===']) {
    assert.throws(() => decodeBase64(bad), (e) => e.errorNo === ErrorNo.INSTANTIATION, bad);
  }
  assert.throws(() => decodeBase64(undefined), (e) => e.errorNo === ErrorNo.INSTANTIATION);
});

test('warmUpUntilSteady runs until a run is no faster, pausing before each', async () => {
  const script = (times) => {
    const calls = { runs: 0, idles: [] };
    const runOnce = async () => times[calls.runs++];
    const idle = async (ms) => { calls.idles.push(ms); };
    return { calls, runOnce, idle };
  };
  // Baseline code (17 ms), then the tier-up lands (11 ms), then steady: 2 more runs.
  let s = script([0.011, 0.0109]);
  assert.equal(await warmUpUntilSteady(0.017, s.runOnce, s.idle), 2);
  assert.deepEqual(s.calls.idles, [WARM_UP.IDLE_MS, WARM_UP.IDLE_MS]);
  // Already steady after the checked run: one more run only.
  s = script([0.0101]);
  assert.equal(await warmUpUntilSteady(0.01, s.runOnce, s.idle), 1);
  assert.equal(s.calls.runs, 1);
  // Slower runs also end it (noise, not a tier-up).
  s = script([0.02]);
  assert.equal(await warmUpUntilSteady(0.01, s.runOnce, s.idle), 1);
  // Ever faster: capped at ROUNDS runs.
  s = script(Array.from({ length: 20 }, (_, i) => 0.05 / (i + 2)));
  assert.equal(await warmUpUntilSteady(0.05, s.runOnce, s.idle), WARM_UP.ROUNDS);
  assert.equal(s.calls.runs, WARM_UP.ROUNDS);
});

test('memoryPlan checks offsets, alignment and size; createMemory follows the ABI', () => {
  const sizes = { data: 16, weight: 16, output: 16 };
  const plan = memoryPlan({ threads: 2, memory_pages: 1, offsets: [1024, 1088, 1152], simd: true }, sizes);
  assert.deepEqual(plan, { threads: 2, pages: 1, offsets: [1024, 1088, 1152], outputOffset: 1152, simd: true, relaxedSimd: false, shared: true });
  // A package's placed kernel: one thread over the package's shared memory; relaxed SIMD said.
  const placed = memoryPlan({ threads: 1, memory_pages: 1, offsets: [1024, 1088, 1152], simd: true, relaxed_simd: true, shared_memory: true }, sizes);
  assert.equal(placed.shared, true);
  assert.equal(placed.relaxedSimd, true);
  assert.ok(createMemory(placed).buffer instanceof SharedArrayBuffer);
  assert.equal(memoryPlan({ threads: 1, memory_pages: 1, offsets: [1024, 1088, 1152], simd: true }, sizes).shared, false);
  const refuse = (wasm, pattern) => assert.throws(() => memoryPlan(wasm, sizes),
    (e) => e.errorNo === ErrorNo.INSTANTIATION && pattern.test(e.message), JSON.stringify(wasm));
  refuse(undefined, /missing/);
  refuse({ threads: 0, memory_pages: 1, offsets: [0, 64, 128] }, /threads 0/);
  refuse({ threads: 1, memory_pages: 0, offsets: [0, 64, 128] }, /memory_pages 0/);
  refuse({ threads: 1, memory_pages: 1, offsets: [0, 64] }, /offsets must be/);
  refuse({ threads: 1, memory_pages: 1, offsets: [0, 65, 128] }, /weight offset 65 is not a 64-byte aligned/);
  refuse({ threads: 1, memory_pages: 1, offsets: [0, 64, PAGE_BYTES] }, /output \(16 floats at byte 65536\) ends past/);

  const shared = createMemory(plan);
  assert.ok(shared.buffer instanceof SharedArrayBuffer);
  assert.equal(shared.buffer.byteLength, PAGE_BYTES);
  const plain = createMemory({ ...plan, threads: 1, pages: 3, shared: false });
  assert.ok(plain.buffer instanceof ArrayBuffer);
  assert.throws(() => plain.grow(1), RangeError);  // maximum = initial
  writeFloats(plain, 64, new Float32Array([1.5, -2]));
  assert.deepEqual([...new Float32Array(plain.buffer, 64, 3)], [1.5, -2, 0]);
});

// ---- the executor over worker_threads ----

/** The dense reference in double, then [index, value, abs_sum, tolerance] samples. */
function denseSamples(M, N, K, seed, count = 24) {
  const A = seededTensor(seed, 0, M * K);
  const B = seededTensor(seed, 1, K * N);
  const samples = [];
  for (let s = 0; s < count; ++s) {
    const index = (s * 7919) % (M * N);
    const i = Math.floor(index / N);
    const j = index % N;
    let value = 0;
    let absSum = 0;
    for (let k = 0; k < K; ++k) {
      value += A[i * K + k] * B[k * N + j];
      absSum += Math.abs(A[i * K + k] * B[k * N + j]);
    }
    samples.push([index, value, absSum, 1e-5 * absSum + 1e-6]);
  }
  return samples;
}

function denseInput({ M = 12, N = 10, K = 9, threads = 1, seed = 42, wat = null, source = null, options = {} } = {}) {
  const pages = 1;
  const offsets = [1024, 1024 + 64 * Math.ceil((M * K * 4) / 64), 0];
  offsets[2] = offsets[1] + 64 * Math.ceil((K * N * 4) / 64);
  const text = wat ?? denseWat({ M, N, K, threads, pages, offsets });
  return {
    workload: { op: 'dense', M, N, K },
    seed,
    samples: denseSamples(M, N, K, seed),
    options: { number: 2, repeat: 2, timeout_s: 10, ...options },
    artifact: {
      target: 'wasm',
      source: source ?? Buffer.from(wat2wasm(text)).toString('base64'),
      inputs: [{ shape: [M, K], pack_axis: -1 }, { shape: [K, N], pack_axis: -1 }],
      output: { rows: M, cols: N, rows_per_item: 1, channels: 1 },
      wasm: { threads, memory_pages: pages, offsets, simd: false },
    },
  };
}

async function expectError(executor, input, errorNo, pattern) {
  await assert.rejects(executor.measure(input, { start: performance.now() }), (e) => {
    assert.equal(e.errorNo, errorNo, e.message);
    assert.match(e.message, pattern);
    return true;
  });
}

test('the executor runs T = 1 and T = 2 dense kernels, and survives traps, bad modules and endless loops', { skip, timeout: 120000 }, async (t) => {
  const executor = await WasmExecutor.create({ max_threads: 4 });
  t.after(() => executor.resetPool());
  // node has SharedArrayBuffer; node stands in for the browser in the device class.
  assert.match(executor.key(), /^wasm:threads:node-\d+:[a-z0-9]+-[a-z0-9_]+:\d+t$/);
  assert.equal(executor.device().limits.max_threads >= 1, true);

  await t.test('T = 1 matches the reference and gives positive costs', async () => {
    const { costs } = await executor.measure(denseInput({ threads: 1 }));
    assert.equal(costs.length, 2);
    for (const c of costs) assert.ok(c > 0);
  });
  await t.test('options.readback (bench/web_vs_tfjs) times runs that copy the output out', async () => {
    for (const threads of [1, 2]) {
      const { costs } = await executor.measure(denseInput({ threads, seed: 9, options: { readback: true, repeat: 3 } }));
      assert.equal(costs.length, 3);
      for (const c of costs) assert.ok(c > 0);
    }
  });
  await t.test('T = 2 and T = 3 split the rows over workers and match', async () => {
    for (const threads of [2, 3]) {
      const { costs } = await executor.measure(denseInput({ threads, seed: 7 }));
      assert.equal(costs.length, 2);
    }
    assert.equal(executor.pool.length, 3);  // workers are kept between jobs
  });
  await t.test('a kernel that skips rows is WRONG_ANSWER', async () => {
    // A T = 2 module run as T = 1 computes only the even rows: the odd ones stay NaN.
    const offsets = denseInput().artifact.wasm.offsets;
    const half = denseWat({ M: 12, N: 10, K: 9, threads: 2, pages: 1, offsets }).replace(' shared', '');
    await expectError(executor, denseInput({ wat: half }), ErrorNo.WRONG_ANSWER, /sampled outputs differ.*= nan/);
  });
  await t.test('corrupt bytes are COMPILE_DEVICE with the engine message', async () => {
    const source = Buffer.from([0, 0x61, 0x73, 0x6d, 1, 0, 0, 0, 0x01, 0xff]).toString('base64');
    await expectError(executor, denseInput({ source }), ErrorNo.COMPILE_DEVICE, /WebAssembly.compile failed: CompileError/);
  });
  await t.test('a module whose memory import disagrees is COMPILE_DEVICE (link error)', async () => {
    const input = denseInput({ threads: 2 });
    input.artifact.wasm.threads = 1;  // a shared-memory module given a plain memory
    await expectError(executor, input, ErrorNo.COMPILE_DEVICE, /does not instantiate.*LinkError/);
  });
  await t.test('a trap on the leader or a helper is RUNTIME_DEVICE, and the next job runs', async () => {
    await expectError(executor, denseInput({ wat: trapWat({ threads: 1, pages: 1 }) }),
      ErrorNo.RUNTIME_DEVICE, /trapped: RuntimeError: unreachable/);
    await expectError(executor, denseInput({ threads: 2, wat: trapWat({ threads: 2, pages: 1, trapTid: 1 }) }),
      ErrorNo.RUNTIME_DEVICE, /trapped: Error: thread 1: RuntimeError: unreachable/);
    await executor.measure(denseInput({ threads: 2 }));
  });
  await t.test('a kernel that never ends is RUN_TIMEOUT; fresh workers run the next job', async () => {
    for (const [threads, loopTid] of [[1, -1], [2, 1], [2, -1]]) {
      const input = denseInput({ threads, wat: loopWat({ threads, pages: 1, loopTid }), options: { timeout_s: 1 } });
      const begin = performance.now();
      await expectError(executor, input, ErrorNo.RUN_TIMEOUT, /past its timeout of 1 s while running the kernel/);
      assert.ok(performance.now() - begin < 3000);
      assert.equal(executor.pool.length, 0);
      await executor.measure(denseInput({ threads }));
    }
  });
  await t.test('an artifact that asks for scratch buffers is INSTANTIATION, and the next job runs', async () => {
    const input = denseInput();
    input.artifact.scratch_floats = 12 * 10 * 4;
    input.artifact.scratch_counters = 1;
    await expectError(executor, input, ErrorNo.INSTANTIATION,
      /asks for scratch buffers \(scratch_floats 480, scratch_counters 1\), which the wasm executor does not provide/);
    await executor.measure(denseInput());
  });
  await t.test('threads on a page that is not cross-origin isolated are RUNTIME_DEVICE', async () => {
    const isolated = executor.threads;
    executor.threads = false;
    try {
      await expectError(executor, denseInput({ threads: 2 }), ErrorNo.RUNTIME_DEVICE, /threads need a cross-origin isolated page/);
    } finally {
      executor.threads = isolated;
    }
  });
  await t.test('a cancelled job stops at once', async () => {
    const input = denseInput({ wat: loopWat({ threads: 1, pages: 1 }), options: { timeout_s: 60 } });
    let stop = false;
    setTimeout(() => { stop = true; }, 300);
    await assert.rejects(executor.measure(input, { shouldStop: () => stop }), (e) => e.errorNo === ErrorNo.RUN_TIMEOUT);
  });
});

test('a waiting helper polls for spinUs µs before it blocks (runtime/wasm_worker.mjs DEFAULT_SPIN_US)', { skip, timeout: 60000 }, async () => {
  const { Worker } = await import('node:worker_threads');
  const offsets = denseInput({ threads: 2 }).artifact.wasm.offsets;
  const module = new WebAssembly.Module(wat2wasm(denseWat({ M: 12, N: 10, K: 9, threads: 2, pages: 1, offsets })));
  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
  // Starts one helper (tid 1) and returns what it did with a generation started without
  // Atomics.notify: a polling helper sees it, a blocked one sleeps on.
  const helperWith = async (spinUs) => {
    const worker = new Worker(new URL('../../runtime/wasm_worker.mjs', import.meta.url));
    const replies = [];
    let wake = null;
    worker.on('message', (m) => { replies.push(m); wake?.(); });
    const next = async () => {
      while (!replies.length) await new Promise((resolve) => { wake = resolve; });
      return replies.shift();
    };
    try {
      assert.deepEqual(await next(), { ready: true });
      const memory = createMemory({ pages: 1, threads: 2 });
      const control = new SharedArrayBuffer(CONTROL.BYTES);
      const ctl = new Int32Array(control);
      worker.postMessage({ cmd: 'load', module, pages: 1, threads: 2, spinUs, tid: 1, memory, control });
      assert.deepEqual(await next(), { ok: true });
      await sleep(200);  // the helper is past its first poll window only when spinUs < 200 ms
      Atomics.add(ctl, CONTROL.GEN, 1);  // no notify
      const start = performance.now();
      while (Atomics.load(ctl, CONTROL.DONE) < 1 && performance.now() - start < 400) await sleep(5);
      const sawIt = Atomics.load(ctl, CONTROL.DONE) === 1;
      Atomics.notify(ctl, CONTROL.GEN);  // a blocked helper runs now
      const waitStart = performance.now();
      while (Atomics.load(ctl, CONTROL.DONE) < 1 && performance.now() - waitStart < 10000) await sleep(5);
      const ranAfterNotify = Atomics.load(ctl, CONTROL.DONE) === 1;
      Atomics.store(ctl, CONTROL.STOP, 1);
      Atomics.add(ctl, CONTROL.GEN, 1);
      Atomics.notify(ctl, CONTROL.GEN);
      return { sawIt, ranAfterNotify };
    } finally {
      await worker.terminate();
    }
  };
  // 0: blocks at once, so only the notify wakes it.
  assert.deepEqual(await helperWith(0), { sawIt: false, ranAfterNotify: true });
  // 5 s of polling: the generation is seen without a notify.
  assert.deepEqual(await helperWith(5e6), { sawIt: true, ranAfterNotify: true });
});

test('the executor replaces its workers after pool_recycle_loads trials, and the results stay right', { skip, timeout: 60000 }, async (t) => {
  const executor = await WasmExecutor.create({ max_threads: 2, pool_recycle_loads: 3 });
  t.after(() => executor.resetPool());
  const pools = [];
  for (let i = 0; i < 7; ++i) {
    // Each trial is checked against the reference samples inside measure (WRONG_ANSWER otherwise).
    const { costs } = await executor.measure(denseInput({ threads: 2, seed: 20 + i }));
    assert.equal(costs.length, 2);
    pools.push(executor.pool.slice());
  }
  // Trials 1–3 on the first pool, 4–6 on a second, 7 on a third: two workers each.
  const same = (a, b) => a.length === b.length && a.every((w, k) => w === b[k]);
  assert.equal(pools[0].length, 2);
  assert.ok(same(pools[0], pools[2]));
  assert.ok(!same(pools[2], pools[3]) && !pools[3].some((w) => pools[2].includes(w)));
  assert.ok(same(pools[3], pools[5]));
  assert.ok(!same(pools[5], pools[6]));
  assert.equal(POOL_RECYCLE.LOADS > 3, true);
});
