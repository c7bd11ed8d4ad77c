// wasm.mjs — the WebAssembly kernel runner: runs the wasm kernels of the C++ emitter
// (codegen/wasm_emitter.*) as docs/wasm_abi.md fixes them, for the browser agent's executor
// (browser-agent/wasm.mjs: measure) and the model runtime (model.mjs: one kernel step).
//
// A WasmKernel decodes and compiles its base64 module once (a CompileError is COMPILE_DEVICE
// with the engine's message) and is run one of two ways:
// - in module workers (wasm_worker.mjs): a T-thread kernel has T workers, each instantiating the
//   module over one memory (P pages, shared iff T > 1); worker 0 (the leader) runs batches of
//   executions and, for T > 1, starts and joins the T − 1 helpers through Atomics on a small
//   control block (workers may Atomics.wait; a page may not), so the caller pays one message per
//   batch. A trap on any thread is RUNTIME_DEVICE with its message. The agent always runs here,
//   so a kernel that never ends can be cut off by terminating the workers.
// - on the caller's thread (instantiateHere, T = 1 only): the model runtime's single-threaded
//   kernels, one synchronous call each, no message at all.
// In node (the unit tests) worker_threads stand in for module workers.

import { ErrorNo, MeasureError, refuseScratch } from './errors.mjs';

/**
 * The control block shared by the threads of one T > 1 kernel (Int32Array indices over a
 * SharedArrayBuffer of BYTES bytes); wasm_worker.mjs says how the words are used.
 */
export const CONTROL = Object.freeze({
  GEN: 0,          // execution generation: the leader bumps it to start one execution
  DONE: 1,         // helpers that finished the current generation
  STOP: 2,         // 1: helpers leave their loop
  TRAP_TID: 3,     // tid + 1 of the first helper that trapped, 0 if none
  MESSAGE_LEN: 4,  // bytes of its message, in MESSAGE_AT
  KERNEL: 5,       // shared pools (the model runtime): the key of the kernel to execute
  MESSAGE_AT: 32,  // byte offset of the message bytes (past the words above)
  BYTES: 32 + 1024,
});

/** The trap a helper stored in control block `ctl` ("thread T: message"), or null. */
export function storedTrap(ctl) {
  const tid = Atomics.load(ctl, CONTROL.TRAP_TID) - 1;
  if (tid < 0) return null;
  const length = Atomics.load(ctl, CONTROL.MESSAGE_LEN);
  const bytes = new Uint8Array(length);
  bytes.set(new Uint8Array(ctl.buffer, CONTROL.MESSAGE_AT, length));
  return `thread ${tid}: ${new TextDecoder().decode(bytes)}`;
}

/** Bytes of a wasm page. */
export const PAGE_BYTES = 65536;
/** The most threads a tab advertises (docs/wasm_abi.md). */
export const MAX_THREADS = 8;
/** The most threads an artifact may ask for: more is a broken artifact, not a schedule. */
const THREAD_LIMIT = 64;
/** Seconds a new worker may take to load its script. */
export const WORKER_START_S = 20;

// (module (func (result v128) v128.const i32x4 0 0 0 0)): validates only where SIMD128 exists.
const SIMD_PROBE = new Uint8Array([
  0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, 0x01, 0x05, 0x01, 0x60, 0x00, 0x01, 0x7b, 0x03,
  0x02, 0x01, 0x00, 0x0a, 0x16, 0x01, 0x14, 0x00, 0xfd, 0x0c, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
  0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x0b,
]);

// (module (func (result v128) (f32x4.relaxed_madd (v128.const 0) (v128.const 0) (v128.const 0)))):
// validates only where relaxed SIMD exists (opcode 0xfd 0x105, the final relaxed-SIMD spec's).
const RELAXED_SIMD_PROBE = (() => {
  const v128Zero = [0xfd, 0x0c, ...new Array(16).fill(0)];
  const body = [0x00, ...v128Zero, ...v128Zero, ...v128Zero, 0xfd, 0x85, 0x02, 0x0b];
  return new Uint8Array([
    0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, 0x01, 0x05, 0x01, 0x60, 0x00, 0x01, 0x7b,
    0x03, 0x02, 0x01, 0x00, 0x0a, body.length + 2, 0x01, body.length, ...body,
  ]);
})();

/**
 * True when this engine validates relaxed SIMD (f32x4.relaxed_madd): Chromium has it on by
 * default since 114 (checked on 156: browser_test); Node 20 only with
 * --experimental-wasm-relaxed-simd. Other browsers: whatever this probe says.
 */
export function hasRelaxedSimd() {
  return typeof WebAssembly === 'object' && WebAssembly.validate(RELAXED_SIMD_PROBE);
}

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
 * Checks an artifact's `wasm` block against element counts {inputs: [every input's count],
 * output} (or the older {data, weight, output}); returns {threads, pages, offsets: [every
 * input's, then the output's], outputOffset, simd}. Throws INSTANTIATION when the offsets do not
 * match the inputs, or a region is misaligned or outside the P pages: the host could not write
 * the inputs or read the output there.
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
  return {
    threads, pages, offsets: offsets.slice(), outputOffset: offsets[offsets.length - 1],
    simd: Boolean(wasm.simd), relaxedSimd: Boolean(wasm.relaxed_simd),
    // A model package's placed kernel imports the package's shared memory even with T = 1.
    shared: threads > 1 || wasm.shared_memory === true,
  };
}

/** The ABI's memory: P pages, initial = maximum, shared iff T > 1 (or the artifact says shared_memory). */
export function createMemory(plan) {
  return new WebAssembly.Memory({ initial: plan.pages, maximum: plan.pages, shared: plan.shared ?? plan.threads > 1 });
}

/** Writes Float32Array `values` at byte `offset` of `memory`. */
export function writeFloats(memory, offset, values) {
  new Float32Array(memory.buffer, offset, values.length).set(values);
}

/** A worker: queued replies, a load failure or crash rejects what waits. */
export class Thread {
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
export async function defaultWorkerFactory() {
  const url = new URL('./wasm_worker.mjs', import.meta.url);
  if (typeof Worker === 'function') return () => new Worker(url, { type: 'module', name: 'webtune-wasm' });
  const { Worker: NodeWorker } = await import('node:worker_threads');
  return () => new NodeWorker(url);
}

/**
 * `count` started workers from `factory`, appended to `pool` until it has that many (each new
 * worker must say it is ready); `reply(thread, what, limitS)` awaits one answer (the agent's
 * adds the job's deadline).
 */
export async function startWorkers(pool, count, factory, reply = (t) => t.next()) {
  while (pool.length < count) {
    const thread = new Thread(factory());
    pool.push(thread);
    const ready = await reply(thread, 'starting a wasm worker', WORKER_START_S);
    if (!ready.ready) throw new MeasureError(ErrorNo.RUNTIME_DEVICE, `a wasm worker said ${JSON.stringify(ready)} instead of ready`);
  }
  return pool.slice(0, count);
}

/**
 * One wasm kernel: `artifact` (KernelArtifact JSON, target wasm) and `sizes` ({inputs: [element
 * count of every input, binding order], output}), checked against the artifact's memory plan
 * at construction (INSTANTIATION when they disagree).
 */
export class WasmKernel {
  constructor(artifact, sizes) {
    if (!artifact || typeof artifact.source !== 'string') {
      throw new MeasureError(ErrorNo.INSTANTIATION, 'the artifact has no source');
    }
    if (artifact.target !== 'wasm') {
      throw new MeasureError(ErrorNo.INSTANTIATION, `the wasm runner runs wasm kernels, not '${artifact.target}'`);
    }
    refuseScratch(artifact, 'the wasm runner');
    this.artifact = artifact;
    this.sizes = sizes;
    this.plan = memoryPlan(artifact.wasm, sizes);
    this.threads = null;   // the workers it is loaded in
    this.control = null;   // T > 1: the control block
    this.memory = null;    // shared (T > 1) or here (instantiateHere); null for T = 1 in a worker
    this.instance = null;  // instantiateHere
  }

  /** Decodes and compiles the module (COMPILE_DEVICE with the engine's reason). */
  async compile() {
    const bytes = decodeBase64(this.artifact.source);
    if (this.plan.simd && !hasSimd()) {
      throw new MeasureError(ErrorNo.COMPILE_DEVICE, 'the module uses SIMD128, which this browser does not validate');
    }
    if (this.plan.relaxedSimd && !hasRelaxedSimd()) {
      throw new MeasureError(ErrorNo.COMPILE_DEVICE, 'the module uses relaxed SIMD (f32x4.relaxed_madd, the fma knob), which this browser does not validate');
    }
    // A SIMD module that does not validate says so first; compile() then gives the engine's reason.
    const what = this.plan.simd && !WebAssembly.validate(bytes) ? 'the SIMD128 module does not validate: ' : '';
    try {
      this.module = await WebAssembly.compile(bytes);
    } catch (e) {
      throw new MeasureError(ErrorNo.COMPILE_DEVICE, `${what}WebAssembly.compile failed: ${e?.name || 'Error'}: ${e?.message || e}`);
    }
  }

  /**
   * Loads the module in `threads` (T started workers; tid 0 last, so helpers are in their loop
   * first) with `regions` ([{offset, values}]) written into its memory; `reply` as in
   * startWorkers. T = 1: the worker makes the (unshared, unpostable) memory; T > 1: it is made
   * here, so `this.memory` can be written and read between executions.
   */
  async load(threads, regions, reply = (t) => t.next(), spinUs = undefined) {
    const { plan } = this;
    this.threads = threads;
    const common = { cmd: 'load', module: this.module, pages: plan.pages, threads: plan.threads, spinUs };
    if (plan.threads === 1 && !plan.shared) {
      this.threads[0].post({ ...common, tid: 0, inputs: regions });
    } else {
      try {
        this.memory = createMemory(plan);
      } catch (e) {
        throw new MeasureError(ErrorNo.RUNTIME_DEVICE, `cannot allocate ${plan.pages} shared pages: ${e.message}`);
      }
      for (const { offset, values } of regions) writeFloats(this.memory, offset, values);
      this.control = new SharedArrayBuffer(CONTROL.BYTES);
      for (let tid = plan.threads - 1; tid >= 0; --tid) {
        this.threads[tid].post({ ...common, tid, memory: this.memory, control: this.control });
      }
    }
    const replies = [];
    for (const thread of this.threads) replies.push(await reply(thread, 'instantiating the module'));
    const failed = replies.find((r) => r.error);
    if (failed?.kind === 'memory') throw new MeasureError(ErrorNo.RUNTIME_DEVICE, failed.error);
    if (failed) {
      throw new MeasureError(ErrorNo.COMPILE_DEVICE, `the module does not instantiate with the ABI's imports: ${failed.error}`);
    }
  }

  /**
   * One batch of `number` executions on the leader: {seconds, output (withOutput: the output
   * region copied out after the last one)}. With `readback` the leader copies the output out
   * after every execution, inside the clock. A trap is RUNTIME_DEVICE.
   */
  async batch(number, withOutput, readback = false, reply = (t) => t.next()) {
    const leader = this.threads[0];
    const region = { offset: this.plan.outputOffset, count: this.sizes.output };
    leader.post({
      cmd: 'run', number,
      output: withOutput ? region : null,
      readback: readback ? region : null,
    });
    const answer = await reply(leader, 'running the kernel');
    if (answer.error) throw new MeasureError(ErrorNo.RUNTIME_DEVICE, `the kernel trapped: ${answer.error}`);
    return answer;
  }

  /**
   * Instantiates the module on this thread (COMPILE_DEVICE on a link error): T = 1 over a fresh
   * memory of its own, or any T over `memory` (a threaded kernel's shared memory: this thread is
   * then its tid 0, the model runtime's pool its helpers); runHere() executes run(0).
   */
  async instantiateHere(memory = null) {
    if (this.plan.threads !== 1 && !memory) throw new MeasureError(ErrorNo.INSTANTIATION, 'only a 1-thread kernel runs on the caller\'s thread');
    try {
      // `memory`: a model package's linear memory, which every kernel of the package imports.
      this.memory = memory || createMemory(this.plan);
    } catch (e) {
      throw new MeasureError(ErrorNo.RUNTIME_DEVICE, `cannot allocate ${this.plan.pages} pages: ${e.message}`);
    }
    try {
      // Asynchronous: Chromium refuses synchronous instantiation of large modules on a page's
      // main thread.
      this.instance = await WebAssembly.instantiate(this.module, { env: { memory: this.memory } });
    } catch (e) {
      throw new MeasureError(ErrorNo.COMPILE_DEVICE, `the module does not instantiate with the ABI's imports: ${e?.name || 'Error'}: ${e?.message || e}`);
    }
    if (typeof this.instance.exports.run !== 'function') {
      throw new MeasureError(ErrorNo.COMPILE_DEVICE, 'the module exports no function run(tid)');
    }
  }

  /** One execution on this thread (instantiateHere); a trap is RUNTIME_DEVICE. */
  runHere() {
    try {
      this.instance.exports.run(0);
    } catch (e) {
      throw new MeasureError(ErrorNo.RUNTIME_DEVICE, `the kernel trapped: ${e?.name || 'Error'}: ${e?.message || e}`);
    }
  }

  /** A view of the output region of `this.memory` (valid until the memory is reused). */
  outputView() {
    return new Float32Array(this.memory.buffer, this.plan.outputOffset, this.sizes.output);
  }

  /** Lets the helpers leave their loop so that they can load another module. */
  release() {
    if (!this.control) return;
    const ctl = new Int32Array(this.control);
    Atomics.store(ctl, CONTROL.STOP, 1);
    Atomics.add(ctl, CONTROL.GEN, 1);
    Atomics.notify(ctl, CONTROL.GEN);
    this.control = null;
  }
}
