#!/usr/bin/env node
// summarize.mjs — a markdown table from several bench.mjs result files (runs of the same rows):
//
//   node bench/web_vs_tfjs/summarize.mjs RUN1.json RUN2.json ... [--old OLD1.json,OLD2.json,...]
//
// Per row (task + epilogue, target): for each mode (fence, read-back) the ratio of every run
// and their median; the median over runs of each side's read-back cost (median read-back
// sample − median fence sample, ms); tfjs wasm's thread count. With --old, files of the former
// method (issue 5: one `ratio` per row, tfjs timed with read-back, webtune fence-only, tfjs
// wasm on its default thread count) give an "old" column: their median ratio per row.

import fs from 'node:fs';

import { parseCommandLine } from '../cli_args.mjs';

const { values: opts, positionals: files } = parseCommandLine('summarize', {
  options: { old: { type: 'string', default: '' } }, allowPositionals: true,
}, 'usage: node bench/web_vs_tfjs/summarize.mjs RUN1.json [RUN2.json ...] [--old OLD1.json,OLD2.json,...]');
if (!files.length) {
  console.error('summarize: name one or more bench.mjs result files');
  process.exit(2);
}

function median(values) {
  const s = values.filter((v) => typeof v === 'number' && Number.isFinite(v)).sort((a, b) => a - b);
  if (!s.length) return null;
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}
const x = (v) => (v === null || v === undefined ? '-' : `${v.toFixed(2)}×`);
const ms = (v) => (v === null || v === undefined ? '-' : `${(v * 1e3).toFixed(1)}`);

const runs = files.map((f) => JSON.parse(fs.readFileSync(f, 'utf8')));
const old = opts.old ? opts.old.split(',').filter(Boolean).map((f) => JSON.parse(fs.readFileSync(f, 'utf8'))) : [];
const key = (r) => `${r.task}${r.epilogue || ''}|${r.target}`;
const order = [];
const byKey = new Map();
for (const run of runs) {
  for (const r of run.rows) {
    if (!byKey.has(key(r))) {
      byKey.set(key(r), []);
      order.push(key(r));
    }
    byKey.get(key(r)).push(r);
  }
}
const oldRatios = new Map();
for (const run of old) {
  for (const r of run.rows) {
    if (!oldRatios.has(key(r))) oldRatios.set(key(r), []);
    oldRatios.get(key(r)).push(r.ratio);
  }
}

const runsHead = runs.map((_, i) => `${i + 1}`).join(' / ');
const head = [
  'task', 'target', ...(old.length ? ['old ratio (median)'] : []),
  `fence ratio, runs ${runsHead}`, 'median', `read-back ratio, runs ${runsHead}`, 'median',
  'read-back cost ms, webtune / tfjs', 'tfjs wasm threads',
];
console.log(`| ${head.join(' | ')} |`);
console.log(`| ${head.map(() => '---').join(' | ')} |`);
for (const k of order) {
  const rows = byKey.get(k);
  const [task, target] = k.split('|');
  const ratios = (mode) => rows.map((r) => r.modes?.[mode]?.ratio ?? null);
  const cost = (side) => median(rows.map((r) => {
    const f = r.modes?.fence?.[side]?.median_s;
    const b = r.modes?.readback?.[side]?.median_s;
    return f && b ? b - f : null;
  }));
  const threads = [...new Set(rows.map((r) => r.tfjs_threads).filter((t) => t !== null && t !== undefined))].join(', ');
  console.log(`| ${[
    task, target, ...(old.length ? [x(median(oldRatios.get(k) || []))] : []),
    ratios('fence').map(x).join(' / '), `**${x(median(ratios('fence')))}**`,
    ratios('readback').map(x).join(' / '), `**${x(median(ratios('readback')))}**`,
    `${ms(cost('webtune'))} / ${ms(cost('tfjs'))}`, threads || '-',
  ].join(' | ')} |`);
}
