#!/usr/bin/env node
// probe_webgpu_textures.mjs — whether a WebGPU kernel on SwiftShader moves memory faster through
// textures than through storage buffers. probe_device_floor.mjs found a storage-buffer copy in
// WebGPU about 4× slower than the same copy as a WebGL2 draw, which reads a texture and writes a
// render target. Each way below copies an H×W×C float tensor (NHWC, vec4 along C) once, timed as
// the bench's batched column (dispatches or draws back to back until a sample takes 20 ms, one
// onSubmittedWorkDone; median ms a copy of 9 samples):
//   buf_buf    storage buffer → storage buffer, 4 vec4 a thread, workgroup 64 (the floor probe's)
//   f32_f32    the same as array<f32>, adjacent invocations on adjacent floats, 4 floats a thread
//              at a stride of the dispatch's width (SwiftShader gathers every load whose offsets
//              it cannot prove sequential at compile time, whatever the vector width)
//   tex_buf    texture_2d<f32> (rgba32float, W·C/4 × H) by textureLoad → storage buffer
//   tex_stex   texture → rgba32float storage texture (textureStore), workgroup 8×8
//   buf_stex   storage buffer → storage texture
//   tex_rt     a render pass: a fragment shader textureLoad → an rgba32float color attachment
//   buf_rt     a render pass: a fragment shader reads the storage buffer → the color attachment
//   buf_rt_buf buf_rt, then copyTextureToBuffer of the attachment into a storage buffer: a
//              fragment-stage kernel whose output stays a buffer for the next op
// Each way's output is read back once and checked (every float 0.5 + its index mod 7).
//
//   node bench/web_vs_tfjs/probe_webgpu_textures.mjs
import { openSession } from './session.mjs';

const s = await openSession();
try {
  const r = await s.page.evaluate(async () => {
    const { timeBatched } = window.bench;  // page.mjs: n runs back to back, one wait, median ms a run
    const adapter = await navigator.gpu.requestAdapter();
    const device = await adapter.requestDevice();
    const B = GPUBufferUsage;
    const T = GPUTextureUsage;
    const read = async (src, bytes, isTexture, w, h) => {
      const rb = device.createBuffer({ size: bytes, usage: B.MAP_READ | B.COPY_DST });
      const e = device.createCommandEncoder();
      if (isTexture) e.copyTextureToBuffer({ texture: src }, { buffer: rb, bytesPerRow: w * 16 }, [w, h]);
      else e.copyBufferToBuffer(src, 0, rb, 0, bytes);
      device.queue.submit([e.finish()]);
      await rb.mapAsync(GPUMapMode.READ);
      const a = new Float32Array(rb.getMappedRange().slice(0));
      rb.destroy();
      return a;
    };
    const out = {};
    const shapes = { '112x112x32': [112, 112, 32], '56x56x144': [56, 56, 144], '112x112x96': [112, 112, 96], '14x14x384': [14, 14, 384] };
    for (const [name, [H, W, C]] of Object.entries(shapes)) {
      const w = (W * C) / 4;  // texels a row (bytesPerRow w·16 is a multiple of 256 for these shapes)
      const n = w * H;  // vec4s
      const data = new Float32Array(n * 4);
      for (let i = 0; i < data.length; ++i) data[i] = 0.5 + (i % 7);
      const xb = device.createBuffer({ size: n * 16, usage: B.STORAGE | B.COPY_DST });
      device.queue.writeBuffer(xb, 0, data);
      const xt = device.createTexture({ size: [w, H], format: 'rgba32float', usage: T.TEXTURE_BINDING | T.COPY_DST });
      device.queue.writeTexture({ texture: xt }, data, { bytesPerRow: w * 16 }, [w, H]);
      const ob = device.createBuffer({ size: n * 16, usage: B.STORAGE | B.COPY_SRC | B.COPY_DST });
      const ot = device.createTexture({ size: [w, H], format: 'rgba32float', usage: T.STORAGE_BINDING | T.COPY_SRC });
      const rt = device.createTexture({ size: [w, H], format: 'rgba32float', usage: T.RENDER_ATTACHMENT | T.COPY_SRC });
      const compute = (code, entries, groups) => {
        const pipe = device.createComputePipeline({ layout: 'auto', compute: { module: device.createShaderModule({ code }), entryPoint: 'main' } });
        const bg = device.createBindGroup({ layout: pipe.getBindGroupLayout(0), entries });
        return async (k) => {
          const e = device.createCommandEncoder();
          const p = e.beginComputePass();
          p.setPipeline(pipe); p.setBindGroup(0, bg);
          for (let i = 0; i < k; ++i) p.dispatchWorkgroups(...groups);
          p.end();
          device.queue.submit([e.finish()]);
          await device.queue.onSubmittedWorkDone();
        };
      };
      const ways = {
        buf_buf: [compute(`@group(0) @binding(0) var<storage, read> x: array<vec4<f32>>;
          @group(0) @binding(1) var<storage, read_write> o: array<vec4<f32>>;
          @compute @workgroup_size(64) fn main(@builtin(global_invocation_id) g: vec3<u32>) {
            for (var k = 0u; k < 4u; k = k + 1u) { let i = g.x * 4u + k; if (i < ${n}u) { o[i] = x[i]; } }
          }`, [{ binding: 0, resource: { buffer: xb } }, { binding: 1, resource: { buffer: ob } }], [Math.ceil(n / 256)]), ob, false],
        f32_f32: [compute(`@group(0) @binding(0) var<storage, read> x: array<f32>;
          @group(0) @binding(1) var<storage, read_write> o: array<f32>;
          @compute @workgroup_size(64) fn main(@builtin(global_invocation_id) g: vec3<u32>) {
            for (var k = 0u; k < 4u; k = k + 1u) { let i = g.x + k * ${n}u; o[i] = x[i]; }
          }`, [{ binding: 0, resource: { buffer: xb } }, { binding: 1, resource: { buffer: ob } }], [n / 64]), ob, false],
        tex_buf: [compute(`@group(0) @binding(0) var x: texture_2d<f32>;
          @group(0) @binding(1) var<storage, read_write> o: array<vec4<f32>>;
          @compute @workgroup_size(8, 8) fn main(@builtin(global_invocation_id) g: vec3<u32>) {
            if (g.x < ${w}u && g.y < ${H}u) { o[g.y * ${w}u + g.x] = textureLoad(x, vec2<u32>(g.xy), 0); }
          }`, [{ binding: 0, resource: xt.createView() }, { binding: 1, resource: { buffer: ob } }], [Math.ceil(w / 8), Math.ceil(H / 8)]), ob, false],
        tex_stex: [compute(`@group(0) @binding(0) var x: texture_2d<f32>;
          @group(0) @binding(1) var o: texture_storage_2d<rgba32float, write>;
          @compute @workgroup_size(8, 8) fn main(@builtin(global_invocation_id) g: vec3<u32>) {
            if (g.x < ${w}u && g.y < ${H}u) { textureStore(o, vec2<u32>(g.xy), textureLoad(x, vec2<u32>(g.xy), 0)); }
          }`, [{ binding: 0, resource: xt.createView() }, { binding: 1, resource: ot.createView() }], [Math.ceil(w / 8), Math.ceil(H / 8)]), ot, true],
        buf_stex: [compute(`@group(0) @binding(0) var<storage, read> x: array<vec4<f32>>;
          @group(0) @binding(1) var o: texture_storage_2d<rgba32float, write>;
          @compute @workgroup_size(8, 8) fn main(@builtin(global_invocation_id) g: vec3<u32>) {
            if (g.x < ${w}u && g.y < ${H}u) { textureStore(o, vec2<u32>(g.xy), x[g.y * ${w}u + g.x]); }
          }`, [{ binding: 0, resource: { buffer: xb } }, { binding: 1, resource: ot.createView() }], [Math.ceil(w / 8), Math.ceil(H / 8)]), ot, true],
      };
      const renderWay = (body, entries, copyOut = false) => {
        const module = device.createShaderModule({ code: `
          @vertex fn vs(@builtin(vertex_index) v: u32) -> @builtin(position) vec4<f32> {
            return vec4<f32>(f32(i32(v & 1u) * 4 - 1), f32(i32(v >> 1u) * 4 - 1), 0.0, 1.0);
          }
          ${body}` });
        const pipe = device.createRenderPipeline({ layout: 'auto', vertex: { module, entryPoint: 'vs' }, fragment: { module, entryPoint: 'fs', targets: [{ format: 'rgba32float' }] }, primitive: { topology: 'triangle-list' } });
        const bg = device.createBindGroup({ layout: pipe.getBindGroupLayout(0), entries });
        const view = rt.createView();
        return [async (k) => {
          const e = device.createCommandEncoder();
          for (let i = 0; i < k; ++i) {
            const p = e.beginRenderPass({ colorAttachments: [{ view, loadOp: 'load', storeOp: 'store' }] });
            p.setPipeline(pipe); p.setBindGroup(0, bg); p.draw(3); p.end();
            if (copyOut) e.copyTextureToBuffer({ texture: rt }, { buffer: ob, bytesPerRow: w * 16 }, [w, H]);
          }
          device.queue.submit([e.finish()]);
          await device.queue.onSubmittedWorkDone();
        }, copyOut ? ob : rt, !copyOut];
      };
      ways.tex_rt = renderWay(`@group(0) @binding(0) var x: texture_2d<f32>;
          @fragment fn fs(@builtin(position) p: vec4<f32>) -> @location(0) vec4<f32> {
            return textureLoad(x, vec2<i32>(p.xy), 0);
          }`, [{ binding: 0, resource: xt.createView() }]);
      ways.buf_rt = renderWay(`@group(0) @binding(0) var<storage, read> x: array<vec4<f32>>;
          @fragment fn fs(@builtin(position) p: vec4<f32>) -> @location(0) vec4<f32> {
            return x[u32(p.y) * ${w}u + u32(p.x)];
          }`, [{ binding: 0, resource: { buffer: xb } }]);
      ways.buf_rt_buf = renderWay(`@group(0) @binding(0) var<storage, read> x: array<vec4<f32>>;
          @fragment fn fs(@builtin(position) p: vec4<f32>) -> @location(0) vec4<f32> {
            return x[u32(p.y) * ${w}u + u32(p.x)];
          }`, [{ binding: 0, resource: { buffer: xb } }], true);
      for (const [way, [batch, dst, isTexture]] of Object.entries(ways)) {
        await batch(1);
        const a = await read(dst, n * 16, isTexture, w, H);
        let bad = 0;
        for (let i = 0; i < a.length; ++i) if (a[i] !== data[i]) ++bad;
        const ms = await timeBatched(batch);
        out[`${name} ${way}`] = { ms: +ms.toFixed(3), gb_s: +((2 * n * 16) / (ms / 1e3) / 1e9).toFixed(2), wrong: bad };
      }
      for (const o of [xb, ob]) o.destroy();
      for (const o of [xt, ot, rt]) o.destroy();
    }
    device.destroy();
    return out;
  });
  console.log(JSON.stringify(r, null, 1));
} finally {
  await s.close();
}
