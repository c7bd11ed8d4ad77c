#!/usr/bin/env node
// bench.mjs — webtune's tuned kernels against TensorFlow.js 4.22 in ONE headless Chromium
// session (one page), per task × target:
//
//   node bench/web_vs_tfjs/bench.mjs --artifacts DIR [--out FILE] [--gl swiftshader|llvmpipe]
//        [--workloads configs/workloads/matmul.json,configs/workloads/resnet18.json]
//        [--tasks dense512,C2,C5,C8] [--targets webgl2,webgpu,wasm] [--rounds 6] [--repeat 5]
//        [--tfjs-wasm-threads match|default|N] [--batch 16] [--wasm-runner page|agent] [--wasm-spin-us N]
//
// Tasks are looked up by name in the --workloads files (--tasks all: every task of them;
// webtune's workload JSON; a task's
// optional "epilogue" — bias, activation, residual — is run by tfjs with the same semantics,
// page.mjs says how). Every row is timed three ways, printed as three column groups:
// "fence" (each sample ends when the device has finished the op), "read-back" (each sample
// also reads the whole output back into a Float32Array) and "batched" (--batch runs back to
// back, one wait, the time per run: the kernels without the latency of one submission), the
// same way on both sides (page.mjs).
//
// Each row takes --rounds rounds; each round times, for each mode, webtune's kernel (--repeat
// samples) and TensorFlow.js's op (--repeat samples), the side that goes first alternating
// from round to round: a slow spell of this shared machine (steal time, another tenant; single
// samples move by up to 2×) falls on both sides rather than on whichever happened to run then.
// Each side's figure per mode is the median of all its rounds × repeat samples; the ratio is of
// those medians, and the table also gives the spread of the per-round ratios. When DIR also
// holds runners-up (<target>-<task>.rank<R>.json, see run), they and the best record are first
// re-measured side by side (pickFinalist, batched timing) and the fastest here is the one compared.
//
// webtune's wasm kernels run (--wasm-runner) "page" (default, since 2026-11-29): as a package
// runs them (runtime/model.mjs): tid 0 on the page's thread, the other threads in helper
// workers, timed on the page around synchronous calls, as tfjs's ops are; or "agent": through
// the browser agent's executor, every thread in workers and the clock in the leader worker, as
// the tuner times a trial (page.mjs says why the two differ on fence-only samples). The
// finalists are picked through the agent either way.
//
// tfjs wasm's thread count: "match" (default) gives it the thread count of the webtune kernel
// the row compares (artifact.wasm.threads), "default" leaves tfjs's own choice (on this 2-core
// machine 1: tfjs caps it at navigator.hardwareConcurrency / 2), N asks for N.
//
// DIR holds `webtune artifact` outputs named <target>-<task>.json (bench/web_vs_tfjs/run writes
// them from the tuning databases). A target × task without one is still timed on the TensorFlow.js
// side and reported as skipped on webtune's, with the reason from DIR/<target>-<task>.skip when
// there is one; so is one whose artifact's workload is not the task's (other shape or epilogue).
// Prints a table and writes everything (each sample, the devices, the flags) as JSON to --out.
//
// The page (index.html, page.mjs) is served and opened by session.mjs: 127.0.0.1, cross-origin
// isolated (COOP/COEP), so that tfjs wasm can use its threaded SIMD build.

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { parseCommandLine } from '../cli_args.mjs';
import { openSession } from './session.mjs';
import { epilogueSuffix, flopsOf, loadTasks, mathOf } from './tasks.mjs';


const USAGE = `usage: node bench/web_vs_tfjs/bench.mjs --artifacts DIR [--out FILE] [--gl swiftshader|llvmpipe]
    [--workloads FILE,...] [--tasks NAME,...|all] [--targets webgl2,webgpu,wasm] [--rounds 6] [--repeat 5]
    [--tfjs-wasm-threads match|default|N] [--batch 16] [--wasm-runner page|agent] [--wasm-spin-us N] [--chromium PATH]`;
const { values: opts } = parseCommandLine('bench', {
  options: {
    artifacts: { type: 'string' },
    out: { type: 'string', default: '' },
    gl: { type: 'string', default: 'swiftshader' },
    workloads: { type: 'string', default: 'configs/workloads/matmul.json,configs/workloads/resnet18.json' },
    tasks: { type: 'string', default: 'dense512,C2,C5,C8' },
    targets: { type: 'string', default: 'webgl2,webgpu,wasm' },
    rounds: { type: 'string', default: '6' },
    repeat: { type: 'string', default: '5' },
    // Runs per sample of the "batched" mode (both sides).
    batch: { type: 'string', default: '16' },
    // tfjs wasm's thread count: match (webtune's kernel's), default (tfjs's own choice), or N.
    'tfjs-wasm-threads': { type: 'string', default: 'match' },
    // How webtune's wasm kernels run: page (as a package runs them) or agent (as tuned).
    'wasm-runner': { type: 'string', default: 'page' },
    // µs the page runner's helpers poll for the next execution before they block (default: the
    // runtime's, wasm_worker.mjs DEFAULT_SPIN_US).
    'wasm-spin-us': { type: 'string', default: '' },
    chromium: { type: 'string', default: process.env.WEBTUNE_CHROMIUM || '/usr/bin/chromium' },
  },
}, USAGE);
if (!opts.artifacts) {
  console.error('bench: --artifacts DIR is required (webtune artifact outputs, <target>-<task>.json)');
  process.exit(2);
}
const repeat = Number.parseInt(opts.repeat, 10);
const rounds = Number.parseInt(opts.rounds, 10);
const batch = Number.parseInt(opts.batch, 10);
if (!(batch >= 2)) {
  console.error('bench: --batch N needs N ≥ 2 (runs per sample of the batched mode)');
  process.exit(2);
}
const tfjsThreads = opts['tfjs-wasm-threads'];
if (!/^(match|default|[1-9][0-9]*)$/.test(tfjsThreads)) {
  console.error(`bench: --tfjs-wasm-threads takes match, default or a count, not '${tfjsThreads}'`);
  process.exit(2);
}
const wasmRunner = opts['wasm-runner'];
if (wasmRunner !== 'page' && wasmRunner !== 'agent') {
  console.error(`bench: --wasm-runner takes page or agent, not '${wasmRunner}'`);
  process.exit(2);
}
const wasmSpinUs = opts['wasm-spin-us'] === '' ? undefined : Number(opts['wasm-spin-us']);
if (wasmSpinUs !== undefined && !(Number.isInteger(wasmSpinUs) && wasmSpinUs >= 0)) {
  console.error(`bench: --wasm-spin-us takes a whole number of µs, not '${opts['wasm-spin-us']}'`);
  process.exit(2);
}
if (!(repeat >= 1 && rounds >= 1 && repeat * rounds >= 10)) {
  console.error('bench: --rounds R --repeat N need R, N ≥ 1 and R·N ≥ 10 (medians of ≥ 10 samples per side)');
  process.exit(2);
}

// webtune target → the TensorFlow.js backend it is compared with, and issue 14's target ratio
// (issue 5's were the same but wasm ≥ 1×, against tfjs wasm on 1 thread).
const TARGETS = {
  webgl2: { backend: 'webgl', goal: 2 },
  webgpu: { backend: 'webgpu', goal: 3 },
  wasm: { backend: 'wasm', goal: 1.2 },
};
const targets = opts.targets.split(',').filter(Boolean);
for (const t of targets) {
  if (!TARGETS[t]) {
    console.error(`bench: unknown target '${t}' (${Object.keys(TARGETS).join(', ')})`);
    process.exit(2);
  }
}

function readArtifact(target, task) {
  const base = path.join(opts.artifacts, `${target}-${task}`);
  if (fs.existsSync(`${base}.json`)) {
    // The best record and the runners-up that run wrote (<target>-<task>.rank<R>.json).
    const records = [JSON.parse(fs.readFileSync(`${base}.json`, 'utf8'))];
    for (let rank = 2; fs.existsSync(`${base}.rank${rank}.json`); ++rank)
      records.push(JSON.parse(fs.readFileSync(`${base}.rank${rank}.json`, 'utf8')));
    return { records };
  }
  const why = fs.existsSync(`${base}.skip`) ? fs.readFileSync(`${base}.skip`, 'utf8').trim()
    : `no ${base}.json`;
  return { skip: why };
}

/**
 * The (task, target) pairs in the order they are measured: grouped by target, and the wasm rows
 * by the thread count of their best artifact (the one tfjs wasm is given: --tfjs-wasm-threads
 * match), ascending and otherwise in the order given. Each change of that count re-creates
 * tfjs's wasm backend (page.mjs useBackend), and a removed backend's shared memory is not given
 * back to the page: on 2026-11-27, 33 wasm rows alternating between 1 and 2 threads left no
 * address space for a new WebAssembly.Memory after about 18 rows ("could not allocate memory").
 */
function runOrder(tasks, targets) {
  const pairs = [];
  for (const target of targets) {
    for (const w of tasks) {
      const { records } = readArtifact(target, w.name);
      const threads = target === 'wasm' ? (records?.[0]?.artifact?.wasm?.threads ?? 0) : 0;
      pairs.push({ w, target, threads, at: pairs.length });
    }
  }
  return pairs.sort((a, b) => (a.target === b.target ? a.threads - b.threads || a.at - b.at : a.at - b.at));
}

/**
 * Milliseconds of idleness before each side's measurement. Both sides' threads poll for a while
 * after their last op before they sleep: webtune's wasm helpers up to 2 ms (runtime/
 * wasm_worker.mjs), XNNPACK's pthreadpool under tfjs wasm a million polls with a pause
 * instruction each, tens of ms. On a 2-core machine a side measured while the other's threads
 * still poll loses a core: on 2026-11-27, with no pause, whole rounds of 40–60 µs webtune kernels
 * took 3.5–4.5 ms a sample right after tfjs had run (and tfjs samples 0.6–4.5 ms right after
 * webtune), and 50 ms was not enough.
 */
const SETTLE_MS = 200;
const settle = () => new Promise((resolve) => setTimeout(resolve, SETTLE_MS));

function fmt(x, digits = 2) {
  return typeof x === 'number' && Number.isFinite(x) ? x.toFixed(digits) : '-';
}

function median(values) {
  const s = [...values].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/** One side's rounds ({costs_s, ...} each) merged: every sample, their median, GFLOP/s. */
function mergeRounds(results, flops) {
  const costs = results.flatMap((r) => r.costs_s);
  const m = median(costs);
  return {
    ...results[0], costs_s: costs, median_s: m, gflops: flops / m / 1e9,
    round_gflops: results.map((r) => r.gflops),
  };
}

const MODES = ['fence', 'readback', 'batched'];

function ratioCell(m) {
  if (!m || m.ratio === null) return '-';
  return `${fmt(m.ratio)}×`;
}

function spreadCell(m) {
  return m?.round_ratios?.length ? `${fmt(Math.min(...m.round_ratios))}–${fmt(Math.max(...m.round_ratios))}×` : '-';
}

/** The table: per row, the fence-only, read-back and batched figures side by side. */
function printTable(rows) {
  const head = ['task', 'target', 'fence: webtune', 'tfjs', 'ratio', 'rounds',
    'read-back: webtune', 'tfjs', 'ratio', 'rounds', `batched ×${batch}: webtune`, 'tfjs', 'ratio', 'rounds',
    'target', 'met (fence / read-back / batched)'];
  const lines = [head, ...rows.map((r) => {
    const group = (m) => [fmt(m.webtune?.gflops), fmt(m.tfjs?.gflops), ratioCell(m), spreadCell(m)];
    return [
      `${r.task}${r.epilogue}`, `${r.target} vs tfjs ${r.tfjs_backend}${r.tfjs_threads ? ` (${r.tfjs_threads}t)` : ''}`,
      ...group(r.modes.fence), ...group(r.modes.readback), ...group(r.modes.batched),
      `≥ ${r.target_ratio}×`,
      r.skipped ? `skipped: ${r.skipped}` : MODES.map((m) => (r.modes[m].met ? 'yes' : 'no')).join(' / '),
    ];
  })];
  const width = head.map((_, c) => Math.max(...lines.map((l) => l[c].length)));
  console.log('GFLOP/s (main op FLOPs / median seconds); ratio = webtune / tfjs; rounds = spread of the per-round ratios');
  for (const l of lines) console.log(l.map((cell, c) => cell.padEnd(width[c])).join('  ').trimEnd());
}

/**
 * The fastest of the tuner's finalists (its best records, measured minutes apart on a machine
 * whose speed drifts up to 2×), re-measured here side by side: FINALIST_ROUNDS rounds, each
 * timing every finalist FINALIST_REPEAT times in batches of `batch` runs (the "batched" mode:
 * as the tuner times a trial, and the steadiest of the three); the pick has the lowest median.
 * Until 2026-11-28 the finalists were timed fence-only, 3 samples a round: on wasm that pick
 * flipped between runs (PW17's configs 6317 and 6422 ran at 67–74 and 46–53 GFLOP/s batched, and
 * 6422 was kept in 4 of 17 runs; PW6's 5837 and 5864 at 56–82 and 34–65). Resolves to {record,
 * finalists: [{rank, config_index, tuned_gflops, gflops}]}; a finalist that fails is left out
 * (and listed with its error).
 */
const FINALIST_ROUNDS = 3;
const FINALIST_REPEAT = 5;
async function pickFinalist(page, records) {
  if (records.length === 1) return { record: records[0], finalists: [] };
  const samples = records.map(() => []);
  const errors = records.map(() => null);
  for (let round = 0; round < FINALIST_ROUNDS; ++round) {
    for (let i = 0; i < records.length; ++i) {
      if (errors[i]) continue;
      try {
        const r = await page.evaluate((rec, n, b) => window.bench.runWebtune(rec, { repeat: n, mode: 'batched', batch: b }),
          records[i], FINALIST_REPEAT, batch);
        samples[i].push(...r.costs_s);
      } catch (e) {
        errors[i] = e.message;
      }
    }
  }
  const finalists = records.map((rec, i) => ({
    rank: rec.rank ?? i + 1, config_index: rec.config_index, tuned_gflops: rec.gflops,
    gflops: samples[i].length ? rec.flops / median(samples[i]) / 1e9 : null, error: errors[i],
  }));
  let pick = -1;
  for (let i = 0; i < records.length; ++i) {
    if (finalists[i].gflops !== null && (pick < 0 || finalists[i].gflops > finalists[pick].gflops)) pick = i;
  }
  return { record: pick < 0 ? records[0] : records[pick], finalists };
}

/** The thread count tfjs wasm gets for a row whose webtune kernel is `record` (0: its own). */
function tfjsThreadsFor(record) {
  if (tfjsThreads === 'default') return 0;
  if (tfjsThreads !== 'match') return Number.parseInt(tfjsThreads, 10);
  return record?.artifact?.wasm?.threads ?? 0;
}

async function main() {
  const tasks = loadTasks(opts.workloads.split(',').filter(Boolean), opts.tasks.split(',').filter(Boolean));
  const session = await openSession({ gl: opts.gl, chromium: opts.chromium });
  const { page, args } = session;
  const rows = [];
  let env = {};
  try {
    env = await page.evaluate(() => window.bench.environment());
    env.chromium = await session.browser.version();
    env.flags = args;
    env.gl = opts.gl;
    env.tfjs_wasm_threads_requested = tfjsThreads;
    env.wasm_runner = wasmRunner;
    env.wasm_spin_us = wasmSpinUs ?? 'default';
    console.error(`bench: ${env.chromium}, ${opts.gl}, WebGL2 ${env.webgl2_renderer}, WebGPU ${env.webgpu_adapter}, ` +
      `cross-origin isolated: ${env.cross_origin_isolated}`);

    for (const { w, target } of runOrder(tasks, targets)) {
      const flops = flopsOf(w);
      {
        const { backend, goal } = TARGETS[target];
        const row = {
          task: w.name, epilogue: epilogueSuffix(w), workload: w, target, tfjs_backend: backend,
          target_ratio: goal, flops, skipped: null, tfjs_ops: null, tfjs_threads: null,
          modes: Object.fromEntries(MODES.map((m) => [m, { webtune: null, tfjs: null, ratio: null, met: null }])),
        };
        const { records, skip } = readArtifact(target, w.name);
        let record = null;
        if (records) {
          // An artifact tuned for other math (shape or epilogue) than the task is not compared.
          const other = records.find((r) => JSON.stringify(mathOf(r.workload)) !== JSON.stringify(mathOf(w)));
          if (other) {
            row.skipped = `the artifact's workload ${JSON.stringify(other.workload)} is not task ${w.name}'s`;
          } else {
            const picked = await pickFinalist(page, records);
            record = picked.record;
            row.finalists = picked.finalists;
            if (picked.finalists.length) {
              console.error(`bench: ${w.name} ${target}: finalists ${picked.finalists.map((f) =>
                `#${f.rank} (config ${f.config_index}) ${fmt(f.gflops)}`).join(', ')} GFLOP/s; ` +
                `keeping config ${record.config_index}`);
            }
          }
        } else {
          row.skipped = skip;
        }
        const threads = backend === 'wasm' ? tfjsThreadsFor(record) : 0;
        if (backend === 'wasm') row.tfjs_threads = threads || 'default';
        const ours = Object.fromEntries(MODES.map((m) => [m, []]));
        const theirs = Object.fromEntries(MODES.map((m) => [m, []]));
        let tfjsError = null;
        let tfjsRuns = 0;
        const runOurs = async (mode) => {
          if (!record || row.skipped) return;
          await settle();
          try {
            ours[mode].push(await page.evaluate((rec, n, md, b, wr, su) => window.bench.runWebtune(rec, { repeat: n, mode: md, batch: b, wasmRunner: wr, wasmSpinUs: su }),
              record, repeat, mode, batch, wasmRunner, wasmSpinUs));
          } catch (e) {
            row.skipped = `webtune run failed (${mode}): ${e.message}`;
          }
        };
        const runTheirs = async (mode) => {
          if (tfjsError) return;
          await settle();
          try {
            // The first run warms the op up (shader compiles, tier-up); later ones only a little.
            const warmup = tfjsRuns++ === 0 ? 5 : 2;
            theirs[mode].push(await page.evaluate((b, wl, f, n, wu, md, t, bt) =>
              window.bench.runTfjs(b, wl, f, { repeat: n, warmup: wu, mode: md, threads: t, batch: bt }),
            backend, w, flops, repeat, warmup, mode, threads, batch));
          } catch (e) {
            tfjsError = e.message;
            row.skipped = row.skipped || `tfjs ${backend} failed: ${e.message}`;
          }
        };
        for (let round = 0; round < rounds && !tfjsError; ++round) {
          // Both modes in every round; the side that goes first alternates.
          for (const mode of MODES) {
            if (round % 2 === 0) {
              await runOurs(mode);
              await runTheirs(mode);
            } else {
              await runTheirs(mode);
              await runOurs(mode);
            }
          }
        }
        for (const mode of MODES) {
          const m = row.modes[mode];
          if (ours[mode].length && !row.skipped) {
            m.webtune = {
              ...mergeRounds(ours[mode], flops), rank: record.rank ?? 1, config_index: record.config_index,
              config: record.config, job: record.job, trials: record.trials, tuned_gflops: record.gflops,
              device_key: record.device_key, threads: record.artifact?.wasm?.threads,
            };
          }
          if (theirs[mode].length && !tfjsError) {
            m.tfjs = mergeRounds(theirs[mode], flops);
            row.tfjs_ops = m.tfjs.ops;
          }
          if (m.webtune?.gflops && m.tfjs?.gflops && ours[mode].length === theirs[mode].length) {
            m.ratio = m.webtune.gflops / m.tfjs.gflops;
            m.met = m.ratio >= goal;
            m.round_ratios = ours[mode].map((o, i) => o.gflops / theirs[mode][i].gflops);
          }
        }
        if (tfjsError) row.tfjs_error = tfjsError;
        console.error(`bench: ${w.name}${row.epilogue} ${target}: ` + MODES.map((mode) => {
          const m = row.modes[mode];
          return `${mode}: webtune ${fmt(m.webtune?.gflops)}, tfjs ${fmt(m.tfjs?.gflops)} GFLOP/s`;
        }).join('; ') + `${row.tfjs_ops ? ` [tfjs: ${row.tfjs_ops}]` : ''}${row.skipped ? ` (${row.skipped})` : ''}`);
        rows.push(row);
      }
    }
  } finally {
    await session.close();
  }
  // The table and the JSON keep the order of the tasks as given.
  const place = (row) => tasks.findIndex((w) => w.name === row.task) * targets.length + targets.indexOf(row.target);
  rows.sort((a, b) => place(a) - place(b));
  printTable(rows);
  const result = {
    date: new Date().toISOString(), host: { cpus: os.cpus().length, platform: os.platform(), release: os.release() },
    env, rounds, repeat, batch, modes: MODES, workloads: opts.workloads, rows,
  };
  if (opts.out) {
    fs.mkdirSync(path.dirname(opts.out), { recursive: true });
    fs.writeFileSync(opts.out, `${JSON.stringify(result, null, 1)}\n`);
    console.error(`bench: wrote ${opts.out}`);
  }
}

main().catch((e) => {
  console.error(`bench: ${e.stack || e.message}`);
  process.exit(1);
});
