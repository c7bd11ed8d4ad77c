// Runs WGSL compute kernels (deploy/'s glue kernels) in headless Chromium's WebGPU (the
// SwiftShader adapter) for tests/deploy_glue_test.cpp.
//
//   node tests/run_wgsl_glue.mjs IN.json OUT.json
//
// IN:  {"kernels": [{"name", "source", "inputs": [[floats]...], "bindings": [int...],
//                    "output_floats": n, "dispatch": [x, y, z]}]}
// OUT: {"adapter": bool, "results": [{"name", "output": [floats]} | {"name", "error": "..."}]}
// The output buffer is binding 2 of group 0, filled with NaN before the dispatch. A page on a
// loopback http server, because navigator.gpu needs a secure context (about:blank is not one).
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
          binding: k.bindings[i], resource: { buffer: buffer(floats) },
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
        results.push({ name: k.name, output: values.map((v) => (Number.isNaN(v) ? null : v)) });
      } catch (e) {
        results.push({ name: k.name, error: String(e.message || e) });
      }
    }
    return { adapter: true, results };
  }, job.kernels);
  writeFileSync(outPath, JSON.stringify(result));
} finally {
  await browser.close();
  server.close();
}
