// page.mjs — the in-browser half of bench/web_vs_tfjs: times one webtune kernel through the
// browser agent's own executor, and TensorFlow.js's equivalent op, in this page. bench.mjs
// (node) serves this page, calls window.bench.* through puppeteer, and prints the table.
//
// webtune: the KernelArtifact of a tuned config (`webtune artifact`) becomes a MeasureInput
// {workload, artifact, seed, samples, options} and goes to the executor class whose
// artifactTargets include artifact.target (as agent.mjs dispatches jobs), so the kernel is run,
// checked against the CPU reference samples, warmed up and timed exactly as during tuning
// (TVM time_evaluator: `repeat` costs of `number` runs each; we report their median).
//
// TensorFlow.js: the same math with the inputs already on the device: tf.matMul(a[M,K], b[K,N])
// for dense; tf.conv2d / tf.depthwiseConv2d for the convolutions, whose layout is NHWC data and
// HWIO filters (webtune's is NCHW and KCRS; the FLOP count is the same, 2·N·K·OH·OW·C·R·S, and
// 2·N·C·OH·OW·R·S for depthwise). A workload with an epilogue runs tfjs's fused op
// (tf.fused.matMul / conv2d / depthwiseConv2d with the bias and, when tfjs can fuse it, the
// activation: relu → 'relu', clip(0,6) → 'relu6'); what tfjs cannot fuse runs as separate ops
// inside one tf.tidy: the residual (tfjs's fused ops take none) as tf.add, before or after the
// activation as the workload says, and other activations (hard-swish, clip of another range).
//
// Three timings per side, chosen by `mode` (bench.mjs prints all three):
// - "readback": each sample is the op plus the output read back into a Float32Array. webgl2:
//   both sides block: tfjs `y.dataSync()`; webtune the executor's options.readback (every
//   render target's readPixels queued into a pixel-pack buffer, then one getBufferSubData,
//   which blocks until the draws and reads are done, and the unpacking to the logical layout,
//   or since 2026-11-29 no unpacking where the reads land in row-major order (GLKernel
//   readsRowMajor); the read returns a new Float32Array, as tfjs's does (since 2026-11-29
//   13:40 UTC made while the draws run, runtime/host_array.mjs);
//   until 2026-11-28 13:00 UTC a 1-texel read waited before the download, one more round trip).
//   webgpu: tfjs `await y.data()`;
//   webtune copies to a MAP_READ buffer, mapAsync, copy out (into a new array made while the
//   GPU works, as for webgl2). wasm: tfjs `await y.data()`;
//   webtune copies the output out of the module's memory after each run.
// - "fence": each sample stops when the device has finished the op, nothing read back but what
//   the wait needs. webgl2: both sides wait the same way, a blocking readPixels of one texel of
//   the output on their own context (webtune: the executor's default in Chromium, see
//   browser-agent/webgl2.mjs defaultSync; tfjs: tfjsFence). A fence polled between tasks,
//   which both sides used until 2026-11-28 (tfjs's createAndWaitForFence on setTimeout turns),
//   is seen 1–4 ms late, more than many of these kernels take. webgpu: tfjs defers submits
//   (WEBGPU_DEFERRED_SUBMIT_BATCH_SIZE dispatches per command buffer), so its open pass is
//   ended and submitted (backend.submitQueue(), as its data() does) and then
//   `await device.queue.onSubmittedWorkDone()` on tfjs's own device; webtune waits on
//   onSubmittedWorkDone too. wasm: both run synchronously, so the run's return is the end.
// - "batched": `batch` (16) runs back to back, then one wait as in "fence"; each sample is the
//   batch's time / batch (TVM time_evaluator's `number`). On SwiftShader one draw or dispatch
//   waited for alone takes more than its share of a batch, on both sides (latency_floor.mjs:
//   an 8×8 draw and a blocking 1-texel read 0.2 ms, its fence polled on MessageChannel turns
//   1.2 ms; onSubmittedWorkDone after a 1-invocation dispatch 2.8 ms): "fence" times that
//   latency too, "batched" the kernels. tfjs's outputs go back to its pool between the runs, as
//   in a model.
//
// tfjs wasm threads: tf.wasm.setThreadsCount(T) alone does not give T threads. tfjs's
// init_with_threads_count (tfjs-backend-wasm/src/cc/backend.cc) caps the count at
// emscripten_num_logical_cores() / 2, i.e. navigator.hardwareConcurrency / 2 ("many x86-64
// processors have 2 threads per core"), which is 1 on this 2-core machine. To give tfjs the
// thread count of webtune's kernel, useBackend re-creates tfjs's wasm backend with
// setThreadsCount(T) while navigator.hardwareConcurrency reads max(2T, the real count), then
// checks tf.wasm.getThreadsCount() === T (and throws otherwise).

const tf = globalThis.tf;

/** The ways a sample can end (see the top of the file). */
const MODES = ['fence', 'readback', 'batched'];

/** Executor modules of the browser agent, tried in order for an artifact target. */
const EXECUTOR_MODULES = ['/agent/webgl2.mjs', '/agent/webgpu.mjs', '/agent/wasm.mjs'];
const executors = new Map();  // artifact target → executor instance

function median(values) {
  const s = [...values].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/** The executor for `target` (KernelArtifact.target), created once per page. */
async function executorFor(target) {
  if (executors.has(target)) return executors.get(target);
  for (const url of EXECUTOR_MODULES) {
    let module;
    try {
      module = await import(url);
    } catch {
      continue;  // e.g. no wasm executor in this checkout yet
    }
    for (const Executor of Object.values(module)) {
      if (typeof Executor !== 'function' || !Executor.artifactTargets?.includes(target)) continue;
      const executor = Executor.create ? await Executor.create({}) : new Executor({});
      executors.set(target, executor);
      return executor;
    }
  }
  throw new Error(`the browser agent has no executor for artifact target '${target}'`);
}

/**
 * Runs a `webtune artifact` object through the agent's executor, each sample ending as `mode`
 * says ("fence": as tuned; "readback": options.readback, the output read back too). Resolves
 * to {costs_s, median_s, gflops, mode, device, key} or throws (the MeasureError's errorNo kept).
 */
async function runWebtune(record, { repeat = 15, number = 1, timeoutS = 300, mode = 'fence', batch = 16, wasmRunner = 'agent', wasmSpinUs = undefined } = {}) {
  if (!MODES.includes(mode)) throw new Error(`mode is ${MODES.join(', ')}, not '${mode}'`);
  if (record.artifact.target === 'wasm' && wasmRunner === 'page') return runWasmOnPage(record, { repeat, mode, batch, spinUs: wasmSpinUs });
  if (wasmRunner !== 'agent' && wasmRunner !== 'page') throw new Error(`wasmRunner is agent or page, not '${wasmRunner}'`);
  // "batched": `batch` runs back to back per sample, one wait at the end (TVM's `number`).
  if (mode === 'batched') number = batch;
  const executor = await executorFor(record.artifact.target);
  const input = {
    workload: record.workload,
    artifact: record.artifact,
    seed: BigInt(record.seed),
    samples: record.samples,
    options: { number, repeat, min_repeat_ms: 0, timeout_s: timeoutS, readback: mode === 'readback' },
  };
  const { costs } = await executor.measure(input);
  const m = median(costs);
  return {
    costs_s: costs, median_s: m, gflops: record.flops / m / 1e9, mode, runs: number,
    key: executor.key(), device: executor.device(),
  };
}

// ---- webtune wasm kernels run as a package runs them ----
//
// runWebtune's wasmRunner 'page': the kernel runs as runtime/model.mjs runs a package's step,
// and as tfjs's XNNPACK ops run: tid 0 on this page's thread, the T − 1 others in helper
// workers (runtime/wasm_pool.mjs), each sample timed here around synchronous calls, like
// runTfjs's. The agent's executor ('agent') runs every thread in workers and times a batch in
// the leader worker, which sleeps between batches: on 2-core machines its fence-only samples
// then take a scheduler tick now and then (a woken leader queued behind its own polling helper),
// which tfjs's page-thread caller never pays.

let onPage = null;  // {source, seed, kernel, pool, run, check, dispose}: the kernel prepared last

/** The WasmKernel of `record` on this thread with its seeded inputs, checked once. */
async function wasmOnPage(record, spinUs = undefined) {
  if (onPage?.source === record.artifact.source && onPage.seed === record.seed && onPage.spinUs === spinUs) return onPage;
  onPage?.dispose();
  onPage = null;
  const { WasmKernel, createMemory, defaultWorkerFactory, writeFloats } = await import('/runtime/wasm.mjs');
  const { WasmHelperPool } = await import('/runtime/wasm_pool.mjs');
  const { checkPlainInputs, requireSamplesMatch, workloadSizes } = await import('/agent/measure.mjs');
  const { cachedSeededTensor } = await import('/agent/seeded_random.mjs');
  const sizes = workloadSizes(record.workload);
  checkPlainInputs(record.artifact, record.workload, 'wasm kernels read plain row-major memory');
  const kernel = new WasmKernel(record.artifact, sizes);
  await kernel.compile();
  const { plan } = kernel;
  kernel.memory = createMemory(plan);  // shared iff T > 1
  sizes.inputs.forEach((count, i) => writeFloats(kernel.memory, plan.offsets[i], cachedSeededTensor(BigInt(record.seed), i, count)));
  writeFloats(kernel.memory, plan.outputOffset, new Float32Array(sizes.output).fill(NaN));
  let pool = null;
  const run = () => (pool ? pool.run(0, kernel) : kernel.runHere());
  const check = (samples) => requireSamplesMatch(kernel.outputView().slice(), { samples });
  const prepared = { source: record.artifact.source, seed: record.seed, spinUs, kernel, run, check, dispose: () => pool?.dispose() };
  try {
    if (plan.threads > 1) {
      pool = new WasmHelperPool(plan.threads - 1, await defaultWorkerFactory(), { spinUs });
      prepared.pool = pool;
      await pool.start();
      await pool.add(0, kernel);
      await pool.serve();
    } else {
      await kernel.instantiateHere(kernel.memory);
    }
    // The checked run (the output started as NaN), then tier-up: V8 compiles the hot kernel
    // with TurboFan on a background thread, which needs a core (browser-agent/wasm.mjs WARM_UP).
    run();
    check(record.samples);
    for (let round = 0; round < 6; ++round) {
      await new Promise((resolve) => setTimeout(resolve, 25));
      run();
    }
  } catch (e) {
    prepared.dispose();  // no helper worker outlives a kernel that failed to start or check
    throw e;
  }
  onPage = prepared;
  return prepared;
}

/** runWebtune for a wasm record with the kernel on this thread ('page', above). */
async function runWasmOnPage(record, { repeat = 15, mode = 'fence', batch = 16, warmup = 2, spinUs = undefined } = {}) {
  const { kernel, run, pool, check } = await wasmOnPage(record, spinUs);
  // The record's samples, against the output the kernel left in memory (a kernel prepared for
  // an earlier call with the same module and inputs is checked against this record's too).
  check(record.samples);
  const runs = mode === 'batched' ? batch : 1;
  let kept = null;
  const once = () => {
    for (let j = 0; j < runs; ++j) run();
    // "readback": the output copied out of the module's memory, as tfjs's `await y.data()`
    // copies it out of its heap.
    if (mode === 'readback') kept = kernel.outputView().slice();
  };
  for (let i = 0; i < warmup; ++i) once();
  const costs = [];
  for (let i = 0; i < repeat; ++i) {
    const t0 = performance.now();
    once();
    costs.push((performance.now() - t0) / 1e3 / runs);
  }
  kept = null;
  const m = median(costs);
  return {
    costs_s: costs, median_s: m, gflops: record.flops / m / 1e9, mode, runs, runner: 'page',
    threads: kernel.plan.threads, helpers: pool ? pool.threads.length : 0,
  };
}

// tfjs's wasm backend factory (tfjs-backend-wasm registers it at load), kept so that the backend
// can be re-created with another thread count; and the thread count it was created for
// (0: tfjs's own choice).
let wasmFactory = null;
let wasmThreads = null;

/**
 * Makes `backend` ("webgl", "webgpu", "wasm") tfjs's current backend. For wasm, `threads` > 0
 * asks for that many XNNPACK threads (0: tfjs's own choice); when the backend already runs with
 * another count it is removed and re-created (the engine keeps no state between ops here).
 * Throws when tfjs cannot start the backend or does not give the thread count asked for.
 */
async function useBackend(backend, { threads = 0 } = {}) {
  if (backend === 'wasm' && wasmThreads !== threads) {
    if (wasmFactory === null) {
      wasmFactory = tf.findBackendFactory('wasm');
      if (!wasmFactory) throw new Error('tfjs has no wasm backend registered');
      tf.wasm.setWasmPaths('/tfjs/tfjs-backend-wasm/dist/');
    } else {
      tf.removeBackend('wasm');  // disposes the module and terminates its pthreads
      tf.registerBackend('wasm', wasmFactory, 2);  // tfjs-backend-wasm's WASM_PRIORITY
    }
    tf.wasm.setThreadsCount(threads > 0 ? threads : -1);
    const real = navigator.hardwareConcurrency;
    // tfjs's cap (see the top of this file): hardwareConcurrency / 2, read while the module
    // starts (a static initializer of backend.cc), so the override only spans setBackend.
    const override = threads > 0 && 2 * threads > real;
    if (override) Object.defineProperty(navigator, 'hardwareConcurrency', { value: 2 * threads, configurable: true });
    let ok;
    try {
      ok = await tf.setBackend('wasm');
    } finally {
      if (override) delete navigator.hardwareConcurrency;
    }
    if (!ok) throw new Error("tf.setBackend('wasm') failed");
    await tf.ready();
    const got = tf.wasm.getThreadsCount();
    if (threads > 0 && got !== threads) {
      throw new Error(`tfjs wasm runs ${got} threads after setThreadsCount(${threads})`);
    }
    wasmThreads = threads;
    return;
  }
  const ok = await tf.setBackend(backend);
  if (!ok) throw new Error(`tf.setBackend('${backend}') failed`);
  await tf.ready();
}

/**
 * The activation of an epilogue as tfjs ops on `v` (fp32 tensor): relu = max(v, 0),
 * clip = min(max(v, lo), hi), hard_swish = v · min(max(v + 3, 0), 6) / 6
 * (codegen/include/codegen/epilogue.hpp). tfjs has no hard-swish op.
 */
function activate(v, e) {
  switch (e.activation || 'none') {
    case 'none': return v;
    case 'relu': return tf.relu(v);
    case 'clip': return isRelu6(e) ? tf.relu6(v) : tf.clipByValue(v, e.clip_min ?? 0, e.clip_max ?? 6);
    case 'hard_swish': return tf.div(tf.mul(v, tf.relu6(tf.add(v, 3))), 6);
    default: throw new Error(`unknown epilogue activation '${e.activation}'`);
  }
}

function isRelu6(e) {
  return e.activation === 'clip' && (e.clip_min ?? 0) === 0 && (e.clip_max ?? 6) === 6;
}

/** tfjs's fused activation for epilogue `e`, or null when tfjs cannot fuse it. */
function fusedActivation(e) {
  if ((e.activation || 'none') === 'none') return 'linear';
  if (e.activation === 'relu') return 'relu';
  if (isRelu6(e)) return 'relu6';
  return null;
}

/**
 * TensorFlow.js's equivalent of workload `w` (JSON form, with its optional "epilogue"):
 * {inputs, run, ops}; run() returns the output tensor (intermediates disposed), `ops` says what
 * tfjs runs. Inputs are seeded uniform in [-1, 1) (the values do not matter for timing).
 */
function tfjsOp(w) {
  const e = w.epilogue || {};
  const residual = e.residual || 'none';
  if (!['none', 'before_activation', 'after_activation'].includes(residual)) {
    throw new Error(`unknown epilogue residual '${residual}'`);
  }
  const uniform = (shape, seed) => tf.randomUniform(shape, -1, 1, 'float32', seed);
  let x, f, outShape, channels, fusedName, callFused, callPlain;
  if (w.op === 'dense') {
    x = uniform([w.M, w.K], 1);
    f = uniform([w.K, w.N], 2);
    outShape = [w.M, w.N];
    channels = w.N;
    fusedName = 'tf.fused.matMul';
    callPlain = () => tf.matMul(x, f);
    callFused = (bias, activation) => tf.fused.matMul({ a: x, b: f, bias, activation });
  } else if (w.op === 'conv2d' || w.op === 'depthwise_conv2d') {
    const N = w.N ?? 1;
    const S = w.S ?? w.R;
    const stride = w.stride ?? 1;
    const p = w.pad ?? 0;
    const depthwise = w.op === 'depthwise_conv2d';
    channels = depthwise ? w.C : w.K;
    const oh = Math.floor((w.H + 2 * p - w.R) / stride) + 1;
    const ow = Math.floor((w.W + 2 * p - S) / stride) + 1;
    x = uniform([N, w.H, w.W, w.C], 1);
    f = uniform(depthwise ? [w.R, S, w.C, 1] : [w.R, S, w.C, w.K], 2);
    outShape = [N, oh, ow, channels];
    // Explicit padding: webtune pads `pad` on every side, as TVM's conv2d_nchw does.
    const pad = [[0, 0], [p, p], [p, p], [0, 0]];
    if (depthwise) {
      fusedName = 'tf.fused.depthwiseConv2d';
      callPlain = () => tf.depthwiseConv2d(x, f, stride, pad, 'NHWC');
      callFused = (bias, activation) => tf.fused.depthwiseConv2d(
        { x, filter: f, strides: stride, pad, dataFormat: 'NHWC', bias, activation });
    } else {
      fusedName = 'tf.fused.conv2d';
      callPlain = () => tf.conv2d(x, f, stride, pad, 'NHWC');
      callFused = (bias, activation) => tf.fused.conv2d(
        { x, filter: f, strides: stride, pad, dataFormat: 'NHWC', bias, activation });
    }
  } else {
    throw new Error(`no TensorFlow.js op for workload op '${w.op}'`);
  }
  const inputs = [x, f];
  if (!e.bias && (e.activation || 'none') === 'none' && residual === 'none') {
    return { inputs, run: callPlain, ops: fusedName.replace('fused.', '') };
  }
  const bias = e.bias ? uniform([channels], 3) : undefined;
  if (bias) inputs.push(bias);
  const r = residual !== 'none' ? uniform(outShape, 4) : null;
  if (r) inputs.push(r);
  // What tfjs fuses: the bias, and the activation unless a residual must come before it.
  const fusable = fusedActivation(e);
  const fuseAct = fusable !== null && residual !== 'before_activation';
  const ops = [`${fusedName}(${[bias ? 'bias' : null, fuseAct && fusable !== 'linear' ? fusable : null].filter(Boolean).join(', ') || 'linear'})`];
  if (residual === 'before_activation') ops.push('tf.add(residual)');
  if (!fuseAct && (e.activation || 'none') !== 'none') ops.push(`activation ${e.activation} as separate ops`);
  if (residual === 'after_activation') ops.push('tf.add(residual)');
  const run = () => tf.tidy(() => {
    let v = callFused(bias, fuseAct ? fusable : 'linear');
    if (residual === 'before_activation') v = tf.add(v, r);
    if (!fuseAct) v = activate(v, e);
    if (residual === 'after_activation') v = tf.add(v, r);
    return v;
  });
  return { inputs, run, ops: ops.join(' + ') };
}

// A framebuffer on tfjs's WebGL context for the 1-texel reads of tfjsFence, and that context.
let waitFramebuffer = null;
let waitContext = null;
const waitTexel = new Float32Array(4);

/**
 * Waits until tfjs's `backend` has finished every op issued so far, `y` the last op's output
 * (see the top of the file). webgl: a blocking read of one texel of y's texture on tfjs's own
 * context, the wait webtune's executor uses in Chromium (browser-agent/webgl2.mjs defaultSync).
 */
async function tfjsFence(backend, y) {
  const b = tf.backend();
  if (backend === 'webgl') {
    const gl = b.gpgpu.gl;
    const data = b.texData.get(y.dataId);
    const texture = data?.texture?.texture ?? data?.texture;
    if (!texture) throw new Error(`tfjs's output ${y.shape} has no texture on the webgl backend`);
    if (waitContext !== gl) {
      waitContext = gl;
      waitFramebuffer = gl.createFramebuffer();
    }
    const previous = gl.getParameter(gl.FRAMEBUFFER_BINDING);
    gl.bindFramebuffer(gl.FRAMEBUFFER, waitFramebuffer);
    gl.framebufferTexture2D(gl.FRAMEBUFFER, gl.COLOR_ATTACHMENT0, gl.TEXTURE_2D, texture, 0);
    gl.readBuffer(gl.COLOR_ATTACHMENT0);
    gl.readPixels(0, 0, 1, 1, gl.RGBA, gl.FLOAT, waitTexel);
    gl.framebufferTexture2D(gl.FRAMEBUFFER, gl.COLOR_ATTACHMENT0, gl.TEXTURE_2D, null, 0);
    gl.bindFramebuffer(gl.FRAMEBUFFER, previous);
    const error = gl.getError();
    if (error !== gl.NO_ERROR) throw new Error(`reading one texel of tfjs's output failed: GL error 0x${error.toString(16)}`);
  } else if (backend === 'webgpu') {
    if (b.commandEncoder) {
      b.endComputePassEncoder();
      b.submitQueue();
    }
    await b.device.queue.onSubmittedWorkDone();
  }
  // wasm: the op ran to its end on this thread.
}

/**
 * Times TensorFlow.js's op for workload `w` (JSON form) on `backend` ("webgl", "webgpu",
 * "wasm"), each sample ending as `mode` says ("readback" or "fence"); `threads`: tfjs wasm's
 * thread count (0: its own choice). Resolves to {costs_s, median_s, gflops, backend, mode,
 * ops, threads, ...}.
 */
async function runTfjs(backend, w, flops, { repeat = 15, warmup = 5, mode = 'readback', threads = 0, batch = 16 } = {}) {
  if (!MODES.includes(mode)) throw new Error(`mode is ${MODES.join(', ')}, not '${mode}'`);
  await useBackend(backend, { threads });
  const { inputs, run, ops } = tfjsOp(w);
  // Inputs on the device before timing: one read forces the upload (and the random kernel).
  for (const t of inputs) await t.data();
  // Runs per sample: "batched" issues `batch` ops back to back (each output given back to
  // tfjs's texture / buffer pool as a model's intermediate would be) and waits once.
  const runs = mode === 'batched' ? batch : 1;
  const once = async () => {
    for (let j = 0; j < runs - 1; ++j) run().dispose();
    const y = run();
    // webgl read-back is the synchronous dataSync(), as webtune's is (a blocking wait, then
    // the download); webgpu's and wasm's are data().
    if (mode === 'readback' && backend === 'webgl') y.dataSync();
    else if (mode === 'readback') await y.data();
    else await tfjsFence(backend, y);
    y.dispose();
  };
  for (let i = 0; i < warmup; ++i) await once();
  const costs = [];
  for (let i = 0; i < repeat; ++i) {
    const t0 = performance.now();
    await once();
    costs.push((performance.now() - t0) / 1e3 / runs);
  }
  for (const t of inputs) t.dispose();
  const m = median(costs);
  const out = { costs_s: costs, median_s: m, gflops: flops / m / 1e9, backend: tf.getBackend(), mode, ops, runs };
  if (backend === 'wasm') {
    out.threads = tf.wasm.getThreadsCount();
    out.threads_requested = threads > 0 ? threads : 'default';
    out.cross_origin_isolated = globalThis.crossOriginIsolated === true;
    // Which of the three builds it loaded (plain, SIMD, threaded SIMD).
    out.wasm_binaries = [...new Set(performance.getEntriesByType('resource')
      .map((e) => e.name).filter((n) => n.endsWith('.wasm')).map((n) => n.split('/').pop()))];
  }
  return out;
}

/**
 * The epilogue semantics of codegen/include/codegen/epilogue.hpp on one value: v = acc + bias;
 * residual before the activation; relu / clip / hard-swish; residual after.
 */
function epilogueRef(acc, b, r, e) {
  let v = acc + b;
  if (e.residual === 'before_activation') v += r;
  switch (e.activation || 'none') {
    case 'relu': v = Math.max(v, 0); break;
    case 'clip': v = Math.min(Math.max(v, e.clip_min ?? 0), e.clip_max ?? 6); break;
    case 'hard_swish': v = (v * Math.min(Math.max(v + 3, 0), 6)) / 6; break;
    default: break;
  }
  if (e.residual === 'after_activation') v += r;
  return v;
}

/**
 * Checks that TensorFlow.js's op for `w` (small shapes: a plain JS loop recomputes it) is the
 * workload's math: the main op in NHWC / HWIO, then the epilogue as epilogue.hpp says. Resolves
 * to {max_abs_err, count, ops, backend, threads}.
 */
async function checkTfjs(backend, w, { threads = 0 } = {}) {
  await useBackend(backend, { threads });
  const { inputs, run, ops } = tfjsOp(w);
  const [x, f, ...extra] = await Promise.all(inputs.map((t) => t.data()));
  const e = w.epilogue || {};
  const bias = e.bias ? extra[0] : null;
  const res = (e.residual || 'none') !== 'none' ? extra[extra.length - 1] : null;
  const y = run();
  const got = await y.data();
  const shape = y.shape;
  y.dispose();
  for (const t of inputs) t.dispose();
  const want = new Float32Array(got.length);
  if (w.op === 'dense') {
    for (let m = 0; m < w.M; ++m) {
      for (let n = 0; n < w.N; ++n) {
        let acc = 0;
        for (let k = 0; k < w.K; ++k) acc += x[m * w.K + k] * f[k * w.N + n];
        const i = m * w.N + n;
        want[i] = epilogueRef(acc, bias ? bias[n] : 0, res ? res[i] : 0, e);
      }
    }
  } else {
    const [N, OH, OW, CO] = shape;
    const depthwise = w.op === 'depthwise_conv2d';
    const S = w.S ?? w.R;
    const stride = w.stride ?? 1;
    const pad = w.pad ?? 0;
    for (let n = 0; n < N; ++n) {
      for (let oh = 0; oh < OH; ++oh) {
        for (let ow = 0; ow < OW; ++ow) {
          for (let co = 0; co < CO; ++co) {
            let acc = 0;
            for (let r = 0; r < w.R; ++r) {
              for (let s2 = 0; s2 < S; ++s2) {
                const ih = oh * stride - pad + r;
                const iw = ow * stride - pad + s2;
                if (ih < 0 || iw < 0 || ih >= w.H || iw >= w.W) continue;
                const xAt = ((n * w.H + ih) * w.W + iw) * w.C;
                if (depthwise) {
                  acc += x[xAt + co] * f[(r * S + s2) * w.C + co];
                } else {
                  for (let c = 0; c < w.C; ++c) acc += x[xAt + c] * f[((r * S + s2) * w.C + c) * CO + co];
                }
              }
            }
            const i = ((n * OH + oh) * OW + ow) * CO + co;
            want[i] = epilogueRef(acc, bias ? bias[co] : 0, res ? res[i] : 0, e);
          }
        }
      }
    }
  }
  let maxAbsErr = 0;
  for (let i = 0; i < got.length; ++i) maxAbsErr = Math.max(maxAbsErr, Math.abs(got[i] - want[i]));
  if (got.some(Number.isNaN)) maxAbsErr = NaN;
  return {
    max_abs_err: maxAbsErr, count: got.length, ops, backend: tf.getBackend(),
    threads: backend === 'wasm' ? tf.wasm.getThreadsCount() : null,
  };
}

/** What the page runs on: user agent, isolation, WebGL2 renderer, WebGPU adapter. */
async function environment() {
  const env = {
    user_agent: navigator.userAgent,
    cross_origin_isolated: globalThis.crossOriginIsolated === true,
    hardware_concurrency: navigator.hardwareConcurrency,
    tfjs_version: tf.version_core,
  };
  try {
    const gl = new OffscreenCanvas(1, 1).getContext('webgl2');
    const debug = gl.getExtension('WEBGL_debug_renderer_info');
    env.webgl2_renderer = gl.getParameter(debug ? debug.UNMASKED_RENDERER_WEBGL : gl.RENDERER);
    env.webgl2_version = gl.getParameter(gl.VERSION);
    gl.getExtension('WEBGL_lose_context')?.loseContext();
  } catch (e) {
    env.webgl2_renderer = `none (${e.message})`;
  }
  try {
    const adapter = await navigator.gpu?.requestAdapter();
    const info = adapter?.info || {};
    env.webgpu_adapter = adapter ? [info.vendor, info.architecture, info.device, info.description]
      .filter(Boolean).join(' / ') : 'none';
  } catch (e) {
    env.webgpu_adapter = `none (${e.message})`;
  }
  return env;
}

/**
 * A WebGL2 context for the probes (latency_floor.mjs, probe_readback.mjs): an OffscreenCanvas of
 * 64×64 with EXT_color_buffer_float on, and `program(fragmentSource)`, which links that shader
 * with a vertex shader whose one triangle covers the viewport (3 vertices, no attributes); it
 * throws the compile log of a shader that fails. `median(values)` as the bench's own.
 */
function glProbe() {
  const gl = new OffscreenCanvas(64, 64).getContext('webgl2');
  gl.getExtension('EXT_color_buffer_float');
  const shader = (type, source) => {
    const s = gl.createShader(type);
    gl.shaderSource(s, source);
    gl.compileShader(s);
    if (!gl.getShaderParameter(s, gl.COMPILE_STATUS)) throw new Error(gl.getShaderInfoLog(s));
    return s;
  };
  const vertex = shader(gl.VERTEX_SHADER,
    '#version 300 es\nvoid main(){vec2 p=vec2((gl_VertexID&1)*4-1,(gl_VertexID>>1)*4-1);gl_Position=vec4(p,0,1);}');
  const program = (fragmentSource) => {
    const p = gl.createProgram();
    gl.attachShader(p, vertex);
    gl.attachShader(p, shader(gl.FRAGMENT_SHADER, fragmentSource));
    gl.linkProgram(p);
    return p;
  };
  return { gl, program, median };
}

/**
 * Times `batch(n)` (a promise: n kernels queued back to back, then one wait) as the batched
 * column times kernels, for the probes (probe_device_floor.mjs, probe_webgpu_textures.mjs): after
 * one untimed run, n doubles from 1 until one sample takes `minSampleMs` (n at most 4096), then
 * `warmup` samples are dropped and `samples` kept. Resolves to the median ms a kernel.
 */
async function timeBatched(batch, { minSampleMs = 20, samples = 9, warmup = 2 } = {}) {
  // A first run outside the sizing: it pays for compiling the pipeline, which would otherwise
  // stop the doubling at n = 1 and leave every sample mostly the wait.
  await batch(1);
  let n = 1;
  for (;;) {
    const begin = performance.now();
    await batch(n);
    if (performance.now() - begin >= minSampleMs || n >= 4096) break;
    n *= 2;
  }
  const costs = [];
  for (let i = 0; i < warmup + samples; ++i) {
    const begin = performance.now();
    await batch(n);
    if (i >= warmup) costs.push((performance.now() - begin) / n);
  }
  return median(costs);
}

window.bench = { runWebtune, runTfjs, checkTfjs, tfjsFence, glProbe, timeBatched, environment, ready: true };
