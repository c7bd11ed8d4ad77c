// session.mjs — the bench/model_vs_web page in one headless Chromium: a node http server on
// 127.0.0.1 (a secure context, so WebGPU is offered) that sends COOP same-origin + COEP
// require-corp (+ CORP same-origin) with every response, so that the page is cross-origin
// isolated and both wasm engines may use threads; one page that has loaded index.html
// (TensorFlow.js 4.22 and page.mjs). The Chromium flags are the browser farm's
// (bench/web_vs_tfjs/flags.mjs: SwiftShader for WebGL2 and WebGPU by default).
//
// Served: /tfjs/* = node_modules/@tensorflow, /ort/* = node_modules/onnxruntime-web/dist,
// /models/* = the models directory (<model>.onnx, .input.f32, .logits.f32), /webtune/* = the
// webtune packages directory (<model>-<target>/, when given), /bench/* = this directory.

import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import puppeteer from 'puppeteer-core';

import { chromiumArgs } from '../web_vs_tfjs/flags.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '../..');

const TYPES = {
  '.html': 'text/html', '.mjs': 'text/javascript', '.js': 'text/javascript',
  '.wasm': 'application/wasm', '.json': 'application/json', '.map': 'application/json',
};

/** The request handler for `mounts` ([[url prefix, directory], ...]); exported for tests. */
export function makeHandler(mounts) {
  return (req, res) => {
    const url = new URL(req.url, 'http://127.0.0.1');
    let file = null;
    if (url.pathname === '/') file = path.join(here, 'index.html');
    for (const [prefix, dir] of mounts) {
      if (!dir || !url.pathname.startsWith(prefix)) continue;
      const candidate = path.resolve(dir, `.${decodeURIComponent(url.pathname.slice(prefix.length - 1))}`);
      if (candidate.startsWith(dir + path.sep)) file = candidate;
    }
    const headers = {
      'Cross-Origin-Opener-Policy': 'same-origin',
      'Cross-Origin-Embedder-Policy': 'require-corp',
      'Cross-Origin-Resource-Policy': 'same-origin',
      'Cache-Control': 'no-store',
    };
    if (url.pathname === '/favicon.ico') {
      res.writeHead(204, headers);
      res.end();
      return;
    }
    if (!file || !fs.existsSync(file) || !fs.statSync(file).isFile()) {
      res.writeHead(404, headers);
      res.end('not found');
      return;
    }
    headers['Content-Type'] = TYPES[path.extname(file)] || 'application/octet-stream';
    headers['Content-Length'] = fs.statSync(file).size;
    res.writeHead(200, headers);
    fs.createReadStream(file).pipe(res);
  };
}

/**
 * Starts the server and Chromium and opens the page; resolves to {browser, page, args, origin,
 * close()} once window.bench is ready. `models`: the directory of the ONNX files; `packages`:
 * webtune's package directory or null. Page errors and warnings go to stderr. close() ends the
 * browser, the server and the profile directory.
 */
export async function openSession({
  gl = 'swiftshader', chromium = process.env.WEBTUNE_CHROMIUM || '/usr/bin/chromium', models, packages = null,
} = {}) {
  const mounts = [
    ['/tfjs/', path.join(root, 'node_modules/@tensorflow')],
    ['/ort/', path.join(root, 'node_modules/onnxruntime-web/dist')],
    ['/models/', models ? path.resolve(models) : null],
    ['/webtune/', packages ? path.resolve(packages) : null],
    ['/bench/', here],
  ];
  const server = http.createServer(makeHandler(mounts));
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const origin = `http://127.0.0.1:${server.address().port}`;
  const profileDir = fs.mkdtempSync(path.join(os.tmpdir(), 'webtune-model-bench-'));
  const args = chromiumArgs({ gl, webgpu: true });
  let browser = null;
  const close = async () => {
    if (browser) await browser.close().catch(() => {});
    server.close();
    fs.rmSync(profileDir, { recursive: true, force: true });
  };
  try {
    browser = await puppeteer.launch({
      executablePath: chromium, headless: true, pipe: true, userDataDir: profileDir, args,
      protocolTimeout: 3600000,
    });
    const page = await browser.newPage();
    page.on('console', (m) => {
      if (['error', 'warn'].includes(m.type())) console.error(`page ${m.type()}: ${m.text()}`);
    });
    page.on('pageerror', (e) => console.error(`page error: ${e.message}`));
    await page.goto(`${origin}/`, { waitUntil: 'load' });
    await page.waitForFunction(() => window.bench?.ready === true, { timeout: 60000 });
    return { browser, page, args, origin, close };
  } catch (e) {
    await close();
    throw e;
  }
}
