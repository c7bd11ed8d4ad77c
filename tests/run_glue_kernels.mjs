// Runs glue kernels (deploy/glue_kernels.hpp) in headless Chromium for
// tests/deploy_glue_test.cpp: WGSL compute kernels in WebGPU (the SwiftShader adapter) and
// GLSL ES 3.00 fragment kernels (gles-frag) in WebGL2 (SwiftShader through ANGLE).
//
//   node tests/run_glue_kernels.mjs IN.json OUT.json
//
// IN:  {"kernels": [{"name", "source", "inputs": [[floats]...], "bindings": [int...],
//                    "output_floats": n, "dispatch": [x, y, z]}],
//       "fragments": [{"name", "source", "inputs": [{"width", "height", "channels",
//                      "texels": [floats]}], "output": {"width", "height", "channels"}}]}
// OUT: {"adapter": bool, "results": [{"name", "output": [floats]} | {"name", "error": "..."}],
//       "fragments": [{"name", "output": [floats of render target 0]} | {"name", "error"}]}
// WebGPU: the output buffer is binding 2 of group 0, filled with NaN before the dispatch.
// WebGL2: one render target cleared to NaN, drawn with the full-screen triangle, read back as
// RGBA floats (only `channels` of each texel kept). JSON has no NaN: null stands for it, in
// the input texels and in the outputs; nor infinities: "inf" and "-inf" stand for them, both
// ways.
// A page on a loopback http server, because navigator.gpu needs a secure context (about:blank
// is not one).
import { readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import puppeteer from 'puppeteer-core';

const [inPath, outPath] = process.argv.slice(2);
const job = JSON.parse(readFileSync(inPath, 'utf8'));
const server = http.createServer((req, res) => {
  res.setHeader('content-type', 'text/html');
  res.end('<!doctype html><title>webtune glue kernels</title>');
});
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const browser = await puppeteer.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  args: ['--no-sandbox', '--enable-unsafe-swiftshader', '--enable-unsafe-webgpu'],
});
try {
  const page = await browser.newPage();
  await page.goto(`http://127.0.0.1:${server.address().port}/`);
  const result = await page.evaluate(async (kernels) => {
    const fromJson = (v) => (v === null ? NaN : v === 'inf' ? Infinity : v === '-inf' ? -Infinity : v);
    const toJson = (v) => (Number.isNaN(v) ? null : v === Infinity ? 'inf' : v === -Infinity ? '-inf' : v);
    const adapter = await navigator.gpu?.requestAdapter();
    if (!adapter) return { adapter: false, results: [] };
    const device = await adapter.requestDevice();
    const results = [];
    for (const k of kernels) {
      try {
        device.pushErrorScope('validation');
        const module = device.createShaderModule({ code: k.source });
        const info = await module.getCompilationInfo();
        const errors = info.messages.filter((m) => m.type === 'error');
        if (errors.length) throw new Error(errors.map((m) => `${m.lineNum}: ${m.message}`).join('\n'));
        const pipeline = device.createComputePipeline({
          layout: 'auto', compute: { module, entryPoint: 'main' },
        });
        const buffer = (floats) => {
          const data = new Float32Array(Math.max(4, Math.ceil(floats.length / 4) * 4));
          data.set(floats);
          const b = device.createBuffer({
            size: data.byteLength,
            usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST,
          });
          device.queue.writeBuffer(b, 0, data);
          return b;
        };
        const entries = k.inputs.map((floats, i) => ({
          binding: k.bindings[i], resource: { buffer: buffer(floats.map(fromJson)) },
        }));
        const out = buffer(new Array(k.output_floats).fill(NaN));
        entries.push({ binding: 2, resource: { buffer: out } });
        const group = device.createBindGroup({ layout: pipeline.getBindGroupLayout(0), entries });
        const read = device.createBuffer({
          size: out.size, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST,
        });
        const encoder = device.createCommandEncoder();
        const pass = encoder.beginComputePass();
        pass.setPipeline(pipeline);
        pass.setBindGroup(0, group);
        pass.dispatchWorkgroups(...k.dispatch);
        pass.end();
        encoder.copyBufferToBuffer(out, 0, read, 0, out.size);
        device.queue.submit([encoder.finish()]);
        const error = await device.popErrorScope();
        if (error) throw new Error(error.message);
        await read.mapAsync(GPUMapMode.READ);
        const values = Array.from(new Float32Array(read.getMappedRange()).slice(0, k.output_floats));
        read.unmap();
        // JSON has no NaN: an unwritten element comes back as null.
        results.push({ name: k.name, output: values.map(toJson) });
      } catch (e) {
        results.push({ name: k.name, error: String(e.message || e) });
      }
    }
    return { adapter: true, results };
  }, job.kernels);
  result.fragments = await page.evaluate(async (kernels) => {
    const fromJson = (v) => (v === null ? NaN : v === 'inf' ? Infinity : v === '-inf' ? -Infinity : v);
    const toJson = (v) => (Number.isNaN(v) ? null : v === Infinity ? 'inf' : v === -Infinity ? '-inf' : v);
    const vertex = `#version 300 es
void main() {
  vec2 corner = vec2(float((gl_VertexID << 1) & 2), float(gl_VertexID & 2));
  gl_Position = vec4(corner * 2.0 - 1.0, 0.0, 1.0);
}`;
    const gl = document.createElement('canvas').getContext('webgl2');
    if (!gl || !gl.getExtension('EXT_color_buffer_float')) {
      return kernels.map((k) => ({ name: k.name, error: 'no WebGL2 with EXT_color_buffer_float' }));
    }
    const results = [];
    for (const k of kernels) {
      const objects = [];
      try {
        const shader = (type, text) => {
          const s = gl.createShader(type);
          gl.shaderSource(s, text);
          gl.compileShader(s);
          if (!gl.getShaderParameter(s, gl.COMPILE_STATUS)) throw new Error(gl.getShaderInfoLog(s));
          return s;
        };
        const program = gl.createProgram();
        gl.attachShader(program, shader(gl.VERTEX_SHADER, vertex));
        gl.attachShader(program, shader(gl.FRAGMENT_SHADER, k.source));
        gl.linkProgram(program);
        if (!gl.getProgramParameter(program, gl.LINK_STATUS)) throw new Error(gl.getProgramInfoLog(program));
        gl.useProgram(program);
        k.inputs.forEach((input, i) => {
          const t = gl.createTexture();
          objects.push(t);
          gl.activeTexture(gl.TEXTURE0 + i);
          gl.bindTexture(gl.TEXTURE_2D, t);
          gl.texParameteri(gl.TEXTURE_2D, gl.TEXTURE_MIN_FILTER, gl.NEAREST);
          gl.texParameteri(gl.TEXTURE_2D, gl.TEXTURE_MAG_FILTER, gl.NEAREST);
          const rgba = input.channels === 4;
          gl.texStorage2D(gl.TEXTURE_2D, 1, rgba ? gl.RGBA32F : gl.R32F, input.width, input.height);
          const data = new Float32Array(input.width * input.height * input.channels);
          data.set(input.texels.slice(0, data.length).map(fromJson));
          gl.texSubImage2D(gl.TEXTURE_2D, 0, 0, 0, input.width, input.height,
            rgba ? gl.RGBA : gl.RED, gl.FLOAT, data);
          gl.uniform1i(gl.getUniformLocation(program, `in${i}`), i);
        });
        const out = k.output;
        const target = gl.createTexture();
        objects.push(target);
        gl.activeTexture(gl.TEXTURE0 + k.inputs.length);
        gl.bindTexture(gl.TEXTURE_2D, target);
        gl.texStorage2D(gl.TEXTURE_2D, 1, out.channels === 4 ? gl.RGBA32F : gl.R32F, out.width, out.height);
        const fb = gl.createFramebuffer();
        gl.bindFramebuffer(gl.FRAMEBUFFER, fb);
        gl.framebufferTexture2D(gl.FRAMEBUFFER, gl.COLOR_ATTACHMENT0, gl.TEXTURE_2D, target, 0);
        gl.viewport(0, 0, out.width, out.height);
        gl.clearBufferfv(gl.COLOR, 0, [NaN, NaN, NaN, NaN]);
        gl.drawArrays(gl.TRIANGLES, 0, 3);
        const rgba = new Float32Array(out.width * out.height * 4);
        gl.readPixels(0, 0, out.width, out.height, gl.RGBA, gl.FLOAT, rgba);
        const error = gl.getError();
        if (error !== gl.NO_ERROR) throw new Error(`GL error ${error}`);
        const values = [];
        for (let t = 0; t < out.width * out.height; ++t) {
          for (let c = 0; c < out.channels; ++c) values.push(rgba[4 * t + c]);
        }
        gl.deleteFramebuffer(fb);
        gl.deleteProgram(program);
        results.push({ name: k.name, output: values.map(toJson) });
      } catch (e) {
        results.push({ name: k.name, error: String(e.message || e) });
      } finally {
        for (const t of objects) gl.deleteTexture(t);
      }
    }
    return results;
  }, job.fragments || []);
  writeFileSync(outPath, JSON.stringify(result));
} finally {
  await browser.close();
  server.close();
}
