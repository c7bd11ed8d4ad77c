// wasm_worker.mjs — one thread of a wasm kernel (wasm.mjs: the runner the agent's executor and
// the model runtime share): a module worker in the browser, a worker_threads worker in node (the
// unit tests). It instantiates the kernel's compiled module (a WebAssembly.Module posted by the
// page) and runs `run(tid)` as docs/wasm_abi.md says.
//
// Kernel code never runs on the page's thread: a kernel that loops forever would freeze the page
// and no timer could ever fire. Every execution runs here, so the page can always terminate the
// workers of a job that ran past its timeout (RUN_TIMEOUT) and start fresh ones.
//
// Roles, given by the 'load' message:
// - leader (tid 0): answers 'run' messages with {seconds, output}; one execution is run(0) here
//   plus, for T > 1, one call of run(tid) in each helper, started and joined through Atomics on
//   the control block. Workers may block (Atomics.wait), the page may not: so the leader, not the
//   page, drives the executions and the page pays one message per timed batch.
// - helper (tid ≥ 1, T > 1 only): after loading it sits in a loop — poll for up to DEFAULT_SPIN_US, then
//   Atomics.wait on the generation word — running run(tid) once per new generation, until the
//   page sets STOP (then it returns to its event loop and can load the next job's module).
//
// Control block (Int32Array over a SharedArrayBuffer, layout: CONTROL in wasm.mjs): a trap in a helper
// stores its tid and message there, so that the leader reports it like a trap of its own.
//
// A shared pool (the model runtime: many threaded kernels, one set of workers) uses two more
// commands: 'add' instantiates one kernel (its key, module, shared memory and T) in this worker
// and keeps it beside the others; then 'serve' makes this worker a helper (tid ≥ 1) that loops
// like the one above but runs, per generation, the kernel whose key the page stored in
// CONTROL.KERNEL (a helper whose tid is ≥ that kernel's T only counts itself done). The page
// itself is tid 0 of every kernel (model.mjs runThreaded). Once serving, helpers take no
// message until STOP: every 'add' comes first.

import { CONTROL, storedTrap } from './wasm.mjs';

/**
 * Microseconds a waiting thread polls a shared word before it blocks in Atomics.wait (0: block
 * at once); the executor's `wasm_spin_us` page option and the model pool's 'serve' may set their
 * own.
 *
 * Why poll at all: a thread blocked in Atomics.wait sleeps in the kernel (a futex), and Linux
 * tends to wake a sleeper on the waker's CPU (wake-affine placement), where it stays until the
 * load balancer moves it. Both threads of a T = 2 kernel then share one core. Measured in
 * headless Chromium 156 on this project's 2-core x86-64 machine (2026-11-27):
 * - MobileNet-v2's 16→96 pointwise layer, T = 2, through the executor: with no polling, stretches
 *   of tens of executions at 1.7–2.0 ms, the speed of one thread, between ones at 0.9–1.0 ms;
 *   with 2 ms of polling, 0.86–1.0 ms after the first few.
 * - the tuner, which times every trial this way: MobileNet-v2's 2,480 trials gave a model
 *   estimate of 18.6 ms without polling and 12.1 ms with it, and that package ran in 16.3 ms
 *   (pool without polling) and 14.5 ms (pool with it), against 19.9 ms for the old package.
 * XNNPACK's pthreadpool (TensorFlow.js wasm, onnxruntime-web) also spins before it sleeps. The
 * cost: a thread keeps its core busy for up to this long after its last execution. Kernels never
 * use more threads than the tab has cores (DeviceLimits max_threads), so a polling thread takes
 * no core from a thread that has work — except where the OS put two threads on one core
 * anyway: the waiter then polls through its time slice before the other runs.
 */
export const DEFAULT_SPIN_US = 2000;

let port = null;  // {post(message), on(handler)}
if (typeof WorkerGlobalScope !== 'undefined') {
  port = {
    post: (m) => self.postMessage(m),
    on: (h) => { self.onmessage = (e) => h(e.data); },
  };
} else {
  const { parentPort } = await import('node:worker_threads');
  port = { post: (m) => parentPort.postMessage(m), on: (h) => parentPort.on('message', h) };
}

let job = null;  // {run, tid, threads, ctl, memory, spinUs}

function errorText(e) {
  return `${e?.name || 'Error'}: ${e?.message || e}`;
}

function storeTrap(ctl, tid, message) {
  if (Atomics.compareExchange(ctl, CONTROL.TRAP_TID, 0, tid + 1) !== 0) return;
  const bytes = new TextEncoder().encode(message).subarray(0, CONTROL.BYTES - CONTROL.MESSAGE_AT);
  new Uint8Array(ctl.buffer, CONTROL.MESSAGE_AT, bytes.length).set(bytes);
  Atomics.store(ctl, CONTROL.MESSAGE_LEN, bytes.length);
}


/** Waits until ctl[index] != value: polls for up to `spinUs` µs, then blocks in Atomics.wait. */
function waitChange(ctl, index, value, spinUs) {
  if (spinUs > 0) {
    const end = performance.now() + spinUs / 1e3;
    // The clock is read once per 64 polls: a poll is a few ns, a clock read far more.
    for (;;) {
      for (let i = 0; i < 64; ++i) if (Atomics.load(ctl, index) !== value) return;
      if (performance.now() >= end) break;
    }
  }
  while (Atomics.load(ctl, index) === value) Atomics.wait(ctl, index, value);
}

function helperLoop(generation) {
  const { ctl, run, tid, spinUs } = job;
  let seen = generation;
  for (;;) {
    waitChange(ctl, CONTROL.GEN, seen, spinUs);
    seen = Atomics.load(ctl, CONTROL.GEN);
    if (Atomics.load(ctl, CONTROL.STOP)) return;
    try {
      run(tid);
    } catch (e) {
      storeTrap(ctl, tid, errorText(e));
    }
    Atomics.add(ctl, CONTROL.DONE, 1);
    Atomics.notify(ctl, CONTROL.DONE);
  }
}

/** One execution: start the helpers, run(0) here, join them. Throws the first trap. */
function execute() {
  const { ctl, run, threads, spinUs } = job;
  if (threads === 1) {
    run(0);
    return;
  }
  Atomics.store(ctl, CONTROL.DONE, 0);
  Atomics.add(ctl, CONTROL.GEN, 1);
  Atomics.notify(ctl, CONTROL.GEN);
  let trap = null;
  try {
    run(0);
  } catch (e) {
    trap = e;
  }
  // Join even after a trap: helpers must be idle before the page reads or reuses the memory.
  for (let done; (done = Atomics.load(ctl, CONTROL.DONE)) < threads - 1;) waitChange(ctl, CONTROL.DONE, done, spinUs);
  if (trap) throw trap;
  const helperTrap = storedTrap(ctl);
  if (helperTrap) throw new Error(helperTrap);
}

function load(m) {
  let memory = m.memory;
  try {
    if (!memory) {
      // T = 1: the ABI's memory is not shared and so cannot be posted; it is made here and the
      // page sends the inputs instead.
      memory = new WebAssembly.Memory({ initial: m.pages, maximum: m.pages });
    }
    for (const { offset, values } of m.inputs || []) {
      new Float32Array(memory.buffer, offset, values.length).set(values);
    }
  } catch (e) {
    return { error: `cannot set up ${m.pages} pages of memory: ${errorText(e)}`, kind: 'memory' };
  }
  let instance;
  try {
    instance = new WebAssembly.Instance(m.module, { env: { memory } });
  } catch (e) {
    return { error: errorText(e), kind: 'link' };
  }
  const run = instance.exports.run;
  if (typeof run !== 'function') return { error: 'the module exports no function run(tid)', kind: 'link' };
  job = { run, tid: m.tid, threads: m.threads, memory, spinUs: m.spinUs ?? DEFAULT_SPIN_US,
    ctl: m.control ? new Int32Array(m.control) : null };
  return { ok: true };
}

// ---- shared pools (the model runtime) ----
const kernels = new Map();  // key → {run, threads}
let pool = null;            // {ctl, size, spinUs, tid}

function add(m) {
  let instance;
  try {
    instance = new WebAssembly.Instance(m.module, { env: { memory: m.memory } });
  } catch (e) {
    return { error: errorText(e), kind: 'link' };
  }
  const run = instance.exports.run;
  if (typeof run !== 'function') return { error: 'the module exports no function run(tid)', kind: 'link' };
  kernels.set(m.key, { run, threads: m.threads });
  return { ok: true };
}

function serveLoop(generation) {
  const { ctl, tid, spinUs } = pool;
  let seen = generation;
  for (;;) {
    waitChange(ctl, CONTROL.GEN, seen, spinUs);
    seen = Atomics.load(ctl, CONTROL.GEN);
    if (Atomics.load(ctl, CONTROL.STOP)) return;
    const kernel = kernels.get(Atomics.load(ctl, CONTROL.KERNEL));
    if (kernel && tid < kernel.threads) {
      try {
        kernel.run(tid);
      } catch (e) {
        storeTrap(ctl, tid, errorText(e));
      }
    }
    Atomics.add(ctl, CONTROL.DONE, 1);
    Atomics.notify(ctl, CONTROL.DONE);
  }
}

function runBatch(m) {
  let readBack = null;
  const begin = performance.now();
  try {
    for (let i = 0; i < m.number; ++i) {
      execute();
      // bench/web_vs_tfjs's read-back timing: the output copied out, inside the clock.
      if (m.readback) readBack = new Float32Array(job.memory.buffer, m.readback.offset, m.readback.count).slice();
    }
  } catch (e) {
    return { error: errorText(e), kind: 'trap' };
  }
  const seconds = (performance.now() - begin) / 1e3;
  readBack = null;  // the copy was only timed
  let output = null;
  if (m.output) output = new Float32Array(job.memory.buffer, m.output.offset, m.output.count).slice();
  return { seconds, output };
}

port.on((m) => {
  switch (m.cmd) {
    case 'load': {
      const reply = load(m);
      // A helper answers, then serves executions until STOP; its next message is the next load.
      // It reads the generation before answering: the leader may start an execution as soon as
      // the page has every answer.
      const helper = reply.ok && m.tid > 0;
      const generation = helper ? Atomics.load(job.ctl, CONTROL.GEN) : 0;
      port.post(reply);
      if (helper) helperLoop(generation);
      break;
    }
    case 'run':
      port.post(runBatch(m));
      break;
    case 'add':
      port.post(add(m));
      break;
    case 'serve': {
      pool = { ctl: new Int32Array(m.control), size: m.size, spinUs: m.spinUs ?? DEFAULT_SPIN_US, tid: m.tid };
      const generation = Atomics.load(pool.ctl, CONTROL.GEN);
      port.post({ ok: true });
      if (m.tid > 0) serveLoop(generation);
      break;
    }
    default:
      port.post({ error: `unknown command '${m.cmd}'`, kind: 'protocol' });
  }
});
port.post({ ready: true });
