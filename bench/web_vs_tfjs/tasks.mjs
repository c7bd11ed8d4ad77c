// tasks.mjs — the bench's tasks: looked up by name in webtune workload files, their FLOPs and
// what they compute (shape and epilogue) in a canonical form, so that bench.mjs can refuse an
// artifact tuned for other math than the task's. Pure functions; tasks.test.mjs tests them.

import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/**
 * The tasks named by --tasks, from the --workloads files (webtune workload JSON: {tasks: [...]},
 * each a workload with a name and an optional "epilogue"); `names` ['all'] is every task of the
 * files, in file order. Throws on an unknown task, or a name defined differently by two files.
 */
export function loadTasks(files, names) {
  const byName = new Map();
  for (const file of files) {
    let doc;
    try {
      doc = JSON.parse(fs.readFileSync(path.resolve(root, file), 'utf8'));
    } catch (e) {
      throw new Error(`cannot read workload file ${file}: ${e.message}`);
    }
    if (!Array.isArray(doc.tasks)) throw new Error(`${file}: no "tasks" list`);
    for (const t of doc.tasks) {
      const seen = byName.get(t.name);
      if (seen && JSON.stringify(mathOf(seen.task)) !== JSON.stringify(mathOf(t))) {
        throw new Error(`task '${t.name}' is defined differently in ${seen.file} and ${file}`);
      }
      byName.set(t.name, { task: t, file });
    }
  }
  if (names.length === 1 && names[0] === 'all') {
    return [...byName.values()].map((w) => ({ ...w.task, workload_file: w.file }));
  }
  return names.map((name) => {
    const w = byName.get(name);
    if (!w) throw new Error(`unknown task '${name}' (not in ${files.join(', ')})`);
    return { ...w.task, workload_file: w.file };
  });
}

/** Output height and width of a conv2d / depthwise conv2d workload (NHWC, padding `pad` a side). */
function outputHW(w) {
  const S = w.S ?? w.R;
  const stride = w.stride ?? 1;
  const pad = w.pad ?? 0;
  return {
    oh: Math.floor((w.H + 2 * pad - w.R) / stride) + 1,
    ow: Math.floor((w.W + 2 * pad - S) / stride) + 1,
  };
}

/** The FLOPs of the main op (an epilogue adds none, as webtune counts them). */
export function flopsOf(w) {
  if (w.op === 'dense') return 2 * w.M * w.N * w.K;
  const S = w.S ?? w.R;
  const { oh, ow } = outputHW(w);
  if (w.op === 'depthwise_conv2d') return 2 * (w.N ?? 1) * w.C * oh * ow * w.R * S;
  return 2 * (w.N ?? 1) * w.K * oh * ow * w.C * w.R * S;
}

/** Floats of the main op's data input and output: {in_floats, out_floats} (weights left out). */
export function tensorFloats(w) {
  if (w.op === 'dense') return { in_floats: w.M * w.K, out_floats: w.M * w.N };
  const { oh, ow } = outputHW(w);
  const k = w.op === 'depthwise_conv2d' ? (w.K ?? w.C) : w.K;
  return { in_floats: (w.N ?? 1) * w.H * w.W * w.C, out_floats: (w.N ?? 1) * oh * ow * k };
}

/**
 * What a workload computes, in a canonical form (defaults filled in, names and occurrences
 * dropped), so that a task and an artifact's workload can be compared: the same shape and the
 * same epilogue (codegen/include/codegen/epilogue.hpp's JSON defaults).
 */
export function mathOf(w) {
  const e = w.epilogue || {};
  const activation = e.activation || 'none';
  const epilogue = {
    bias: Boolean(e.bias), activation,
    clip: activation === 'clip' ? [e.clip_min ?? 0, e.clip_max ?? 6] : null,
    residual: e.residual || 'none',
  };
  if (w.op === 'dense') return { op: w.op, M: w.M, N: w.N, K: w.K, epilogue };
  return {
    op: w.op, N: w.N ?? 1, C: w.C, H: w.H, W: w.W, K: w.op === 'depthwise_conv2d' ? (w.K ?? w.C) : w.K,
    R: w.R, S: w.S ?? w.R, stride: w.stride ?? 1, pad: w.pad ?? 0, epilogue,
  };
}

/** The epilogue as webtune's key suffix ("+bias+relu"; "" when empty), for the table. */
export function epilogueSuffix(w) {
  const e = mathOf(w).epilogue;
  let s = '';
  if (e.bias) s += '+bias';
  if (e.residual === 'before_activation') s += '+residual';
  if (e.activation === 'clip') s += `+clip(${e.clip[0]},${e.clip[1]})`;
  else if (e.activation !== 'none') s += `+${e.activation}`;
  if (e.residual === 'after_activation') s += '+residual';
  return s;
}
