// wasm_sync_bench.mjs — measures, in headless Chromium, what one T = 2 execution of an empty
// kernel costs on top of the kernel itself (µs), for the ways to start and join the helper:
//   worker-leader  the executor's way: worker 0 drives the batch, joins with Atomics.wait
//   page-spin      the page runs run(0) and spins on Atomics.load for the completion count
//   page-waitasync the page runs run(0) and awaits Atomics.waitAsync for it
// and, as the baseline, T = 1 executions on the leader (one call each, no synchronisation).
// each with the helper polling for `spinUs` µs before it blocks (wasm_spin_us) and with 0.
// An empty kernel measures only the start and join; what spinning buys a real kernel (both
// threads on their own core) is in runtime/wasm_worker.mjs, DEFAULT_SPIN_US.
// Not part of ctest (minutes of CPU): WEBTUNE_WASM_SYNC_BENCH=1 node --test <this file>.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import test from 'node:test';
import { fileURLToPath } from 'node:url';

import { wat2wasm } from './wasm_modules.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');  // the repository: browser-agent/ and runtime/
const run = process.env.WEBTUNE_WASM_SYNC_BENCH === '1';

/** Serves the repository (browser-agent/, runtime/) with the isolation headers the tracker's /agent sends. */
function serve() {
  const server = http.createServer((req, res) => {
    const name = new URL(req.url, 'http://x').pathname.slice(1) || 'blank.html';
    const headers = {
      'Cross-Origin-Opener-Policy': 'same-origin',
      'Cross-Origin-Embedder-Policy': 'require-corp',
      'Cross-Origin-Resource-Policy': 'same-origin',
    };
    if (name === 'blank.html') {
      res.writeHead(200, { ...headers, 'Content-Type': 'text/html' });
      res.end('<!doctype html><title>bench</title>');
      return;
    }
    const file = path.join(ROOT, name);
    if (!file.startsWith(ROOT) || !fs.existsSync(file)) {
      res.writeHead(404);
      res.end();
      return;
    }
    res.writeHead(200, { ...headers, 'Content-Type': 'text/javascript' });
    res.end(fs.readFileSync(file));
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

// The page side: every variant, `executions` executions per sample, median of `samples`.
async function pageBench(moduleB64, executions, samples, spinsUs) {
  const { WasmExecutor, CONTROL } = await import('/browser-agent/wasm.mjs');
  const bytes = Uint8Array.from(atob(moduleB64), (c) => c.charCodeAt(0));
  const module = await WebAssembly.compile(bytes);
  const median = (xs) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const out = { isolated: crossOriginIsolated, cores: navigator.hardwareConcurrency };
  const workerUrl = new URL('/runtime/wasm_worker.mjs', location.href);
  const next = (w) => new Promise((r) => { w.onmessage = (e) => r(e.data); });
  for (const spinUs of spinsUs) {
    // worker-leader, through the executor's own workers and messages.
    const executor = await WasmExecutor.create({ wasm_spin_us: spinUs });
    const trial = { reply: (t) => t.next() };
    const threads = await executor.workers(2, trial);
    const memory = new WebAssembly.Memory({ initial: 1, maximum: 1, shared: true });
    const control = new SharedArrayBuffer(CONTROL.BYTES);
    for (const tid of [1, 0]) threads[tid].post({ cmd: 'load', module, pages: 1, threads: 2, spinUs, tid, memory, control });
    await threads[0].next();
    await threads[1].next();
    const perExec = [];
    for (let s = 0; s < samples; ++s) {
      threads[0].post({ cmd: 'run', number: executions, output: null });
      perExec.push((await threads[0].next()).seconds / executions * 1e6);
    }
    out[`worker-leader spin_us=${spinUs}`] = (out[`worker-leader spin_us=${spinUs}`] || []).concat([median(perExec)]);
    const ctl = new Int32Array(control);
    Atomics.store(ctl, CONTROL.STOP, 1);
    Atomics.add(ctl, CONTROL.GEN, 1);
    Atomics.notify(ctl, CONTROL.GEN);
    // T = 1 on the leader: the cost of one call with no synchronisation, the baseline.
    threads[0].post({ cmd: 'load', module, pages: 1, threads: 1, spinUs, tid: 0, memory, control });
    await threads[0].next();
    const single = [];
    for (let s = 0; s < samples; ++s) {
      threads[0].post({ cmd: 'run', number: executions, output: null });
      single.push((await threads[0].next()).seconds / executions * 1e6);
    }
    out['worker T=1'] = (out['worker T=1'] || []).concat([median(single)]);
    executor.resetPool();

    // page-leader variants: run(0) here, helper tid 1 in a worker.
    for (const mode of ['page-spin', 'page-waitasync']) {
      const worker = new Worker(workerUrl, { type: 'module' });
      await next(worker);  // ready
      const control2 = new SharedArrayBuffer(CONTROL.BYTES);
      const c = new Int32Array(control2);
      worker.postMessage({ cmd: 'load', module, pages: 1, threads: 2, spinUs, tid: 1, memory, control: control2 });
      await next(worker);
      const instance = new WebAssembly.Instance(module, { env: { memory } });
      const run0 = instance.exports.run;
      const times = [];
      for (let s = 0; s < samples; ++s) {
        const begin = performance.now();
        for (let i = 0; i < executions; ++i) {
          Atomics.store(c, CONTROL.DONE, 0);
          Atomics.add(c, CONTROL.GEN, 1);
          Atomics.notify(c, CONTROL.GEN);
          run0(0);
          if (mode === 'page-spin') {
            while (Atomics.load(c, CONTROL.DONE) < 1) { /* spin */ }
          } else {
            while (Atomics.load(c, CONTROL.DONE) < 1) {
              const w = Atomics.waitAsync(c, CONTROL.DONE, 0);
              if (w.async) await w.value;
            }
          }
        }
        times.push((performance.now() - begin) / executions * 1e3);
      }
      out[`${mode} spin_us=${spinUs}`] = (out[`${mode} spin_us=${spinUs}`] || []).concat([median(times)]);
      Atomics.store(c, CONTROL.STOP, 1);
      Atomics.add(c, CONTROL.GEN, 1);
      Atomics.notify(c, CONTROL.GEN);
      worker.terminate();
    }
  }
  return out;
}

test('T = 2 synchronisation overhead per execution in Chromium (µs)', { skip: run ? false : 'set WEBTUNE_WASM_SYNC_BENCH=1', timeout: 600000 }, async () => {
  const { default: puppeteer } = await import('puppeteer-core');
  const server = await serve();
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'webtune-bench-'));
  const browser = await puppeteer.launch({
    executablePath: process.env.WEBTUNE_CHROMIUM || '/usr/bin/chromium',
    headless: 'new',
    args: ['--no-sandbox', '--disable-quic', '--no-first-run', `--user-data-dir=${profile}`],
  });
  try {
    const page = await browser.newPage();
    page.on('console', (m) => console.log('page:', m.text()));
    await page.goto(`http://127.0.0.1:${server.address().port}/blank.html`);
    const empty = Buffer.from(wat2wasm(`(module (import "env" "memory" (memory 1 1 shared))
      (func (export "run") (param $tid i32) (i32.store (i32.shl (local.get $tid) (i32.const 6)) (local.get $tid))))`)).toString('base64');
    const result = await page.evaluate(pageBench, empty, Number(process.env.EXECUTIONS || 2000), 7, (process.env.SPINS_US || "0,2000,200,0,2000").split(",").map(Number));
    console.log(JSON.stringify(result));
    assert.equal(result.isolated, true);
  } finally {
    await browser.close();
    server.close();
    fs.rmSync(profile, { recursive: true, force: true });
  }
});
