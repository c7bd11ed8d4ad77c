// The dashboard's Models panel end to end (issue 16 item 3): `webtune tracker --models DIR --db
// RECORDS` serves a small fake package (manifest.json and weights.bin are all the farm reads), a
// fake agent here (a WebSocket client that declares job_kinds ["model"]) answers the model job
// with three costs, `webtune measure-model` submits it and records the result, and the tracker's
// dashboard in headless Chromium shows it beside the package's estimate. A screenshot goes to
// $WEBTUNE_ARTIFACTS/models_panel.png.
//
// Run by ctest (tests/CMakeLists.txt) as `node --test`, with WEBTUNE_BINARY, WEBTUNE_ARTIFACTS
// and CHROMIUM set.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import puppeteer from 'puppeteer-core';
import WebSocket from 'ws';

const binary = process.env.WEBTUNE_BINARY;
const artifacts = process.env.WEBTUNE_ARTIFACTS || join(process.cwd(), 'artifacts');
const chromium = process.env.CHROMIUM || '/usr/bin/chromium';

function start(args) {
  const child = spawn(binary, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  child.out = '';
  child.err = '';
  child.stdout.setEncoding('utf8').on('data', (c) => { child.out += c; });
  child.stderr.setEncoding('utf8').on('data', (c) => { child.err += c; });
  return child;
}

function stop(child) {
  if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve();
    else child.once('exit', resolve);
  });
}

const exited = (child) => new Promise((resolve) => {
  if (child.exitCode !== null) resolve(child.exitCode);
  else child.once('exit', (code) => resolve(code));
});

async function waitFor(what, predicate, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const value = predicate();
    if (value) return value;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`timed out waiting for ${what}`);
}

/// A package with one task (dense 64³ run by 2 nodes), input [1,12], output [1,10] and an
/// estimate of 5.5 ms; returns the manifest's SHA-256.
function writePackage(dir) {
  mkdirSync(dir, { recursive: true });
  const manifest = JSON.stringify({
    format: 'webtune-package', version: 1,
    model: { name: 'tiny-net', file: 'tiny-net.onnx', sha256: 'a'.repeat(64) },
    target: 'webgl2', artifact_target: 'gles-frag', device_key: '',
    inputs: [{ name: 'input', shape: [1, 12], value: 0 }],
    outputs: [{ name: 'output', shape: [1, 10], value: 1 }],
    tasks: [{ name: 'dense_1', workload: { name: 'dense_1', op: 'dense', M: 64, N: 64, K: 64 },
              nodes: ['/a', '/b'], source: 'default', record_id: null, cost_ms: null }],
    slots: [], values: [], weights: [], steps: [], layout_transforms: 0, estimated_ms: 5.5,
  });
  writeFileSync(join(dir, 'manifest.json'), manifest);
  writeFileSync(join(dir, 'weights.bin'), Buffer.alloc(4096));
  return createHash('sha256').update(manifest).digest('hex');
}

test('a measured model shows on the dashboard beside its estimate', { timeout: 120_000 }, async (t) => {
  assert.ok(binary, 'WEBTUNE_BINARY must name the webtune program');
  mkdirSync(artifacts, { recursive: true });
  const work = mkdtempSync(join(tmpdir(), 'webtune-models-panel-'));
  const db = join(work, 'records.db');
  const sha = writePackage(join(work, 'models', 'tiny-webgl2'));
  const children = [];
  let browser = null;
  let agent = null;
  t.after(async () => {
    agent?.terminate();
    await browser?.close();
    await Promise.all(children.map(stop));
    rmSync(work, { recursive: true, force: true });
  });

  const tracker = start(['tracker', '--listen', '127.0.0.1:0', '--models', join(work, 'models'),
                         '--db', db]);
  children.push(tracker);
  const [, http] = await waitFor('the tracker', () => tracker.err.match(/dashboard at (http:\/\/\S+)/),
                                 30_000);
  const ws = `${http.replace('http://', 'ws://')}ws`;

  // The fake agent: runs model jobs only, answers 10, 12 and 11 ms.
  const jobs = [];
  agent = new WebSocket(ws);
  agent.on('open', () => agent.send(JSON.stringify({
    type: 'hello', protocol: 1, role: 'agent', name: 'fake-tab', keys: ['webgl2:fake-gpu'],
    job_kinds: ['model'], device: { renderer: 'fake gpu' } })));
  agent.on('message', (data) => {
    const m = JSON.parse(data.toString());
    if (m.type !== 'job') return;
    jobs.push(m);
    agent.send(JSON.stringify({ type: 'result', job: m.job, attempt: m.attempt, result: {
      error_no: 0, message: '', costs: [0.010, 0.012, 0.011], all_cost: 1.2,
      timestamp: Date.now() / 1000 } }));
  });

  const measure = start(['measure-model', '--tracker', ws, '--models', join(work, 'models'),
                         '--model', 'tiny-webgl2', '--key', 'webgl2', '--db', db, '--runs', '3',
                         '--warmup', '1', '--timeout', '30', '--wait', '60']);
  assert.equal(await exited(measure), 0, `measure-model failed:\n${measure.out}\n${measure.err}`);
  assert.match(measure.out, /median 11\.000 ms {2}min 10\.000 ms {2}max 12\.000 ms/);
  assert.match(measure.out, /measured \/ estimate 2\.000/);
  assert.equal(jobs.length, 1);
  assert.equal(jobs[0].input.kind, 'model');
  assert.equal(jobs[0].input.manifest_sha256, sha);

  // The API and the page.
  const { measurements } = await (await fetch(new URL('/api/models', http))).json();
  assert.equal(measurements.length, 1);
  assert.equal(measurements[0].model, 'tiny-webgl2');
  assert.equal(measurements[0].measured_over_estimate, 2);

  browser = await puppeteer.launch({
    executablePath: chromium,
    headless: true,
    userDataDir: join(work, 'chromium'),
    args: ['--no-sandbox', '--disable-quic', '--no-first-run', '--disable-background-networking',
           '--disable-component-update', '--disable-sync'],
    defaultViewport: { width: 1400, height: 900 },
  });
  const page = await browser.newPage();
  const pageErrors = [];
  page.on('pageerror', (e) => pageErrors.push(e.message));
  await page.goto(http);
  await page.waitForFunction(() => document.querySelectorAll('#models tbody tr').length === 1,
                             { timeout: 20_000 });
  const cells = await page.$$eval('#models tbody tr td', (tds) => tds.map((td) => td.textContent));
  assert.deepEqual(cells.slice(0, 9), ['tiny-webgl2', 'webgl2', 'webgl2:fake-gpu', 'fake-tab',
                                       '11.000', '10.000', '5.500', '2.00×', '3 runs']);
  assert.equal(await page.$eval('#models-empty', (el) => el.hidden), true);
  assert.equal(await page.$eval('#model-count', (el) => el.textContent), '(1)');
  await page.screenshot({ path: join(artifacts, 'models_panel.png'), fullPage: true });
  assert.deepEqual(pageErrors, []);
});
