// floor.mjs — what a bench.mjs row short of its target in the fence-only or read-back column
// would need, and whether any kernel could give it (floor_report.mjs prints it). Pure functions;
// bench.test.mjs tests them.
//
// For a short cell (a row and a column):
//   fixed_s        what the column adds to a kernel, per side: the column's median minus the
//                  batched median (the wait, the round trip, the download and its copy into a new
//                  array). The batched median stands for the kernel alone.
//   zero_kernel    the ratio a kernel taking no time at all would reach: tfjs's median over
//                  webtune's fixed cost.
//   need_s         the batched kernel time webtune would need: tfjs's median / target − fixed.
//   floor_s        with a probe_device_floor.mjs output: max(copy, FLOPs / peak multiply-add
//                  rate), the batched time no kernel for the row beats on that device; else null.
//   of_peak        the row's FLOPs over need_s as a share of the peak rate (null without a floor).
//   verdict        'none can'    need_s ≤ 0: the fixed cost alone is over tfjs's time / target;
//                  'below floor' 0 < need_s < floor_s: no kernel the device can run meets it;
//                  'faster'      a kernel speedup × faster than today's would (need_s ≥ floor_s).

/**
 * The short cells of bench.mjs output `run` ({rows: [{task, target, target_ratio, flops, modes:
 * {fence|readback|batched: {webtune: {median_s}, tfjs: {median_s}}}}]}), with `floor` the
 * output of probe_device_floor.mjs or null. Rows without a batched pair are left out.
 */
export function floorCells(run, floor = null) {
  const cells = [];
  for (const row of run.rows || []) {
    if (row.skipped || !row.modes?.batched?.webtune || !row.modes?.batched?.tfjs) continue;
    const target = row.target_ratio;
    const wb = row.modes.batched.webtune.median_s;
    const tb = row.modes.batched.tfjs.median_s;
    const probe = floor?.rows?.[row.task];
    const copy = probe?.[row.target]?.copy_ms;
    const peak = floor?.alu_gflops?.[row.target];
    const floorS = copy != null && peak ? Math.max(copy / 1e3, probe.flops / (peak * 1e9)) : null;
    for (const mode of ['fence', 'readback']) {
      const m = row.modes[mode];
      if (!m?.webtune || !m?.tfjs) continue;
      const w = m.webtune.median_s;
      const t = m.tfjs.median_s;
      if (t / w >= target) continue;
      const fixed = w - wb;
      const need = t / target - fixed;
      let verdict = 'faster';
      if (need <= 0) verdict = 'none can';
      else if (floorS !== null && need < floorS) verdict = 'below floor';
      cells.push({
        task: row.task, target: row.target, mode, ratio: t / w, target_ratio: target,
        fixed_s: { webtune: fixed, tfjs: t - tb }, zero_kernel: fixed > 0 ? t / fixed : Infinity,
        kernel_s: wb, need_s: need, floor_s: floorS,
        of_peak: peak && need > 0 ? row.flops / need / 1e9 / peak : null,
        speedup: need > 0 ? wb / need : null, verdict,
      });
    }
  }
  return cells;
}
