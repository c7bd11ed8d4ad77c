// session.mjs — the bench page in one headless Chromium: a node http server on 127.0.0.1 (a
// secure context, so WebGPU is offered) with COOP/COEP headers, so that the page is
// cross-origin isolated and tfjs wasm can use its threaded SIMD build, and one page that has
// loaded index.html (TensorFlow.js 4.22 and page.mjs). Served: /agent/* = browser-agent/,
// /runtime/* = runtime/ (the kernel runners the agent's executors import), /tfjs/* = the
// @tensorflow packages in node_modules, /bench/* = this directory.

import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import puppeteer from 'puppeteer-core';

import { chromiumArgs } from './flags.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '../..');

const TYPES = {
  '.html': 'text/html', '.mjs': 'text/javascript', '.js': 'text/javascript',
  '.wasm': 'application/wasm', '.json': 'application/json', '.map': 'application/json',
};
const MOUNTS = [
  ['/agent/', path.join(root, 'browser-agent')],
  ['/runtime/', path.join(root, 'runtime')],
  ['/tfjs/', path.join(root, 'node_modules/@tensorflow')],
  ['/bench/', here],
];

function serve(req, res) {
  const url = new URL(req.url, 'http://127.0.0.1');
  let file = null;
  if (url.pathname === '/') file = path.join(here, 'index.html');
  for (const [prefix, dir] of MOUNTS) {
    if (!url.pathname.startsWith(prefix)) continue;
    const candidate = path.resolve(dir, `.${decodeURIComponent(url.pathname.slice(prefix.length - 1))}`);
    if (candidate.startsWith(dir + path.sep)) file = candidate;
  }
  const headers = {
    'Cross-Origin-Opener-Policy': 'same-origin',
    'Cross-Origin-Embedder-Policy': 'require-corp',
    'Cross-Origin-Resource-Policy': 'same-origin',
    'Cache-Control': 'no-store',
  };
  if (url.pathname === '/favicon.ico') {  // asked by every page; none, and no console error
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
  res.writeHead(200, headers);
  fs.createReadStream(file).pipe(res);
}

/**
 * Starts the server and Chromium (the farm's flags for `gl`, WebGPU on) and opens the page;
 * resolves to {browser, page, args, origin, close()} once window.bench is ready. Page errors
 * and warnings go to stderr. close() ends the browser, the server and the profile directory.
 */
export async function openSession({ gl = 'swiftshader', chromium = process.env.WEBTUNE_CHROMIUM || '/usr/bin/chromium' } = {}) {
  const server = http.createServer(serve);
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const origin = `http://127.0.0.1:${server.address().port}`;
  const profileDir = fs.mkdtempSync(path.join(os.tmpdir(), 'webtune-bench-'));
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
      protocolTimeout: 1800000,
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

/**
 * The driver of a probe over tuned artifacts (`node probe_….mjs ARTIFACT.json [...]`): opens one
 * session, runs `inPage(record, options)` in the page for each file given (`record`: the file's
 * `webtune artifact` JSON; `options`: the probe's own JSON-serialisable settings, read in node;
 * `inPage` goes through puppeteer's evaluate, so it must use nothing else from node) and prints
 * {file: result} as JSON on stdout, each result on stderr as it comes. Without files it prints
 * `usage` and exits with status 2.
 */
export async function probeArtifacts(usage, inPage, options = {}) {
  const files = process.argv.slice(2);
  if (!files.length) {
    console.error(`usage: ${usage}`);
    process.exit(2);
  }
  const session = await openSession();
  try {
    const out = {};
    for (const f of files) {
      out[f] = await session.page.evaluate(inPage, JSON.parse(fs.readFileSync(f, 'utf8')), options);
      console.error(f, JSON.stringify(out[f]));
    }
    console.log(JSON.stringify(out, null, 1));
  } finally {
    await session.close();
  }
}
