// A/B timing of wasm artifacts on one thread in Node: run(0..T-1) in sequence, median ms.
import fs from 'node:fs';
const files = process.argv.slice(2);
const mods = files.map((f) => {
  const a = JSON.parse(fs.readFileSync(f, 'utf8'));
  const art = a.artifact ?? a;
  const w = art.wasm;
  const mem = new WebAssembly.Memory({initial: w.memory_pages, maximum: w.memory_pages, shared: true});
  const f32 = new Float32Array(mem.buffer);
  for (let i = 16384; i < f32.length; ++i) f32[i] = Math.random() - 0.5;
  const mod = new WebAssembly.Module(Buffer.from(art.source, 'base64'));
  const inst = new WebAssembly.Instance(mod, {env: {memory: mem}});
  const T = w.threads;
  const run = () => { for (let t = 0; t < T; ++t) inst.exports.run(t); };
  return {f, run, flops: a.flops};
});
const reps = 15;
const res = mods.map(() => []);
for (let r = 0; r < reps; ++r) {
  for (let i = 0; i < mods.length; ++i) {
    const m = mods[i];
    let n = 1, t0, dt;
    for (;;) { t0 = performance.now(); for (let j = 0; j < n; ++j) m.run(); dt = performance.now() - t0; if (dt > 30) break; n *= 2; }
    res[i].push(dt / n);
  }
}
for (let i = 0; i < mods.length; ++i) {
  const s = res[i].sort((a, b) => a - b); const med = s[s.length >> 1];
  console.log(`${mods[i].f.padEnd(40)} ${med.toFixed(4)} ms  ${(mods[i].flops / med / 1e6).toFixed(1)} GFLOP/s (1 thread)`);
}
