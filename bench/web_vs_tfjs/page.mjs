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
// for dense; tf.conv2d for conv2d, whose layout is NHWC data and HWIO filters (webtune's is NCHW
// and KCRS; the FLOP count is the same, 2·N·K·OH·OW·C·R·S). Each timed sample is one op plus
// `await y.data()` (on WebGPU dataSync() returns stale zeros; data() waits for the GPU), after
// warm-up runs that compile the op's shaders; the median of the samples is reported.

const tf = globalThis.tf;

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
 * Runs a `webtune artifact` object through the agent's executor. Resolves to
 * {costs_s, median_s, gflops, device, key} or throws (the MeasureError's errorNo kept).
 */
async function runWebtune(record, { repeat = 15, number = 1, timeoutS = 300 } = {}) {
  const executor = await executorFor(record.artifact.target);
  const input = {
    workload: record.workload,
    artifact: record.artifact,
    seed: BigInt(record.seed),
    samples: record.samples,
    options: { number, repeat, min_repeat_ms: 0, timeout_s: timeoutS },
  };
  const { costs } = await executor.measure(input);
  const m = median(costs);
  return {
    costs_s: costs, median_s: m, gflops: record.flops / m / 1e9,
    key: executor.key(), device: executor.device(),
  };
}

/** Backend name → whether tf.setBackend succeeded (wasm needs its .wasm paths first). */
async function useBackend(backend) {
  if (backend === 'wasm') {
    tf.wasm.setWasmPaths('/tfjs/tfjs-backend-wasm/dist/');
    // ?wasm_threads=N overrides tfjs's own thread count (it must be set before the backend
    // starts; its default here, on 2 cores, is 1).
    const threads = Number(new URLSearchParams(location.search).get('wasm_threads'));
    if (threads > 0) tf.wasm.setThreadsCount(threads);
  }
  const ok = await tf.setBackend(backend);
  if (!ok) throw new Error(`tf.setBackend('${backend}') failed`);
  await tf.ready();
}

function tfjsOp(w) {
  if (w.op === 'dense') {
    const a = tf.randomUniform([w.M, w.K], -1, 1, 'float32', 1);
    const b = tf.randomUniform([w.K, w.N], -1, 1, 'float32', 2);
    return { inputs: [a, b], run: () => tf.matMul(a, b) };
  }
  if (w.op === 'conv2d') {
    const x = tf.randomUniform([w.N, w.H, w.W, w.C], -1, 1, 'float32', 1);
    const f = tf.randomUniform([w.R, w.S, w.C, w.K], -1, 1, 'float32', 2);
    // Explicit padding: webtune pads `pad` on every side, as TVM's conv2d_nchw does.
    const pad = [[0, 0], [w.pad, w.pad], [w.pad, w.pad], [0, 0]];
    return { inputs: [x, f], run: () => tf.conv2d(x, f, w.stride, pad, 'NHWC') };
  }
  throw new Error(`no TensorFlow.js op for workload op '${w.op}'`);
}

/**
 * Times TensorFlow.js's op for workload `w` (JSON form) on `backend` ("webgl", "webgpu",
 * "wasm"). Resolves to {costs_s, median_s, gflops, backend, threads, ...}.
 */
async function runTfjs(backend, w, flops, { repeat = 15, warmup = 5 } = {}) {
  await useBackend(backend);
  const { inputs, run } = tfjsOp(w);
  // Inputs on the device before timing: one read forces the upload (and the random kernel).
  for (const t of inputs) await t.data();
  const once = async () => {
    const y = run();
    await y.data();
    y.dispose();
  };
  for (let i = 0; i < warmup; ++i) await once();
  const costs = [];
  for (let i = 0; i < repeat; ++i) {
    const t0 = performance.now();
    await once();
    costs.push((performance.now() - t0) / 1e3);
  }
  for (const t of inputs) t.dispose();
  const m = median(costs);
  const out = { costs_s: costs, median_s: m, gflops: flops / m / 1e9, backend: tf.getBackend() };
  if (backend === 'wasm') {
    // tfjs picks its thread count itself (XNNPACK's pthreadpool); the default is what users get.
    out.threads = tf.wasm.getThreadsCount ? tf.wasm.getThreadsCount() : null;
    out.cross_origin_isolated = globalThis.crossOriginIsolated === true;
    // Which of the three builds it loaded (plain, SIMD, threaded SIMD).
    out.wasm_binaries = performance.getEntriesByType('resource')
      .map((e) => e.name).filter((n) => n.endsWith('.wasm')).map((n) => n.split('/').pop());
  }
  return out;
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

window.bench = { runWebtune, runTfjs, environment, ready: true };
