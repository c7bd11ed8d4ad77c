// webtune dashboard: polls the JSON API once a second and redraws the farm, the tuning jobs, the
// whole models measured on the farm beside their estimates, the selected job's convergence plot and, when the job belongs to a model run, the run's estimated
// model latency against trials (uPlot, loaded by index.html as the global `uPlot`).
//
// The viewer token, when the tracker has one, comes from the page's own ?token= (the server also
// stores it in a cookie); it is sent again as a Bearer header so the API works without cookies.

const REFRESH_MS = 1000;
const TRIAL_PAGE = 1000;  // trials fetched per request; the API allows up to 5000
const token = new URLSearchParams(location.search).get('token');

const state = {
  selected: null,      // job id shown in the detail section
  userSelected: false, // true once a person clicked a job: stop following the running one
  trialsJob: null,     // job whose trials are cached below
  trials: [],          // that job's trials, in trial-number order
  plot: null,
  modelPlot: null,
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
    const tr = row([a.name, a.keys.join(', '), deviceName(a.device),
                    el('td', a.state, `state-${a.state}`), num(a.jobs_done), num(a.jobs_failed),
                    ago(a.last_seen)]);
    tr.dataset.agent = a.name;
    return tr;
  }));
  document.getElementById('agent-count').textContent = summary.live ? `(${online.length})` : '';
  document.getElementById('agents-empty').hidden = online.length > 0;
  document.getElementById('agents-empty').textContent =
      summary.live ? 'No agent online.' : 'No tracker: records only.';

  const keys = summary.tracker ? Object.entries(summary.tracker.keys) : [];
  document.querySelector('#keys tbody').replaceChildren(...keys.map(([key, k]) => row([
    key, num(k.agents_idle), num(k.agents_busy), num(k.agents_quarantined), num(k.jobs_pending),
    num(k.jobs_leased)])));
  document.getElementById('keys-empty').hidden = keys.length > 0;
  document.getElementById('keys-empty').textContent =
      summary.live ? 'No key: no agent has connected.' : 'No tracker: records only.';
  document.getElementById('source').textContent =
      summary.records ? `records ${summary.records.db}` : 'no records file';
}

function renderJobs(jobs) {
  const body = document.querySelector('#jobs tbody');
  body.replaceChildren(...jobs.map((j) => {
    const tr = row([num(j.id), j.task, j.workload.key, j.target, j.device_key, j.tuner,
                    el('td', j.status, `status-${j.status}`), num(j.trials), num(j.errors),
                    num(gflops(j.best_gflops))]);
    tr.dataset.job = j.id;
    if (j.id === state.selected) tr.classList.add('selected');
    tr.addEventListener('click', () => {
      state.selected = j.id;
      state.userSelected = true;
      requestRefresh();
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
  state.selected = pick ? pick.id : null;
}

async function loadTrials(id) {
  if (state.trialsJob !== id) {
    state.trialsJob = id;
    state.trials = [];
  }
  // Trials are append-only: fetch only what is new since the last poll.
  while (true) {
    const page = await api(`/api/jobs/${id}/trials?offset=${state.trials.length}&limit=${TRIAL_PAGE}`);
    state.trials.push(...page.trials);
    if (page.trials.length < TRIAL_PAGE) break;
  }
}

function plotData(trials) {
  const x = [], ok = [], err = [], best = [];
  let top = null;
  for (const t of trials) {
    x.push(t.number);
    if (t.error_no === 0) {
      ok.push(t.gflops);
      err.push(null);
      top = top === null ? t.gflops : Math.max(top, t.gflops);
    } else {
      ok.push(null);
      err.push(0);
    }
    best.push(top);
  }
  return [x, ok, err, best];
}

function drawPlot(job) {
  const container = document.getElementById('plot');
  const data = plotData(state.trials);
  const width = Math.max(400, container.clientWidth || 800);
  if (!state.plot || state.plot.webtuneJob !== job.id) {
    state.plot?.destroy();
    const css = getComputedStyle(document.documentElement);
    const color = (name) => css.getPropertyValue(name).trim();
    state.plot = new uPlot({
      width,
      height: 320,
      scales: { x: { time: false, range: (u, min, max) => [Math.min(0.5, min - 0.5), max + 0.5] }, y: { range: (u, min, max) => [0, Math.max(1, max * 1.1)] } },
      axes: [
        { label: 'trial', stroke: color('--muted'), grid: { stroke: color('--line') } },
        { label: 'GFLOP/s', stroke: color('--muted'), grid: { stroke: color('--line') } },
      ],
      series: [
        { label: 'trial' },
        { label: 'GFLOP/s', stroke: color('--ok'), paths: () => null,
          points: { show: true, size: 6, fill: color('--ok') } },
        { label: 'error', stroke: color('--err'), paths: () => null,
          points: { show: true, size: 8, fill: color('--err') } },
        { label: 'best so far', stroke: color('--best'), width: 2,
          paths: uPlot.paths.stepped({ align: 1 }), points: { show: false } },
      ],
    }, data, container);
    state.plot.webtuneJob = job.id;
  } else {
    state.plot.setData(data);
  }
  // What tests and people can read back: how many trial points the plot holds.
  const points = data[1].filter((v) => v !== null).length + data[2].filter((v) => v !== null).length;
  container.dataset.points = String(points);
  container.dataset.job = String(job.id);
}

function renderJob(job) {
  document.getElementById('job-detail').hidden = false;
  document.getElementById('job-title').textContent =
      `Job ${job.id}: ${job.task} (${job.workload.key}) on ${job.target} / ${job.device_key} — ` +
      `${job.trials} trials, best ${gflops(job.best_gflops)} GFLOP/s`;
  drawPlot(job);
  // Why trials failed: the latest message of each error number, from the cached trials.
  const lastMessage = new Map();
  for (const t of state.trials) if (t.error_no !== 0) lastMessage.set(t.error_no, t);
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

// One refresh at a time: two overlapping ones would append the same trials twice.
let timer = null;
let inFlight = false;
let again = false;

function requestRefresh() {
  if (inFlight) {
    again = true;
    return;
  }
  refresh();
}

async function refresh() {
  clearTimeout(timer);
  inFlight = true;
  const status = document.getElementById('status');
  try {
    const [summary, agents, jobs, models] = await Promise.all(
        [api('/api/summary'), api('/api/agents'), api('/api/jobs'), api('/api/models')]);
    chooseJob(jobs.jobs);
    renderFarm(summary, agents);
    renderJobs(jobs.jobs);
    renderModels(models.measurements || []);
    if (state.selected !== null) {
      const job = await api(`/api/jobs/${state.selected}`);
      await loadTrials(job.id);
      renderJob(job);
      await renderModelRun(job);
    }
    status.textContent = `updated ${new Date().toLocaleTimeString()}`;
    status.classList.remove('error');
  } catch (e) {
    status.textContent = e.message;
    status.classList.add('error');
  }
  inFlight = false;
  if (again) {
    again = false;
    refresh();
  } else {
    timer = setTimeout(refresh, REFRESH_MS);
  }
}

window.addEventListener('resize', () => {
  const container = document.getElementById('plot');
  state.plot?.setSize({ width: Math.max(400, container.clientWidth), height: 320 });
  const model = document.getElementById('model-plot');
  state.modelPlot?.setSize({ width: Math.max(400, model.clientWidth), height: 320 });
});

refresh();
