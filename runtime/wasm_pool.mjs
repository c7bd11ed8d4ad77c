// wasm_pool.mjs — threaded wasm kernels run the way TensorFlow.js's and onnxruntime-web's
// XNNPACK ops run: the caller's thread is tid 0 of every kernel, and a pool of T − 1 helper
// workers (wasm_worker.mjs, "shared pools") runs tids 1..T−1. An execution starts the helpers
// through the control block (CONTROL in wasm.mjs), runs run(0) here, then polls until every
// helper is done: a page's thread may not Atomics.wait, and polling is what XNNPACK's
// pthreadpool does on the caller's side too. An execution costs no message.
//
// Used by the model runtime (model.mjs: one pool for every threaded kernel of a package) and by
// bench/web_vs_tfjs (one kernel timed as a package runs it). The browser agent's executor runs
// every thread in workers instead (wasm.mjs WasmKernel.batch), so that a kernel that never ends
// can be cut off without hanging the page.

import { CONTROL, startWorkers, storedTrap } from './wasm.mjs';
import { ErrorNo, MeasureError } from './errors.mjs';

/** How long the caller waits for the helpers after its own share, in ms (a kernel that hangs). */
export const HELPER_WAIT_MS = 30000;

export class WasmHelperPool {
  /**
   * `helpers`: worker count (the largest T of the kernels to run, minus 1); `factory`: makes a
   * worker running wasm_worker.mjs (wasm.mjs defaultWorkerFactory). Call start(), add() each
   * kernel, then serve(); run() executes one. `spinUs`: µs a helper polls for the next execution
   * before it blocks (wasm_worker.mjs DEFAULT_SPIN_US when undefined).
   */
  constructor(helpers, factory, { spinUs = undefined } = {}) {
    this.size = helpers + 1;
    this.factory = factory;
    this.spinUs = spinUs;
    this.threads = [];
    this.control = null;
    this.ctl = null;
  }

  /** Starts the helper workers (rejects when one does not start within WORKER_START_S). */
  async start() {
    await startWorkers(this.threads, this.size - 1, this.factory);
  }

  /**
   * Instantiates `kernel` (a compiled WasmKernel whose `memory` is its shared memory) on this
   * thread and in every helper, under `key` (an integer). COMPILE_DEVICE when a helper cannot
   * link it; must come before serve().
   */
  async add(key, kernel) {
    if (this.control) throw new Error('WasmHelperPool.add after serve()');
    await kernel.instantiateHere(kernel.memory);
    for (const thread of this.threads) {
      thread.post({ cmd: 'add', key, module: kernel.module, memory: kernel.memory, threads: kernel.plan.threads });
    }
    for (const thread of this.threads) {
      const reply = await thread.next();
      if (reply.error) {
        throw new MeasureError(ErrorNo.COMPILE_DEVICE, `the module does not instantiate with the ABI's imports: ${reply.error}`);
      }
    }
  }

  /** Lets the helpers wait for executions; after it only run() and dispose(). */
  async serve() {
    this.control = new SharedArrayBuffer(CONTROL.BYTES);
    this.ctl = new Int32Array(this.control);
    this.threads.forEach((thread, h) => thread.post({ cmd: 'serve', control: this.control, size: this.size, tid: h + 1, spinUs: this.spinUs }));
    for (const thread of this.threads) await thread.next();
  }

  /**
   * One execution of the kernel added under `key`: the helpers are started, this thread runs
   * run(0), then polls until every helper is done. A trap on any thread is RUNTIME_DEVICE;
   * helpers that are not done after HELPER_WAIT_MS are terminated (the pool is disposed, then
   * `onHang()` runs) before RUNTIME_DEVICE is thrown, its message ending with `hangNote`.
   */
  run(key, kernel, onHang = () => {}, hangNote = 'its helpers were terminated') {
    const ctl = this.ctl;
    Atomics.store(ctl, CONTROL.TRAP_TID, 0);
    Atomics.store(ctl, CONTROL.KERNEL, key);
    Atomics.store(ctl, CONTROL.DONE, 0);
    Atomics.add(ctl, CONTROL.GEN, 1);
    Atomics.notify(ctl, CONTROL.GEN);
    let trap = null;
    try {
      kernel.runHere();
    } catch (e) {
      trap = e;
    }
    const helpers = this.threads.length;
    const start = performance.now();
    while (Atomics.load(ctl, CONTROL.DONE) < helpers) {
      if (performance.now() - start > HELPER_WAIT_MS) {
        this.dispose();
        onHang();
        throw new MeasureError(ErrorNo.RUNTIME_DEVICE, `a helper thread of the kernel did not finish within ${HELPER_WAIT_MS / 1000} s; ${hangNote}`);
      }
    }
    if (trap) throw trap;
    const helperTrap = storedTrap(ctl);
    if (helperTrap) throw new MeasureError(ErrorNo.RUNTIME_DEVICE, `the kernel trapped: ${helperTrap}`);
  }

  /** Lets the helpers leave their loop and terminates them. */
  dispose() {
    if (this.ctl) {
      Atomics.store(this.ctl, CONTROL.STOP, 1);
      Atomics.add(this.ctl, CONTROL.GEN, 1);
      Atomics.notify(this.ctl, CONTROL.GEN);
      this.ctl = null;
      this.control = null;
    }
    for (const thread of this.threads) thread.terminate('disposed');
    this.threads = [];
  }
}
