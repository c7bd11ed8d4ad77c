// errors.mjs — the error every kernel runner throws (runtime/webgl2.mjs, webgpu.mjs, wasm.mjs):
// an Error with AutoTVM's MeasureErrorNo (codegen/include/codegen/measure.hpp), so that the
// browser agent reports it as a MeasureResult unchanged and the model runtime (model.mjs) can say
// what kind of failure stopped a step.

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

/** A failure of a kernel: the agent turns it into a result, the model runtime into a rejection. */
export class MeasureError extends Error {
  constructor(errorNo, message) {
    super(message);
    this.errorNo = errorNo;
  }
}

/** The name of an error number ("COMPILE_DEVICE"), for messages. */
export function errorName(errorNo) {
  return Object.keys(ErrorNo).find((k) => ErrorNo[k] === errorNo) || `error ${errorNo}`;
}

/**
 * Refuses (INSTANTIATION) an artifact that asks for scratch buffers (`scratch_floats`,
 * `scratch_counters`: gles-compute's k_groups, codegen/include/codegen/kernel_artifact.hpp),
 * which no browser runner provides (neither the agent's executors nor a model
 * package's runtime): running such a kernel without them would be wrong, not
 * slow. `runtime` names the runner in the message.
 */
export function refuseScratch(artifact, runtime) {
  const floats = artifact?.scratch_floats ?? 0;
  const counters = artifact?.scratch_counters ?? 0;
  if (floats !== 0 || counters !== 0) {
    throw new MeasureError(ErrorNo.INSTANTIATION,
      `the kernel asks for scratch buffers (scratch_floats ${floats}, scratch_counters ${counters}), which ${runtime} does not provide`);
  }
}
