// Runs one wasm KernelArtifact (docs/wasm_abi.md) under Node, for tests/wasm_emitter_test.cpp.
//
// usage: node run_wasm_artifact.mjs ARTIFACT.json DATA.bin WEIGHT.bin OUT.bin [--repeat R]
// DATA/WEIGHT hold the row-major fp32 inputs (little endian). The runner creates the memory the
// artifact asks for (shared when threads > 1), writes the inputs at their offsets, instantiates
// the module once and calls run(0) … run(T−1) one after the other on this thread: that proves
// the static split covers the output exactly once (real threads are the browser executor's
// job). It poisons the output with NaN first, so an element no call writes shows up. With
// --repeat R it then times R more executions one by one and prints {"seconds": mean,
// "best": fastest} (seconds per execution; on a shared machine the fastest is the steadier).
import { readFileSync, writeFileSync } from 'node:fs';

const [artifactPath, dataPath, weightPath, outPath, ...rest] = process.argv.slice(2);
if (!outPath) {
  console.error('usage: run_wasm_artifact.mjs ARTIFACT.json DATA.bin WEIGHT.bin OUT.bin [--repeat R]');
  process.exit(2);
}
const repeat = rest[0] === '--repeat' ? Number(rest[1]) : 0;
const artifact = JSON.parse(readFileSync(artifactPath, 'utf8'));
if (artifact.target !== 'wasm') throw new Error(`not a wasm artifact: ${artifact.target}`);
const { threads, memory_pages: pages, offsets } = artifact.wasm;
const bytes = Buffer.from(artifact.source, 'base64');
if (!WebAssembly.validate(bytes)) throw new Error('the module does not validate');
const module = new WebAssembly.Module(bytes);
const memory = new WebAssembly.Memory({ initial: pages, maximum: pages, shared: threads > 1 });
const put = (path, offset) => {
  const b = readFileSync(path);
  new Uint8Array(memory.buffer, offset, b.length).set(b);
};
put(dataPath, offsets[0]);
put(weightPath, offsets[1]);
const outCount = artifact.output.rows * artifact.output.cols;
new Float32Array(memory.buffer, offsets[2], outCount).fill(NaN);
const instance = new WebAssembly.Instance(module, { env: { memory } });
const run = instance.exports.run;
const execute = () => {
  for (let tid = 0; tid < threads; ++tid) run(tid);
};
execute();
const out = new Uint8Array(memory.buffer, offsets[2], outCount * 4);
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
