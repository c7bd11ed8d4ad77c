// The dashboard in headless Chromium (puppeteer-core) while a small real tuning runs: `webtune
// tune` with its embedded tracker and one native agent on llvmpipe serves the dashboard for its
// records file. The convergence plot must hold as many points as the job has trials recorded
// (read back through the API), the agent list must show the live agent, the model run's plot
// (the tuning is recorded as model run "tiny") one point per estimate recorded, and a screenshot
// goes to $WEBTUNE_ARTIFACTS/dashboard.png. Then `webtune serve` on the same file shows the same
// job without a tracker.
//
// Issue 17 (live per trial, devices compared, downloads, 1280×800), on the same records through
// `webtune serve`: the AutoTVM export has one line per trial, the CSV a header and one row per
// trial, the best kernel's artifact parses; the job's first 8 trials imported again as a webgl2
// tab's (a long ANGLE renderer name in the device key) make a second device for the workload:
// the best-per-device table lists both with their best GFLOP/s, best ms and speedup over the
// default config (the API's values), and ticking the second overlays it (2 series). A trial
// written into the SQLite file by another program (sqlite3) reaches the open page through
// /api/events: the plot grows by exactly 1 point without a reload. The wall-clock axis keeps the
// points; at 1280×800 nothing overflows sideways (screenshot $WEBTUNE_ARTIFACTS/
// dashboard-1280x800.png); a job without trials says it waits for the first one.
//
// Run by ctest (tests/CMakeLists.txt) as `node --test`, with WEBTUNE_BINARY, WEBTUNE_ARTIFACTS
// and CHROMIUM set.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
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
  // Trial ticks are whole numbers within the trials (no 2.5, no empty -0.5…0.5 axis).
  const ticks = (await page.$eval('#plot', (el) => el.dataset.xticks)).split(',').map(Number);
  assert.ok(ticks.length >= 2, `${ticks}`);
  for (const x of ticks) assert.ok(Number.isInteger(x) && x >= 0 && x <= TRIALS + 1, `${ticks}`);
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

  // --- Issue 17 on the same page (served by `webtune serve`, viewer token in its cookie). ---
  const auth = { headers: { Authorization: 'Bearer let-me-see' } };
  const fetchOk = async (path) => {
    const r = await fetch(new URL(path, serveUrl), auth);
    assert.equal(r.status, 200, `${path}: ${r.status}`);
    return r;
  };
  const sql = (statement) => execFileSync('sqlite3', [db, statement], { encoding: 'utf8' });

  // Downloads: the AutoTVM log (one line per trial), the CSV (a header, one row per trial), the
  // best config's kernel artifact; the page's buttons point at them.
  const log = await (await fetchOk(`/api/export?job=${job.id}&format=autotvm`)).text();
  const logLines = log.trim().split('\n');
  assert.equal(logLines.length, TRIALS);
  for (const line of logLines) assert.match(JSON.parse(line).input[0], /-model=gles:llvmpipe/);
  const csvResponse = await fetchOk(`/api/export?job=${job.id}&format=csv`);
  assert.match(csvResponse.headers.get('content-type'), /^text\/csv/);
  assert.match(csvResponse.headers.get('content-disposition'), /attachment; filename=".*\.csv"/);
  const csvRows = (await csvResponse.text()).trim().split('\r\n');
  assert.equal(csvRows[0], 'number,trial_id,config_index,error_no,error,gflops,mean_cost_s,' +
                           'costs_s,all_cost_s,timestamp,agent,verdict,config');
  assert.equal(csvRows.length, TRIALS + 1);
  assert.deepEqual(csvRows.slice(1).map((r) => Number(r.split(',')[0])),
                   Array.from({ length: TRIALS }, (_, i) => i + 1));
  const artifact = await (await fetchOk(`/api/artifact?job=${job.id}`)).json();
  assert.equal(artifact.config_index, detail.best.config_index);
  assert.equal(artifact.device_key, job.device_key);
  assert.ok(artifact.artifact.source.length > 0, 'the kernel source');
  const hrefs = await page.$$eval('.toolbar a.button', (as) => as.map((a) => a.getAttribute('href')));
  assert.deepEqual(hrefs.map((h) => h.replace(/&token=.*$/, '')),
                   [`/api/export?job=${job.id}&format=autotvm`, `/api/export?job=${job.id}&format=csv`,
                    `/api/artifact?job=${job.id}`]);

  // A second device for the workload: the first 8 lines again, as a webgl2 tab measured them.
  const tab = 'webgl2:ANGLE (Mesa, llvmpipe (LLVM 15.0.6, 256 bits), OpenGL 4.5 (Core Profile) ' +
              'Mesa 22.3.6), a renderer name long enough to push a column off the screen';
  writeFileSync(join(work, 'tab.log'), `${logLines.slice(0, 8).join('\n')}\n`);
  execFileSync(binary, ['--log-level', 'warn', 'log', 'import', '--db', db, '--in',
                        join(work, 'tab.log'), '--device-key', tab]);
  const { jobs: both } = await (await fetchOk('/api/jobs')).json();
  assert.equal(both.length, 2);
  const tabJob = both.find((j) => j.device_key === tab);
  assert.equal(tabJob.target, 'webgl2', 'named as the user names it, not gles-frag');
  assert.equal(tabJob.trials, 8);
  await page.waitForFunction(() => document.querySelectorAll('#jobs tbody tr').length === 2 &&
                                   document.querySelectorAll('.workload tbody tr').length === 2,
                             { timeout: 15_000 });
  // The best-per-device table shows the API's numbers. The tuner measures the template's
  // default config in the job's first batch, so the tuned job has it (and so does the tab's,
  // when it is among the 8 lines imported): the speedup is best / default GFLOP/s.
  const { workloads } = await (await fetchOk('/api/workloads')).json();
  assert.equal(workloads.length, 1);
  const devices = workloads[0].devices;
  assert.equal(devices.length, 2);
  for (const d of devices) {
    const own = d.job === job.id ? recorded.trials : recorded.trials.slice(0, 8);
    const def = own.find((t) => t.config_index === d.default_config_index);
    if (d.job === job.id) assert.ok(def, 'the tuned job measured the default config');
    assert.equal(d.default_gflops, def ? def.gflops : null);
    const best = Math.max(...own.filter((t) => t.error_no === 0).map((t) => t.gflops));
    assert.ok(Math.abs(d.best_gflops - best) <= 1e-9 * best, `${d.best_gflops} vs ${best}`);
    if (def && def.gflops > 0)
      assert.ok(Math.abs(d.speedup - best / def.gflops) <= 1e-9 * d.speedup, `${d.speedup}`);
    else
      assert.equal(d.speedup, null);
    assert.ok(Math.abs(d.best_ms - 2 * 32 * 32 * 32 / (best * 1e9) * 1e3) <= 1e-9 * d.best_ms);
  }
  const tableRows = await page.$$eval('.workload tbody tr', (trs) => trs.map((tr) => ({
    job: Number(tr.dataset.job),
    cells: [...tr.querySelectorAll('td')].map((td) => td.textContent),
  })));
  assert.deepEqual(tableRows.map((r) => r.job), devices.map((d) => d.job), 'fastest first');
  for (const [i, d] of devices.entries()) {
    const cells = tableRows[i].cells;
    assert.equal(cells[1], d.device_key);
    assert.equal(cells[2], d.job === job.id ? 'gles-frag' : 'webgl2');
    assert.equal(cells[4], String(d.trials));
    assert.equal(cells[5], d.best_gflops.toFixed(2));
    assert.equal(cells[6], d.best_ms.toFixed(4));
    assert.equal(cells[8], d.speedup === null ? 'n/a' : `${d.speedup.toFixed(2)}×`);
  }

  // Overlay: pick the tuned job (the page followed the newest, the import), then tick the tab's
  // job beside it.
  await page.click(`#jobs tbody tr[data-job="${job.id}"]`);
  await page.waitForFunction(
      (id, n) => document.getElementById('plot').dataset.job === String(id) &&
                 document.getElementById('plot').dataset.series === '1' &&
                 Number(document.getElementById('plot').dataset.points) === n,
      { timeout: 15_000 }, job.id, TRIALS);
  await page.click(`.workload tr[data-job="${tabJob.id}"] input[type=checkbox]`);
  await page.waitForFunction(
      (n) => document.getElementById('plot').dataset.series === '2' &&
             Number(document.getElementById('plot').dataset.points) === n,
      { timeout: 15_000 }, TRIALS + 8);
  const legend = await page.$eval('#plot', (el) => el.querySelector('.u-legend')?.textContent ?? '');
  assert.match(legend, new RegExp(`job ${tabJob.id} · webgl2`));

  // Live: a trial written into the file by another program reaches the open page by itself.
  await page.evaluate(() => { window.notReloaded = true; });
  const before = await page.$eval('#plot', (el) => Number(el.dataset.points));
  const sseBefore = await page.evaluate(() => Number(document.body.dataset.sseTrials || 0));
  assert.equal(await page.evaluate(() => document.body.dataset.sse), 'open');
  sql(`INSERT INTO trials (job_id, config_index, entity_json, error_no, message, costs_json,
         mean_cost, gflops, all_cost, timestamp, agent_id)
       SELECT job_id, config_index + 1000000, entity_json, error_no, message, costs_json,
         mean_cost, gflops, all_cost, timestamp + 1, agent_id
       FROM trials WHERE job_id = ${job.id} AND error_no = 0 ORDER BY id DESC LIMIT 1;`);
  await page.waitForFunction((n) => Number(document.getElementById('plot').dataset.points) >= n,
                             { timeout: 15_000 }, before + 1);
  await new Promise((resolve) => setTimeout(resolve, 1000));  // nothing more may come
  assert.equal(await page.$eval('#plot', (el) => Number(el.dataset.points)), before + 1);
  assert.equal(await page.evaluate(() => Number(document.body.dataset.sseTrials)), sseBefore + 1,
               'the trial came through /api/events');
  assert.equal(await page.evaluate(() => window.notReloaded), true, 'no reload');

  // The wall-clock axis plots the same points.
  await page.click('input[name="xaxis"][value="time"]');
  await page.waitForFunction(() => document.getElementById('plot').dataset.xaxis === 'time');
  assert.equal(await page.$eval('#plot', (el) => Number(el.dataset.points)), before + 1);
  await page.click('input[name="xaxis"][value="trial"]');

  // 1280×800: no horizontal overflow, the queue table on screen, a screenshot as the artifact.
  await page.setViewport({ width: 1280, height: 800 });
  await new Promise((resolve) => setTimeout(resolve, 500));
  const layout = await page.evaluate(() => ({
    scrollWidth: document.documentElement.scrollWidth,
    innerWidth: window.innerWidth,
    keysRight: document.getElementById('keys').getBoundingClientRect().right,
  }));
  assert.ok(layout.scrollWidth <= layout.innerWidth, JSON.stringify(layout));
  assert.ok(layout.keysRight <= layout.innerWidth, JSON.stringify(layout));
  const shot = join(artifacts, 'dashboard-1280x800.png');
  rmSync(shot, { force: true });
  await page.screenshot({ path: shot });
  assert.ok(statSync(shot).size > 1000, 'the screenshot was written');
  assert.deepEqual([...readFileSync(shot).subarray(1, 4)], [0x50, 0x4e, 0x47], 'a PNG');

  // A job without trials: a sentence, not an empty axis.
  sql(`INSERT INTO devices (key, info_json, updated) VALUES ('wasm:empty', '{}', 0);
       INSERT INTO tuning_jobs (workload_id, target_id, device_id, task_name, tuner, options_json,
         status, created, updated)
       SELECT workload_id, target_id, (SELECT id FROM devices WHERE key = 'wasm:empty'), task_name,
         'random', '{}', 'stopped', created, updated FROM tuning_jobs WHERE id = ${job.id};`);
  await page.waitForFunction(() => document.querySelectorAll('#jobs tbody tr').length === 3,
                             { timeout: 15_000 });
  await page.click('#jobs tbody tr:last-child');
  await page.waitForFunction(() => !document.getElementById('plot-waiting').hidden &&
                                   document.getElementById('plot').hidden &&
                                   document.getElementById('plot').dataset.points === '0',
                             { timeout: 15_000 });
  assert.match(await page.$eval('#plot-waiting', (el) => el.textContent), /waiting for the first trial/i);
  assert.deepEqual(pageErrors, []);
});
