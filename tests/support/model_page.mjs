#!/usr/bin/env node
// model_page.mjs — runs a model package (docs/package.md) in a real headless Chromium, the way a
// page would: for tests/model_runtime_test.cpp and by hand.
//
//   node tests/support/model_page.mjs --package DIR --input IN.f32 --output OUT.f32
//        [--target webgl2|webgpu|wasm] [--runs N] [--gl swiftshader|llvmpipe]
//        [--chromium /usr/bin/chromium] [--lose-after-load] [--repo-runtime]
//
// A static HTTP server on 127.0.0.1 (an ephemeral port) serves the package under /pkg/ and the
// repository's runtime/ under /runtime/ (a package may carry its own runtime/ copy: it is served
// as it is under /pkg/runtime/), with the COOP / COEP headers that make the page cross-origin
// isolated, as the tracker serves /agent (SharedArrayBuffer for wasm threads). The page imports
// the package's own model.mjs (/pkg/model.mjs: its runtime/ copy, as `webtune build` wrote it)
// or, when the package has none or with --repo-runtime, the repository's /runtime/model.mjs,
// loads /pkg/, runs the model `--runs` times (default 1) on IN.f32 (raw
// little-endian fp32, row-major) and the last output is written to OUT.f32. With
// --lose-after-load the page loses its WebGL context (WEBGL_lose_context) or destroys its WebGPU
// device after load, so the run must reject.
//
// stdout: one JSON line {"load_ms", "run_ms": [each run], "median_ms", "outputs", "isolated",
// "threads"}; on a failure of load or run: exit status 1 and the Error's message on stderr as
// "model_page: error: <message>".

import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import puppeteer from 'puppeteer-core';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

const { values: opts } = parseArgs({
  options: {
    package: { type: 'string' },
    input: { type: 'string' },
    output: { type: 'string', default: '' },
    target: { type: 'string', default: '' },
    runs: { type: 'string', default: '1' },
    gl: { type: 'string', default: 'swiftshader' },
    chromium: { type: 'string', default: process.env.WEBTUNE_CHROMIUM || '/usr/bin/chromium' },
    'lose-after-load': { type: 'boolean', default: false },
    'repo-runtime': { type: 'boolean', default: false },
  },
});
if (!opts.package || !opts.input) {
  console.error('model_page: --package DIR and --input FILE.f32 are required');
  process.exit(2);
}
const runs = Math.max(1, Number.parseInt(opts.runs, 10) || 1);

const TYPES = { '.mjs': 'text/javascript', '.js': 'text/javascript', '.json': 'application/json', '.html': 'text/html', '.wasm': 'application/wasm' };

/** Serves `/pkg/...` from the package, `/runtime/...` from runtime/, `/input.f32` and `/`. */
function serve() {
  const roots = { pkg: path.resolve(opts.package), runtime: path.join(REPO, 'runtime') };
  const server = http.createServer((req, res) => {
    const headers = {
      'Cross-Origin-Opener-Policy': 'same-origin',
      'Cross-Origin-Embedder-Policy': 'require-corp',
      'Cross-Origin-Resource-Policy': 'same-origin',
      'Cache-Control': 'no-cache',
    };
    const name = decodeURIComponent(new URL(req.url, 'http://x').pathname);
    if (name === '/') {
      res.writeHead(200, { ...headers, 'Content-Type': 'text/html' });
      res.end('<!doctype html><title>webtune model</title><body>model</body>');
      return;
    }
    let file = null;
    if (name === '/input.f32') file = path.resolve(opts.input);
    const [, top, ...rest] = name.split('/');
    if (roots[top]) {
      file = path.join(roots[top], ...rest);
      if (!file.startsWith(roots[top] + path.sep)) file = null;
    }
    if (!file || !fs.existsSync(file) || !fs.statSync(file).isFile()) {
      res.writeHead(404, headers);
      res.end();
      return;
    }
    res.writeHead(200, { ...headers, 'Content-Type': TYPES[path.extname(file)] || 'application/octet-stream' });
    res.end(fs.readFileSync(file));
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

function chromiumArgs() {
  const args = ['--no-sandbox', '--disable-quic', '--no-first-run', '--disable-background-networking',
    '--disable-component-update', '--disable-sync', '--disable-background-timer-throttling',
    '--disable-renderer-backgrounding', '--enable-unsafe-webgpu'];
  if (opts.gl === 'llvmpipe') args.push('--use-gl=angle', '--use-angle=gl-egl', '--ignore-gpu-blocklist');
  else args.push('--enable-unsafe-swiftshader');
  return args;
}

// The page side: load, optionally lose the device, run, return the last output as base64.
async function pageRun(target, runCount, lose, entry) {
  const { load } = await import(entry);
  const input = new Float32Array(await (await fetch('/input.f32')).arrayBuffer());
  const t0 = performance.now();
  let model;
  try {
    model = await load('/pkg/', target ? { target } : {});
  } catch (e) {
    return { error: e.message };
  }
  const loadMs = performance.now() - t0;
  if (lose) window.__webtuneLose();
  const times = [];
  let out = null;
  try {
    for (let r = 0; r < runCount; ++r) {
      const begin = performance.now();
      out = await model.run(input);
      times.push(performance.now() - begin);
    }
  } catch (e) {
    return { error: e.message };
  } finally {
    model.dispose();
  }
  const outputs = Array.isArray(out) ? out : [out];
  const bytes = new Uint8Array(outputs[0].buffer, outputs[0].byteOffset, outputs[0].byteLength);
  let binary = '';
  for (let i = 0; i < bytes.length; i += 0x8000) binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return {
    load_ms: loadMs, run_ms: times, outputs: outputs.length, output: btoa(binary),
    isolated: crossOriginIsolated, threads: navigator.hardwareConcurrency,
  };
}

const server = await serve();
const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'webtune-model-page-'));
let browser = null;
let status = 0;
try {
  browser = await puppeteer.launch({
    executablePath: opts.chromium, headless: true, pipe: true, userDataDir: profile,
    args: chromiumArgs(), protocolTimeout: 600000,
  });
  const page = await browser.newPage();
  page.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warning') console.error(`model_page: page: ${m.text()}`); });
  page.on('pageerror', (e) => console.error(`model_page: page error: ${e.message}`));
  await page.goto(`http://127.0.0.1:${server.address().port}/`, { waitUntil: 'load' });
  if (opts['lose-after-load']) {
    // Wraps the runtime's device creation so that the test can lose exactly its context/device.
    await page.evaluate(() => {
      const contexts = [];
      const original = HTMLCanvasElement.prototype.getContext;
      const offscreen = typeof OffscreenCanvas !== 'undefined' ? OffscreenCanvas.prototype.getContext : null;
      const keep = (ctx) => { if (ctx) contexts.push(ctx); return ctx; };
      HTMLCanvasElement.prototype.getContext = function (...a) { return keep(original.apply(this, a)); };
      if (offscreen) OffscreenCanvas.prototype.getContext = function (...a) { return keep(offscreen.apply(this, a)); };
      const devices = [];
      if (navigator.gpu) {
        const request = GPUAdapter.prototype.requestDevice;
        GPUAdapter.prototype.requestDevice = async function (...a) { const d = await request.apply(this, a); devices.push(d); return d; };
      }
      window.__webtuneLose = () => {
        for (const ctx of contexts) ctx.getExtension?.('WEBGL_lose_context')?.loseContext();
        for (const d of devices) d.destroy();
      };
    });
  }
  // The package's own model.mjs (its runtime/ copy, as a page would import it) when it has one;
  // otherwise, or with --repo-runtime, the repository's runtime/model.mjs.
  const own = fs.existsSync(path.join(opts.package, 'model.mjs')) && !opts['repo-runtime'];
  const entry = own ? '/pkg/model.mjs' : '/runtime/model.mjs';
  const result = await page.evaluate(pageRun, opts.target, runs, opts['lose-after-load'], entry);
  if (result.error) {
    console.error(`model_page: error: ${result.error}`);
    status = 1;
  } else {
    if (opts.output) fs.writeFileSync(opts.output, Buffer.from(result.output, 'base64'));
    const sorted = [...result.run_ms].sort((a, b) => a - b);
    const { output, ...summary } = result;
    console.log(JSON.stringify({ ...summary, median_ms: sorted[Math.floor(sorted.length / 2)] }));
  }
} catch (e) {
  console.error(`model_page: error: ${e.message}`);
  status = 1;
} finally {
  if (browser) await Promise.race([browser.close().catch(() => {}), new Promise((r) => setTimeout(r, 5000))]);
  server.close();
  fs.rmSync(profile, { recursive: true, force: true });
}
process.exit(status);
