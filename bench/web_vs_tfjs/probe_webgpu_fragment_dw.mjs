#!/usr/bin/env node
// probe_webgpu_fragment_dw.mjs — a depthwise conv2d (NCHW, 3×3, bias + clip(0, 6)) written as a
// WebGPU render pass against the same kernel as a compute shader, on MobileNet-v2's DW shapes.
// Fragment: one fragment per vec4 of 4 consecutive outputs, an rgba32float color attachment of
// 256 texels a row, then copyTextureToBuffer into the output storage buffer. Compute: one
// invocation per vec4 of outputs, workgroup 64. Both read X and the weights from storage
// buffers; both are checked against a CPU reference. Timed as the bench's batched column.
//
//   node bench/web_vs_tfjs/probe_webgpu_fragment_dw.mjs
import { openSession } from './session.mjs';

const shapes = {
  DW1: [32, 112, 112, 1], DW2: [96, 112, 112, 2], DW3: [144, 56, 56, 1], DW4: [144, 56, 56, 2],
  DW5: [192, 28, 28, 1], DW6: [192, 28, 28, 2], DW7: [384, 14, 14, 1], DW8: [576, 14, 14, 1],
  DW9: [576, 14, 14, 2], DW10: [960, 7, 7, 1],
};
const s = await openSession();
try {
  const r = await s.page.evaluate(async (shapes) => {
    const { timeBatched } = window.bench;
    const adapter = await navigator.gpu.requestAdapter();
    const device = await adapter.requestDevice();
    const B = GPUBufferUsage;
    const T = GPUTextureUsage;
    const out = {};
    for (const [name, [C, H, W, st]] of Object.entries(shapes)) {
      const OH = Math.floor((H + 2 - 3) / st) + 1, OW = Math.floor((W + 2 - 3) / st) + 1;
      const N = C * OH * OW, texels = Math.ceil(N / 4);
      const x = new Float32Array(C * H * W).map((_, i) => ((i * 7919) % 13) / 13 - 0.4);
      const wt = new Float32Array(C * 9).map((_, i) => ((i * 31) % 11) / 11 - 0.5);
      const bias = new Float32Array(C).map((_, i) => (i % 5) / 10);
      const ref = new Float32Array(N);
      for (let c = 0; c < C; ++c) for (let oh = 0; oh < OH; ++oh) for (let ow = 0; ow < OW; ++ow) {
        let a = 0;
        for (let r = 0; r < 3; ++r) for (let q = 0; q < 3; ++q) {
          const ih = oh * st - 1 + r, iw = ow * st - 1 + q;
          if (ih >= 0 && ih < H && iw >= 0 && iw < W) a += x[(c * H + ih) * W + iw] * wt[c * 9 + r * 3 + q];
        }
        ref[(c * OH + oh) * OW + ow] = Math.min(6, Math.max(0, a + bias[c]));
      }
      const buf = (data) => {
        const b = device.createBuffer({ size: Math.ceil(data.byteLength / 16) * 16, usage: B.STORAGE | B.COPY_DST });
        device.queue.writeBuffer(b, 0, data);
        return b;
      };
      const xb = buf(x), wb = buf(wt), bb = buf(bias);
      const ob = device.createBuffer({ size: texels * 16, usage: B.STORAGE | B.COPY_SRC | B.COPY_DST });
      const rb = device.createBuffer({ size: texels * 16, usage: B.MAP_READ | B.COPY_DST });
      const Wt = 256, Ht = Math.ceil(texels / Wt), full = Math.floor(texels / Wt), tail = texels % Wt;
      const rt = device.createTexture({ size: [Wt, Ht], format: 'rgba32float', usage: T.RENDER_ATTACHMENT | T.COPY_SRC });
      // The body: `t` is the vec4 index; returns the vec4 of outputs 4t..4t+3.
      const vec = OW % 4 === 0;
      const body = `
        fn xl(base : i32, ih : i32, iw : i32) -> f32 {
          let inside = (u32(ih) < ${H}u) & (u32(iw) < ${W}u);
          return select(0.0, X[select(0, base + ih * ${W} + iw, inside)], inside);
        }
        fn one(q : i32) -> f32 {
          let plane = q / ${OH * OW}; let rem = q - plane * ${OH * OW};
          let oh = rem / ${OW}; let ow = rem - oh * ${OW};
          let base = min(plane, ${C - 1}) * ${H * W};
          let wb = min(plane, ${C - 1}) * 9;
          var a = 0.0;
          for (var r = 0; r < 3; r = r + 1) { for (var s = 0; s < 3; s = s + 1) {
            a = a + Wv[wb + r * 3 + s] * xl(base, oh * ${st} - 1 + r, ow * ${st} - 1 + s); } }
          return clamp(a + Bv[min(plane, ${C - 1})], 0.0, 6.0);
        }
        fn four(t : i32) -> vec4<f32> {
          ${vec ? `
          let q = t * 4;
          let plane = q / ${OH * OW}; let rem = q - plane * ${OH * OW};
          let oh = rem / ${OW}; let ow = rem - oh * ${OW};
          let base = plane * ${H * W}; let wb = plane * 9;
          var a = vec4<f32>(0.0);
          for (var r = 0; r < 3; r = r + 1) {
            let ih = oh * ${st} - 1 + r; let iw = ow * ${st} - 1;
            ${Array.from({ length: 3 * st + 3 }, (_, d) => `let x${d} = xl(base, ih, iw + ${d});`).join(' ')}
            ${[0, 1, 2].map((s2) => `a = a + Wv[wb + r * 3 + ${s2}] * vec4<f32>(${[0, 1, 2, 3].map((e) => `x${e * st + s2}`).join(', ')});`).join(' ')}
          }
          return clamp(a + vec4<f32>(Bv[plane]), vec4<f32>(0.0), vec4<f32>(6.0));` : `
          return vec4<f32>(one(t * 4), one(t * 4 + 1), one(t * 4 + 2), one(t * 4 + 3));`}
        }`;
      const decl = `@group(0) @binding(0) var<storage, read> X : array<f32>;
        @group(0) @binding(1) var<storage, read> Wv : array<f32>;
        @group(0) @binding(3) var<storage, read> Bv : array<f32>;`;
      const fragCode = `${decl}
        @vertex fn vs(@builtin(vertex_index) v : u32) -> @builtin(position) vec4<f32> {
          return vec4<f32>(f32(i32(v & 1u) * 4 - 1), f32(i32(v >> 1u) * 4 - 1), 0.0, 1.0);
        }
        ${body}
        @fragment fn fs(@builtin(position) p : vec4<f32>) -> @location(0) vec4<f32> {
          return four(i32(p.y) * ${Wt} + i32(p.x));
        }`;
      const compCode = `${decl}
        @group(0) @binding(2) var<storage, read_write> Y : array<vec4<f32>>;
        ${body}
        @compute @workgroup_size(64) fn main(@builtin(global_invocation_id) g : vec3<u32>) {
          if (g.x < ${texels}u) { Y[g.x] = four(i32(g.x)); }
        }`;
      const entries = [{ binding: 0, resource: { buffer: xb } }, { binding: 1, resource: { buffer: wb } }, { binding: 3, resource: { buffer: bb } }];
      const fm = device.createShaderModule({ code: fragCode });
      const fpipe = await device.createRenderPipelineAsync({ layout: 'auto', vertex: { module: fm, entryPoint: 'vs' }, fragment: { module: fm, entryPoint: 'fs', targets: [{ format: 'rgba32float' }] }, primitive: { topology: 'triangle-list' } });
      const fbg = device.createBindGroup({ layout: fpipe.getBindGroupLayout(0), entries });
      const cm = device.createShaderModule({ code: compCode });
      const cpipe = await device.createComputePipelineAsync({ layout: 'auto', compute: { module: cm, entryPoint: 'main' } });
      const cbg = device.createBindGroup({ layout: cpipe.getBindGroupLayout(0), entries: [...entries, { binding: 2, resource: { buffer: ob } }] });
      const view = rt.createView();
      const frag = (e) => {
        const p = e.beginRenderPass({ colorAttachments: [{ view, loadOp: 'clear', clearValue: [0, 0, 0, 0], storeOp: 'store' }] });
        p.setPipeline(fpipe); p.setBindGroup(0, fbg); p.draw(3); p.end();
        if (full) e.copyTextureToBuffer({ texture: rt }, { buffer: ob, bytesPerRow: Wt * 16 }, [Wt, full]);
        if (tail) e.copyTextureToBuffer({ texture: rt, origin: [0, full] }, { buffer: ob, offset: full * Wt * 16 }, [tail, 1]);
      };
      const comp = (e) => {
        const p = e.beginComputePass();
        p.setPipeline(cpipe); p.setBindGroup(0, cbg); p.dispatchWorkgroups(Math.ceil(texels / 64)); p.end();
      };
      for (const [way, encode] of Object.entries({ frag, comp })) {
        device.queue.writeBuffer(ob, 0, new Float32Array(texels * 4).fill(NaN));
        const e = device.createCommandEncoder();
        encode(e);
        e.copyBufferToBuffer(ob, 0, rb, 0, texels * 16);
        device.queue.submit([e.finish()]);
        await rb.mapAsync(GPUMapMode.READ);
        const y = new Float32Array(rb.getMappedRange().slice(0));
        rb.unmap();
        let bad = 0;
        for (let i = 0; i < N; ++i) if (!(Math.abs(y[i] - ref[i]) < 1e-4)) ++bad;
        const ms = await timeBatched(async (k) => {
          const e2 = device.createCommandEncoder();
          for (let i = 0; i < k; ++i) encode(e2);
          device.queue.submit([e2.finish()]);
          await device.queue.onSubmittedWorkDone();
        });
        out[`${name} ${way}`] = { ms: +ms.toFixed(3), wrong: bad };
      }
      for (const o of [xb, wb, bb, ob, rb]) o.destroy();
      rt.destroy();
    }
    device.destroy();
    return out;
  }, shapes);
  console.log(JSON.stringify(r, null, 1));
} finally {
  await s.close();
}
