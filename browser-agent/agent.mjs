// agent.mjs — the browser agent: turns the tab that opens /agent into a worker of the farm.
//
// The page speaks tracker protocol v1 (docs/protocol.md) as role "agent" over ws(s)://<host>/ws:
// a hello advertising one key per executor (`webgl2:<renderer>`, `webgpu:<adapter>`,
// `wasm:threads` or `wasm:simd`), then one job at a time, each answered with a MeasureResult. Jobs go to
// the executor whose artifactTargets include the artifact's target, so a new target plugs in by
// adding its executor class to EXECUTORS. An executor that can no longer work (`failed`, e.g.
// WebGPU once requestAdapter() returns null) is dropped after the job it failed: the tab
// reconnects with its other keys, or, with none left, reports status 'failed' and closes its
// socket (farm.mjs reloads such tabs).
//
// Model jobs ("kind":"model" inputs, MODEL_JOBS.md) are run by model_job.mjs: the whole package
// the tracker serves at /models/<model>/ through the model runtime, for the package's target if
// one of this tab's executors is of that family; the hello says "job_kinds":["kernel","model"].
//
// URL parameters: token (the tracker's agent token; else the form asks for it), name (shown in
// the farm), targets (comma-separated executor families, default all that work here), tracker
// (a ws:// URL, default this page's host); the rest go to the executors as options (webgl2:
// sync=fence|readpixels|finish; wasm: wasm_spin_us=<µs a thread polls before it blocks>). Progress is
// shown on the page and logged to the console with a "[webtune]" prefix, which the local farm
// (farm.mjs) forwards. The page lists every executor family with its key or the reason it is
// unavailable (state.unavailable: what its setup threw, e.g. "navigator.gpu is undefined"),
// which the hello also carries as device.unavailable.

import { ErrorNo, MeasureError, makeResult } from './measure.mjs';
import { WebGL2Executor } from './webgl2.mjs';
import { WasmExecutor } from './wasm.mjs';
import { WebGPUExecutor } from './webgpu.mjs';
import { isModelInput, runModelJob } from './model_job.mjs';

/**
 * Executor classes by family; each has static family, static artifactTargets, key(), device(),
 * measure(), and either a constructor that sets it up or (WebGPU: adapters and devices come
 * asynchronously) a static async create(options).
 */
const EXECUTORS = [WebGL2Executor, WebGPUExecutor, WasmExecutor];
const PROTOCOL = 1;
// How much longer than its own timeout_s a job may run before the agent gives up on it: the
// executor checks the timeout between timed batches, the watchdog covers a batch that hangs.
const WATCHDOG_GRACE_S = 5;

const params = new URLSearchParams(location.search);
const state = {
  status: 'starting',      // starting | connecting | connected | waiting-for-token | failed
  keys: [],
  jobsDone: 0,
  lastError: '',
  session: 0,
  busyJob: 0,
  reconnects: 0,
  // Executor families this tab does not serve, each with its own reason: {webgpu:
  // 'navigator.gpu is undefined', ...} (shown on the page as "webgpu: <reason>").
  unavailable: {},
};
// For the farm and tests: a read-only view of the agent's state.
window.webtuneAgent = { state, executors: [] };

function log(...args) {
  console.log('[webtune]', ...args);
}

function show() {
  const el = document.getElementById('status');
  if (el) {
    el.textContent = `${state.status}${state.keys.length ? ` as ${state.keys.join(', ')}` : ''}; ` +
      `${state.jobsDone} job(s) done${state.lastError ? `; last error: ${state.lastError}` : ''}`;
  }
  showExecutors();
}

/**
 * The page's executor list: one line per family of EXECUTORS, "webgl2: ready as <key>" or
 * "webgpu: <why not>" (class "unavailable"), so that a user sees why a family is missing.
 */
function showExecutors() {
  const list = document.getElementById('executors');
  if (!list) return;
  const ready = new Map((window.webtuneAgent.executors || []).map((e) => [e.constructor.family, e]));
  const lines = EXECUTORS.map(({ family }) => {
    if (ready.has(family)) return { family, ok: true, text: `${family}: ready as ${ready.get(family).key()}` };
    const reason = state.unavailable[family];
    return { family, ok: false, text: `${family}: ${reason ?? 'starting'}` };
  });
  list.replaceChildren(...lines.map(({ family, ok, text }) => {
    const item = document.createElement('li');
    item.dataset.family = family;
    item.className = ok ? 'ready' : 'unavailable';
    item.textContent = text;
    return item;
  }));
}

/** The one-line reason an executor could not be made, from what its setup threw. */
function reasonOf(error) {
  const text = error?.message || String(error);
  return text.replace(/\s+/g, ' ').trim() || `${error?.name || 'Error'} without a message`;
}

function setStatus(status) {
  state.status = status;
  show();
}

// Parses a frame keeping uint64 seeds exact: JSON numbers above 2^53 lose bits as doubles, so
// the reviver takes the seed from its source text (JSON.parse source text access).
function parseFrame(text) {
  return JSON.parse(text, function reviver(key, value, context) {
    if (key === 'seed' && typeof value === 'number' && context && typeof context.source === 'string') {
      return BigInt(context.source);
    }
    return value;
  });
}

/** A ready executor of class `Executor`; rejects when it cannot work in this browser. */
async function makeExecutor(Executor, options) {
  return Executor.create ? Executor.create(options) : new Executor(options);
}

async function createExecutors() {
  const wanted = (params.get('targets') || '').split(',').map((s) => s.trim()).filter(Boolean);
  const executors = [];
  for (const Executor of EXECUTORS) {
    if (wanted.length && !wanted.includes(Executor.family)) {
      state.unavailable[Executor.family] = `off (not in targets=${wanted.join(',')})`;
      continue;
    }
    try {
      executors.push(await makeExecutor(Executor, Object.fromEntries(params)));
    } catch (e) {
      state.unavailable[Executor.family] = reasonOf(e);
      log(`no ${Executor.family} executor: ${state.unavailable[Executor.family]}`);
    }
  }
  return executors;
}

class Agent {
  constructor(executors, token) {
    this.executors = executors;
    this.executorOptions = Object.fromEntries(params);
    this.token = token;
    this.socket = null;
    this.backoffMs = 500;
    this.queue = [];
    this.running = false;
    this.cancelled = new Set();
    this.name = params.get('name') || `browser/${executors.map((e) => e.key()).join('+')}`;
    const scheme = location.protocol === 'https:' ? 'wss' : 'ws';
    this.url = params.get('tracker') || `${scheme}://${location.host}/ws`;
  }

  hello() {
    const devices = {};
    for (const e of this.executors) devices[e.key()] = e.device();
    state.keys = Object.keys(devices);
    return {
      type: 'hello',
      protocol: PROTOCOL,
      role: 'agent',
      token: this.token,
      name: this.name,
      keys: state.keys,
      job_kinds: ['kernel', 'model'],
      // The tracker keeps one device per agent; a tab with several executors lists all of them,
      // and the families it does not serve with their reasons (as the page shows them).
      device: { ...this.executors[0].device(), devices, unavailable: { ...state.unavailable } },
    };
  }

  connect() {
    setStatus('connecting');
    let socket;
    try {
      socket = new WebSocket(this.url);
    } catch (e) {
      state.lastError = e.message;
      this.scheduleReconnect();
      return;
    }
    this.socket = socket;
    socket.onopen = () => socket.send(JSON.stringify(this.hello()));
    socket.onmessage = (event) => this.onMessage(event.data);
    socket.onclose = (event) => {
      if (this.socket !== socket) return;
      this.socket = null;
      log(`disconnected (code ${event.code}${event.reason ? `, ${event.reason}` : ''})`);
      if (state.status === 'waiting-for-token') return;
      this.scheduleReconnect();
    };
  }

  scheduleReconnect() {
    // Exponential backoff with jitter, so that a farm's tabs do not all return at once.
    const delay = this.backoffMs * (0.75 + 0.5 * Math.random());
    this.backoffMs = Math.min(this.backoffMs * 2, 10000);
    state.reconnects += 1;
    setStatus('connecting');
    setTimeout(() => this.connect(), delay);
  }

  send(message) {
    if (this.socket && this.socket.readyState === WebSocket.OPEN) {
      this.socket.send(JSON.stringify(message));
      return true;
    }
    return false;
  }

  onMessage(text) {
    let message;
    try {
      message = parseFrame(text);
    } catch (e) {
      log(`unparsable frame: ${e.message}`);
      return;
    }
    switch (message.type) {
      case 'welcome':
        state.session = message.session;
        this.backoffMs = 500;
        setStatus('connected');
        log(`connected as ${state.keys.join(', ')} (session ${message.session})`);
        break;
      case 'job':
        this.queue.push(message);
        this.pump();
        break;
      case 'cancel':
        this.cancelled.add(message.job);
        break;
      case 'error':
        state.lastError = `${message.code}: ${message.message}`;
        log(`tracker error ${state.lastError}`);
        if (message.code === 'bad_token') {
          setStatus('waiting-for-token');
          askForToken(state.lastError);
        } else {
          show();
        }
        break;
      default:
        break;
    }
  }

  async pump() {
    if (this.running) return;
    this.running = true;
    try {
      while (this.queue.length) {
        const job = this.queue.shift();
        const result = await this.runJob(job);
        state.jobsDone += 1;
        show();
        // A result whose socket is gone is dropped: the tracker re-queues the job elsewhere.
        // The attempt is echoed: an answer to an earlier lease of the same job is refused.
        if (!this.send({ type: 'result', job: job.job, attempt: job.attempt, result })) log(`result of job ${job.job} dropped: not connected`);
        if (this.executors.some((e) => e.failed)) this.dropFailedExecutors();
      }
    } finally {
      this.running = false;
    }
  }

  /**
   * Executors that can no longer work (WebGPU: the adapter is gone) leave the agent. The tab
   * reconnects advertising the remaining keys; with none left it reports itself 'failed' and
   * closes its socket (the farm reloads such a tab). Jobs queued here are not answered: the
   * tracker re-queues a disconnected session's jobs.
   */
  dropFailedExecutors() {
    const failed = this.executors.filter((e) => e.failed);
    this.executors = this.executors.filter((e) => !e.failed);
    window.webtuneAgent.executors = this.executors;
    state.lastError = failed.map((e) => e.failedMessage).join('; ');
    for (const e of failed) state.unavailable[e.constructor.family] = `failed: ${e.failedMessage}`;
    log(`dropping ${failed.map((e) => e.constructor.family).join(', ')}: ${state.lastError}`);
    this.queue = [];
    const socket = this.socket;
    this.socket = null;  // its close event must not schedule a reconnect
    if (!this.executors.length) {
      setStatus('failed');
      log('failed: no executor works any more');
    }
    // close() sends the result written just before it first.
    if (socket) socket.close(1000, this.executors.length ? 'executor failed' : 'agent failed');
    if (this.executors.length) this.connect();
  }

  async runJob(job) {
    const start = performance.now();
    const elapsed = () => (performance.now() - start) / 1e3;
    state.busyJob = job.job;
    let timedOut = false;
    let timer = null;
    try {
      const input = job.input;
      const model = isModelInput(input);
      const target = input?.artifact?.target;
      // A model job runs on a model of its own (model_job.mjs), not on an executor's context.
      const executor = model ? null : this.executors.find((e) => e.constructor.artifactTargets.includes(target));
      if (!model && !executor) {
        throw new MeasureError(ErrorNo.INSTANTIATION, `this agent has no executor for artifact target '${target}'`);
      }
      const timeoutS = input.options?.timeout_s ?? 10;
      const shouldStop = () => timedOut || this.cancelled.has(job.job);
      const measured = model
        ? runModelJob(input, { trackerUrl: this.url, targets: this.executors.map((e) => e.constructor.family), start, shouldStop })
        : executor.measure(input, { start, shouldStop });
      const watchdog = new Promise((resolve) => {
        if (timeoutS <= 0) return;
        timer = setTimeout(() => {
          timedOut = true;
          resolve({ watchdog: true });
        }, (timeoutS + WATCHDOG_GRACE_S) * 1e3);
      });
      const outcome = await Promise.race([measured, watchdog]);
      if (outcome.watchdog) {
        // The old executor is still inside a batch (it stops at its next check, or never if the
        // kernel hangs): the next jobs get a fresh executor with a context of its own.
        measured.catch(() => {});
        if (!executor) {
          return makeResult(ErrorNo.RUN_TIMEOUT, `the model job ran past its timeout of ${timeoutS} s (+${WATCHDOG_GRACE_S} s grace)`, [], elapsed());
        }
        try {
          const fresh = await makeExecutor(executor.constructor, this.executorOptions);
          this.executors[this.executors.indexOf(executor)] = fresh;
          window.webtuneAgent.executors = this.executors;
        } catch (e) {
          // No fresh one (e.g. requestAdapter() returned null): the stuck one is of no use
          // either, so it fails and pump() drops it after this result.
          executor.failed = true;
          executor.failedMessage = `the ${executor.constructor.family} executor hung and cannot be replaced: ${e.message}`;
          log(executor.failedMessage);
        }
        return makeResult(ErrorNo.RUN_TIMEOUT, `the job ran past its timeout of ${timeoutS} s (+${WATCHDOG_GRACE_S} s grace)`, [], elapsed());
      }
      return makeResult(ErrorNo.NO_ERROR, '', outcome.costs, elapsed());
    } catch (e) {
      if (e instanceof MeasureError) return makeResult(e.errorNo, e.message, [], elapsed());
      return makeResult(ErrorNo.UNKNOWN, `${e?.name || 'Error'}: ${e?.message || e}`, [], elapsed());
    } finally {
      if (timer) clearTimeout(timer);
      this.cancelled.delete(job.job);
      state.busyJob = 0;
    }
  }
}

function askForToken(reason) {
  const form = document.getElementById('token-form');
  if (!form) return;
  form.hidden = false;
  const note = document.getElementById('token-note');
  if (note && reason) note.textContent = reason;
}

async function main() {
  const executors = await createExecutors();
  window.webtuneAgent.executors = executors;
  show();
  if (!executors.length) {
    state.lastError = `no executor works in this browser: ${Object.entries(state.unavailable).map(([f, r]) => `${f}: ${r}`).join('; ')}`;
    setStatus('failed');
    log(state.lastError);
    return;
  }
  const form = document.getElementById('token-form');
  let token = params.get('token');
  if (token === null) {
    // No token in the URL: ask (an empty token is fine for a tracker that needs none).
    setStatus('waiting-for-token');
    askForToken('');
  }
  const start = (t) => {
    const agent = new Agent(executors, t);
    window.webtuneAgent.agent = agent;
    agent.connect();
  };
  if (form) {
    form.addEventListener('submit', (event) => {
      event.preventDefault();
      form.hidden = true;
      const value = document.getElementById('token').value;
      const agent = window.webtuneAgent.agent;
      if (agent) {
        agent.token = value;
        agent.backoffMs = 500;
        agent.connect();
      } else {
        start(value);
      }
    });
  }
  if (token !== null) start(token);
}

main();
