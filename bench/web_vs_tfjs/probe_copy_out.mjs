#!/usr/bin/env node
// probe_copy_out.mjs — what copying a kernel's output out of a wasm memory into a new
// Float32Array costs in the bench's headless Chromium (session.mjs), per way of copying, for
// outputs of MobileNet-v2 layers' sizes (below), from a shared memory (a threaded kernel's, and
// tfjs's threaded build's heap) and an unshared one:
//   f32_slice     new Float32Array(memory.buffer, offset, n).slice()   (the bench's read-back)
//   u8_slice      new Uint8Array(memory.buffer, offset, 4n).slice(), viewed as a Float32Array
//                 (tfjs-backend-wasm readSync: HEAPU8.slice)
//   f32_from      Float32Array.from(view)            (runtime/model.mjs download)
//   alloc_set     new Float32Array(n), then .set(view)
//   alloc_only    new Float32Array(n), nothing copied (the allocation alone)
//   kept_set      .set(view) into an array kept from the sample before (no allocation)
// Prints JSON: median ms of 20 samples per way and size (the last of three rounds), and ms per MB.
//
//   node bench/web_vs_tfjs/probe_copy_out.mjs
import { openSession } from './session.mjs';

const s = await openSession();
try {
  const r = await s.page.evaluate(() => {
    const median = (v) => { const a = [...v].sort((x, y) => x - y); return a[a.length >> 1]; };
    const out = {};
    // floats: CV1 / DW1 (112·112·32), PW1 (112·112·16), PW2 (112·112·96), PW7 (28·28·192)
    const sizes = { '112x112x32': 112 * 112 * 32, '112x112x16': 112 * 112 * 16, '112x112x96': 112 * 112 * 96, '28x28x192': 28 * 28 * 192 };
    for (const shared of [true, false]) {
      const pages = 160;  // 10 MiB
      const memory = new WebAssembly.Memory({ initial: pages, maximum: pages, shared });
      const offset = 65536;
      for (const [name, n] of Object.entries(sizes)) {
        const view = new Float32Array(memory.buffer, offset, n);
        for (let i = 0; i < n; ++i) view[i] = i * 0.5;
        let kept = new Float32Array(n);
        let sink = 0;
        const ways = {
          f32_slice: () => view.slice(),
          u8_slice: () => new Float32Array(new Uint8Array(memory.buffer, offset, 4 * n).slice().buffer),
          f32_from: () => Float32Array.from(view),
          alloc_set: () => { const a = new Float32Array(n); a.set(view); return a; },
          alloc_only: () => new Float32Array(n),
          kept_set: () => { kept.set(view); return kept; },
        };
        for (let round = 0; round < 3; ++round) {
          for (const [way, f] of Object.entries(ways)) {
            const t = [];
            for (let i = 0; i < 20; ++i) {
              const b = performance.now();
              const a = f();
              t.push(performance.now() - b);
              sink += a[n - 1];
            }
            const ms = median(t);
            out[`${shared ? 'shared' : 'unshared'} ${name} ${way}`] = { ms: +ms.toFixed(3), ms_per_mb: +(ms / (n * 4 / 1e6)).toFixed(3) };
          }
        }
        if (sink === 0) out.sink = sink;  // keeps the copies from being optimized away
      }
    }
    return out;
  });
  console.log(JSON.stringify(r, null, 1));
} finally {
  await s.close();
}
