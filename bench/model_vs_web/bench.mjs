#!/usr/bin/env node
// bench.mjs — whole models end to end in ONE headless Chromium session (one page): webtune's
// packages against onnxruntime-web 1.30 and TensorFlow.js 4.22 (issue 16, "Benchmark:
// bench/model_vs_web"):
//
//   node bench/model_vs_web/bench.mjs [--models resnet18,mobilenet_v2] [--models-dir ../shared/models]
//        [--targets webgl2,webgpu,wasm] [--engines all|ENGINE,...] [--webtune-packages DIR]
//        [--profile]  (after the rounds, one run of each webtune package with every step timed
//                      alone: sums by step kind and the slowest steps, on stderr and in --out)
//        [--threads auto|N] [--anchor-threads best|N]
//        [--rounds 4] [--runs 5] [--warmup 2] [--round-warmup 0] [--settle-ms 200]
//        [--ort-webgl-pack default|true|false] [--gl swiftshader|llvmpipe] [--out FILE]
//
// Rows: model × target; per row the engines (page.mjs):
//   webgl2: webtune-webgl2, ort-webgl (ORT's WebGL EP), tfjs-webgl
//   webgpu: webtune-webgpu, ort-webgpu (ort.webgpu bundle, C++ WebGPU EP), ort-webgpu-jsep
//           (ort.all bundle, JSEP WebGPU EP), tfjs-webgpu
//   wasm:   webtune-wasm, ort-wasm (SIMD + threads), tfjs-wasm (threaded SIMD)
// --engines picks a subset by name (default all). webtune's engines run only where
// --webtune-packages DIR holds DIR/<model>-<target>/model.mjs (docs/package.md); elsewhere the
// table prints "—".
//
// Each sample is one end-to-end inference: the input uploaded from a Float32Array (NCHW, the
// model's <model>.input.f32), the model run, the output read back into a Float32Array. Before
// any timing every engine's output is checked against <model>.logits.f32 (max abs error ≤ 1e-3 ×
// max |logit|). Then --warmup untimed runs. Then --rounds rounds; each round times every engine
// of the model (--round-warmup untimed runs, then --runs timed ones), the engine that goes first
// rotating from round to round, so that a slow spell of this shared machine falls on all of
// them. An engine's figure is the median of its rounds × runs samples (the issue asks for ≥ 20);
// the table also gives the spread of its per-round medians. The load average (os.loadavg) is
// recorded before each round. Each engine's turn starts after --settle-ms (200) of idleness:
// every wasm engine's threads poll for a while after their last op before they sleep (XNNPACK's
// pthreadpool under tfjs and onnxruntime-web tens of ms, webtune's helpers 2 ms), and on a
// 2-core machine the engine that follows would lose a core to them (bench/web_vs_tfjs SETTLE_MS).
//
// Refusals: any failure of one engine on one model is that engine's "refused: <reason>" for
// that model × target, in the table (the reason in full on the engine's line) and in the JSON
// (engines[engine].refused = the reason, refused_at = load | threads | prepare | check | run),
// and the bench goes on with the other engines and models; it never aborts for one engine. The
// failures: the model's files cannot be read (every engine of the model: "cannot load the
// model: ..."); tfjs_model.mjs cannot translate the graph (an op such as HardSigmoid, a
// ceil-mode MaxPool: the tfjs engines, with the node it names; the model's other engines run);
// no thread count of a wasm anchor's probe runs (below); an engine cannot be made (an ORT
// session that refuses the model or an operator, a webtune package that does not load); its
// first run throws; its output fails the check ("wrong output: ..."); a timed run throws ("run
// failed in round R: ...", not timed after it, its earlier samples kept in the JSON). Only a
// broken session (Chromium or the page does not start, the page is not cross-origin isolated)
// or a bad command line stops the bench. A webtune engine without a package is not run ("—").
//
// Threads. webtune's wasm packages run the thread count their kernels were built for
// (kernels/*.json "wasm.threads"); the bench does not change it. --threads auto|N states it:
// auto (default) reads it from the packages (their maximum) when given, else takes the machine's
// logical CPU count; N is taken as given. That count T also runs the wasm part of ORT's GPU-EP
// bundles (ort-webgl, ort-webgpu, ort-webgpu-jsep). The wasm anchors, ort-wasm and tfjs-wasm,
// run --anchor-threads best|N:
//   best (default): per model and anchor, before the anchor is checked and timed, it runs on 1,
//     2, ... up to navigator.hardwareConcurrency (H) threads, each count alone after --settle-ms
//     of idleness: made on that count, 1 warm-up run (its output checked), 3 timed runs, released;
//     the count with the lowest median is kept (a tie: fewer threads; a count that fails is
//     skipped; all failing: the anchor is refused). ORT reads env.wasm.numThreads once, when a
//     bundle's wasm module is instantiated, so each count gets its own copy of ort.wasm.min.mjs
//     (imported as ort.wasm.min.mjs?threads=t: its own env and wasm instance) and a new session.
//     tfjs's setThreadsCount also acts only when the wasm backend initialises; the page re-creates
//     the backend for each count (page.mjs's workaround of the hardwareConcurrency / 2 cap, which
//     also lets one page change the count), so each count is a new backend with the model's
//     weights uploaded again. The copies made for the counts not kept stay in the page (a wasm
//     module cannot be freed), their threads asleep.
//   N: both anchors on N threads, no probe (the same count as webtune's, for a same-thread
//     comparison: --anchor-threads T).
// The count each wasm engine ran is on a line under the table's header, per model:
// "resnet18: webtune-wasm threads: 2 (its kernels), ort-wasm threads: 2 (best of 1..2; medians
// 1: 250 ms, 2: 180 ms), tfjs-wasm threads: ..."; in the JSON: engines[e].threads = {chosen,
// from, probe: [{threads, samples_ms, engine_threads} or {threads, error}]}. Either way checked:
// ORT's env.wasm.numThreads after the session (ORT drops to 1 unless the page is cross-origin
// isolated; a mismatch refuses the engine) and its pthread workers; tfjs's
// tf.wasm.getThreadsCount().
//
// Speedup = anchor's median ÷ webtune's median (> 1: webtune faster). Goal per row (issue 16):
// webgl2 ≥ 2×, webgpu ≥ 2×, wasm ≥ 1.2× against the faster anchor of the row.
// Prints the table on stdout; with --out writes everything (every sample, checks, devices,
// flags, load averages) as JSON.

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { parseCommandLine } from '../cli_args.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '../..');

/** Row target → its engines, webtune's first, and issue 16's goal. */
export const ROWS = {
  webgl2: { engines: ['webtune-webgl2', 'ort-webgl', 'tfjs-webgl'], goal: 2 },
  webgpu: { engines: ['webtune-webgpu', 'ort-webgpu', 'ort-webgpu-jsep', 'tfjs-webgpu'], goal: 2 },
  wasm: { engines: ['webtune-wasm', 'ort-wasm', 'tfjs-wasm'], goal: 1.2 },
};
/** The anchors whose wasm thread count --anchor-threads picks. */
export const WASM_ANCHORS = ['ort-wasm', 'tfjs-wasm'];
const PACKAGE_TARGET = { 'webtune-webgl2': 'webgl2', 'webtune-webgpu': 'webgpu', 'webtune-wasm': 'wasm' };

export function median(values) {
  const s = values.filter(Number.isFinite).sort((a, b) => a - b);
  if (!s.length) return null;
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/** The wasm thread count of a webtune wasm package: the maximum over its kernels, or null. */
export function packageThreads(dir) {
  const kernels = path.join(dir, 'kernels');
  if (!fs.existsSync(kernels)) return null;
  let threads = null;
  for (const f of fs.readdirSync(kernels).filter((n) => n.endsWith('.json'))) {
    const t = JSON.parse(fs.readFileSync(path.join(kernels, f), 'utf8'))?.wasm?.threads;
    if (Number.isInteger(t)) threads = Math.max(threads ?? 0, t);
  }
  return threads;
}

/**
 * The fastest count of a thread probe (page.mjs probeThreads(): [{threads, samples_ms} or
 * {threads, error}]): the lowest median; a tie goes to fewer threads. null when none ran.
 */
export function chooseThreads(probe) {
  let best = null;
  for (const p of probe) {
    const m = p.error ? null : median(p.samples_ms ?? []);
    if (m === null) continue;
    if (best === null || m < best.median_ms || (m === best.median_ms && p.threads < best.threads)) best = { threads: p.threads, median_ms: m };
  }
  return best;
}

/** What a wasm engine's thread count was and where it came from, as text ("2 (best of 1..2; ...)"). */
export function threadsText(engine, r) {
  if (engine === 'webtune-wasm') return Number.isInteger(r?.info?.kernel_threads) ? `${r.info.kernel_threads} (its kernels)` : null;
  const t = r?.threads;
  if (!t) return null;
  const chosen = t.chosen ?? '—';
  if (!t.probe) return `${chosen} (${t.from})`;
  const tried = t.probe.map((p) => `${p.threads}: ${p.error ? 'failed' : `${fmtMs(median(p.samples_ms))} ms`}`).join(', ');
  return `${chosen} (${t.from}; medians ${tried})`;
}

/**
 * Per row, the figures: engines' medians, webtune's speedup over each anchor, the faster anchor
 * and whether the goal is met. `results[engine]`: {median_ms, ...} or {error}.
 */
export function rowSummary(target, results) {
  const { engines, goal } = ROWS[target];
  const webtune = results[engines[0]]?.median_ms ?? null;
  const anchors = engines.slice(1).filter((e) => Number.isFinite(results[e]?.median_ms));
  let fastest = null;
  for (const e of anchors) if (fastest === null || results[e].median_ms < results[fastest].median_ms) fastest = e;
  const speedups = Object.fromEntries(anchors.map((e) => [e, webtune ? results[e].median_ms / webtune : null]));
  const vsFastest = fastest && webtune ? results[fastest].median_ms / webtune : null;
  return { target, goal, webtune_ms: webtune, speedups, fastest_anchor: fastest, speedup_vs_fastest: vsFastest, met: vsFastest === null ? null : vsFastest >= goal };
}

const fmtMs = (v) => (Number.isFinite(v) ? (v >= 100 ? v.toFixed(0) : v.toFixed(1)) : '—');
const fmtX = (v) => (Number.isFinite(v) ? `${v.toFixed(2)}×` : '—');

/**
 * The text table: one line per engine, grouped by model and row, then the row's verdict. A
 * refused engine's line says "refused: <reason>" after its engine name (the reason in full, over
 * the figure columns).
 */
export function formatTable(models) {
  const head = ['model', 'target', 'engine', 'median ms', 'round medians', 'samples', 'check (max err / tol)', 'webtune speedup'];
  const lines = [head];
  const verdicts = [];
  for (const m of models) {
    for (const row of m.rows) {
      for (const e of ROWS[row.target].engines) {
        const r = m.engines[e];
        if (!r) continue;
        if (r.refused) {
          lines.push([m.model, row.target, e, `refused: ${r.refused}`]);
          continue;
        }
        const check = r.check ? `${r.check.max_abs_err.toExponential(1)} / ${r.check.tolerance.toExponential(1)}${r.check.ok ? '' : ' WRONG'}` : '—';
        const rounds = r.round_medians_ms?.length ? `${fmtMs(Math.min(...r.round_medians_ms))}–${fmtMs(Math.max(...r.round_medians_ms))}` : '—';
        const why = r.check && !r.check.ok ? 'wrong output' : r.error?.slice(0, 40);
        lines.push([m.model, row.target, e, r.error ? `— (${why})` : fmtMs(r.median_ms), rounds,
          String(r.samples_ms?.length ?? 0), check, e.startsWith('webtune') ? '' : fmtX(row.speedups[e])]);
      }
      verdicts.push(`${m.model} ${row.target}: webtune ${fmtMs(row.webtune_ms)} ms; faster anchor ` +
        `${row.fastest_anchor ?? '—'} ${fmtMs(m.engines[row.fastest_anchor]?.median_ms)} ms; speedup ` +
        `${fmtX(row.speedup_vs_fastest)} (goal ≥ ${row.goal}×${row.met === null ? '' : row.met ? ': met' : ': not met'})`);
    }
  }
  // Column widths over the full lines; a refused line's reason spans the figure columns.
  const full = lines.filter((l) => l.length === head.length);
  const width = head.map((_, c) => Math.max(...(c < 3 ? lines : full).map((l) => l[c].length)));
  // Under the header line: the wasm threads of each model's wasm engines.
  const threadLines = [];
  for (const m of models) {
    if (!m.rows.some((r) => r.target === 'wasm')) continue;
    const parts = ROWS.wasm.engines.map((e) => [e, threadsText(e, m.engines[e])]).filter(([, t]) => t).map(([e, t]) => `${e} threads: ${t}`);
    if (parts.length) threadLines.push(`${m.model}: ${parts.join(', ')}`);
  }
  return [
    'end-to-end latency per inference (upload + run + read-back), ms; speedup = anchor ms ÷ webtune ms',
    ...threadLines,
    ...lines.map((l) => l.map((cell, c) => (c < l.length - 1 ? cell.padEnd(width[c]) : cell)).join('  ').trimEnd()),
    '', ...verdicts,
  ].join('\n');
}

/** An engine failure's reason, one line (page.evaluate's errors may carry a stack). */
export function reason(e) {
  const text = String(e?.message ?? e ?? 'unknown error');
  return text.split('\n')[0].replace(/\s+/g, ' ').trim() || 'unknown error';
}

/** window.bench.* of the page through puppeteer, as async functions (benchModel's `api`). */
export function pageApi(page) {
  const call = (name) => (...args) => page.evaluate((n, a) => window.bench[n](...a), name, args);
  return Object.fromEntries(['loadModel', 'prepare', 'probeThreads', 'time', 'release', 'profile', 'dropModel'].map((n) => [n, call(n)]));
}

/**
 * One model through every picked engine of `cfg.targets`: load, check, warm-up, the timed
 * rounds, the rows. `api`: the page's window.bench functions (pageApi(); a stand-in in the
 * tests). An engine that fails at any stage (the model or the tfjs graph cannot be loaded or
 * translated, the engine cannot be made, a run throws, the output check fails) is recorded as
 * {refused: reason, error: reason, refused_at: stage} and not timed (further); the other engines
 * and models go on. A webtune engine without a package gets {error} only (not run, "—").
 * Returns {model, summary, engines, rows, loadavg}.
 */
export async function benchModel(api, model, cfg, log = (line) => console.error(line)) {
  const {
    targets, engines: picked, warmup = 2, rounds = 4, runs = 5, roundWarmup = 0, settleMs = 200,
    ortWebglPack, profile = false, webtuneThreads = {}, webtunePackage = () => 'no --webtune-packages',
    anchorThreads = 'best', maxThreads = 1, probeRuns = 3,
    sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
  } = cfg;
  const mres = { model, summary: null, engines: {}, rows: [], loadavg: [] };
  const wanted = targets.flatMap((t) => ROWS[t].engines.filter((e) => picked.includes(e)));
  const refuse = (engine, stage, why, extra = {}) => {
    mres.engines[engine] = { ...(mres.engines[engine] ?? {}), ...extra, refused: why, error: why, refused_at: stage };
    log(`bench: ${model} ${engine}: refused (${stage}): ${why}`);
  };
  try {
    mres.summary = await api.loadModel(model);
  } catch (e) {
    const why = `cannot load the model: ${reason(e)}`;
    for (const engine of wanted) refuse(engine, 'load', why);
    mres.rows = targets.map((t) => rowSummary(t, mres.engines));
    return mres;
  }
  if (mres.summary.tfjs_refused) log(`bench: ${model}: the tfjs builder refuses the graph: ${mres.summary.tfjs_refused}`);
  else log(`bench: ${model}: tfjs ops ${JSON.stringify(mres.summary.tfjs_ops)}`);
  const timed = [];
  for (const engine of wanted) {
    if (PACKAGE_TARGET[engine]) {
      const missing = webtunePackage(model, engine);
      if (missing) {
        mres.engines[engine] = { error: missing };
        continue;
      }
    }
    let threads;
    if (WASM_ANCHORS.includes(engine)) {
      if (anchorThreads === 'best') {
        const counts = Array.from({ length: maxThreads }, (_, i) => i + 1);
        const t0 = Date.now();
        let probe;
        try {
          probe = await api.probeThreads(engine, model, { counts, runs: probeRuns, warmup: 1, settleMs });
        } catch (e) {
          refuse(engine, 'threads', reason(e));
          continue;
        }
        const best = chooseThreads(probe);
        threads = { chosen: best?.threads ?? null, from: `best of 1..${maxThreads}`, probe };
        log(`bench: ${model} ${engine}: threads ${threadsText(engine, { threads })} (${((Date.now() - t0) / 1e3).toFixed(0)} s)`);
        if (!best) {
          const errors = [...new Set(probe.map((p) => reason(p.error)))];
          refuse(engine, 'threads', errors.length === 1 ? errors[0] : probe.map((p) => `${p.threads} threads: ${reason(p.error)}`).join('; '), { threads });
          continue;
        }
      } else {
        threads = { chosen: anchorThreads, from: `--anchor-threads ${anchorThreads}` };
      }
    }
    const t0 = Date.now();
    try {
      const p = await api.prepare(engine, model, { warmup, ortWebglPack, threads: threads?.chosen });
      mres.engines[engine] = { ...p, samples_ms: [], round_medians_ms: [] };
      if (threads) mres.engines[engine].threads = threads;
      if (engine === 'webtune-wasm') mres.engines[engine].info.kernel_threads = webtuneThreads[model] ?? null;
      log(`bench: ${model} ${engine}: loaded in ${p.load_ms.toFixed(0)} ms, first run ${p.first_run_ms.toFixed(0)} ms, ` +
        `max abs error ${p.check.max_abs_err.toExponential(2)} (tolerance ${p.check.tolerance.toExponential(2)})` +
        `${p.check.ok ? '' : ' WRONG'}; ${JSON.stringify(p.info)} (${((Date.now() - t0) / 1e3).toFixed(0)} s)`);
      if (p.check.ok) {
        timed.push(engine);
      } else {
        refuse(engine, 'check', `wrong output: max abs error ${p.check.max_abs_err} > ${p.check.tolerance}`);
        await api.release(engine, model).catch(() => {});
      }
    } catch (e) {
      refuse(engine, 'prepare', reason(e), threads ? { threads } : {});
      await api.release(engine, model).catch(() => {});
    }
  }
  for (let round = 0; round < rounds; ++round) {
    mres.loadavg.push({ round, at: new Date().toISOString(), loadavg: os.loadavg() });
    const order = timed.map((_, i) => timed[(i + round) % timed.length]);
    for (const engine of order) {
      const r = mres.engines[engine];
      if (r.refused) continue;
      await sleep(settleMs);
      try {
        const ms = await api.time(engine, model, runs, { warmup: roundWarmup });
        r.samples_ms.push(...ms);
        r.round_medians_ms.push(median(ms));
      } catch (e) {
        refuse(engine, 'run', `run failed in round ${round + 1}: ${reason(e)}`);
        await api.release(engine, model).catch(() => {});
      }
    }
    log(`bench: ${model} round ${round + 1}/${rounds} (load ${os.loadavg()[0].toFixed(1)}): ` +
      order.map((e) => `${e} ${mres.engines[e].refused ? 'refused' : fmtMs(mres.engines[e].round_medians_ms.at(-1))}`).join(', '));
  }
  for (const engine of timed) {
    const r = mres.engines[engine];
    r.median_ms = r.refused ? null : median(r.samples_ms);
  }
  mres.rows = targets.map((t) => rowSummary(t, mres.engines));
  if (profile) {
    // After the timed rounds: one run per webtune engine with every step timed alone.
    for (const engine of timed.filter((e) => PACKAGE_TARGET[e])) {
      const r = mres.engines[engine];
      if (r.refused) continue;
      try {
        r.profile = await api.profile(engine, model);
        log(formatProfile(model, engine, r.profile));
      } catch (e) {
        log(`bench: ${model} ${engine}: profile failed: ${reason(e)}`);
      }
    }
  }
  try {
    await api.dropModel(model);
  } catch (e) {
    log(`bench: ${model}: dropping the model failed: ${reason(e)}`);
  }
  return mres;
}

/**
 * A profile (page.mjs profile()) as lines: the sums by step kind, the non-task kernels by
 * operator (count of steps in parentheses), then the slowest steps.
 */
export function formatProfile(model, engine, p) {
  const f = (ms) => ms.toFixed(2).padStart(9);
  const lines = [`profile ${model} ${engine}: ${p.steps_count} steps, each run alone: ${p.total_ms.toFixed(2)} ms ` +
    `(upload ${p.by.upload.toFixed(2)}, task kernels ${p.by.task.toFixed(2)}, op and relayout kernels ${p.by.op.toFixed(2)}, download ${p.by.download.toFixed(2)})`];
  const ops = Object.entries(p.by_op ?? {});
  if (ops.length) lines.push(`  non-task kernels by operator: ${ops.map(([type, o]) => `${type} ${o.ms.toFixed(2)} ms (${o.steps})`).join(', ')}`);
  for (const t of p.steps) lines.push(`  step ${String(t.step).padStart(4)} ${f(t.ms)} ms  ${t.kind}${t.role ? `/${t.role}` : ''}  ${t.task ?? '-'}  ${t.node ?? ''}`);
  return lines.join('\n');
}

const USAGE = `usage: node bench/model_vs_web/bench.mjs [--models resnet18,mobilenet_v2] [--models-dir DIR]
    [--targets webgl2,webgpu,wasm] [--engines all|ENGINE,...] [--webtune-packages DIR] [--profile]
    [--threads auto|N] [--anchor-threads best|N] [--rounds 4] [--runs 5] [--warmup 2] [--round-warmup 0] [--settle-ms 200]
    [--ort-webgl-pack default|true|false] [--gl swiftshader|llvmpipe] [--out FILE] [--chromium PATH]`;

async function main() {
  const { values: opts } = parseCommandLine('bench', {
    options: {
      models: { type: 'string', default: 'resnet18,mobilenet_v2' },
      'models-dir': { type: 'string', default: path.resolve(root, '../shared/models') },
      targets: { type: 'string', default: 'webgl2,webgpu,wasm' },
      engines: { type: 'string', default: 'all' },
      'webtune-packages': { type: 'string', default: '' },
      threads: { type: 'string', default: 'auto' },
      'anchor-threads': { type: 'string', default: 'best' },
      rounds: { type: 'string', default: '4' },
      runs: { type: 'string', default: '5' },
      warmup: { type: 'string', default: '2' },
      'round-warmup': { type: 'string', default: '0' },
      'settle-ms': { type: 'string', default: '200' },
      'ort-webgl-pack': { type: 'string', default: 'default' },
      gl: { type: 'string', default: 'swiftshader' },
      out: { type: 'string', default: '' },
      chromium: { type: 'string', default: process.env.WEBTUNE_CHROMIUM || '/usr/bin/chromium' },
      profile: { type: 'boolean', default: false },
    },
  }, USAGE);
  const fail = (msg) => {
    console.error(`bench: ${msg}`);
    process.exit(2);
  };
  const int = (name, min) => {
    const v = Number(opts[name]);
    if (!Number.isInteger(v) || v < min) fail(`--${name} takes an integer ≥ ${min}, not '${opts[name]}'`);
    return v;
  };
  const rounds = int('rounds', 1);
  const runs = int('runs', 1);
  const warmup = int('warmup', 0);
  const roundWarmup = int('round-warmup', 0);
  const settleMs = int('settle-ms', 200);
  if (rounds * runs < 20) console.error(`bench: warning: ${rounds} rounds × ${runs} runs = ${rounds * runs} samples per engine; issue 16 asks for ≥ 20`);
  const modelNames = opts.models.split(',').filter(Boolean);
  const targets = opts.targets.split(',').filter(Boolean);
  for (const t of targets) if (!ROWS[t]) fail(`unknown target '${t}' (${Object.keys(ROWS).join(', ')})`);
  const allEngines = Object.values(ROWS).flatMap((r) => r.engines);
  const picked = opts.engines === 'all' ? allEngines : opts.engines.split(',').filter(Boolean);
  for (const e of picked) if (!allEngines.includes(e)) fail(`unknown engine '${e}' (${allEngines.join(', ')})`);
  for (const m of modelNames) {
    for (const ext of ['.onnx', '.input.f32', '.logits.f32']) {
      const f = path.join(opts['models-dir'], `${m}${ext}`);
      if (!fs.existsSync(f)) fail(`no ${f} (--models-dir)`);
    }
  }
  if (!['default', 'true', 'false'].includes(opts['ort-webgl-pack'])) fail('--ort-webgl-pack takes default, true or false');
  const ortWebglPack = opts['ort-webgl-pack'] === 'default' ? undefined : opts['ort-webgl-pack'] === 'true';
  const packages = opts['webtune-packages'] ? path.resolve(opts['webtune-packages']) : null;
  if (packages && !fs.existsSync(packages)) fail(`no directory ${packages} (--webtune-packages)`);
  const packageDir = (model, engine) => (packages ? path.join(packages, `${model}-${PACKAGE_TARGET[engine]}`) : null);
  const hasPackage = (model, engine) => {
    const d = packageDir(model, engine);
    return d !== null && fs.existsSync(path.join(d, 'model.mjs'));
  };

  // webtune's wasm thread count (its packages' kernels'; also ORT's GPU-EP bundles' wasm part),
  // and the wasm anchors' (--anchor-threads: best of 1..hardwareConcurrency, or N).
  const anchorThreads = opts['anchor-threads'] === 'best' ? 'best' : Number(opts['anchor-threads']);
  if (anchorThreads !== 'best' && !(Number.isInteger(anchorThreads) && anchorThreads >= 1)) {
    fail(`--anchor-threads takes best or an integer ≥ 1, not '${opts['anchor-threads']}'`);
  }
  let threads;
  let threadsFrom;
  const webtuneThreads = {};
  for (const m of modelNames) {
    if (hasPackage(m, 'webtune-wasm')) webtuneThreads[m] = packageThreads(packageDir(m, 'webtune-wasm'));
  }
  if (opts.threads === 'auto') {
    const known = Object.values(webtuneThreads).filter(Number.isInteger);
    if (known.length) {
      threads = Math.max(...known);
      threadsFrom = `webtune's wasm packages (${JSON.stringify(webtuneThreads)})`;
    } else {
      threads = os.cpus().length;
      threadsFrom = 'the logical CPU count (no webtune wasm package)';
    }
  } else {
    threads = int('threads', 1);
    threadsFrom = '--threads';
  }
  console.error(`bench: webtune's wasm threads ${threads} (${threadsFrom}); ORT's GPU-EP bundles' wasm on ${threads}; ` +
    `wasm anchors ${anchorThreads === 'best' ? 'on the fastest of 1..hardwareConcurrency threads, per model' : `on ${anchorThreads} threads (--anchor-threads)`}`);

  // Imported here: the exported helpers (summarize.mjs, the tests) need no puppeteer.
  const { openSession } = await import('./session.mjs');
  const session = await openSession({ gl: opts.gl, chromium: opts.chromium, models: opts['models-dir'], packages });
  const { page } = session;
  const result = {
    date: new Date().toISOString(),
    host: { cpus: os.cpus().length, cpu_model: os.cpus()[0]?.model ?? null, platform: os.platform(), release: os.release(), loadavg_start: os.loadavg() },
    rounds, runs, warmup, round_warmup: roundWarmup, threads, threads_from: threadsFrom, anchor_threads: anchorThreads,
    webtune_packages: packages,
    ort_webgl_pack: opts['ort-webgl-pack'], models: [],
  };
  try {
    const env = await page.evaluate(() => window.bench.environment());
    env.chromium = await session.browser.version();
    env.flags = session.args;
    env.gl = opts.gl;
    env.ort_version = JSON.parse(fs.readFileSync(path.join(root, 'node_modules/onnxruntime-web/package.json'), 'utf8')).version;
    result.env = env;
    console.error(`bench: ${env.chromium}, ${opts.gl}, WebGL2 ${env.webgl2_renderer}, WebGPU ${env.webgpu_adapter}, ` +
      `cross-origin isolated: ${env.cross_origin_isolated}, onnxruntime-web ${env.ort_version}, tfjs ${env.tfjs_version}`);
    if (!env.cross_origin_isolated) throw new Error('the page is not cross-origin isolated: the wasm engines would run 1 thread');
    result.setup = await page.evaluate((t) => window.bench.setup({ threads: t }), threads);

    const api = pageApi(page);
    const cfg = {
      targets, engines: picked, warmup, rounds, runs, roundWarmup, settleMs, ortWebglPack, profile: opts.profile,
      anchorThreads, maxThreads: Math.max(1, Math.trunc(env.hardware_concurrency) || 1), webtuneThreads, webtunePackage: (m, e) => (hasPackage(m, e) ? null : packages ? `no package ${packageDir(m, e)}` : 'no --webtune-packages'),
    };
    for (const model of modelNames) {
      result.models.push(await benchModel(api, model, cfg));
    }
  } finally {
    await session.close();
  }
  result.host.loadavg_end = os.loadavg();
  result.finished = new Date().toISOString();
  console.log(formatTable(result.models));
  if (opts.out) {
    fs.mkdirSync(path.dirname(path.resolve(opts.out)), { recursive: true });
    fs.writeFileSync(opts.out, `${JSON.stringify(result, null, 1)}\n`);
    console.error(`bench: wrote ${opts.out}`);
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main().catch((e) => {
    console.error(`bench: ${e.stack || e.message}`);
    process.exit(1);
  });
}
