// A built model package as a page a person can open (issue 16 item 4): `webtune build` writes a
// wasm package of MobileNet-v2 (the ONNX export of ../shared/models where present, else the
// zoo's), `webtune tracker --models DIR` serves it under /models/<name>/, and a real headless
// Chromium opens the page, picks the input file (the export's <model>.input.f32, else a raw
// float32 file written here) with the page's file picker, runs the model and shows the latency
// and the top-5 classes. Checked: the table rows, a finite output of 1000 logits, a positive
// median latency, and with ../shared the top-5 classes of <model>.logits.f32; the redirect of
// /models/<name> to the slash form; no horizontal overflow at 1280×800. The screenshot goes to
// $WEBTUNE_ARTIFACTS/model_page.png.
//
// Run by ctest (tests/CMakeLists.txt) as `node --test`, with WEBTUNE_BINARY, WEBTUNE_ARTIFACTS
// and CHROMIUM set.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import puppeteer from 'puppeteer-core';

const binary = process.env.WEBTUNE_BINARY;
const artifacts = process.env.WEBTUNE_ARTIFACTS || join(process.cwd(), 'artifacts');
const chromium = process.env.CHROMIUM || '/usr/bin/chromium';
const shared = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'shared', 'models');

function run(args) {
  const r = spawnSync(binary, args, { encoding: 'utf8' });
  assert.equal(r.status, 0, `webtune ${args.join(' ')}:\n${r.stderr}`);
  return r.stdout;
}

function top5(values) {
  return [...values.keys()].sort((a, b) => values[b] - values[a]).slice(0, 5);
}

test('a built package is a page that runs the model on the tab\'s device', { timeout: 280_000 }, async (t) => {
  assert.ok(binary, 'WEBTUNE_BINARY must name the webtune program');
  mkdirSync(artifacts, { recursive: true });
  const work = mkdtempSync(join(tmpdir(), 'webtune-model-page-'));
  let tracker = null;
  let browser = null;
  t.after(async () => {
    await browser?.close();
    if (tracker && tracker.exitCode === null) tracker.kill('SIGTERM');
    rmSync(work, { recursive: true, force: true });
  });

  const useShared = existsSync(join(shared, 'mobilenet_v2.onnx'));
  if (!useShared) t.diagnostic(`${shared} is absent: the zoo's MobileNet-v2 and a written input instead`);
  const onnx = useShared ? join(shared, 'mobilenet_v2.onnx') : join(work, 'mobilenet_v2.onnx');
  if (!useShared) run(['zoo', 'mobilenet_v2', '-o', onnx]);
  const inputFile = useShared ? join(shared, 'mobilenet_v2.input.f32') : join(work, 'input.f32');
  if (!useShared) {
    const x = new Float32Array(3 * 224 * 224).map((_, i) => Math.sin(i * 0.37));
    writeFileSync(inputFile, Buffer.from(x.buffer));
  }
  const models = join(work, 'models');
  run(['build', '--model', onnx, '--target', 'wasm', '-o', join(models, 'mobilenet_v2')]);
  assert.ok(existsSync(join(models, 'mobilenet_v2', 'index.html')), 'the package has its page');

  tracker = spawn(binary, ['tracker', '--listen', '127.0.0.1:0', '--models', models],
                  { stdio: ['ignore', 'pipe', 'pipe'] });
  const pageUrl = await new Promise((resolve, reject) => {
    let text = '';
    tracker.stderr.setEncoding('utf8');
    tracker.stderr.on('data', (chunk) => {
      text += chunk;
      const m = text.match(/model page at (http:\/\/\S+)/);
      if (m) resolve(m[1]);
    });
    tracker.once('exit', (code) => reject(new Error(`tracker exited (${code}):\n${text}`)));
  });
  assert.match(pageUrl, /\/models\/mobilenet_v2\/$/);
  const redirect = await fetch(pageUrl.replace(/\/$/, ''), { redirect: 'manual' });
  assert.equal(redirect.status, 308);
  assert.equal(redirect.headers.get('location'), '/models/mobilenet_v2/');

  browser = await puppeteer.launch({
    executablePath: chromium, headless: true, userDataDir: join(work, 'chromium'),
    args: ['--no-sandbox', '--disable-quic', '--no-first-run', '--disable-background-networking',
           '--disable-component-update', '--disable-sync'],
    defaultViewport: { width: 1280, height: 800 },
  });
  const page = await browser.newPage();
  const pageErrors = [];
  page.on('pageerror', (e) => pageErrors.push(e.message));
  await page.goto(pageUrl);
  await page.waitForFunction(() => window.webtunePageReady || window.webtuneResult?.error,
                             { timeout: 60_000 });
  assert.equal(await page.evaluate(() => window.webtuneResult?.error ?? null), null);
  assert.equal(await page.evaluate(() => crossOriginIsolated), true);
  assert.match(await page.$eval('#facts', (e) => e.textContent), /target wasm · input \[1,3,224,224\]/);

  await (await page.$('#file')).uploadFile(inputFile);
  await page.waitForFunction(() => /input: /.test(document.getElementById('status').textContent),
                             { timeout: 10_000 });
  await page.$eval('#runs', (e) => { e.value = '3'; });
  await page.click('#run');
  await page.waitForFunction(() => window.webtuneResult, { timeout: 200_000 });
  const result = await page.evaluate(() => window.webtuneResult);
  assert.equal(result.error, undefined, result.error);
  assert.equal(result.outputLength, 1000);
  assert.equal(result.finite, true);
  assert.ok(result.medianMs > 0 && result.minMs <= result.medianMs && result.medianMs <= result.maxMs);
  const rows = await page.$$eval('#top tr', (trs) => trs.slice(1).map((tr) => tr.textContent));
  assert.equal(rows.length, 5, rows.join('\n'));
  const shown = result.top5.map((c) => c.index);
  for (let i = 1; i < 5; ++i) assert.ok(result.top5[i - 1].value >= result.top5[i].value);
  if (useShared) {
    const bytes = readFileSync(join(shared, 'mobilenet_v2.logits.f32'));
    const logits = new Float32Array(bytes.buffer, bytes.byteOffset, bytes.length / 4);
    assert.deepEqual(shown, top5(logits), 'the page\'s top-5 classes are the export\'s');
  }
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth > window.innerWidth);
  assert.equal(overflow, false, 'no horizontal overflow at 1280×800');
  await page.screenshot({ path: join(artifacts, 'model_page.png'), fullPage: true });
  assert.deepEqual(pageErrors, []);
});
