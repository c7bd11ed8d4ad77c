// host_array.mjs — the Float32Array that a read-back returns, made ready while the device is
// still working. Shared by the WebGL2 kernel runner (webgl2.mjs, GLKernel.startReadOutput) and
// the browser agent's WebGPU executor (browser-agent/webgpu.mjs).
//
// Why: a new typed array of a few MB is memory the page has never written. Its pages are mapped
// on their first write, and on the machines measured that costs about 3 ms per MB
// (docs/benchmarks.md, "What a webgl2 read-back costs here"): more than the download itself.
// A read that allocates its result after the device has finished pays that after the wait;
// allocated and written once before the wait, the same cost overlaps the kernels still running
// in the GPU process. The array is still a new one for each read, as TensorFlow.js's data()
// returns, so the caller owns it.

/** Floats per 4 KiB page: one write in each is enough to map it. */
const FLOATS_PER_PAGE = 1024;

/**
 * A new Float32Array of `length` zeros whose pages have all been written once (every element
 * still reads 0). Throws a RangeError, as the constructor does, for a negative or huge length.
 */
export function touchedFloat32Array(length) {
  const array = new Float32Array(length);
  for (let i = 0; i < length; i += FLOATS_PER_PAGE) array[i] = 0;
  return array;
}
