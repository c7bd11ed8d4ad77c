// webtune dashboard. Live per trial: /api/events (server-sent events, event_feed.hpp) pushes the
// job list after every change and each new trial as it is recorded; history comes once from
// /api/jobs/{id}/trials. The farm (agents, queues: the tracker's live state, not the records)
// and the measured models are polled every 2 s. The convergence plot (uPlot, loaded by
// index.html as the global `uPlot`) overlays the jobs picked in the best-per-device table (one
// workload at a time), against the trial number or the wall clock.
//
// The viewer token, when the tracker has one, comes from the page's own ?token= (the server also
// stores it in a cookie); it is sent again as a Bearer header so the API works without cookies.

const FARM_REFRESH_MS = 2000;
const TRIAL_PAGE = 1000;  // trials fetched per request; the API allows up to 5000
const token = new URLSearchParams(location.search).get('token');
const withToken = (path) => (token ? `${path}${path.includes('?') ? '&' : '?'}token=${encodeURIComponent(token)}` : path);

const state = {
  jobs: [],            // the latest job list (/api/jobs, or the feed's `jobs` event)
  selected: null,      // job id shown in the detail section
  userSelected: false, // true once a person clicked a job: stop following the running one
  plotted: [],         // job ids overlaid in the plot, all of the selected job's workload
  trials: new Map(),   // job id -> its trials in trial-number order (contiguous from 1)
  loading: new Map(),  // job id -> the history fetch in flight
  xAxis: 'trial',      // 'trial' or 'time'
  plot: null,
  plotKey: '',
  modelPlot: null,
  sseTrials: 0,        // trials that arrived through the event stream
};

async function api(path) {
  const headers = token ? { Authorization: `Bearer ${token}` } : {};
  const response = await fetch(path, { headers, cache: 'no-store' });
  if (!response.ok) {
    let message = `${response.status}`;
    try { message += ` ${(await response.json()).error}`; } catch { /* not JSON */ }
    throw new Error(`${path}: ${message}`);
  }
  return response.json();
}

function el(tag, text, className) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (className) node.className = className;
  return node;
}

function row(cells) {
  const tr = document.createElement('tr');
  for (const cell of cells) tr.append(cell instanceof Node ? cell : el('td', cell));
  return tr;
}

const num = (value) => el('td', value, 'num');
const gflops = (value) => (value > 0 ? value.toFixed(2) : '—');

/// A cell that never widens its table: long text is cut with an ellipsis, whole in its title.
function clipped(text) {
  // The span clips: table cells do not honour max-width in the automatic table layout.
  const td = el('td');
  const span = el('span', text, 'clip');
  td.title = String(text);
  td.append(span);
  return td;
}

function ago(unixSeconds) {
  if (!unixSeconds) return '—';
  const s = Math.max(0, Date.now() / 1000 - unixSeconds);
  if (s < 60) return `${s.toFixed(0)} s ago`;
  if (s < 3600) return `${(s / 60).toFixed(0)} min ago`;
  return new Date(unixSeconds * 1000).toLocaleString();
}

function deviceName(device) {
  if (!device || typeof device !== 'object') return '—';
  return device.renderer || device.short_name || device.name || JSON.stringify(device);
}

function renderFarm(summary, agents) {
  const body = document.querySelector('#agents tbody');
  const online = agents.online || [];
  body.replaceChildren(...online.map((a) => {
    const tr = row([clipped(a.name), clipped(a.keys.join(', ')), clipped(deviceName(a.device)),
                    el('td', a.state, `state-${a.state}`), num(a.jobs_done), num(a.jobs_failed),
                    ago(a.last_seen)]);
    tr.dataset.agent = a.name;
    tr.dataset.state = a.state;
    return tr;
  }));
  document.getElementById('agent-count').textContent = summary.live ? `(${online.length})` : '';
  document.getElementById('agents-empty').hidden = online.length > 0;
  document.getElementById('agents-empty').textContent =
      summary.live ? 'No agent online.' : 'No tracker: records only.';

  const keys = summary.tracker ? Object.entries(summary.tracker.keys) : [];
  document.querySelector('#keys tbody').replaceChildren(...keys.map(([key, k]) => row([
    clipped(key), num(k.agents_idle), num(k.agents_busy), num(k.agents_quarantined),
    num(k.jobs_pending), num(k.jobs_leased)])));
  document.getElementById('keys-empty').hidden = keys.length > 0;
  document.getElementById('keys-empty').textContent =
      summary.live ? 'No key: no agent has connected.' : 'No tracker: records only.';
  document.getElementById('source').textContent =
      summary.records ? `records ${summary.records.db}` : 'no records file';
}

const jobById = (id) => state.jobs.find((j) => j.id === id);
const shorten = (text, n) => (text.length > n ? `${text.slice(0, n - 1)}…` : text);
const jobLabel = (j) => `job ${j.id} · ${j.target} · ${shorten(j.device_key, 40)} · ${j.tuner || '?'}`;

function selectJob(id, byUser) {
  if (byUser) state.userSelected = true;
  // The plot shows one workload: another job starts a new overlay, unless it is plotted already.
  if (state.selected !== id && !state.plotted.includes(id)) state.plotted = [id];
  state.selected = id;
}

function renderJobs(jobs) {
  const body = document.querySelector('#jobs tbody');
  body.replaceChildren(...jobs.map((j) => {
    const tr = row([num(j.id), clipped(j.task), clipped(j.workload.key), j.target,
                    clipped(j.device_key), j.tuner || '—', el('td', j.status, `status-${j.status}`),
                    num(j.trials), num(j.errors), num(gflops(j.best_gflops))]);
    tr.dataset.job = j.id;
    if (j.id === state.selected) tr.classList.add('selected');
    tr.addEventListener('click', () => {
      selectJob(j.id, true);
      renderJobs(state.jobs);
      refreshDetail();
    });
    return tr;
  }));
  document.getElementById('job-count').textContent = `(${jobs.length})`;
  document.getElementById('jobs-empty').hidden = jobs.length > 0;
}

function chooseJob(jobs) {
  if (state.userSelected && jobs.some((j) => j.id === state.selected)) return;
  // Follow the tuning: the newest running job, else the newest job.
  const running = jobs.filter((j) => j.status === 'running');
  const pick = (running.length ? running : jobs).at(-1);
  if (pick) selectJob(pick.id, false);
  else state.selected = null;
}

/// Appends trials that continue job `id`'s cache (trial numbers are contiguous from 1); others
/// (already there, or after a gap that the history fetch fills) are left out. Returns how many.
function appendTrials(id, trials) {
  const cache = state.trials.get(id);
  if (!cache) return 0;
  let added = 0;
  for (const t of trials) {
    if (t.number === cache.length + 1) {
      cache.push(t);
      ++added;
    }
  }
  return added;
}

/// Fetches what job `id`'s cache lacks (history, or a gap after a reconnect); one at a time.
function loadTrials(id) {
  if (!state.trials.has(id)) state.trials.set(id, []);
  if (state.loading.has(id)) return state.loading.get(id);
  const run = (async () => {
    try {
      while (true) {
        const cache = state.trials.get(id);
        const page = await api(`/api/jobs/${id}/trials?offset=${cache.length}&limit=${TRIAL_PAGE}`);
        appendTrials(id, page.trials);
        if (page.trials.length < TRIAL_PAGE) break;
      }
    } finally {
      state.loading.delete(id);
    }
  })();
  state.loading.set(id, run);
  return run;
}

// Distinct colors for overlaid jobs (the first is the single-job plot's blue).
const PALETTE = ['#2563eb', '#d97706', '#7c3aed', '#0891b2', '#db2777', '#65a30d', '#475569',
                 '#b45309'];

/// The plot's aligned data: x (trial number, or seconds since each job's first trial), then per
/// job its GFLOP/s points and best-so-far line, then the errors (at 0) of every job.
function plotData(jobs) {
  const byTime = state.xAxis === 'time';
  const perJob = jobs.map((j) => {
    const trials = state.trials.get(j.id) || [];
    const t0 = trials.length ? trials[0].timestamp : 0;
    let top = null;
    return trials.map((t) => {
      const x = byTime ? Math.max(0, t.timestamp - t0) : t.number;
      if (t.error_no === 0) top = top === null ? t.gflops : Math.max(top, t.gflops);
      return { x, ok: t.error_no === 0 ? t.gflops : null, err: t.error_no === 0 ? null : 0, best: top };
    });
  });
  const xs = [...new Set(perJob.flat().map((p) => p.x))].sort((a, b) => a - b);
  const at = new Map(xs.map((x, i) => [x, i]));
  const data = [xs];
  const errors = xs.map(() => null);
  let points = 0;
  for (const series of perJob) {
    const ok = xs.map(() => null), best = xs.map(() => null);
    for (const p of series) {
      const i = at.get(p.x);
      if (p.ok !== null) { ok[i] = p.ok; ++points; }
      if (p.err !== null) { errors[i] = 0; ++points; }
      best[i] = p.best;
    }
    // The best-so-far line holds between a job's trials (its x values may interleave another's).
    let last = null;
    for (let i = 0; i < xs.length; ++i) {
      if (best[i] !== null) last = best[i];
      else if (last !== null && i <= at.get(series.at(-1)?.x ?? -1)) best[i] = last;
    }
    data.push(ok, best);
  }
  data.push(errors);
  return { data, points };
}

function drawPlot() {
  const container = document.getElementById('plot');
  const waiting = document.getElementById('plot-waiting');
  const jobs = state.plotted.map(jobById).filter(Boolean);
  const { data, points } = plotData(jobs);
  container.dataset.points = String(points);
  container.dataset.series = String(jobs.length);
  container.dataset.job = String(state.selected ?? '');
  container.dataset.xaxis = state.xAxis;
  if (data[0].length === 0) {
    // Nothing to draw yet: no empty axis, a sentence instead.
    state.plot?.destroy();
    state.plot = null;
    state.plotKey = '';
    container.hidden = true;
    waiting.hidden = false;
    return;
  }
  container.hidden = false;
  waiting.hidden = true;
  const key = `${state.xAxis}:${jobs.map((j) => j.id).join(',')}`;
  const width = Math.max(400, container.clientWidth || 800);
  if (state.plot && state.plotKey === key) {
    state.plot.setData(data);
    return;
  }
  state.plot?.destroy();
  const css = getComputedStyle(document.documentElement);
  const color = (name) => css.getPropertyValue(name).trim();
  const byTime = state.xAxis === 'time';
  const series = [{ label: byTime ? 's' : 'trial' }];
  jobs.forEach((j, k) => {
    const c = jobs.length === 1 ? color('--ok') : PALETTE[k % PALETTE.length];
    series.push({ label: jobLabel(j), stroke: c, paths: () => null,
                  points: { show: true, size: 6, fill: c } });
    series.push({ label: jobs.length === 1 ? 'best so far' : `best of job ${j.id}`,
                  stroke: jobs.length === 1 ? color('--best') : c, width: 2,
                  paths: uPlot.paths.stepped({ align: 1 }), points: { show: false } });
  });
  series.push({ label: 'error', stroke: color('--err'), paths: () => null,
                points: { show: true, size: 8, fill: color('--err') } });
  // Trial numbers are integers: ticks at 1, 2, 5, 10, ... only, never at 2.5.
  const integers = [1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000];
  state.plot = new uPlot({
    width,
    height: 320,
    scales: {
      x: { time: false,
           range: (u, min, max) => (byTime ? [0, Math.max(1, max * 1.02)]
                                           : [Math.max(0, min - 0.5), max + 0.5]) },
      y: { range: (u, min, max) => [0, Math.max(1, max * 1.1)] },
    },
    axes: [
      { label: byTime ? 'seconds since the job\'s first trial' : 'trial', stroke: color('--muted'),
        grid: { stroke: color('--line') }, ...(byTime ? {} : { incrs: integers }),
        // The ticks drawn, for people and tests to read back (the canvas has no text nodes).
        values: (u, splits) => {
          container.dataset.xticks = splits.join(',');
          return splits.map((v) => (byTime ? String(+v.toFixed(3)) : String(v)));
        } },
      { label: 'GFLOP/s', stroke: color('--muted'), grid: { stroke: color('--line') } },
    ],
    series,
  }, data, container);
  state.plotKey = key;
}

let drawQueued = false;
function scheduleDraw() {
  if (drawQueued) return;
  drawQueued = true;
  requestAnimationFrame(() => {
    drawQueued = false;
    drawPlot();
  });
}

function renderDownloads(job) {
  const links = {
    'download-autotvm': `/api/export?job=${job.id}&format=autotvm`,
    'download-csv': `/api/export?job=${job.id}&format=csv`,
    'download-artifact': `/api/artifact?job=${job.id}`,
  };
  for (const [id, href] of Object.entries(links)) document.getElementById(id).href = withToken(href);
  document.getElementById('download-artifact').classList.toggle('disabled', !(job.best_gflops > 0));
}

function renderJob(job) {
  document.getElementById('job-detail').hidden = false;
  document.getElementById('job-title').textContent =
      `Job ${job.id}: ${job.task} (${job.workload.key}) on ${job.target} / ${job.device_key} — ` +
      `${job.trials} trials, best ${gflops(job.best_gflops)} GFLOP/s`;
  renderDownloads(job);
  scheduleDraw();
  // Why trials failed: the latest message of each error number, from the cached trials.
  const lastMessage = new Map();
  for (const t of state.trials.get(job.id) || []) if (t.error_no !== 0) lastMessage.set(t.error_no, t);
  document.querySelector('#errors tbody').replaceChildren(...job.errors_by_error_no.map((e) => {
    const last = lastMessage.get(e.error_no);
    const why = el('td', last ? `trial ${last.number}: ${last.message || '(no message)'}` : '',
                   'message');
    if (last) why.title = last.message;
    return row([num(e.error_no), e.error, num(e.count), why]);
  }));
  const best = job.best;
  document.getElementById('best-summary').textContent =
      best ? `(trial ${best.number}, config ${best.config_index}, ${gflops(best.gflops)} GFLOP/s` +
             `${best.agent ? `, ${best.agent}` : ''})` : '';
  document.getElementById('best-config').textContent =
      best ? JSON.stringify(best.config, null, 1).replace(/\n\s*(?=[\]\d"-])/g, ' ') : '—';
}

// Best per device: one table per workload, a row per job (device and target), fastest first,
// with the speedup over the template's default config; the boxes pick the plot's overlay.
function renderWorkloads(workloads) {
  const container = document.getElementById('workloads');
  const selectedKey = jobById(state.selected)?.workload.key;
  container.replaceChildren(...workloads.map((w) => {
    const box = el('div', null, 'workload');
    box.dataset.workload = w.key;
    box.append(el('h3', `${w.task ? `${w.task}: ` : ''}${w.key}`));
    const table = el('table', null, 'devices');
    const head = row(['Plot', 'Device', 'Target', 'Tuner', 'Trials', 'Best GFLOP/s', 'Best ms',
                      'Default GFLOP/s', 'Speedup']);
    head.querySelectorAll('td').forEach((td, i) => {
      const th = el('th', td.textContent, i >= 4 ? 'num' : undefined);
      td.replaceWith(th);
    });
    const thead = el('thead');
    thead.append(head);
    const tbody = el('tbody');
    for (const d of w.devices) {
      const check = document.createElement('input');
      check.type = 'checkbox';
      check.checked = w.key === selectedKey && state.plotted.includes(d.job);
      check.title = 'overlay this job in the plot';
      check.addEventListener('change', () => togglePlotted(d.job, w.key, check.checked));
      const pick = el('td');
      pick.append(check);
      const speedup = d.speedup === null ? el('td', 'n/a', 'num muted') : num(`${d.speedup.toFixed(2)}×`);
      if (d.speedup === null)
        speedup.title = d.default_gflops === null
            ? 'the default config was never measured in this job'
            : 'the default config failed';
      const tr = row([pick, clipped(d.device_key), d.target, d.tuner || '—', num(d.trials),
                      num(gflops(d.best_gflops)), num(d.best_ms === null ? '—' : d.best_ms.toFixed(4)),
                      num(d.default_gflops === null ? 'n/a' : gflops(d.default_gflops)), speedup]);
      tr.dataset.job = d.job;
      tbody.append(tr);
    }
    table.append(thead, tbody);
    box.append(table);
    return box;
  }));
  document.getElementById('workloads-empty').hidden = workloads.length > 0;
}

function togglePlotted(id, key, on) {
  state.userSelected = true;  // a person chose: stop following the running job
  const sameWorkload = state.plotted.filter((p) => jobById(p)?.workload.key === key);
  if (on) {
    state.plotted = [...new Set([...sameWorkload, id])];
    if (jobById(state.selected)?.workload.key !== key) state.selected = id;
  } else {
    state.plotted = sameWorkload.filter((p) => p !== id);
    if (state.selected === id && state.plotted.length) state.selected = state.plotted[0];
  }
  Promise.all(state.plotted.map(loadTrials)).then(() => {
    renderJobs(state.jobs);
    refreshDetail();
  });
  scheduleDraw();
}

const ms = (value) => (value === null || value === undefined ? '—' : value.toFixed(3));

// Whole models measured on the farm (`webtune measure-model`), newest first, beside the estimate.
function renderModels(measurements) {
  document.querySelector('#models tbody').replaceChildren(...measurements.map((m) => {
    const ratio = m.measured_over_estimate;
    const result = m.error_no === 0 ? el('td', `${m.runs} runs`, 'state-idle')
                                    : el('td', `${m.error}: ${m.message}`, 'message');
    if (m.error_no !== 0) result.title = m.message;
    const tr = row([m.model, m.target, m.device_key || '—', m.agent || '—', num(ms(m.median_ms)),
                    num(ms(m.min_ms)), num(ms(m.estimated_ms)),
                    num(ratio === null ? '—' : `${ratio.toFixed(2)}×`), result, ago(m.created)]);
    tr.dataset.measurement = m.id;
    return tr;
  }));
  document.getElementById('model-count').textContent = `(${measurements.length})`;
  document.getElementById('models-empty').hidden = measurements.length > 0;
}

// The model run's estimated latency (ms) against the trials spent on all its tasks.
function drawModelPlot(run, estimates) {
  const container = document.getElementById('model-plot');
  const data = [estimates.map((e) => e.trials), estimates.map((e) => e.latency_ms)];
  const width = Math.max(400, container.clientWidth || 800);
  if (!state.modelPlot || state.modelPlot.webtuneRun !== run.id) {
    state.modelPlot?.destroy();
    const css = getComputedStyle(document.documentElement);
    const color = (name) => css.getPropertyValue(name).trim();
    state.modelPlot = new uPlot({
      width,
      height: 320,
      scales: { x: { time: false }, y: { range: (u, min, max) => [0, Math.max(1e-3, max * 1.1)] } },
      axes: [
        { label: 'trials (all tasks)', stroke: color('--muted'), grid: { stroke: color('--line') } },
        { label: 'estimated latency (ms)', stroke: color('--muted'), grid: { stroke: color('--line') } },
      ],
      series: [
        { label: 'trials' },
        // A step line: the estimate holds until the next batch improves a task's best.
        { label: 'latency ms', stroke: color('--best'), width: 2,
          paths: uPlot.paths.stepped({ align: 1 }),
          points: { show: true, size: 5, fill: color('--best') } },
      ],
    }, data, container);
    state.modelPlot.webtuneRun = run.id;
  } else {
    state.modelPlot.setData(data);
  }
  container.dataset.points = String(estimates.length);
  container.dataset.run = String(run.id);
}

async function renderModelRun(job) {
  const section = document.getElementById('model-detail');
  const runs = job.model_runs || [];
  if (!runs.length) {
    section.hidden = true;
    return;
  }
  const id = runs.at(-1);  // the latest run that tuned this job
  const [run, { estimates }] = await Promise.all(
      [api(`/api/models/${id}`), api(`/api/models/${id}/estimates`)]);
  section.hidden = false;
  const latest = run.latest ? `${run.latest.latency_ms.toFixed(4)} ms after ${run.latest.trials} trials`
                            : 'n/a until every task has a successful trial';
  const budget = run.total_trials > 0 ? `, a budget of ${run.total_trials} trials` : '';
  document.getElementById('model-title').textContent =
      `Model run ${run.id}: ${run.model} on ${run.target} / ${run.device_key}, ` +
      `${run.jobs.length} task${run.jobs.length === 1 ? '' : 's'}, ${run.schedule} schedule` +
      `${budget} — estimated latency ${latest}`;
  drawModelPlot(run, estimates);
}

// The detail (selected job, its workload's devices, the model run): fetched after a change the
// feed reports, at most one fetch at a time (a change meanwhile asks for one more).
let detailBusy = false;
let detailAgain = false;

async function refreshDetail() {
  if (detailBusy) {
    detailAgain = true;
    return;
  }
  detailBusy = true;
  const status = document.getElementById('status');
  try {
    const [{ workloads }] = await Promise.all([api('/api/workloads'),
                                                ...state.plotted.map(loadTrials)]);
    renderWorkloads(workloads);
    if (state.selected !== null) {
      const job = await api(`/api/jobs/${state.selected}`);
      renderJob(job);
      await renderModelRun(job);
    } else {
      scheduleDraw();
    }
    status.classList.remove('error');
  } catch (e) {
    status.textContent = e.message;
    status.classList.add('error');
  }
  detailBusy = false;
  if (detailAgain) {
    detailAgain = false;
    refreshDetail();
  }
}

function onJobs(jobs) {
  state.jobs = jobs;
  chooseJob(jobs);
  state.plotted = state.plotted.filter((id) => jobById(id));
  if (state.selected !== null && !state.plotted.length) state.plotted = [state.selected];
  renderJobs(jobs);
  refreshDetail();
}

function onTrials({ job, trials }) {
  state.sseTrials += trials.length;
  document.body.dataset.sseTrials = String(state.sseTrials);
  if (appendTrials(job, trials) > 0 && state.plotted.includes(job)) scheduleDraw();
}

function connectEvents() {
  const status = document.getElementById('status');
  const events = new EventSource(withToken('/api/events'));
  events.addEventListener('open', () => {
    document.body.dataset.sse = 'open';
    status.textContent = 'live';
  });
  events.addEventListener('jobs', (e) => onJobs(JSON.parse(e.data).jobs));
  events.addEventListener('trials', (e) => onTrials(JSON.parse(e.data)));
  events.addEventListener('error', () => {
    // EventSource reconnects by itself; the first `jobs` event after that fills any gap.
    document.body.dataset.sse = 'reconnecting';
    status.textContent = 'reconnecting…';
  });
}

// The tracker's live state and the measured models: not in the feed, polled.
async function refreshFarm() {
  const status = document.getElementById('status');
  try {
    const [summary, agents, models] = await Promise.all(
        [api('/api/summary'), api('/api/agents'), api('/api/models')]);
    renderFarm(summary, agents);
    renderModels(models.measurements || []);
    if (document.body.dataset.sse === 'open') {
      status.textContent = `live · farm updated ${new Date().toLocaleTimeString()}`;
      status.classList.remove('error');
    }
  } catch (e) {
    status.textContent = e.message;
    status.classList.add('error');
  }
  setTimeout(refreshFarm, FARM_REFRESH_MS);
}

for (const input of document.querySelectorAll('input[name="xaxis"]')) {
  input.addEventListener('change', () => {
    state.xAxis = input.value;
    drawPlot();
  });
}

window.addEventListener('resize', () => {
  const container = document.getElementById('plot');
  state.plot?.setSize({ width: Math.max(400, container.clientWidth), height: 320 });
  const model = document.getElementById('model-plot');
  state.modelPlot?.setSize({ width: Math.max(400, model.clientWidth), height: 320 });
});

connectEvents();
refreshFarm();
