// page.mjs — the in-browser half of bench/model_vs_web: whole models (the shared ONNX files) run
// end to end by onnxruntime-web 1.30, TensorFlow.js 4.22 and webtune's packages, all in this one
// page. bench.mjs (node) serves the page (session.mjs), calls window.bench.* through puppeteer
// and prints the table.
//
// Engines (ENGINES below); each exposes run(Float32Array NCHW input) → Promise<Float32Array>
// logits, the whole inference end to end: the input uploaded from the user's Float32Array, the
// model run, the output read back into a Float32Array.
// - onnxruntime-web: `new ort.Tensor('float32', input, dims)`, `await session.run(feeds)`, the
//   output tensor's `.data` (outputs live on the CPU: preferredOutputLocation is left at its
//   default, so GPU EPs download inside run()). Three bundles of the npm package, each an ES
//   module with its own wasm instance and `env`:
//     ort.all.min.mjs     'webgl' EP (the legacy onnxjs WebGL backend, still in 1.30) and the
//                         JSEP 'webgpu' EP (ort-wasm-simd-threaded.jsep.wasm);
//     ort.webgpu.min.mjs  'webgpu' EP of the asyncify build (ort-wasm-simd-threaded.asyncify.wasm),
//                         the C++ WebGPU EP that ORT's docs point WebGPU users to;
//     ort.wasm.min.mjs    'wasm' EP (ort-wasm-simd-threaded.wasm, SIMD + threads).
//   env.wasm.numThreads = T before a bundle's first session; ORT reads it once, when the
//   bundle's wasm module is instantiated, and only in a cross-origin isolated page (else it drops
//   to 1 with a warning). So each thread count gets its own copy of the bundle, imported as
//   `<bundle>?threads=T` (its own env and wasm instance): ort-wasm on the count prepare() or
//   probeThreads() names, the GPU EPs' bundles on setup()'s. Checked after the first session:
//   env.wasm.numThreads as ORT left it (ort-wasm: refused unless it is T) and the pthread workers
//   its module started (T − 1, "WebAssembly will create (Module.numThreads − 1) workers", ORT's
//   wasm-factory).
// - TensorFlow.js: the same graph through tfjs ops in NHWC with the file's weights
//   (tfjs_model.mjs), on webgl, webgpu and wasm; `tf.tensor(input)` + the graph +
//   `await y.data()`. tfjs wasm reads setThreadsCount(T) only when its backend initialises, and
//   caps it at navigator.hardwareConcurrency / 2; the workaround of bench/web_vs_tfjs/page.mjs
//   re-creates the wasm backend with setThreadsCount(T) while hardwareConcurrency reads 2·T, and
//   checks tf.wasm.getThreadsCount() === T. Re-creating it is also how one page changes the count
//   (useTfjsWasm(): for prepare() and each count of probeThreads(); the tensors of the old
//   backend die with it, so no tfjs-wasm engine may be live then).
// - webtune: a package built by `webtune build` (docs/package.md), served under
//   /webtune/<model>-<target>/: `const m = await load(baseUrl)`, `await m.run(input)`.
//
// Before an engine is timed its output on <model>.input.f32 is checked against
// <model>.logits.f32: max |got − want| ≤ 1e-3 × max |want| (issue 16); an engine that fails the
// check, or cannot be made or run, is reported refused with its reason and not timed
// (bench.mjs). A graph that tfjs_model.mjs cannot translate does not fail loadModel(): the
// model's tfjs engines are refused with the builder's message, its other engines run.

const tf = globalThis.tf;

// Every Worker the page starts, so that the thread pools of ORT's and tfjs's wasm modules can be
// counted (both start theirs when their module is instantiated).
const workers = [];
{
  const NativeWorker = globalThis.Worker;
  globalThis.Worker = class extends NativeWorker {
    constructor(url, options) {
      super(url, options);
      workers.push({ url: String(url).slice(0, 200), name: options?.name ?? '', at_ms: performance.now() });
    }
  };
}

/** The engines: side, the target row they belong to, how they are made. */
const ENGINES = {
  'ort-webgl': { side: 'ort', target: 'webgl2', bundle: 'ort.all.min.mjs', ep: 'webgl' },
  'ort-webgpu': { side: 'ort', target: 'webgpu', bundle: 'ort.webgpu.min.mjs', ep: 'webgpu' },
  'ort-webgpu-jsep': { side: 'ort', target: 'webgpu', bundle: 'ort.all.min.mjs', ep: 'webgpu' },
  'ort-wasm': { side: 'ort', target: 'wasm', bundle: 'ort.wasm.min.mjs', ep: 'wasm' },
  'tfjs-webgl': { side: 'tfjs', target: 'webgl2', backend: 'webgl' },
  'tfjs-webgpu': { side: 'tfjs', target: 'webgpu', backend: 'webgpu' },
  'tfjs-wasm': { side: 'tfjs', target: 'wasm', backend: 'wasm' },
  'webtune-webgl2': { side: 'webtune', target: 'webgl2', package: 'webgl2' },
  'webtune-webgpu': { side: 'webtune', target: 'webgpu', package: 'webgpu' },
  'webtune-wasm': { side: 'webtune', target: 'wasm', package: 'wasm' },
};

let threads = 1;        // T: ORT wasm and tfjs wasm threads (setup())
const bundles = new Map();  // bundle file → {ort, workersAtInit, threads}
const models = new Map();   // model name → {bytes, input, logits, plan, maxAbsLogit}
const live = new Map();     // `${engine}|${model}` → {run, dispose, info}

async function fetchBytes(url) {
  const r = await fetch(url);
  if (!r.ok) throw new Error(`cannot fetch ${url}: HTTP ${r.status}`);
  return new Uint8Array(await r.arrayBuffer());
}

/**
 * Loads <model>.onnx, .input.f32, .logits.f32 from /models/ and plans the tfjs graph. A graph
 * that tfjs_model.mjs cannot translate is no error here: the summary's `tfjs_refused` says why,
 * and every tfjs engine of the model is refused with that reason (prepare()); the other engines
 * run. Rejects only when a file is missing or the ONNX file cannot be read at all.
 */
async function loadModel(name) {
  if (models.has(name)) return models.get(name).summary;
  const { planTfjsModel } = await import('/bench/tfjs_model.mjs');
  const bytes = await fetchBytes(`/models/${name}.onnx`);
  const input = new Float32Array((await fetchBytes(`/models/${name}.input.f32`)).buffer);
  const logits = new Float32Array((await fetchBytes(`/models/${name}.logits.f32`)).buffer);
  let plan = null;
  let tfjsRefused = null;
  try {
    plan = planTfjsModel(bytes, name);
  } catch (e) {
    tfjsRefused = e.message;
  }
  let io;
  if (plan) {
    io = { input: plan.input, output: plan.output };
  } else {
    const { parseModel } = await import('/bench/onnx.mjs');
    const g = parseModel(bytes).graph;
    if (!g.inputs.length || !g.outputs.length) throw new Error(`${name}.onnx has no graph input or output`);
    io = { input: { name: g.inputs[0].name, shape: g.inputs[0].shape }, output: { name: g.outputs[0].name, shape: g.outputs[0].shape } };
  }
  const maxAbsLogit = logits.reduce((m, v) => Math.max(m, Math.abs(v)), 0);
  const summary = {
    name, onnx_bytes: bytes.length, input: io.input, output: io.output, tfjs_ops: plan?.ops ?? null,
    tfjs_refused: tfjsRefused, weight_floats: plan?.weightFloats ?? null, max_abs_logit: maxAbsLogit,
  };
  models.set(name, { bytes, input, logits, plan, tfjsRefused, io, maxAbsLogit, summary });
  return summary;
}

/** Releases every engine of model `name` and forgets its files. */
async function dropModel(name) {
  for (const key of [...live.keys()]) if (key.endsWith(`|${name}`)) await release(...key.split('|'));
  models.delete(name);
}

// ---- TensorFlow.js ---------------------------------------------------------------------------

let wasmFactory = null;

/** tfjs's wasm backend re-created on `t` threads (see the top of the file); throws otherwise. */
async function tfjsWasmThreads(t) {
  if (wasmFactory === null) {
    wasmFactory = tf.findBackendFactory('wasm');
    if (!wasmFactory) throw new Error('tfjs has no wasm backend registered');
    tf.wasm.setWasmPaths('/tfjs/tfjs-backend-wasm/dist/');
  } else {
    tf.removeBackend('wasm');
    tf.registerBackend('wasm', wasmFactory, 2);
  }
  tf.wasm.setThreadsCount(t);
  const real = navigator.hardwareConcurrency;
  const override = 2 * t > real;
  if (override) Object.defineProperty(navigator, 'hardwareConcurrency', { value: 2 * t, configurable: true });
  const before = workers.length;
  let ok;
  try {
    ok = await tf.setBackend('wasm');
  } finally {
    if (override) delete navigator.hardwareConcurrency;
  }
  if (!ok) throw new Error("tf.setBackend('wasm') failed");
  await tf.ready();
  const got = tf.wasm.getThreadsCount();
  if (got !== t) throw new Error(`tfjs wasm runs ${got} threads after setThreadsCount(${t})`);
  return {
    threads: got, workers_started: workers.length - before,
    wasm_binaries: [...new Set(performance.getEntriesByType('resource').map((e) => e.name)
      .filter((n) => n.includes('tfjs-backend-wasm') && n.endsWith('.wasm')).map((n) => n.split('/').pop()))],
  };
}

let tfjsWasm = null;  // tfjsWasmThreads()'s result for the current tfjs wasm backend, or null

/**
 * tfjs on its wasm backend with `t` threads: the backend re-created (tfjsWasmThreads) when it
 * runs another count. Its tensors die with it, so no tfjs-wasm engine may be live then.
 */
async function useTfjsWasm(t) {
  if (tfjsWasm?.threads !== t) {
    const holder = [...live.keys()].find((k) => k.startsWith('tfjs-wasm|'));
    if (holder) throw new Error(`tfjs wasm cannot change to ${t} threads while ${holder} holds tensors on its backend`);
    tfjsWasm = null;
    tfjsWasm = await tfjsWasmThreads(t);
  }
  await useTfjs('wasm');
  return tfjsWasm;
}

async function useTfjs(backend) {
  if (tf.getBackend() === backend) return;
  const ok = await tf.setBackend(backend);
  if (!ok) throw new Error(`tf.setBackend('${backend}') failed`);
  await tf.ready();
}

// ---- onnxruntime-web -------------------------------------------------------------------------

/**
 * Bundle `file` with its wasm module on `t` threads. ORT reads env.wasm.numThreads once, when the
 * bundle's module is instantiated (its first session), so each thread count gets its own copy of
 * the bundle: the ES module imported under its own URL (`?threads=t`), with its own `env` and
 * wasm instance (the .wasm and the glue module are fetched from the same files).
 */
async function ortBundle(file, t) {
  const url = `/ort/${file}?threads=${t}`;
  if (bundles.has(url)) return bundles.get(url);
  const ort = await import(url);
  ort.env.wasm.numThreads = t;
  ort.env.wasm.proxy = false;
  ort.env.logLevel = 'warning';
  const b = { ort, file, threads: t, initialised: false };
  bundles.set(url, b);
  return b;
}

function ortInfo(b, ep, session, workersBefore) {
  const info = { bundle: b.file, ep, ort_version: b.ort.env.versions?.web ?? null };
  if (ep !== 'webgl') {
    // ORT instantiates the bundle's wasm module (and its pthread pool) with the first session
    // that needs it (every EP but webgl): the workers started while that session was created.
    if (!b.initialised) {
      b.initialised = true;
      const started = workers.slice(workersBefore);
      b.workers = started.length;
      b.workerNames = [...new Set(started.map((w) => `${w.name || '-'} ${w.url.split('/').pop()}`))];
    }
    info.pthread_worker_kinds = b.workerNames;
    info.wasm_threads = b.ort.env.wasm.numThreads;
    info.pthread_workers = b.workers;
  } else {
    info.webgl_pack = b.ort.env.webgl.pack ?? null;
    info.webgl_context = b.ort.env.webgl.context ? 'webgl2' : null;
  }
  info.input_names = session?.inputNames;
  info.output_names = session?.outputNames;
  return info;
}

async function makeOrt(spec, m, options) {
  const dims = m.io.input.shape;
  if (!dims?.every((d) => Number.isInteger(d) && d > 0)) throw new Error(`the input '${m.io.input.name}' has no fixed shape (${JSON.stringify(dims)})`);
  const b = await ortBundle(spec.bundle, options.threads);
  if (spec.ep === 'webgl' && options.ortWebglPack !== undefined) b.ort.env.webgl.pack = options.ortWebglPack;
  const workersBefore = workers.length;
  let session;
  try {
    session = await b.ort.InferenceSession.create(m.bytes, {
      executionProviders: [spec.ep], graphOptimizationLevel: 'all',
    });
  } catch (e) {
    // A refused model still instantiated the bundle's module: its workers count for the next.
    if (spec.ep !== 'webgl' && workers.length > workersBefore) ortInfo(b, spec.ep, null, workersBefore);
    throw e;
  }
  const info = ortInfo(b, spec.ep, session, workersBefore);
  if (spec.ep === 'wasm' && info.wasm_threads !== options.threads) {
    await session.release();
    throw new Error(`onnxruntime-web runs ${info.wasm_threads} wasm threads, not the ${options.threads} asked for`);
  }
  const inName = session.inputNames[0];
  const outName = session.outputNames[0];
  return {
    info,
    async run(data) {
      const results = await session.run({ [inName]: new b.ort.Tensor('float32', data, dims) });
      const y = results[outName];
      const out = y.location === 'cpu' || y.location === undefined ? y.data : await y.getData(true);
      for (const t of Object.values(results)) if (t !== y) t.dispose?.();
      return out;
    },
    async dispose() {
      await session.release();
    },
  };
}

// ---- webtune ----------------------------------------------------------------------------------

async function makeWebtune(spec, name) {
  const dir = `/webtune/${name}-${spec.package}/`;
  const base = new URL(dir, location.href).href;
  const mod = await import(`${dir}model.mjs`);
  if (typeof mod.load !== 'function') throw new Error(`${dir}model.mjs exports no load()`);
  const before = workers.length;
  const m = await mod.load(base);
  const manifest = m.manifest ?? null;
  return {
    info: {
      package: dir, target: manifest?.target ?? null, device_key: manifest?.device_key ?? null,
      estimated_ms: manifest?.estimated_ms ?? null, workers_started: workers.length - before,
    },
    run: (data) => m.run(data),
    profile: (data) => m.profile(data),
    async dispose() {
      await m.dispose?.();
    },
  };
}

// ---- engines ------------------------------------------------------------------------------------

function checkOutput(out, m) {
  if (!(out instanceof Float32Array)) throw new Error(`the output is a ${out?.constructor?.name}, not a Float32Array`);
  if (out.length !== m.logits.length) throw new Error(`the output has ${out.length} values, not ${m.logits.length}`);
  let err = 0;
  for (let i = 0; i < out.length; ++i) {
    const d = Math.abs(out[i] - m.logits[i]);
    if (!(d <= err)) err = Number.isNaN(d) ? NaN : d;
    if (Number.isNaN(err)) break;
  }
  const tol = 1e-3 * m.maxAbsLogit;
  return { max_abs_err: err, tolerance: tol, ok: err <= tol };
}

/**
 * `spec`'s engine for model `m` (named `name`): {info, run(Float32Array) → Promise<Float32Array>,
 * dispose(), profile?}. `threads`: the wasm threads of ort-wasm and tfjs-wasm; ORT's GPU EPs'
 * bundles run setup()'s count.
 */
async function makeEngine(spec, m, name, { ortWebglPack, threads: t } = {}) {
  if (spec.side === 'ort') return makeOrt(spec, m, { ortWebglPack, threads: spec.ep === 'wasm' ? t : threads });
  if (spec.side === 'webtune') return makeWebtune(spec, name);
  if (!m.plan) throw new Error(m.tfjsRefused);
  const wasm = spec.backend === 'wasm' ? await useTfjsWasm(t) : (await useTfjs(spec.backend), null);
  const inst = m.plan.instantiate(tf);
  const e = {
    info: { backend: inst.backend, threads: wasm ? tf.wasm.getThreadsCount() : null },
    run: async (data) => {
      await useTfjs(spec.backend);
      return inst.run(data);
    },
    dispose: () => inst.dispose(),
  };
  if (wasm) {
    e.info.workers_started = wasm.workers_started;
    e.info.wasm_binaries = wasm.wasm_binaries;
  }
  if (spec.backend === 'webgl') {
    const b = tf.backend();
    e.info.webgl_version = tf.env().getNumber('WEBGL_VERSION');
    e.info.float32 = tf.env().getBool('WEBGL_RENDER_FLOAT32_ENABLED');
    e.info.packed = tf.env().getBool('WEBGL_PACK');
    e.info.renderer = b.gpgpu?.gl?.getParameter(b.gpgpu.gl.RENDERER) ?? null;
  }
  return e;
}

/**
 * Creates `engine` for `model` (loadModel first), runs it once on the model's input and checks
 * the output; then `warmup` more runs. Resolves to {engine, model, info, check, load_ms,
 * first_run_ms} or rejects (the engine cannot be made or run). A wrong output resolves with
 * check.ok false (bench.mjs reports it and does not time the engine).
 */
async function prepare(engine, model, { warmup = 2, ortWebglPack, threads: t = threads } = {}) {
  const spec = ENGINES[engine];
  if (!spec) throw new Error(`unknown engine '${engine}' (${Object.keys(ENGINES).join(', ')})`);
  const m = models.get(model);
  if (!m) throw new Error(`model '${model}' is not loaded`);
  const key = `${engine}|${model}`;
  if (live.has(key)) await release(engine, model);
  const t0 = performance.now();
  const e = await makeEngine(spec, m, model, { ortWebglPack, threads: t });
  live.set(key, e);
  const loadMs = performance.now() - t0;
  const t1 = performance.now();
  const out = await e.run(m.input);
  const firstRunMs = performance.now() - t1;
  const check = checkOutput(out, m);
  if (check.ok) for (let i = 0; i < warmup; ++i) await e.run(m.input);
  return { engine, model, side: spec.side, target: spec.target, info: e.info, check, load_ms: loadMs, first_run_ms: firstRunMs };
}

/**
 * The thread counts of wasm anchor `engine` (ort-wasm or tfjs-wasm) on `model`, each timed
 * alone: for each count of `counts`, after `settleMs` of idleness, the engine made on that many
 * threads (ORT: a session of the bundle's copy for that count; tfjs: the wasm backend
 * re-created), one checked warm-up run (its output checked as prepare() does) and `warmup` − 1
 * more, `runs` timed runs, and the engine released. Resolves to [{threads, samples_ms,
 * engine_threads} or {threads, error}] in the order of `counts`; rejects when the engine cannot
 * run the model at all (a tfjs graph the builder refused).
 */
async function probeThreads(engine, model, { counts, runs = 3, warmup = 1, settleMs = 200 } = {}) {
  const spec = ENGINES[engine];
  if (!spec || spec.target !== 'wasm' || spec.side === 'webtune') throw new Error(`'${engine}' is not a wasm anchor`);
  const m = models.get(model);
  if (!m) throw new Error(`model '${model}' is not loaded`);
  if (spec.side === 'tfjs' && !m.plan) throw new Error(m.tfjsRefused);
  if (live.has(`${engine}|${model}`)) await release(engine, model);
  const probe = [];
  for (const t of counts) {
    await new Promise((resolve) => setTimeout(resolve, settleMs));
    const entry = { threads: t };
    let e = null;
    try {
      e = await makeEngine(spec, m, model, { threads: t });
      entry.engine_threads = e.info.wasm_threads ?? e.info.threads;
      const check = checkOutput(await e.run(m.input), m);
      if (!check.ok) throw new Error(`wrong output on ${t} threads: max abs error ${check.max_abs_err} > ${check.tolerance}`);
      for (let i = 1; i < warmup; ++i) await e.run(m.input);
      const ms = [];
      for (let i = 0; i < runs; ++i) {
        const t0 = performance.now();
        await e.run(m.input);
        ms.push(performance.now() - t0);
      }
      entry.samples_ms = ms;
    } catch (err) {
      entry.error = err?.message ?? String(err);
    } finally {
      try {
        await e?.dispose();
      } catch {
        // The count's engine is dropped either way.
      }
    }
    probe.push(entry);
  }
  return probe;
}

/**
 * `runs` end-to-end inferences of `engine` on `model`'s input, after `warmup` untimed ones;
 * resolves to the milliseconds of each (performance.now() around upload + run + read-back).
 */
async function time(engine, model, runs, { warmup = 1 } = {}) {
  const e = live.get(`${engine}|${model}`);
  if (!e) throw new Error(`engine ${engine} is not prepared for ${model}`);
  const input = models.get(model).input;
  if (ENGINES[engine].side === 'tfjs') await useTfjs(ENGINES[engine].backend);
  for (let i = 0; i < warmup; ++i) await e.run(input);
  const ms = [];
  for (let i = 0; i < runs; ++i) {
    const t0 = performance.now();
    await e.run(input);
    ms.push(performance.now() - t0);
  }
  return ms;
}

/**
 * One profiled run of webtune engine `engine` on `model` (the runtime's profile(): every step
 * alone, the device waited for after it). Resolves to {total_ms, by: {upload, task, op,
 * download, alias: ms}, by_op: {operator type: {steps, ms}} of the non-task kernels (slowest
 * first), steps: the `top` slowest steps}; rejects for another side's engine.
 */
async function profile(engine, model, { top = 12 } = {}) {
  const e = live.get(`${engine}|${model}`);
  if (!e) throw new Error(`engine ${engine} is not prepared for ${model}`);
  if (!e.profile) throw new Error(`engine ${engine} has no per-step profile (webtune engines only)`);
  const p = await e.profile(models.get(model).input);
  const by = { upload: 0, task: 0, op: 0, download: 0, alias: 0 };
  for (const t of p.steps) by[t.kind === 'kernel' ? (t.role === 'task' ? 'task' : 'op') : t.kind] += t.ms;
  // The non-task kernels by operator: {type: {steps, ms}}, slowest first (where glue goes).
  const ops = {};
  for (const t of p.steps) {
    if (t.kind !== 'kernel' || t.role === 'task') continue;
    const type = t.op ?? t.role ?? '?';
    ops[type] ??= { steps: 0, ms: 0 };
    ops[type].steps += 1;
    ops[type].ms += t.ms;
  }
  const by_op = Object.fromEntries(Object.entries(ops).sort((a, b) => b[1].ms - a[1].ms));
  const steps = [...p.steps].sort((a, b) => b.ms - a.ms).slice(0, top);
  return { total_ms: p.total_ms, steps_count: p.steps.length, by, by_op, steps };
}

async function release(engine, model) {
  const key = `${engine}|${model}`;
  const e = live.get(key);
  live.delete(key);
  if (e) await e.dispose();
}

/**
 * The default wasm thread count: ORT's GPU EPs' bundles (their wasm part), and ort-wasm and
 * tfjs-wasm when prepare() names no count.
 */
async function setup({ threads: t = 1 } = {}) {
  threads = t;
  return { threads: t };
}

/** What the page runs on: user agent, isolation, WebGL2 renderer, WebGPU adapter, versions. */
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

/** Worker count (tests: the thread pools). */
function workerCount() {
  return workers.length;
}

window.bench = {
  engines: () => ENGINES, environment, setup, loadModel, dropModel, prepare, probeThreads, time, profile, release, workerCount,
  ready: true,
};
