// Runs one wasm KernelArtifact (docs/wasm_abi.md) under Node, for tests/wasm_emitter_test.cpp.
//
// usage: node run_wasm_artifact.mjs ARTIFACT.json OUT.bin INPUT.bin... [--repeat R] [--claims W,W,...]
// The INPUT files hold the row-major fp32 inputs (little endian) in the workload's input order
// (data, weight, then bias and residual where the epilogue has them): one per input, as many as
// the artifact has offsets before the output's. The runner creates the memory the artifact asks
// for (shared when threads > 1), writes input i at offsets[i], instantiates the module once and
// calls run(0) … run(T−1) one after the other on this thread: that proves the static split
// covers the output exactly once (real threads are the browser executor's job). It poisons the
// output (at the last offset) with NaN first, so an element no call writes shows up. With
// --repeat R it then times R more executions one by one and prints {"seconds": mean, "best":
// fastest} (seconds per execution; on a shared machine the fastest is the steadier).
// With --claims (kernels with balance = steal, docs/wasm_abi.md "Claim words"), the first
// execution is run(0) alone, after the given words were stored at the claim words (word t at
// byte 512 + 4t): run(0) must then claim every unit the words offer, as a thread does when the
// others' threads are slow.
import { readFileSync, writeFileSync } from 'node:fs';

const args = process.argv.slice(2);
/** The value of `--name V` (removed from args), or null. */
const option = (name) => {
  const at = args.indexOf(name);
  if (at < 0) return null;
  const [, value] = args.splice(at, 2);
  return value;
};
const repeat = Number(option('--repeat') ?? 0);
const claims = option('--claims')?.split(',').map(Number) ?? null;
const [artifactPath, outPath, ...inputPaths] = args;
if (!outPath || inputPaths.length < 1) {
  console.error('usage: run_wasm_artifact.mjs ARTIFACT.json OUT.bin INPUT.bin... [--repeat R] [--claims W,W,...]');
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
const CLAIM_WORDS_AT = 512;  // codegen/wasm_kernel.hpp kWasmClaimWordsAt
if (claims) {
  new Int32Array(memory.buffer, CLAIM_WORDS_AT, claims.length).set(claims);
  run(0);
} else {
  execute();
}
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
