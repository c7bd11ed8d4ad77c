#!/usr/bin/env node
// probe_device_floor.mjs — how fast any kernel for a bench row could be on this browser's
// webgl2 and webgpu devices (SwiftShader in the bench's headless Chromium, session.mjs), from
// two probes that do less work than the row's kernel must:
//
//   copy  a kernel that reads every float of the row's input once (summing the floats that
//         fall on one output) and writes every float of its output once, as vec4s: a
//         convolution must at least read its input and write its output. The fastest of a few
//         shapes of that kernel counts (webgpu: 64 or 256 invocations a workgroup, 1 or 4 vec4
//         a thread; webgl2: one RGBA32F render target 1024, 2048 or 4096 texels wide).
//         Weights, bias and padding are left out, so the floor is low, never high.
//   alu   peak multiply-add throughput: every invocation (fragment) runs 1 to 24 independent
//         vec4 multiply-add chains for 256 steps, in a loop whose body holds 1 or 8 steps, on
//         values the compiler cannot fold; 2 FLOPs a lane, GFLOP/s, the best of the variants
//         (alu_by_accumulators: "8x8" is 8 chains, 8 steps a loop turn). A row's FLOPs over
//         that is its compute floor.
//
// Both are timed as the bench's "batched" column times kernels: dispatches (draws) queued back
// to back until a sample takes at least 20 ms, one wait at the end (onSubmittedWorkDone; a
// blocking 1-texel readPixels), the sample divided by the count; median of 9 samples after 2
// warm-ups. A row's floor is max(copy, FLOPs / alu): the batched time no kernel for that row
// can beat on this device. floor_report.py sets it against what a row needs to meet its target.
//
// Prints JSON to stdout: {environment, alu_gflops: {webgl2, webgpu}, rows: {task: {in_floats,
// out_floats, flops, webgl2: {copy_ms, shape}, webgpu: {copy_ms, shape}}}}.
//
//   node bench/web_vs_tfjs/probe_device_floor.mjs [--workloads F,F] [--tasks T,T|all] [--targets webgl2,webgpu]
import { openSession } from './session.mjs';
import { flopsOf, loadTasks, tensorFloats } from './tasks.mjs';

const args = process.argv.slice(2);
const flag = (name, dflt) => {
  const i = args.indexOf(name);
  if (i < 0) return dflt;
  if (i + 1 >= args.length) throw new Error(`${name} needs a value`);
  return args[i + 1];
};
const workloads = flag('--workloads', 'configs/workloads/mobilenet_v2.json,configs/workloads/resnet18_fused.json').split(',');
const taskNames = flag('--tasks', 'all').split(',');
const targets = flag('--targets', 'webgl2,webgpu').split(',');
for (const t of targets) if (!['webgl2', 'webgpu'].includes(t)) throw new Error(`--targets takes webgl2, webgpu; not '${t}'`);

const rows = loadTasks(workloads, taskNames).map((w) => ({ task: w.name, ...tensorFloats(w), flops: flopsOf(w) }));

const s = await openSession();
try {
  const r = await s.page.evaluate(async (rows, targets) => {
    const { timeBatched } = window.bench;  // page.mjs: n runs back to back, one wait, median ms a run
    const out = { alu_gflops: {}, rows: {} };
    for (const row of rows) out.rows[row.task] = { in_floats: row.in_floats, out_floats: row.out_floats, flops: row.flops };
    const STEPS = 256;
    // independent vec4 accumulators (acc · 4 lanes · 2 FLOPs a step): SwiftShader's JIT keeps a
    // vec4 in 4 SIMD registers, so 8 of them spill and 1 leaves the pipeline idle; the best counts
    // and a loop body repeated 1 or 8 times (a loop turn costs SwiftShader lane-mask work)
    const ALU_VARIANTS = [];
    for (const acc of [1, 2, 4, 8, 16, 24]) for (const unroll of [1, 8]) ALU_VARIANTS.push({ acc, unroll });
    const aluBody = (acc, unroll) => [...Array(unroll)].map(() => [...Array(acc).keys()].map((j) => `a${j} = a${j} * u.x + u.y;`).join(' ')).join('\n');
    out.alu_by_accumulators = { webgpu: {}, webgl2: {} };

    if (targets.includes('webgpu')) {
      const adapter = await navigator.gpu.requestAdapter();
      const device = await adapter.requestDevice();
      const S = GPUBufferUsage;
      const pipeline = (code) => device.createComputePipeline({ layout: 'auto', compute: { module: device.createShaderModule({ code }), entryPoint: 'main' } });
      const run = (pipe, bindGroup, groups) => async (n) => {
        const e = device.createCommandEncoder();
        const p = e.beginComputePass();
        p.setPipeline(pipe);
        p.setBindGroup(0, bindGroup);
        for (let i = 0; i < n; ++i) p.dispatchWorkgroups(...groups);
        p.end();
        device.queue.submit([e.finish()]);
        await device.queue.onSubmittedWorkDone();
      };
      // alu: 65536 invocations, the best of ALU_VARIANTS
      for (const { acc, unroll } of ALU_VARIANTS) {
        const code = `@group(0) @binding(0) var<storage, read_write> o: array<vec4<f32>>;
          @group(0) @binding(1) var<uniform> u: vec4<f32>;
          @compute @workgroup_size(64) fn main(@builtin(global_invocation_id) g: vec3<u32>) {
            let seed = f32(g.x) * 1e-7;
            ${[...Array(acc).keys()].map((j) => `var a${j} = vec4<f32>(seed + ${j}.0);`).join(' ')}
            for (var i = 0u; i < ${STEPS / unroll}u; i = i + 1u) {
              ${aluBody(acc, unroll)}
            }
            o[g.x] = ${[...Array(acc).keys()].map((j) => `a${j}`).join(' + ')};
          }`;
        const invocations = 65536;
        const ob = device.createBuffer({ size: invocations * 16, usage: S.STORAGE });
        const ub = device.createBuffer({ size: 16, usage: S.UNIFORM | S.COPY_DST });
        device.queue.writeBuffer(ub, 0, new Float32Array([0.999, 1e-3, 0, 0]));
        const pipe = pipeline(code);
        const bg = device.createBindGroup({ layout: pipe.getBindGroupLayout(0), entries: [{ binding: 0, resource: { buffer: ob } }, { binding: 1, resource: { buffer: ub } }] });
        const ms = await timeBatched(run(pipe, bg, [invocations / 64]));
        const gflops = +(invocations * STEPS * acc * 8 / (ms / 1e3) / 1e9).toFixed(2);
        out.alu_by_accumulators.webgpu[`${acc}x${unroll}`] = gflops;
        out.alu_gflops.webgpu = Math.max(out.alu_gflops.webgpu ?? 0, gflops);
        ob.destroy(); ub.destroy();
      }
      // copy, per row: output vec4 i sums input vec4s i, i + nOut, i + 2 nOut, ... when nIn >= nOut
      // (every input vec4 read once); when the output is larger, it reads input vec4 min(i, nIn − 1)
      // (every input vec4 read at least once, the rest one cached vec4). No division or modulo: the
      // probe should be as fast as a copy can be, so that its time is a floor.
      const shapes = [[64, 1], [256, 1], [64, 4]];
      const pipes = new Map();
      for (const row of rows) {
        const nIn = Math.ceil(row.in_floats / 4);
        const nOut = Math.ceil(row.out_floats / 4);
        const xb = device.createBuffer({ size: nIn * 16, usage: S.STORAGE | S.COPY_DST });
        device.queue.writeBuffer(xb, 0, new Float32Array(nIn * 4).fill(0.5));
        const ob = device.createBuffer({ size: nOut * 16, usage: S.STORAGE });
        const ub = device.createBuffer({ size: 16, usage: S.UNIFORM | S.COPY_DST });
        device.queue.writeBuffer(ub, 0, new Uint32Array([nIn, nOut, 0, 0]));
        let best = null;
        for (const [wg, per] of shapes) {
          const key = `${wg}x${per}`;
          if (!pipes.has(key)) {
            pipes.set(key, pipeline(`@group(0) @binding(0) var<storage, read> x: array<vec4<f32>>;
              @group(0) @binding(1) var<storage, read_write> o: array<vec4<f32>>;
              @group(0) @binding(2) var<uniform> u: vec4<u32>;
              @compute @workgroup_size(${wg}) fn main(@builtin(global_invocation_id) g: vec3<u32>) {
                for (var k = 0u; k < ${per}u; k = k + 1u) {
                  let i = g.x * ${per}u + k;
                  if (i >= u.y) { return; }
                  var acc = x[min(i, u.x - 1u)];
                  for (var j = i + u.y; j < u.x; j = j + u.y) { acc = acc + x[j]; }
                  o[i] = acc;
                }
              }`));
          }
          const pipe = pipes.get(key);
          const bg = device.createBindGroup({ layout: pipe.getBindGroupLayout(0), entries: [{ binding: 0, resource: { buffer: xb } }, { binding: 1, resource: { buffer: ob } }, { binding: 2, resource: { buffer: ub } }] });
          const groups = Math.ceil(nOut / (wg * per));
          if (groups > 65535) throw new Error(`${row.task}: ${groups} workgroups; the probe dispatches one dimension`);
          const ms = await timeBatched(run(pipe, bg, [groups]));
          if (!best || ms < best.copy_ms) best = { copy_ms: +ms.toFixed(4), shape: `workgroup ${wg}, ${per} vec4 a thread` };
        }
        out.rows[row.task].webgpu = best;
        xb.destroy(); ob.destroy(); ub.destroy();
      }
      device.destroy();
    }

    if (targets.includes('webgl2')) {
      const { gl, program } = window.bench.glProbe();
      const waitTexel = new Float32Array(4);
      const texture = (w, h, data) => {
        const t = gl.createTexture();
        gl.bindTexture(gl.TEXTURE_2D, t);
        gl.texStorage2D(gl.TEXTURE_2D, 1, gl.RGBA32F, w, h);
        gl.texParameteri(gl.TEXTURE_2D, gl.TEXTURE_MIN_FILTER, gl.NEAREST);
        gl.texParameteri(gl.TEXTURE_2D, gl.TEXTURE_MAG_FILTER, gl.NEAREST);
        if (data) gl.texSubImage2D(gl.TEXTURE_2D, 0, 0, 0, w, h, gl.RGBA, gl.FLOAT, data);
        return t;
      };
      const target = (w, h) => {
        const t = texture(w, h);
        const fb = gl.createFramebuffer();
        gl.bindFramebuffer(gl.FRAMEBUFFER, fb);
        gl.framebufferTexture2D(gl.FRAMEBUFFER, gl.COLOR_ATTACHMENT0, gl.TEXTURE_2D, t, 0);
        if (gl.checkFramebufferStatus(gl.FRAMEBUFFER) !== gl.FRAMEBUFFER_COMPLETE) throw new Error('RGBA32F render target incomplete');
        return { t, fb };
      };
      const draws = (w, h) => async (n) => {
        gl.viewport(0, 0, w, h);
        for (let i = 0; i < n; ++i) gl.drawArrays(gl.TRIANGLES, 0, 3);
        gl.readPixels(0, 0, 1, 1, gl.RGBA, gl.FLOAT, waitTexel);
      };
      // alu: a 256×256 target, the best of ALU_VARIANTS
      const tg = target(256, 256);
      for (const { acc, unroll } of ALU_VARIANTS) {
        const p = program(`#version 300 es
          precision highp float; uniform vec4 u; out vec4 o;
          void main() {
            float seed = (gl_FragCoord.x + 256.0 * gl_FragCoord.y) * 1e-7;
            ${[...Array(acc).keys()].map((j) => `vec4 a${j} = vec4(seed + ${j}.0);`).join(' ')}
            for (int i = 0; i < ${STEPS / unroll}; ++i) {
              ${aluBody(acc, unroll)}
            }
            o = ${[...Array(acc).keys()].map((j) => `a${j}`).join(' + ')};
          }`);
        gl.useProgram(p);
        gl.uniform4f(gl.getUniformLocation(p, 'u'), 0.999, 1e-3, 0, 0);
        const ms = await timeBatched(draws(256, 256));
        const gflops = +(256 * 256 * STEPS * acc * 8 / (ms / 1e3) / 1e9).toFixed(2);
        out.alu_by_accumulators.webgl2[`${acc}x${unroll}`] = gflops;
        out.alu_gflops.webgl2 = Math.max(out.alu_gflops.webgl2 ?? 0, gflops);
        gl.deleteProgram(p);
      }
      gl.deleteFramebuffer(tg.fb); gl.deleteTexture(tg.t);
      // copy, per row: output and input textures of one width w; output texel (x, y) of a w×h
      // target sums input texels (x, y), (x, y + h), (x, y + 2h), ... when the input is taller
      // (every input texel read once), else reads (x, min(y, inH − 1)). No division or modulo.
      const copy = program(`#version 300 es
        precision highp float; precision highp int; precision highp sampler2D;
        uniform sampler2D x; uniform ivec2 u;  // input height, output height
        out vec4 o;
        void main() {
          ivec2 p = ivec2(gl_FragCoord.xy);
          vec4 acc = texelFetch(x, ivec2(p.x, min(p.y, u.x - 1)), 0);
          for (int y = p.y + u.y; y < u.x; y += u.y) acc += texelFetch(x, ivec2(p.x, y), 0);
          o = acc;
        }`);
      gl.useProgram(copy);
      gl.uniform1i(gl.getUniformLocation(copy, 'x'), 0);
      const uLoc = gl.getUniformLocation(copy, 'u');
      for (const row of rows) {
        const nIn = Math.ceil(row.in_floats / 4);
        const nOut = Math.ceil(row.out_floats / 4);
        let best = null;
        for (const width of [1024, 2048, 4096]) {
          const w = Math.min(width, nOut);
          if (best && best.width === w) continue;  // the same shapes again
          const h = Math.ceil(nOut / w);
          const inH = Math.ceil(nIn / w);
          gl.activeTexture(gl.TEXTURE0);
          const xt = texture(w, inH, new Float32Array(w * inH * 4).fill(0.5));
          const tg = target(w, h);
          gl.useProgram(copy);
          gl.bindTexture(gl.TEXTURE_2D, xt);
          gl.uniform2i(uLoc, inH, h);
          const ms = await timeBatched(draws(w, h));
          if (!best || ms < best.copy_ms) best = { copy_ms: +ms.toFixed(4), shape: `input ${w}×${inH}, one RGBA32F target ${w}×${h}`, width: w };
          gl.deleteFramebuffer(tg.fb); gl.deleteTexture(tg.t); gl.deleteTexture(xt);
        }
        if (gl.getError() !== gl.NO_ERROR) throw new Error(`${row.task}: a GL error in the webgl2 copy probe`);
        delete best.width;
        out.rows[row.task].webgl2 = best;
      }
    }
    return out;
  }, rows, targets);
  r.environment = await s.page.evaluate(() => window.bench.environment?.() ?? null).catch(() => null);
  console.log(JSON.stringify(r, null, 1));
} finally {
  await s.close();
}
