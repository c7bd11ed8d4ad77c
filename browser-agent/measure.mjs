// measure.mjs — what every executor shares: AutoTVM's error numbers, MeasureResult objects
// (codegen/include/codegen/measure.hpp), the sampled reference check (codegen/reference.cpp) and
// the workload sizes the seeded inputs need (codegen/include/codegen/workload.hpp).

// The error numbers and the error class are the kernel runners' (runtime/errors.mjs), shared
// with the model runtime; so is the refusal of kernels with scratch buffers.
import { ErrorNo, MeasureError, refuseScratch } from '../runtime/errors.mjs';

export { ErrorNo, MeasureError, refuseScratch };

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

function outputShape(w) {
  if (w.op === 'dense') return [w.M, w.N];
  const [oh, ow] = outHW(w);
  if (w.op === 'conv2d') return [w.N, w.K, oh, ow];
  if (w.op === 'depthwise_conv2d') return [w.N, w.C, oh, ow];
  throw new MeasureError(ErrorNo.INSTANTIATION, `unknown workload op '${w.op}'`);
}

const product = (dims) => dims.reduce((a, b) => a * b, 1);

/**
 * The epilogue's extra inputs of a workload in its JSON form, in binding order after data and
 * weight (codegen/include/codegen/epilogue.hpp): [{name: 'bias', shape: [C_out]}] if it has a
 * bias, then [{name: 'residual', shape: <the output's>}] if it has a residual.
 */
export function epilogueInputs(w) {
  const e = w.epilogue;
  const extra = [];
  if (!e) return extra;
  const out = outputShape(w);
  if (e.bias) extra.push({ name: 'bias', shape: [w.op === 'dense' ? w.N : out[1]] });
  if (e.residual && e.residual !== 'none') extra.push({ name: 'residual', shape: out });
  return extra;
}

/**
 * Shapes of every input of a workload in its JSON form, in binding order: data, weight, then the
 * epilogue's bias and residual (row-major, see workload.hpp).
 */
export function inputShapes(w) {
  let base;
  if (w.op === 'dense') base = [[w.M, w.K], [w.K, w.N]];
  else if (w.op === 'conv2d') base = [[w.N, w.C, w.H, w.W], [w.K, w.C, w.R, w.S]];
  else if (w.op === 'depthwise_conv2d') base = [[w.N, w.C, w.H, w.W], [w.C, 1, w.R, w.S]];
  else throw new MeasureError(ErrorNo.INSTANTIATION, `unknown workload op '${w.op}'`);
  return [...base, ...epilogueInputs(w).map((x) => x.shape)];
}

/** Names of every input, as inputShapes orders them: 'data', 'weight', then 'bias', 'residual'. */
export function inputNames(w) {
  return ['data', 'weight', ...epilogueInputs(w).map((x) => x.name)];
}

/**
 * Element counts {data, weight, output, inputs: [every input's count]} of a workload in its JSON
 * form.
 */
export function workloadSizes(w) {
  const inputs = inputShapes(w).map(product);
  return { data: inputs[0], weight: inputs[1], output: product(outputShape(w)), inputs };
}

/**
 * Checks that `artifact` has one layout per input of `workload` (JSON form) with its shape;
 * throws INSTANTIATION naming what differs (e.g. a residual layout of the wrong shape).
 * `fail(message)` raises (default: throw INSTANTIATION).
 */
export function checkInputShapes(artifact, workload, fail = (m) => {
  throw new MeasureError(ErrorNo.INSTANTIATION, m);
}) {
  const shapes = inputShapes(workload);
  const names = inputNames(workload);
  if (!Array.isArray(artifact.inputs) || artifact.inputs.length !== shapes.length) {
    fail(`the artifact has ${artifact.inputs?.length ?? 0} input layouts; the workload has ${shapes.length} inputs (${names.join(', ')})`);
  }
  artifact.inputs.forEach((layout, i) => {
    if (JSON.stringify(layout.shape) !== JSON.stringify(shapes[i])) {
      fail(`artifact input ${i} (${names[i]}) has shape [${layout.shape}] but the workload's ${names[i]} is [${shapes[i]}]`);
    }
  });
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
 * Checks that `artifact` feeds every input of `workload` (JSON form) with its shape, unpacked
 * (plain row-major buffers, as compute and wasm kernels read them); throws INSTANTIATION naming
 * what differs. `reader` names what reads them in the message ("WGSL kernels read plain
 * row-major buffers").
 */
export function checkPlainInputs(artifact, workload, reader) {
  checkInputShapes(artifact, workload);
  artifact.inputs.forEach((layout, i) => {
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
 * with `number` grown (nextNumber) until one timed batch lasts `min_repeat_ms`, and doubled while a
 * batch reads 0 s (shorter than the clock's resolution), so every cost is positive.
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
      if (number >= 2 ** 30) break;
      // A batch shorter than the clock's resolution (performance.now() is coarsened to 5-100 µs)
      // reads 0: time more runs, as the tracker refuses costs that are not positive (and marks
      // the agent suspect), even where min_repeat_ms asks for nothing.
      if (!(durationS > 0)) {
        number = Math.min(2 ** 30, number * 2);
        continue;
      }
      if (minRepeatMs <= 0 || durationS * 1e3 >= minRepeatMs) break;
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
