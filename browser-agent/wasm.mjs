// wasm.mjs — the WebAssembly executor: runs the wasm kernels of the C++ emitter
// (codegen/wasm_emitter.*) as docs/wasm_abi.md fixes them. Per job: decode the base64 module,
// compile it once (a CompileError is COMPILE_DEVICE with the browser's message), make its memory
// (P pages, shared iff T > 1), write the seeded inputs at the artifact's offsets, run one checked
// execution that must match the reference samples, then time executions with the shared
// timeEvaluator.
//
// Every execution runs in module workers (wasm_worker.mjs), never on the page's thread: the
// page stays responsive, so a kernel that never ends is cut off at the job's timeout
// (RUN_TIMEOUT) by terminating the workers, which are recreated for the next job. Worker 0 (the
// leader) runs `number` executions per timed batch and the clock; for T > 1 it starts and joins
// the T − 1 helpers through Atomics on a small control block (workers may Atomics.wait; the
// page may not), so the page pays one message per batch, not per execution. A trap on any thread
// is RUNTIME_DEVICE with its message; the workers then stay usable.
//
// Keys: `wasm:threads` on a cross-origin isolated page (SharedArrayBuffer exists) that validates
// SIMD128, else `wasm:simd`. In node (the unit tests) worker_threads stand in for module workers.

import { ErrorNo, MeasureError, checkJobDeadline, checkPlainInputs, refuseScratch, requireSamplesMatch, timeEvaluator, workloadSizes } from './measure.mjs';
import { cachedSeededTensor } from './seeded_random.mjs';
import { deviceClassKey, platformDevice } from './device_class.mjs';

/**
 * The control block shared by the threads of one T > 1 job (Int32Array indices over a
 * SharedArrayBuffer of BYTES bytes); wasm_worker.mjs says how the words are used.
 */
export const CONTROL = Object.freeze({
  GEN: 0,          // execution generation: the leader bumps it to start one execution
  DONE: 1,         // helpers that finished the current generation
  STOP: 2,         // 1: helpers leave their loop
  TRAP_TID: 3,     // tid + 1 of the first helper that trapped, 0 if none
  MESSAGE_LEN: 4,  // bytes of its message, in MESSAGE_AT
  MESSAGE_AT: 32,  // byte offset of the message bytes (past the words above)
  BYTES: 32 + 1024,
});

/**
 * Tier-up warm-up (Trial.warmUp): V8 first runs a new module's functions as baseline code
 * (Liftoff) and recompiles a hot one with TurboFan on a background thread; wasm has no
 * on-stack replacement, so a call that began as baseline code ends as one. When the kernel's
 * threads hold every core the background compile waits, and the timed runs would time the
 * baseline code: a 2-thread dense 512 ran 16 timed runs at 17 ms, then 10.9 ms. So after the
 * checked run the trial idles IDLE_MS (the compiler thread gets a core) and runs once more,
 * until a run is no more than 5 % faster than the one before (at most ROUNDS runs).
 */
export const WARM_UP = Object.freeze({ IDLE_MS: 25, ROUNDS: 6, GAIN: 0.95 });

/**
 * Runs `runOnce` (resolves to the seconds of one untimed execution) after an idle pause of
 * WARM_UP.IDLE_MS each, until a run is not faster than GAIN × the one before, or ROUNDS runs.
 * `firstSeconds` is the run before (the checked run). Resolves to the number of runs made.
 * `idle(ms)` is the pause (a timer; tests pass their own).
 */
export async function warmUpUntilSteady(firstSeconds, runOnce,
  idle = (ms) => new Promise((resolve) => setTimeout(resolve, ms))) {
  let previous = firstSeconds;
  for (let round = 1; round <= WARM_UP.ROUNDS; ++round) {
    await idle(WARM_UP.IDLE_MS);
    const seconds = await runOnce();
    if (seconds > previous * WARM_UP.GAIN) return round;
    previous = seconds;
  }
  return WARM_UP.ROUNDS;
}

/** Bytes of a wasm page. */
export const PAGE_BYTES = 65536;
/** The most threads a tab advertises (docs/wasm_abi.md). */
export const MAX_THREADS = 8;
/** The most threads an artifact may ask for: more is a broken artifact, not a schedule. */
const THREAD_LIMIT = 64;
/** Seconds a new worker may take to load its script. */
const WORKER_START_S = 20;

// (module (func (result v128) v128.const i32x4 0 0 0 0)): validates only where SIMD128 exists.
const SIMD_PROBE = new Uint8Array([
  0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, 0x01, 0x05, 0x01, 0x60, 0x00, 0x01, 0x7b, 0x03,
  0x02, 0x01, 0x00, 0x0a, 0x16, 0x01, 0x14, 0x00, 0xfd, 0x0c, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
  0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x0b,
]);

/** True when this engine validates SIMD128 modules. */
export function hasSimd() {
  return typeof WebAssembly === 'object' && WebAssembly.validate(SIMD_PROBE);
}

/** True when shared memory (and so threads) is available: a cross-origin isolated page, or node. */
export function hasThreads() {
  if (typeof SharedArrayBuffer === 'undefined') return false;
  return globalThis.crossOriginIsolated !== false;
}

/**
 * Decodes standard base64 (RFC 4648 alphabet, padded; whitespace ignored) into a Uint8Array;
 * throws MeasureError INSTANTIATION on anything else.
 */
export function decodeBase64(text) {
  if (typeof text !== 'string') throw new MeasureError(ErrorNo.INSTANTIATION, 'the artifact source is not a base64 string');
  const clean = text.replace(/\s+/g, '');
  if (clean.length % 4 !== 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(clean)) {
    throw new MeasureError(ErrorNo.INSTANTIATION, `the artifact source is not padded standard base64 (${clean.length} characters)`);
  }
  const binary = atob(clean);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; ++i) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

/**
 * Checks an artifact's `wasm` block against the workload's element counts {data, weight,
 * output, inputs: [every input's count]} (workloadSizes); returns {threads, pages, offsets:
 * [every input's, then the output's], outputOffset, simd}. Throws INSTANTIATION when the
 * offsets do not match the inputs, or a region is misaligned or outside the P pages: the host
 * could not write the inputs or read the output there.
 */
export function memoryPlan(wasm, sizes) {
  const bad = (message) => { throw new MeasureError(ErrorNo.INSTANTIATION, `artifact.wasm: ${message}`); };
  if (!wasm || typeof wasm !== 'object') bad('missing (threads, memory_pages, offsets, simd)');
  const { threads, memory_pages: pages, offsets } = wasm;
  if (!Number.isInteger(threads) || threads < 1 || threads > THREAD_LIMIT) bad(`threads ${threads} is outside 1..${THREAD_LIMIT}`);
  if (!Number.isInteger(pages) || pages < 1 || pages > 65536) bad(`memory_pages ${pages} is outside 1..65536`);
  const inputCounts = sizes.inputs || [sizes.data, sizes.weight];
  const names = ['data', 'weight', 'bias or residual', 'residual'].slice(0, inputCounts.length);
  if (!Array.isArray(offsets) || offsets.length !== inputCounts.length + 1) {
    bad(`offsets must be [${[...names, 'output'].join(', ')}] (${inputCounts.length + 1} numbers), not ${JSON.stringify(offsets)}`);
  }
  const end = pages * PAGE_BYTES;
  const counts = [...inputCounts, sizes.output];
  [...names, 'output'].forEach((name, i) => {
    const at = offsets[i];
    if (!Number.isInteger(at) || at < 0 || at % 64 !== 0) bad(`the ${name} offset ${at} is not a 64-byte aligned byte offset`);
    if (at + counts[i] * 4 > end) {
      bad(`the ${name} (${counts[i]} floats at byte ${at}) ends past the memory's ${pages} pages (${end} bytes)`);
    }
  });
  return { threads, pages, offsets: offsets.slice(), outputOffset: offsets[offsets.length - 1], simd: Boolean(wasm.simd) };
}

/** The ABI's memory: P pages, initial = maximum, shared iff T > 1. */
export function createMemory(plan) {
  return new WebAssembly.Memory({ initial: plan.pages, maximum: plan.pages, shared: plan.threads > 1 });
}

/** Writes Float32Array `values` at byte `offset` of `memory`. */
export function writeFloats(memory, offset, values) {
  new Float32Array(memory.buffer, offset, values.length).set(values);
}

/** A worker of the pool: queued replies, a load failure or crash rejects what waits. */
class Thread {
  constructor(raw) {
    this.raw = raw;
    this.replies = [];
    this.waiter = null;
    this.failure = null;
    const onMessage = (data) => {
      if (this.waiter) {
        const { resolve } = this.waiter;
        this.waiter = null;
        resolve(data);
      } else {
        this.replies.push(data);
      }
    };
    const onFailure = (message) => {
      this.failure = message;
      if (this.waiter) {
        const { reject } = this.waiter;
        this.waiter = null;
        reject(new MeasureError(ErrorNo.RUNTIME_DEVICE, `a wasm worker failed: ${message}`));
      }
    };
    if (typeof raw.on === 'function') {  // node worker_threads
      raw.on('message', onMessage);
      raw.on('error', (e) => onFailure(e?.message || String(e)));
      raw.on('exit', (code) => onFailure(`exited with code ${code}`));
    } else {
      raw.onmessage = (e) => onMessage(e.data);
      raw.onerror = (e) => {
        e.preventDefault?.();
        onFailure(e.message || 'its script did not load');
      };
      raw.onmessageerror = () => onFailure('a message could not be deserialized');
    }
  }

  post(message) {
    this.raw.postMessage(message);
  }

  /** The next reply (a promise). */
  next() {
    if (this.replies.length) return Promise.resolve(this.replies.shift());
    if (this.failure) return Promise.reject(new MeasureError(ErrorNo.RUNTIME_DEVICE, `a wasm worker failed: ${this.failure}`));
    return new Promise((resolve, reject) => { this.waiter = { resolve, reject }; });
  }

  /** Ends the worker; a reply still awaited rejects with RUNTIME_DEVICE. */
  terminate(reason = 'terminated') {
    this.failure = this.failure || reason;
    if (this.waiter) {
      const { reject } = this.waiter;
      this.waiter = null;
      reject(new MeasureError(ErrorNo.RUNTIME_DEVICE, `the wasm workers were ${reason}`));
    }
    try { this.raw.terminate(); } catch { /* already gone */ }
  }
}

/** The default worker factory: module workers in a browser, worker_threads in node. */
async function defaultWorkerFactory() {
  const url = new URL('./wasm_worker.mjs', import.meta.url);
  if (typeof Worker === 'function') return () => new Worker(url, { type: 'module', name: 'webtune-wasm' });
  const { Worker: NodeWorker } = await import('node:worker_threads');
  return () => new NodeWorker(url);
}

export class WasmExecutor {
  /** The target family this executor serves, the first part of its key. */
  static family = 'wasm';
  /** Artifact targets (KernelArtifact.target) this executor runs. */
  static artifactTargets = ['wasm'];

  /**
   * Probes SIMD128 and shared memory; rejects where WebAssembly or SIMD128 is missing (the ABI's
   * keys both need SIMD). Options: `workerFactory` (a function returning a Worker or a
   * worker_threads Worker running wasm_worker.mjs), `wasm_spin` (polls before a thread blocks),
   * `max_threads` (caps the advertised count; tests).
   */
  static async create(options = {}) {
    const executor = new WasmExecutor(options);
    executor.workerFactory = options.workerFactory || await defaultWorkerFactory();
    return executor;
  }

  constructor(options = {}) {
    if (typeof WebAssembly !== 'object') throw new Error('this browser has no WebAssembly');
    if (!hasSimd()) throw new Error('this browser does not validate SIMD128 modules');
    this.options = options;
    this.threads = hasThreads();
    const cores = (typeof navigator !== 'undefined' && navigator.hardwareConcurrency) || 1;
    const cap = Number(options.max_threads) > 0 ? Number(options.max_threads) : MAX_THREADS;
    this.maxThreads = this.threads ? Math.max(1, Math.min(cores, MAX_THREADS, cap)) : 1;
    this.spin = options.wasm_spin !== undefined ? Number(options.wasm_spin) : undefined;
    this.pool = [];
  }

  /**
   * The tracker key of this device class: "wasm:threads" or "wasm:simd", then the browser, OS
   * and thread count (device_class.mjs), e.g. "wasm:threads:firefox-153:linux-x86_64:8t".
   */
  key() {
    return deviceClassKey('wasm', this.threads ? 'threads' : 'simd', { cpu: true });
  }

  /** The `device` object of the agent's hello. */
  device() {
    return {
      platform: 'wasm',
      features: this.threads ? ['simd128', 'threads'] : ['simd128'],
      limits: { max_threads: this.maxThreads },
      hardware_concurrency: (typeof navigator !== 'undefined' && navigator.hardwareConcurrency) || 0,
      user_agent: typeof navigator !== 'undefined' ? navigator.userAgent : '',
      cross_origin_isolated: typeof crossOriginIsolated !== 'undefined' && crossOriginIsolated,
      ...platformDevice(),
    };
  }

  /** `count` started workers (the pool grows; each new worker must say it is ready). */
  async workers(count, trial) {
    while (this.pool.length < count) {
      const thread = new Thread(this.workerFactory());
      this.pool.push(thread);
      const ready = await trial.reply(thread, 'starting a wasm worker', WORKER_START_S);
      if (!ready.ready) throw new MeasureError(ErrorNo.RUNTIME_DEVICE, `a wasm worker said ${JSON.stringify(ready)} instead of ready`);
    }
    return this.pool.slice(0, count);
  }

  /** Terminates every worker (a hung or failed job); the next job starts fresh ones. */
  resetPool(reason = 'terminated') {
    for (const thread of this.pool) thread.terminate(reason);
    this.pool = [];
  }

  /**
   * Runs one MeasureInput; resolves to {costs} (seconds) or throws MeasureError. `shouldStop`
   * is polled while waiting for the workers (a cancelled job or the agent's watchdog).
   */
  async measure(input, { start = performance.now(), shouldStop = () => false } = {}) {
    const trial = new Trial(this, input, start, shouldStop);
    try {
      return await trial.run();
    } catch (e) {
      // A worker that failed or was cut off cannot be trusted with the next job.
      if (e instanceof MeasureError && e.errorNo === ErrorNo.RUN_TIMEOUT) this.resetPool();
      if (this.pool.some((t) => t.failure)) this.resetPool();
      throw e;
    } finally {
      trial.release();
    }
  }

  /** Ends every worker now (the farm's "lose" command; tests of the recovery path). */
  loseContext() {
    this.resetPool('terminated on purpose (lose)');
    return true;
  }
}

class Trial {
  constructor(executor, input, start, shouldStop) {
    this.executor = executor;
    this.input = input;
    this.artifact = input.artifact;
    this.start = start;
    this.shouldStop = shouldStop;
    this.control = null;
  }

  async run() {
    this.validate();
    await this.compile();
    await this.load();
    // The checked run is also TVM's untimed warm-up run; the output starts as NaN so that a
    // kernel that skips outputs cannot pass.
    const first = await this.batch(1, true);
    requireSamplesMatch(first.output, this.input);
    this.checkDeadline(0, 0);
    await this.warmUp(first.seconds);
    // options.readback (bench/web_vs_tfjs only): each timed run also copies the output out of
    // the module's memory, as TensorFlow.js's `await y.data()` copies it out of its heap.
    const readback = Boolean(this.input.options?.readback);
    return timeEvaluator(this.input.options || {}, async (number) => (await this.batch(number, false, readback)).seconds,
      (timedRuns, perRunS) => this.checkDeadline(timedRuns, perRunS));
  }

  /** Untimed runs until the engine's optimized code runs (WARM_UP says why). */
  async warmUp(firstSeconds) {
    await warmUpUntilSteady(firstSeconds, async () => {
      const { seconds } = await this.batch(1, false);
      this.checkDeadline(0, seconds);
      return seconds;
    });
  }

  instantiation(message) {
    throw new MeasureError(ErrorNo.INSTANTIATION, message);
  }

  validate() {
    const { artifact, input } = this;
    if (!artifact || typeof artifact.source !== 'string') this.instantiation('the measure input has no artifact source');
    if (!WasmExecutor.artifactTargets.includes(artifact.target)) {
      this.instantiation(`the wasm executor runs wasm kernels, not '${artifact.target}'`);
    }
    refuseScratch(artifact, 'the wasm executor');
    this.sizes = workloadSizes(input.workload);
    checkPlainInputs(artifact, input.workload, 'wasm kernels read plain row-major memory');
    this.plan = memoryPlan(artifact.wasm, this.sizes);
    if (this.plan.threads > 1 && !this.executor.threads) {
      throw new MeasureError(ErrorNo.RUNTIME_DEVICE, `the kernel uses ${this.plan.threads} threads; threads need a cross-origin isolated page`);
    }
  }

  async compile() {
    const bytes = decodeBase64(this.artifact.source);
    if (this.plan.simd && !hasSimd()) {
      throw new MeasureError(ErrorNo.COMPILE_DEVICE, 'the module uses SIMD128, which this browser does not validate');
    }
    // A SIMD module that does not validate says so first; compile() then gives the engine's reason.
    const what = this.plan.simd && !WebAssembly.validate(bytes) ? 'the SIMD128 module does not validate: ' : '';
    try {
      this.module = await WebAssembly.compile(bytes);
    } catch (e) {
      throw new MeasureError(ErrorNo.COMPILE_DEVICE, `${what}WebAssembly.compile failed: ${e?.name || 'Error'}: ${e?.message || e}`);
    }
  }

  /** Memory, inputs and one instance per thread (tid 0 last: helpers are in their loop first). */
  async load() {
    const { plan, sizes } = this;
    const seed = this.input.seed;
    const inputs = (sizes.inputs || [sizes.data, sizes.weight]).map((count, i) => (
      { offset: plan.offsets[i], values: cachedSeededTensor(seed, i, count) }));
    const nan = { offset: plan.outputOffset, values: new Float32Array(sizes.output).fill(NaN) };
    this.threads = await this.executor.workers(plan.threads, this);
    const common = { cmd: 'load', module: this.module, pages: plan.pages, threads: plan.threads, spin: this.executor.spin };
    if (plan.threads === 1) {
      // Not shared, so not postable: the worker makes the memory and writes the inputs.
      this.threads[0].post({ ...common, tid: 0, inputs: [...inputs, nan] });
    } else {
      let memory;
      try {
        memory = createMemory(plan);
      } catch (e) {
        throw new MeasureError(ErrorNo.RUNTIME_DEVICE, `cannot allocate ${plan.pages} shared pages: ${e.message}`);
      }
      for (const { offset, values } of [...inputs, nan]) writeFloats(memory, offset, values);
      this.control = new SharedArrayBuffer(CONTROL.BYTES);
      for (let tid = plan.threads - 1; tid >= 0; --tid) {
        this.threads[tid].post({ ...common, tid, memory, control: this.control });
      }
    }
    const replies = [];
    for (const thread of this.threads) replies.push(await this.reply(thread, 'instantiating the module'));
    const failed = replies.find((r) => r.error);
    if (failed?.kind === 'memory') throw new MeasureError(ErrorNo.RUNTIME_DEVICE, failed.error);
    if (failed) {
      throw new MeasureError(ErrorNo.COMPILE_DEVICE, `the module does not instantiate with the ABI's imports: ${failed.error}`);
    }
  }

  /**
   * One batch of `number` executions on the leader: {seconds, output (when asked)}. With
   * `readback` the leader copies the output out after every execution, inside the clock.
   */
  async batch(number, withOutput, readback = false) {
    const leader = this.threads[0];
    const region = { offset: this.plan.outputOffset, count: this.sizes.output };
    leader.post({
      cmd: 'run', number,
      output: withOutput ? region : null,
      readback: readback ? region : null,
    });
    const reply = await this.reply(leader, 'running the kernel');
    if (reply.error) throw new MeasureError(ErrorNo.RUNTIME_DEVICE, `the kernel trapped: ${reply.error}`);
    return reply;
  }

  /**
   * The next reply of `thread`, or RUN_TIMEOUT when the job's deadline (or `limitS` from now)
   * passes first, or the job is cancelled; the executor then terminates its workers.
   */
  async reply(thread, what, limitS = Infinity) {
    const jobLimit = this.input.options?.timeout_s ?? 10;
    const jobLeftMs = jobLimit > 0 ? this.start + jobLimit * 1e3 - performance.now() : Infinity;
    const leftMs = Math.max(0, Math.min(jobLeftMs, limitS * 1e3));
    let timer = null;
    let poll = null;
    const expired = new Promise((resolve) => {
      if (Number.isFinite(leftMs)) timer = setTimeout(() => resolve({ expired: 'deadline' }), leftMs);
      poll = setInterval(() => { if (this.shouldStop()) resolve({ expired: 'stop' }); }, 100);
    });
    try {
      const outcome = await Promise.race([thread.next(), expired]);
      if (outcome && outcome.expired) {
        this.executor.resetPool();
        if (outcome.expired === 'stop') throw new MeasureError(ErrorNo.RUN_TIMEOUT, 'the job was cancelled or its time ran out');
        if (leftMs < jobLeftMs) throw new MeasureError(ErrorNo.RUNTIME_DEVICE, `no answer from a wasm worker within ${limitS} s while ${what}`);
        throw new MeasureError(ErrorNo.RUN_TIMEOUT,
          `measurement ran past its timeout of ${jobLimit} s while ${what} (${((performance.now() - this.start) / 1e3).toPrecision(4)} s)`);
      }
      return outcome;
    } finally {
      clearTimeout(timer);
      clearInterval(poll);
    }
  }

  /** The timeout between batches (a batch in flight is cut off by reply()). */
  checkDeadline(timedRuns, lastRunS) {
    checkJobDeadline(this, timedRuns, lastRunS);
  }

  /** Lets the helpers leave their loop so that they can load the next job's module. */
  release() {
    if (!this.control) return;
    const ctl = new Int32Array(this.control);
    Atomics.store(ctl, CONTROL.STOP, 1);
    Atomics.add(ctl, CONTROL.GEN, 1);
    Atomics.notify(ctl, CONTROL.GEN);
    this.control = null;
  }
}
