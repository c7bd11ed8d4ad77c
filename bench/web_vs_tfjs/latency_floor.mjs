#!/usr/bin/env node
// latency_floor.mjs — the latency of one trivial op waited for alone, per way of waiting, in
// the bench's headless Chromium (session.mjs): what a "fence" or "read-back" sample of
// bench.mjs costs before any kernel work. Prints JSON, median ms of 40 samples per row (second
// of two rounds):
//   webgl2 <wait>: an 8×8 draw, then a fence polled on MessageChannel turns ("message"), the
//     browser agent's sync=fence wait (2 ms of those, then 1 ms timers: "hybrid"), setTimeout(0) turns
//     ("timeout0"), or a synchronous 1-texel readPixels ("readpixels", the agent's default in Chromium);
//   webgpu done / map: a 1-invocation dispatch, then onSubmittedWorkDone or a 16-byte mapAsync;
//   tfjs webgl / webgpu: a 4096-element tf.add, then tfjs's own fence (webgl: createAndWaitForFence,
//     polled on setTimeout turns), a blocking 1-texel read of its output (webgl; what bench.mjs's
//     webgl2 rows wait on since 2026-11-28), or onSubmittedWorkDone (webgpu).
//
//   node bench/web_vs_tfjs/latency_floor.mjs
import { openSession } from './session.mjs';

const s = await openSession();
try {
  const r = await s.page.evaluate(async () => {
    const ch = new MessageChannel(); let res = null; ch.port1.onmessage = () => { const f = res; res = null; f(); };
    const nextTask = () => new Promise((r) => { res = r; ch.port2.postMessage(0); });
    const { gl, program, median: med } = window.bench.glProbe();
    const out = {};
    gl.useProgram(program('#version 300 es\nprecision highp float;out vec4 o;void main(){o=vec4(gl_FragCoord.xy,0,1);}'));
    const tex = gl.createTexture(); gl.bindTexture(gl.TEXTURE_2D, tex); gl.texStorage2D(gl.TEXTURE_2D, 1, gl.RGBA32F, 64, 64);
    const fb = gl.createFramebuffer(); gl.bindFramebuffer(gl.FRAMEBUFFER, fb); gl.framebufferTexture2D(gl.FRAMEBUFFER, gl.COLOR_ATTACHMENT0, gl.TEXTURE_2D, tex, 0);
    gl.viewport(0, 0, 8, 8);
    const waits = {
      message: async () => { const f = gl.fenceSync(gl.SYNC_GPU_COMMANDS_COMPLETE, 0); let st = gl.clientWaitSync(f, gl.SYNC_FLUSH_COMMANDS_BIT, 0); while (st === gl.TIMEOUT_EXPIRED) { await nextTask(); st = gl.clientWaitSync(f, 0, 0); } gl.deleteSync(f); },
      hybrid: async () => { const f = gl.fenceSync(gl.SYNC_GPU_COMMANDS_COMPLETE, 0); const b = performance.now(); let st = gl.clientWaitSync(f, gl.SYNC_FLUSH_COMMANDS_BIT, 0); while (st === gl.TIMEOUT_EXPIRED) { await (performance.now() - b < 2 ? nextTask() : new Promise((r) => setTimeout(r, 1))); st = gl.clientWaitSync(f, 0, 0); } gl.deleteSync(f); },
      timeout0: async () => { const f = gl.fenceSync(gl.SYNC_GPU_COMMANDS_COMPLETE, 0); let st = gl.clientWaitSync(f, gl.SYNC_FLUSH_COMMANDS_BIT, 0); while (st === gl.TIMEOUT_EXPIRED) { await new Promise((r) => setTimeout(r, 0)); st = gl.clientWaitSync(f, 0, 0); } gl.deleteSync(f); },
      readpixels: async () => { gl.readPixels(0, 0, 1, 1, gl.RGBA, gl.FLOAT, new Float32Array(4)); },
    };
    for (let round = 0; round < 2; ++round) for (const [name, w] of Object.entries(waits)) {
      const t = [];
      for (let i = 0; i < 40; ++i) { const b = performance.now(); gl.drawArrays(gl.TRIANGLES, 0, 3); await w(); t.push(performance.now() - b); }
      out[`webgl2 ${name}`] = med(t).toFixed(3);
    }
    const ad = await navigator.gpu.requestAdapter(); const dev = await ad.requestDevice();
    const mod = dev.createShaderModule({ code: '@group(0) @binding(0) var<storage, read_write> b: array<f32>; @compute @workgroup_size(1) fn main() { b[0] = b[0] + 1.0; }' });
    const pipe = dev.createComputePipeline({ layout: 'auto', compute: { module: mod, entryPoint: 'main' } });
    const buf = dev.createBuffer({ size: 16, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC });
    const bg = dev.createBindGroup({ layout: pipe.getBindGroupLayout(0), entries: [{ binding: 0, resource: { buffer: buf } }] });
    const rb = dev.createBuffer({ size: 16, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
    for (let round = 0; round < 2; ++round) {
      for (const mode of ['done', 'map']) {
        const t = [];
        for (let i = 0; i < 40; ++i) {
          const b = performance.now();
          const e = dev.createCommandEncoder(); const c = e.beginComputePass(); c.setPipeline(pipe); c.setBindGroup(0, bg); c.dispatchWorkgroups(1); c.end();
          if (mode === 'map') e.copyBufferToBuffer(buf, 0, rb, 0, 16);
          dev.queue.submit([e.finish()]);
          if (mode === 'done') await dev.queue.onSubmittedWorkDone(); else { await rb.mapAsync(GPUMapMode.READ); rb.unmap(); }
          t.push(performance.now() - b);
        }
        out[`webgpu ${mode}`] = med(t).toFixed(3);
      }
    }
    // tfjs webgl floor: a 1-element add and its fence
    await tf.setBackend('webgl'); await tf.ready();
    const a = tf.ones([4096]);  // above tfjs's CPU hand-off threshold (128 elements)
    for (let round = 0; round < 2; ++round) {
      const t = [];
      for (let i = 0; i < 40; ++i) { const b = performance.now(); const y = tf.add(a, a); await tf.backend().getGPGPUContext().createAndWaitForFence(); t.push(performance.now() - b); y.dispose(); }
      out['tfjs webgl add+fence'] = med(t).toFixed(3);
    }
    // The wait bench.mjs's webgl2 rows use on both sides since 2026-11-28 (page.mjs tfjsFence):
    // a blocking read of one texel of the output, on tfjs's own context.
    for (let round = 0; round < 2; ++round) {
      const t = [];
      for (let i = 0; i < 40; ++i) {
        const b = performance.now();
        const y = tf.add(a, a);
        await window.bench.tfjsFence('webgl', y);
        t.push(performance.now() - b);
        y.dispose();
      }
      out['tfjs webgl add+readpixels'] = med(t).toFixed(3);
    }
    await tf.setBackend('webgpu'); await tf.ready();
    const a2 = tf.ones([4096]);
    for (let round = 0; round < 2; ++round) {
      const t = [];
      for (let i = 0; i < 40; ++i) {
        const b = performance.now();
        const y = tf.add(a2, a2);
        const be = tf.backend();  // tfjs defers submits: end its pass and submit, as bench.mjs does
        if (be.commandEncoder) { be.endComputePassEncoder(); be.submitQueue(); }
        await be.device.queue.onSubmittedWorkDone();
        t.push(performance.now() - b);
        y.dispose();
      }
      out['tfjs webgpu add+done'] = med(t).toFixed(3);
    }
    return out;
  });
  console.log(JSON.stringify(r, null, 1));
} finally { await s.close(); }
