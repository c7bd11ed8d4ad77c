#!/usr/bin/env node
// summarize.mjs — markdown tables from bench.mjs result files (runs of bench/model_vs_web):
//
//   node bench/model_vs_web/summarize.mjs RUN1.json [RUN2.json ...]
//
// Table 1, per model × target × engine: the median end-to-end latency of each run (ms) and their
// median, the spread of the per-round medians over all runs, the output check, and webtune's
// speedup over the engine (anchor median ÷ webtune median, from the medians over runs; "—"
// without a webtune package). An engine bench.mjs refused in a run reads "refused" there, its
// reason in the check column. Table 2, per model × target: webtune, the faster anchor, the
// speedup against it and issue 16's goal. Then each run's date, load averages, threads (webtune's,
// and the count each wasm anchor ran) and Chromium.

import fs from 'node:fs';

import { parseCommandLine } from '../cli_args.mjs';

import { ROWS, median, rowSummary } from './bench.mjs';

const { positionals: files } = parseCommandLine('summarize', { allowPositionals: true },
  'usage: node bench/model_vs_web/summarize.mjs RUN1.json [RUN2.json ...]');
if (!files.length) {
  console.error('summarize: name one or more bench.mjs result files');
  process.exit(2);
}
const runs = files.map((f) => JSON.parse(fs.readFileSync(f, 'utf8')));
const ms = (v) => (Number.isFinite(v) ? (v >= 100 ? v.toFixed(0) : v.toFixed(1)) : '—');
const x = (v) => (Number.isFinite(v) ? `${v.toFixed(2)}×` : '—');

// model → target → engine → [per-run entries]
const models = [];
const byModel = new Map();
for (const run of runs) {
  for (const m of run.models) {
    if (!byModel.has(m.model)) {
      byModel.set(m.model, new Map());
      models.push(m.model);
    }
    for (const [engine, r] of Object.entries(m.engines)) {
      const map = byModel.get(m.model);
      if (!map.has(engine)) map.set(engine, []);
      map.get(engine).push(r);
    }
  }
}

const runsHead = runs.map((_, i) => `${i + 1}`).join(' / ');
console.log(`| model | target | engine | median ms, runs ${runsHead} | median | round medians ms | check: max abs error (tolerance) | webtune speedup |`);
console.log('| --- | --- | --- | --- | --- | --- | --- | --- |');
const verdicts = [];
for (const model of models) {
  const engines = byModel.get(model);
  for (const target of Object.keys(ROWS)) {
    const merged = {};
    for (const engine of ROWS[target].engines) {
      const entries = engines.get(engine);
      if (!entries) continue;
      const medians = entries.map((r) => r.median_ms ?? null);
      merged[engine] = { median_ms: median(medians.filter((v) => v !== null)), entries, medians };
    }
    if (!Object.keys(merged).length) continue;
    const row = rowSummary(target, merged);
    for (const engine of ROWS[target].engines) {
      const m = merged[engine];
      if (!m) continue;
      const rounds = m.entries.flatMap((r) => r.round_medians_ms ?? []);
      const checks = m.entries.filter((r) => r.check).map((r) => `${r.check.max_abs_err.toExponential(1)}${r.check.ok ? '' : ' **wrong**'}`);
      const tol = m.entries.find((r) => r.check)?.check.tolerance;
      const errors = [...new Set(m.entries.filter((r) => r.error && !r.check).map((r) => (r.refused ? `refused: ${r.refused}` : r.error)))];
      const ranRefused = [...new Set(m.entries.filter((r) => r.refused && r.check?.ok).map((r) => `refused: ${r.refused}`))];
      const cells = m.medians.map((v, i) => (v === null ? (m.entries[i].check && !m.entries[i].check.ok ? 'wrong' : m.entries[i].refused ? 'refused' : '—') : ms(v)));
      console.log(`| ${[
        model, target, engine, cells.join(' / '), `**${ms(m.median_ms)}**`,
        rounds.length ? `${ms(Math.min(...rounds))}–${ms(Math.max(...rounds))}` : '—',
        checks.length ? `${[...new Set(checks)].join(', ')} (${tol?.toExponential(1)})${ranRefused.length ? `; ${ranRefused.join('; ').slice(0, 80)}` : ''}` : (errors.join('; ').slice(0, 120) || '—'),
        engine.startsWith('webtune') ? '' : x(row.speedups[engine]),
      ].join(' | ')} |`);
    }
    verdicts.push(`| ${model} | ${target} | ${ms(row.webtune_ms)} | ${row.fastest_anchor ?? '—'} ${ms(merged[row.fastest_anchor]?.median_ms)} | ${x(row.speedup_vs_fastest)} | ≥ ${row.goal}× | ${row.met === null ? '—' : row.met ? 'yes' : 'no'} |`);
  }
}
console.log('');
console.log('| model | target | webtune ms | faster anchor, ms | speedup | goal | met |');
console.log('| --- | --- | --- | --- | --- | --- | --- |');
for (const v of verdicts) console.log(v);
console.log('');
/** The wasm anchors' threads of a run: per model and anchor, or the one count of older runs. */
function anchorThreads(run) {
  if (run.anchor_threads === undefined) return `on ${run.threads} threads`;
  const chosen = run.models.flatMap((m) => ['ort-wasm', 'tfjs-wasm']
    .filter((e) => m.engines[e]?.threads).map((e) => `${m.model} ${e} ${m.engines[e].threads.chosen ?? '—'}`));
  const how = run.anchor_threads === 'best' ? 'the fastest count of each' : `--anchor-threads ${run.anchor_threads}`;
  return `${how}${chosen.length ? ` (${chosen.join(', ')})` : ''}`;
}

runs.forEach((run, i) => {
  const loads = run.models.flatMap((m) => m.loadavg.map((l) => l.loadavg[0]));
  console.log(`- run ${i + 1}: ${run.date} – ${run.finished ?? '?'}, ${run.env?.chromium ?? '?'}, ${run.rounds} rounds × ${run.runs} runs, ` +
    `webtune wasm threads ${run.threads} (${run.threads_from}), wasm anchors ${anchorThreads(run)}, load average (1 min) ${loads.length ? `${Math.min(...loads).toFixed(1)}–${Math.max(...loads).toFixed(1)}` : '?'}`);
});
