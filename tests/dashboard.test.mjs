// The dashboard in headless Chromium (puppeteer-core) while a small real tuning runs: `webtune
// tune` with its embedded tracker and one native agent on llvmpipe serves the dashboard for its
// records file. The convergence plot must hold as many points as the job has trials recorded
// (read back through the API), the agent list must show the live agent, the model run's plot
// (the tuning is recorded as model run "tiny") one point per estimate recorded, and a screenshot
// goes to $WEBTUNE_ARTIFACTS/dashboard.png. Then `webtune serve` on the same file shows the same
// job without a tracker.
//
// Run by ctest (tests/CMakeLists.txt) as `node --test`, with WEBTUNE_BINARY, WEBTUNE_ARTIFACTS
// and CHROMIUM set.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import puppeteer from 'puppeteer-core';

const binary = process.env.WEBTUNE_BINARY;
const artifacts = process.env.WEBTUNE_ARTIFACTS || join(process.cwd(), 'artifacts');
const chromium = process.env.CHROMIUM || '/usr/bin/chromium';
const TRIALS = 16;

/// Resolves with the first match of `pattern` in the child's stdout; rejects when it exits first.
function waitForOutput(child, pattern, what) {
  return new Promise((resolve, reject) => {
    let text = '';
    const onData = (chunk) => {
      text += chunk;
      const m = text.match(pattern);
      if (m) {
        child.stdout.off('data', onData);
        resolve(m);
      }
    };
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', onData);
    child.once('exit', (code) => reject(new Error(`${what} exited (${code}) before printing ${pattern}:\n${text}`)));
  });
}

function start(args, what) {
  const child = spawn(binary, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (chunk) => { stderr += chunk; });
  child.stderrText = () => stderr;
  child.what = what;
  return child;
}

function stop(child) {
  if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve();
    else child.once('exit', resolve);
  });
}

async function getJson(url) {
  const response = await fetch(url);
  assert.equal(response.status, 200, `${url}: ${response.status}`);
  return response.json();
}

/// Text of every row of a table body, one string per row.
const rows = (page, selector) => page.$$eval(`${selector} tbody tr`,
    (trs) => trs.map((tr) => tr.textContent));

test('the dashboard follows a live tuning and shows every trial', { timeout: 240_000 }, async (t) => {
  assert.ok(binary, 'WEBTUNE_BINARY must name the webtune program');
  mkdirSync(artifacts, { recursive: true });
  const work = mkdtempSync(join(tmpdir(), 'webtune-dashboard-'));
  const db = join(work, 'records.db');
  const children = [];
  let browser = null;
  t.after(async () => {
    await browser?.close();
    await Promise.all(children.map(stop));
    rmSync(work, { recursive: true, force: true });
  });

  // The browser first, so the page is open while the tuning runs.
  browser = await puppeteer.launch({
    executablePath: chromium,
    headless: true,
    userDataDir: join(work, 'chromium'),
    args: ['--no-sandbox', '--disable-quic', '--no-first-run', '--disable-background-networking',
           '--disable-component-update', '--disable-sync'],
    defaultViewport: { width: 1400, height: 1000 },
  });
  const page = await browser.newPage();
  const pageErrors = [];
  page.on('pageerror', (e) => pageErrors.push(e.message));

  // --min-repeat-ms stretches each measurement so that the tuning lasts a few seconds;
  // --linger keeps the embedded farm (and its dashboard) up once it is done.
  const tune = start(['--log-level', 'warn', 'tune', '--workload', 'dense:32,32,32',
                      '--target', 'gles-frag', '--tuner', 'random', '--trials', String(TRIALS),
                      '--batch', '2', '--min-repeat-ms', '100', '--local-agents', '1',
                      '--db', db, '--linger', '120', '--model-name', 'tiny'], 'webtune tune');
  children.push(tune);
  const [, url] = await waitForOutput(tune, /dashboard: (http:\/\/\S+)/, 'webtune tune');
  await page.goto(url);

  // The live agent shows up with its device and key.
  await page.waitForFunction(
      () => [...document.querySelectorAll('#agents tbody tr')].some(
          (tr) => tr.dataset.agent === 'local-0'), { timeout: 60_000 });
  const agents = await rows(page, '#agents');
  assert.equal(agents.length, 1, agents.join('\n'));
  assert.match(agents[0], /local-0/);
  assert.match(agents[0], /gles:llvmpipe/);
  assert.match(agents[0], /llvmpipe/);
  assert.match((await rows(page, '#keys')).join('\n'), /gles:llvmpipe/);

  // While it runs: the job is listed and the plot grows.
  await page.waitForFunction(() => Number(document.getElementById('plot').dataset.points) > 0,
                             { timeout: 60_000 });
  const firstJobs = await getJson(new URL('/api/jobs', url));
  t.diagnostic(`first plot seen with the job ${firstJobs.jobs[0]?.status}`);

  // Done: the plot holds one point per recorded trial.
  await waitForOutput(tune, /dashboard stays at/, 'webtune tune');
  const { jobs } = await getJson(new URL('/api/jobs', url));
  assert.equal(jobs.length, 1);
  const job = jobs[0];
  assert.equal(job.status, 'done');
  const recorded = await getJson(new URL(`/api/jobs/${job.id}/trials?limit=5000`, url));
  assert.equal(recorded.trials.length, recorded.total);
  assert.equal(recorded.total, TRIALS);
  // One poll fetches the jobs list before the trials: wait for a poll that saw the job done.
  await page.waitForFunction(
      (n) => Number(document.getElementById('plot').dataset.points) === n &&
             /done/.test(document.querySelector('#jobs tbody tr')?.textContent ?? ''),
      { timeout: 15_000 }, recorded.total);
  const plot = await page.$eval('#plot', (el) => ({
    points: Number(el.dataset.points),
    job: Number(el.dataset.job),
    canvas: !!el.querySelector('canvas'),
  }));
  assert.equal(plot.job, job.id);
  assert.equal(plot.points, recorded.trials.length,
               'the plot has one point per trial recorded');
  assert.ok(plot.canvas, 'uPlot drew a canvas');
  // The jobs table, the errors table and the best config entity agree with the records.
  const jobRows = await rows(page, '#jobs');
  assert.match(jobRows[0], /dense_32_32_32/);
  assert.match(jobRows[0], /done/);
  const errors = (await rows(page, '#errors')).join('\n');
  assert.match(errors, /NO_ERROR/);
  const bestConfig = await page.$eval('#best-config', (el) => el.textContent);
  const detail = await getJson(new URL(`/api/jobs/${job.id}`, url));
  assert.ok(detail.best, 'a best trial');
  assert.match(bestConfig, new RegExp(`"index": ${detail.best.config_index}\\b`));

  // The model run: the API returns the estimates recorded (one per batch of 2 from the first
  // with a success on), and the page plots each of them.
  const { models } = await getJson(new URL('/api/models', url));
  assert.equal(models.length, 1);
  assert.equal(models[0].model, 'tiny');
  assert.deepEqual(models[0].jobs.map((j) => j.job), [job.id]);
  assert.deepEqual(detail.model_runs, [models[0].id]);
  const { estimates } = await getJson(new URL(`/api/models/${models[0].id}/estimates`, url));
  assert.ok(estimates.length >= 1 && estimates.length <= TRIALS / 2, `${estimates.length}`);
  const first = TRIALS - 2 * (estimates.length - 1);
  assert.deepEqual(estimates.map((e) => e.trials),
                   Array.from({ length: estimates.length }, (_, i) => first + 2 * i),
                   'one estimate per batch');
  const bestMs = 2 * 32 * 32 * 32 / (detail.best.gflops * 1e9) * 1e3;
  assert.ok(Math.abs(estimates.at(-1).latency_ms - bestMs) <= 1e-9 * bestMs,
            `${estimates.at(-1).latency_ms} ms, the best trial's ${bestMs}`);
  await page.waitForFunction(
      (n) => Number(document.getElementById('model-plot').dataset.points) === n,
      { timeout: 15_000 }, estimates.length);
  const modelPlot = await page.$eval('#model-detail', (el) => ({
    hidden: el.hidden,
    run: Number(el.querySelector('#model-plot').dataset.run),
    canvas: !!el.querySelector('#model-plot canvas'),
    title: el.querySelector('#model-title').textContent,
  }));
  assert.equal(modelPlot.hidden, false);
  assert.equal(modelPlot.run, models[0].id);
  assert.ok(modelPlot.canvas, 'uPlot drew the model plot');
  assert.match(modelPlot.title, /tiny/);
  assert.match(modelPlot.title, /estimated latency [0-9.]+ ms after 16 trials/);

  await page.screenshot({ path: join(artifacts, 'dashboard.png'), fullPage: true });
  assert.deepEqual(pageErrors, []);

  // The same records through `webtune serve`, behind a viewer token: no tracker, the same job
  // and points once the page is opened with the token (its scripts then use the cookie).
  await stop(tune);
  const serve = start(['--log-level', 'warn', 'serve', '--db', db, '--listen', '127.0.0.1:0',
                       '--viewer-token', 'let-me-see'], 'webtune serve');
  children.push(serve);
  const [, serveUrl] = await waitForOutput(serve, /dashboard: (http:\/\/\S+)/, 'webtune serve');
  assert.equal((await page.goto(serveUrl)).status(), 401);
  assert.equal((await fetch(new URL('/api/jobs', serveUrl))).status, 401);
  assert.equal((await page.goto(`${serveUrl}?token=let-me-see`)).status(), 200);
  await page.waitForFunction(
      (n) => Number(document.getElementById('plot').dataset.points) === n,
      { timeout: 20_000 }, TRIALS);
  assert.equal(await page.$eval('#agents-empty', (el) => el.hidden), false);
  assert.match(await page.$eval('#agents-empty', (el) => el.textContent), /records only/);
  const summary = await (await fetch(new URL('/api/summary', serveUrl),
                                     { headers: { Authorization: 'Bearer let-me-see' } })).json();
  assert.equal(summary.live, false);
  assert.equal(summary.records.trials, TRIALS);
  assert.deepEqual(pageErrors, []);
});
