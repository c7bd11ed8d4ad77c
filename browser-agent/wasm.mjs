// wasm.mjs — the WebAssembly executor: runs the wasm kernels of the C++ emitter
// (codegen/wasm_emitter.*) as docs/wasm_abi.md fixes them, through the kernel runner it shares
// with the model runtime (runtime/wasm.mjs: WasmKernel, the workers). Per job: decode the base64 module,
// compile it once (a CompileError is COMPILE_DEVICE with the browser's message), make its memory
// (P pages, shared iff T > 1), write the seeded inputs at the artifact's offsets, run one checked
// execution that must match the reference samples, then time executions with the shared
// timeEvaluator.
//
// Every execution runs in module workers (runtime/wasm_worker.mjs), never on the page's thread: the
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
import { MAX_THREADS, WasmKernel, defaultWorkerFactory, hasRelaxedSimd, hasSimd, hasThreads, startWorkers } from '../runtime/wasm.mjs';

// The runner's pieces, for the agent's tests and tools.
export { CONTROL, PAGE_BYTES, MAX_THREADS, createMemory, decodeBase64, hasRelaxedSimd, hasSimd, hasThreads, memoryPlan, writeFloats } from '../runtime/wasm.mjs';

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

/**
 * Worker pool recycling. Every trial gets a new WebAssembly.Memory, and each one reserves about
 * 10 GiB of address space (V8's guard regions), out of about 1 TiB that V8 allows a process for
 * all of them. A finished trial's memory is freed only when every isolate that saw it has
 * collected it, and an idle worker may never collect: in bench/web_vs_tfjs (2026-11-27,
 * headless Chromium 156) the 21st wasm row, after about 160 trials, could not allocate a
 * 13-page memory any more ("could not allocate memory"), and with the workers replaced it
 * could (which isolate held the old memories was not traced). So the pool is replaced after
 * LOADS trials (ending a worker frees everything it held), and a trial whose memory cannot be
 * allocated replaces it and tries again once after RETRY_MS.
 */
export const POOL_RECYCLE = Object.freeze({ LOADS: 48, RETRY_MS: 250 });

export class WasmExecutor {
  /** The target family this executor serves, the first part of its key. */
  static family = 'wasm';
  /** Artifact targets (KernelArtifact.target) this executor runs. */
  static artifactTargets = ['wasm'];

  /**
   * Probes SIMD128 and shared memory; rejects where WebAssembly or SIMD128 is missing (the ABI's
   * keys both need SIMD). Options: `workerFactory` (a function returning a Worker or a
   * worker_threads Worker running wasm_worker.mjs), `wasm_spin_us` (µs a waiting thread polls
   * before it blocks; wasm_worker.mjs DEFAULT_SPIN_US), `max_threads` (caps the advertised
   * count; tests), `pool_recycle_loads` (POOL_RECYCLE.LOADS; tests).
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
    // The fma knob's kernels need relaxed SIMD; `relaxed_simd: false` hides it (tests).
    this.relaxedSimd = options.relaxed_simd === false ? false : hasRelaxedSimd();
    this.spinUs = options.wasm_spin_us !== undefined ? Number(options.wasm_spin_us) : undefined;
    this.pool = [];
    this.poolLoads = 0;  // trials loaded by the current pool (POOL_RECYCLE)
    this.recycleLoads = Number(options.pool_recycle_loads) > 0 ? Number(options.pool_recycle_loads) : POOL_RECYCLE.LOADS;
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
      features: ['simd128', ...(this.threads ? ['threads'] : []), ...(this.relaxedSimd ? ['relaxed_simd'] : [])],
      limits: { max_threads: this.maxThreads, relaxed_simd: this.relaxedSimd },
      hardware_concurrency: (typeof navigator !== 'undefined' && navigator.hardwareConcurrency) || 0,
      user_agent: typeof navigator !== 'undefined' ? navigator.userAgent : '',
      cross_origin_isolated: typeof crossOriginIsolated !== 'undefined' && crossOriginIsolated,
      ...platformDevice(),
    };
  }

  /** `count` started workers (the pool grows; each new worker must say it is ready). */
  async workers(count, trial) {
    return startWorkers(this.pool, count, this.workerFactory, (t, what, limitS) => trial.reply(t, what, limitS));
  }

  /** Terminates every worker (a hung or failed job); the next job starts fresh ones. */
  resetPool(reason = 'terminated') {
    for (const thread of this.pool) thread.terminate(reason);
    this.pool = [];
    this.poolLoads = 0;
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
    this.kernel = null;
  }

  async run() {
    this.validate();
    await this.kernel.compile();
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
    this.kernel = new WasmKernel(artifact, this.sizes);
    this.plan = this.kernel.plan;
    if (this.plan.threads > 1 && !this.executor.threads) {
      throw new MeasureError(ErrorNo.RUNTIME_DEVICE, `the kernel uses ${this.plan.threads} threads; threads need a cross-origin isolated page`);
    }
  }

  /** Memory, inputs and one instance per thread (the runner's load). */
  async load() {
    const { plan, sizes } = this;
    const seed = this.input.seed;
    const inputs = (sizes.inputs || [sizes.data, sizes.weight]).map((count, i) => (
      { offset: plan.offsets[i], values: cachedSeededTensor(seed, i, count) }));
    const nan = { offset: plan.outputOffset, values: new Float32Array(sizes.output).fill(NaN) };
    const { executor } = this;
    if (executor.poolLoads >= executor.recycleLoads) executor.resetPool('recycled');
    for (let attempt = 1; ; ++attempt) {
      executor.poolLoads += 1;
      const threads = await executor.workers(plan.threads, this);
      try {
        await this.kernel.load(threads, [...inputs, nan], (t, what, limitS) => this.reply(t, what, limitS), executor.spinUs);
        return;
      } catch (e) {
        const noMemory = e instanceof MeasureError && e.errorNo === ErrorNo.RUNTIME_DEVICE && /allocate/.test(e.message);
        if (!noMemory || attempt > 1) throw e;
        // Fresh workers, and time for the old ones to end and give their memories back.
        executor.resetPool('recycled: a memory could not be allocated');
        await new Promise((resolve) => setTimeout(resolve, POOL_RECYCLE.RETRY_MS));
        this.checkDeadline(0, 0);
      }
    }
  }

  /** One batch of `number` executions on the leader (WasmKernel.batch within the job's deadline). */
  batch(number, withOutput, readback = false) {
    return this.kernel.batch(number, withOutput, readback, (t, what) => this.reply(t, what));
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
    this.kernel?.release();
  }
}
