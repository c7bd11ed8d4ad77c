#!/usr/bin/env node
// probe_wasm_join.mjs — where a threaded webtune wasm kernel's time goes when its batched samples
// slow down in a bench run while tfjs's do not (2026-11-29: PW18 81 → 51 GFLOP/s over six rounds
// of one row, tfjs steady at 58–62). For each artifact given (`webtune artifact` JSON of a wasm
// kernel with T = 2), in the bench's headless Chromium (session.mjs), the bench's own round is
// repeated ROUNDS times: fence, read-back and batched samples of webtune's kernel on the page
// runner (page.mjs runWasmOnPage) and of tfjs's fused op on as many threads, the side going first
// alternating, 200 ms of idleness before each side (bench.mjs SETTLE_MS). Every pool execution
// is timed in two parts (WasmHelperPool.run, wrapped here): the leader's own share (run(0) on the
// page's thread) and the wait at the join for the helper. If a slow round is a slow helper (a
// core taken from it), the join wait grows and the leader's share does not; if both shares slow
// down, the join wait stays small.
//
// Prints JSON per artifact and round: webtune and tfjs batched GFLOP/s, and over that round's
// batched executions the medians (µs) of the leader's share, of the join wait and of the whole
// execution.
//
//   node bench/web_vs_tfjs/probe_wasm_join.mjs ARTIFACT.json [...]
import { probeArtifacts } from './session.mjs';

await probeArtifacts('probe_wasm_join.mjs ARTIFACT.json [...]', async (record, { rounds }) => {
  const { WasmHelperPool } = await import('/runtime/wasm_pool.mjs');
  const median = (v) => { const a = [...v].sort((x, y) => x - y); return a.length ? a[a.length >> 1] : null; };
  const settle = () => new Promise((resolve) => setTimeout(resolve, 200));
  const flops = record.flops;
  let log = null;  // [share_ms, join_ms] per execution while recording
  const original = WasmHelperPool.prototype.run;
  WasmHelperPool.prototype.run = function run(key, kernel, ...rest) {
    if (!log) return original.call(this, key, kernel, ...rest);
    const runHere = kernel.runHere;
    let t1 = 0;
    kernel.runHere = function () { const r = runHere.call(this); t1 = performance.now(); return r; };
    const t0 = performance.now();
    try {
      return original.call(this, key, kernel, ...rest);
    } finally {
      const t2 = performance.now();
      kernel.runHere = runHere;
      log.push([t1 - t0, t2 - t1]);
    }
  };
  const threads = record.artifact.wasm?.threads ?? 1;
  const w = { ...record.workload };
  const out = { config_index: record.config_index, threads, rounds: [] };
  try {
    for (let round = 0; round < rounds; ++round) {
      const r = {};
      const ours = async (mode) => {
        await settle();
        log = mode === 'batched' ? [] : null;
        const res = await window.bench.runWebtune(record, { repeat: 5, mode, batch: 16, wasmRunner: 'page' });
        if (mode === 'batched') {
          r.webtune_gflops = res.gflops;
          r.share_us = median(log.map((x) => x[0])) * 1e3;
          r.join_us = median(log.map((x) => x[1])) * 1e3;
          r.exec_us = median(log.map((x) => x[0] + x[1])) * 1e3;
          r.join_over_100us = log.filter((x) => x[1] > 0.1).length;
          r.executions = log.length;
        }
        log = null;
      };
      const theirs = async (mode) => {
        await settle();
        const res = await window.bench.runTfjs('wasm', w, flops, { repeat: 5, warmup: 2, mode, threads, batch: 16 });
        if (mode === 'batched') r.tfjs_gflops = res.gflops;
      };
      for (const mode of ['fence', 'readback', 'batched']) {
        if (round % 2 === 0) { await ours(mode); await theirs(mode); } else { await theirs(mode); await ours(mode); }
      }
      out.rounds.push(r);
    }
  } finally {
    WasmHelperPool.prototype.run = original;
  }
  return out;
}, { rounds: Number.parseInt(process.env.ROUNDS || '8', 10) });
