// Runs one wasm KernelArtifact (docs/wasm_abi.md) under Node, for tests/wasm_emitter_test.cpp.
//
// usage: node run_wasm_artifact.mjs ARTIFACT.json OUT.bin INPUT.bin... [--repeat R]
// The INPUT files hold the row-major fp32 inputs (little endian) in the workload's input order
// (data, weight, then bias and residual where the epilogue has them): one per input, as many as
// the artifact has offsets before the output's. The runner creates the memory the artifact asks
// for (shared when threads > 1), writes input i at offsets[i], instantiates the module once and
// calls run(0) … run(T−1) one after the other on this thread: that proves the static split
// covers the output exactly once (real threads are the browser executor's job). It poisons the
// output (at the last offset) with NaN first, so an element no call writes shows up. With
// --repeat R it then times R more executions one by one and prints {"seconds": mean, "best":
// fastest} (seconds per execution; on a shared machine the fastest is the steadier).
import { readFileSync, writeFileSync } from 'node:fs';

const args = process.argv.slice(2);
const at = args.indexOf('--repeat');
const repeat = at >= 0 ? Number(args[at + 1]) : 0;
const [artifactPath, outPath, ...inputPaths] = at >= 0 ? args.slice(0, at) : args;
if (!outPath || inputPaths.length < 1) {
  console.error('usage: run_wasm_artifact.mjs ARTIFACT.json OUT.bin INPUT.bin... [--repeat R]');
  process.exit(2);
}
const artifact = JSON.parse(readFileSync(artifactPath, 'utf8'));
if (artifact.target !== 'wasm') throw new Error(`not a wasm artifact: ${artifact.target}`);
const { threads, memory_pages: pages, offsets } = artifact.wasm;
const bytes = Buffer.from(artifact.source, 'base64');
if (!WebAssembly.validate(bytes)) throw new Error('the module does not validate');
const module = new WebAssembly.Module(bytes);
const memory = new WebAssembly.Memory({ initial: pages, maximum: pages, shared: threads > 1 || artifact.wasm.shared_memory === true });
const put = (path, offset) => {
  const b = readFileSync(path);
  new Uint8Array(memory.buffer, offset, b.length).set(b);
};
if (offsets.length !== inputPaths.length + 1) {
  throw new Error(`the artifact has ${offsets.length} offsets for ${inputPaths.length} inputs + output`);
}
inputPaths.forEach((path, i) => put(path, offsets[i]));
const outOffset = offsets[offsets.length - 1];
const outCount = artifact.output.rows * artifact.output.cols;
new Float32Array(memory.buffer, outOffset, outCount).fill(NaN);
const instance = new WebAssembly.Instance(module, { env: { memory } });
const run = instance.exports.run;
const execute = () => {
  for (let tid = 0; tid < threads; ++tid) run(tid);
};
execute();
const out = new Uint8Array(memory.buffer, outOffset, outCount * 4);
writeFileSync(outPath, Buffer.from(out));
if (repeat > 0) {
  execute();  // warm-up
  let total = 0;
  let best = Infinity;
  for (let i = 0; i < repeat; ++i) {
    const start = process.hrtime.bigint();
    execute();
    const s = Number(process.hrtime.bigint() - start) / 1e9;
    total += s;
    best = Math.min(best, s);
  }
  console.log(JSON.stringify({ seconds: total / repeat, best }));
}
