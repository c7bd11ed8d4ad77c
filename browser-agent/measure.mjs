// measure.mjs — what every executor shares: AutoTVM's error numbers, MeasureResult objects
// (codegen/include/codegen/measure.hpp), the sampled reference check (codegen/reference.cpp) and
// the workload sizes the seeded inputs need (codegen/include/codegen/workload.hpp).

/** AutoTVM's MeasureErrorNo, as the tracker protocol carries it. */
export const ErrorNo = Object.freeze({
  NO_ERROR: 0,
  INSTANTIATION: 1,
  COMPILE_HOST: 2,
  COMPILE_DEVICE: 3,
  RUNTIME_DEVICE: 4,
  WRONG_ANSWER: 5,
  BUILD_TIMEOUT: 6,
  RUN_TIMEOUT: 7,
  UNKNOWN: 8,
});

/** A failure inside a trial; executors throw it and the agent turns it into a result. */
export class MeasureError extends Error {
  constructor(errorNo, message) {
    super(message);
    this.errorNo = errorNo;
  }
}

/** A MeasureResult JSON object. `costs` in seconds; `allCost` in seconds. */
export function makeResult(errorNo, message, costs, allCost) {
  return {
    error_no: errorNo,
    message: message || '',
    costs: errorNo === ErrorNo.NO_ERROR ? costs : [],
    all_cost: allCost,
    timestamp: Date.now() / 1000,
  };
}

function outHW(w) {
  return [Math.floor((w.H + 2 * w.pad - w.R) / w.stride) + 1,
          Math.floor((w.W + 2 * w.pad - w.S) / w.stride) + 1];
}

/** Element counts {data, weight, output} of a workload in its JSON form. */
export function workloadSizes(w) {
  if (w.op === 'dense') return { data: w.M * w.K, weight: w.K * w.N, output: w.M * w.N };
  const [oh, ow] = outHW(w);
  if (w.op === 'conv2d') {
    return { data: w.N * w.C * w.H * w.W, weight: w.K * w.C * w.R * w.S, output: w.N * w.K * oh * ow };
  }
  if (w.op === 'depthwise_conv2d') {
    return { data: w.N * w.C * w.H * w.W, weight: w.C * w.R * w.S, output: w.N * w.C * oh * ow };
  }
  throw new MeasureError(ErrorNo.INSTANTIATION, `unknown workload op '${w.op}'`);
}

/** Shapes [data, weight] of a workload in its JSON form (row-major, see workload.hpp). */
export function inputShapes(w) {
  if (w.op === 'dense') return [[w.M, w.K], [w.K, w.N]];
  if (w.op === 'conv2d') return [[w.N, w.C, w.H, w.W], [w.K, w.C, w.R, w.S]];
  if (w.op === 'depthwise_conv2d') return [[w.N, w.C, w.H, w.W], [w.C, 1, w.R, w.S]];
  throw new MeasureError(ErrorNo.INSTANTIATION, `unknown workload op '${w.op}'`);
}

/**
 * The soft job timeout, checked between timed batches (work in flight cannot be interrupted):
 * throws RUN_TIMEOUT once the job is cancelled (`shouldStop()` is true) or more than
 * `input.options.timeout_s` seconds (default 10; 0 or less: no limit) have passed since
 * `startMs` (a performance.now() time). `timedRuns` and `lastRunS` (seconds) go into the message.
 */
export function checkJobDeadline({ input, start: startMs, shouldStop }, timedRuns, lastRunS) {
  const limit = input.options?.timeout_s ?? 10;
  if (shouldStop()) throw new MeasureError(ErrorNo.RUN_TIMEOUT, 'the job was cancelled or its time ran out');
  if (limit <= 0) return;
  const elapsed = (performance.now() - startMs) / 1e3;
  if (elapsed <= limit) return;
  let message = `measurement ran past its timeout of ${limit} s (${elapsed.toPrecision(4)} s`;
  if (timedRuns > 0) message += ` after ${timedRuns} timed runs of about ${(lastRunS * 1e3).toPrecision(4)} ms`;
  throw new MeasureError(ErrorNo.RUN_TIMEOUT, `${message})`);
}

/**
 * Checks that `artifact` feeds exactly the two inputs of `workload` (JSON form) with their
 * shapes, unpacked (plain row-major buffers, as compute and wasm kernels read them); throws
 * INSTANTIATION naming what differs. `reader` names what reads them in the message
 * ("WGSL kernels read plain row-major buffers").
 */
export function checkPlainInputs(artifact, workload, reader) {
  const shapes = inputShapes(workload);
  if (!Array.isArray(artifact.inputs) || artifact.inputs.length !== 2) {
    throw new MeasureError(ErrorNo.INSTANTIATION,
      `the artifact has ${artifact.inputs?.length ?? 0} input layouts; the runtime feeds exactly 2 (data, weight)`);
  }
  artifact.inputs.forEach((layout, i) => {
    if (JSON.stringify(layout.shape) !== JSON.stringify(shapes[i])) {
      throw new MeasureError(ErrorNo.INSTANTIATION,
        `artifact input ${i} has shape [${layout.shape}] but the workload's ${i === 0 ? 'data' : 'weight'} is [${shapes[i]}]`);
    }
    if (layout.pack_axis !== -1 && layout.pack_axis !== undefined) {
      throw new MeasureError(ErrorNo.INSTANTIATION, `input ${i} is packed along axis ${layout.pack_axis}; ${reader}`);
    }
  });
}

// C++ streams print doubles with 6 significant digits ("%g"); keep messages alike.
function g(x) {
  if (!Number.isFinite(x)) return String(x).toLowerCase();
  return String(Number(x.toPrecision(6)));
}

/**
 * Compares `output` (row-major Float32Array) with reference samples [index, value, abs_sum,
 * tolerance]: |y − value| ≤ tolerance, NaN and infinities never pass. Returns {ok, mismatches,
 * message} like check_samples in codegen/reference.cpp.
 */
export function checkSamples(output, samples) {
  let mismatches = 0;
  let msg = '';
  for (const [index, value, , tolerance] of samples) {
    if (index < 0 || index >= output.length) {
      ++mismatches;
      if (mismatches <= 4) msg += `output[${index}] missing; `;
      continue;
    }
    const y = output[index];
    if (Number.isFinite(y) && Math.abs(y - value) <= tolerance) continue;
    ++mismatches;
    if (mismatches <= 4) msg += `output[${index}] = ${g(y)}, expected ${g(value)} ± ${g(tolerance)}; `;
  }
  if (mismatches === 0) return { ok: true, mismatches: 0, message: '' };
  return {
    ok: false,
    mismatches,
    message: `${mismatches} of ${samples.length} sampled outputs differ from the reference: ${msg}`,
  };
}

/**
 * The next power-of-two-free batch size of TVM's time_evaluator: jump to the number of runs that
 * should fill min_repeat_ms, growing by at least the golden ratio (as gl_runtime.cpp does).
 */
/**
 * The checked run's verdict: throws WRONG_ANSWER with checkSamples' message when `output`
 * (the row-major output, all of it) differs from the reference samples the input carries.
 */
export function requireSamplesMatch(output, input) {
  const check = checkSamples(output, input.samples || []);
  if (!check.ok) throw new MeasureError(ErrorNo.WRONG_ANSWER, check.message);
}

/**
 * TVM time_evaluator semantics over a kernel: `repeat` costs (s), each the mean of `number` runs,
 * with `number` grown (nextNumber) until one timed batch lasts `min_repeat_ms`.
 * `timeBatch(n)` runs n dispatches, waits for them and resolves to the seconds they took;
 * `afterBatch(timedRuns, perRunS)` runs after each batch and may throw a MeasureError (a lost
 * context or device, the job's deadline). Resolves to `{costs}`.
 */
export async function timeEvaluator(options, timeBatch, afterBatch) {
  let number = Math.max(1, options.number ?? 1);
  const repeat = Math.max(1, options.repeat ?? 1);
  const minRepeatMs = options.min_repeat_ms ?? 0;
  const costs = [];
  let timedRuns = 0;
  for (let r = 0; r < repeat; ++r) {
    let durationS = 0;
    for (;;) {
      durationS = await timeBatch(number);
      timedRuns += number;
      afterBatch(timedRuns, durationS / number);
      if (minRepeatMs <= 0 || durationS * 1e3 >= minRepeatMs || number >= 2 ** 30) break;
      number = nextNumber(number, durationS, minRepeatMs);
    }
    costs.push(durationS / number);
  }
  return { costs };
}

export function nextNumber(number, durationS, minRepeatMs) {
  const perRunMs = Math.max((durationS * 1e3) / number, 1e-6);
  const next = Math.max(minRepeatMs / perRunMs + 1, number * 1.618);
  return Math.min(2 ** 30, Math.max(number + 1, Math.round(next)));
}
