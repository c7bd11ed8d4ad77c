#!/usr/bin/env node
// floor_report.mjs — for every row of a bench.mjs run short of its target in the fence-only or
// read-back column: the fixed cost of the column per side, the ratio a 0 ms kernel would reach,
// the batched kernel time webtune would need, the device's floor for the row (with --floor, a
// probe_device_floor.mjs output), the share of the peak multiply-add rate the need implies, and
// a verdict (floor.mjs says how each is computed). Prints a Markdown table per run to stdout and
// a count by verdict. The figures are one run's medians: a row near a boundary moves with noise.
//
//   node bench/web_vs_tfjs/floor_report.mjs --run RUN.json [--run RUN.json ...] [--floor FLOOR.json]
import fs from 'node:fs';
import { floorCells } from './floor.mjs';

const args = process.argv.slice(2);
const runs = [];
let floor = null;
for (let i = 0; i < args.length; ++i) {
  if (args[i] === '--run' && i + 1 < args.length) runs.push(args[++i]);
  else if (args[i] === '--floor' && i + 1 < args.length) floor = JSON.parse(fs.readFileSync(args[++i], 'utf8'));
  else {
    console.error(`usage: floor_report.mjs --run RUN.json [--run ...] [--floor FLOOR.json] (not '${args[i]}')`);
    process.exit(2);
  }
}
if (runs.length === 0) {
  console.error('floor_report.mjs: give at least one --run');
  process.exit(2);
}

const ms = (s) => (s == null ? '—' : (s * 1e3).toFixed(3));
for (const file of runs) {
  const cells = floorCells(JSON.parse(fs.readFileSync(file, 'utf8')), floor);
  const counts = {};
  console.log(`\n### ${file}\n`);
  console.log('| row | column | ratio | fixed webtune / tfjs (ms) | 0 ms kernel | kernel now (ms) | need (ms) | floor (ms) | of peak | verdict |');
  console.log('| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |');
  for (const c of cells) {
    const verdict = c.verdict === 'faster' ? `${c.speedup.toFixed(2)}× faster` : c.verdict;
    counts[c.verdict] = (counts[c.verdict] || 0) + 1;
    console.log(`| ${c.task} | ${c.mode} | ${c.ratio.toFixed(2)} | ${ms(c.fixed_s.webtune)} / ${ms(c.fixed_s.tfjs)} | ${c.zero_kernel.toFixed(2)} | ${ms(c.kernel_s)} | ${c.need_s > 0 ? ms(c.need_s) : '—'} | ${ms(c.floor_s)} | ${c.of_peak != null ? `${(c.of_peak * 100).toFixed(0)} %` : '—'} | ${verdict} |`);
  }
  console.log(`\nshort cells by verdict: ${Object.entries(counts).map(([k, v]) => `${k} ${v}`).join(', ') || 'none'}`);
}
