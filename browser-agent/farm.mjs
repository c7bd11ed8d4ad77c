#!/usr/bin/env node
// farm.mjs — a local farm of browser tabs (headless Chromium, or Firefox): each tab opens the
// tracker's /agent page and so becomes an agent of the farm. `webtune farm` and `webtune tune
// --target webgl2` (without --tracker) start this script; it can also run on its own:
//
//   node browser-agent/farm.mjs --tracker ws://127.0.0.1:9190/ws --tabs 2 --targets webgl2[,webgpu][,wasm]
//        [--browser chromium|firefox] [--token T] [--gl llvmpipe|swiftshader]
//        [--chromium /usr/bin/chromium] [--firefox /usr/bin/firefox-esr] [--display xvfb|headless]
//        [--name farm] [--parent-pid PID] [--no-restart] [--trust-cert CERT.pem]
//
// Firefox (Debian's firefox-esr) is driven over WebDriver BiDi, the protocol puppeteer-core 24
// speaks to it. Headless Firefox offers no WebGL on Linux (its WebGL needs a window system: the
// context fails with "AllowWebgl2:false restricts context creation on this system", and with
// webgl.force-enabled "Exhausted GL driver options"), so by default (--display xvfb) the farm
// runs a windowed Firefox on a private Xvfb display, where WebGL2 renders through Mesa
// (llvmpipe). --display headless runs `firefox --headless` instead: such tabs serve wasm only.
// Xvfb is tied to this process: a shell that holds it exits when its stdin (a pipe from here)
// ends, and Firefox exits when its X server goes, so neither outlives a killed farm.
//
// A wss:// tracker's pages are opened over https://. --trust-cert makes Chromium accept exactly
// that certificate's key (its SPKI SHA-256, --ignore-certificate-errors-spki-list): for a
// self-signed tracker certificate, without trusting anything else.
//
// Browsers are Debian's (`/usr/bin/chromium`, `/usr/bin/firefox-esr`), driven through
// puppeteer-core: no browser is ever downloaded. A tab that crashes or closes is reopened, a
// browser that dies is relaunched with all its tabs, each after a short backoff. A tab whose
// agent reports status 'failed' (no executor works any more, e.g. its WebGPU adapter is gone) is
// reloaded the same way. The agent page's "[webtune]" console lines are printed as
// "farm: tab N: ...".
//
// Lines on stdin control the farm (for tests and operators): "close N" closes tab N (reopened
// unless --no-restart), "lose N" loses tab N's WebGL context (WEBGL_lose_context), destroys its
// WebGPU device or terminates its wasm workers (to exercise recovery), "kill-browser" SIGKILLs
// the browser (relaunched unless --no-restart), "status" prints every tab's agent state (with
// `executors`, the page's per-executor lines) as one JSON line, "quit" stops.
// SIGINT/SIGTERM, the end of --parent-pid, or "quit" close the browser and remove its profile.

import { spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { parseArgs } from 'node:util';
import puppeteer from 'puppeteer-core';

const { values: opts } = parseArgs({
  options: {
    tracker: { type: 'string', default: 'ws://127.0.0.1:9190/ws' },
    tabs: { type: 'string', default: '1' },
    targets: { type: 'string', default: 'webgl2' },
    token: { type: 'string', default: '' },
    gl: { type: 'string', default: 'swiftshader' },
    browser: { type: 'string', default: process.env.WEBTUNE_BROWSER || 'chromium' },
    chromium: { type: 'string', default: process.env.WEBTUNE_CHROMIUM || '/usr/bin/chromium' },
    firefox: { type: 'string', default: process.env.WEBTUNE_FIREFOX || '/usr/bin/firefox-esr' },
    display: { type: 'string', default: 'xvfb' },
    name: { type: 'string', default: 'farm' },
    'parent-pid': { type: 'string', default: '0' },
    'no-restart': { type: 'boolean', default: false },
    'trust-cert': { type: 'string', default: '' },
  },
});

// The SPKI SHA-256 (base64) of --trust-cert's certificate, for Chromium's allow-list.
let trustedSpki = '';
if (opts['trust-cert']) {
  try {
    const cert = new crypto.X509Certificate(fs.readFileSync(opts['trust-cert']));
    const spki = cert.publicKey.export({ type: 'spki', format: 'der' });
    trustedSpki = crypto.createHash('sha256').update(spki).digest('base64');
  } catch (e) {
    console.error(`farm: --trust-cert: cannot read a certificate from '${opts['trust-cert']}': ${e.message}`);
    process.exit(2);
  }
}

const tabCount = Number.parseInt(opts.tabs, 10);
if (!(tabCount >= 1)) {
  console.error('farm: --tabs takes a positive number');
  process.exit(2);
}
// Executor families the agent page has (agent.mjs EXECUTORS).
const FARM_TARGETS = ['webgl2', 'webgpu', 'wasm'];
const targets = opts.targets.split(',');
for (const target of targets) {
  if (!FARM_TARGETS.includes(target)) {
    console.error(`farm: unknown target '${target}' (this farm runs: ${FARM_TARGETS.join(', ')})`);
    process.exit(2);
  }
}
if (!['chromium', 'firefox'].includes(opts.browser)) {
  console.error(`farm: --browser takes chromium or firefox, not '${opts.browser}'`);
  process.exit(2);
}
const firefox = opts.browser === 'firefox';
if (!['xvfb', 'headless'].includes(opts.display)) {
  console.error(`farm: --display takes xvfb or headless, not '${opts.display}'`);
  process.exit(2);
}
if (firefox && opts['trust-cert']) {
  // Chromium pins the certificate's key with a flag; Firefox has no such switch (a profile
  // would need the certificate imported into its NSS database).
  console.error('farm: --trust-cert works with --browser chromium only');
  process.exit(2);
}
const executablePath = firefox ? opts.firefox : opts.chromium;
if (!fs.existsSync(executablePath)) {
  console.error(`farm: no ${opts.browser} at ${executablePath}` +
    (firefox ? ' (apt-get install firefox-esr, or --firefox PATH)' : ' (apt-get install chromium, or --chromium PATH)'));
  process.exit(2);
}
/** True when `name` is an executable file in a directory of $PATH. */
function onPath(name) {
  return (process.env.PATH || '/usr/bin:/bin').split(':').some((dir) => {
    try {
      fs.accessSync(path.join(dir || '.', name), fs.constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
}
if (firefox && opts.display === 'xvfb' && !onPath('Xvfb')) {
  console.error('farm: no Xvfb on PATH (apt-get install xvfb); or --display headless, whose ' +
    'Firefox tabs have no WebGL and serve wasm only');
  process.exit(2);
}
if (!['llvmpipe', 'swiftshader'].includes(opts.gl)) {
  console.error(`farm: --gl takes llvmpipe or swiftshader, not '${opts.gl}'`);
  process.exit(2);
}

// ws://host:port/ws → http://host:port/agent?...
function agentUrl(index) {
  const tracker = new URL(opts.tracker);
  const page = new URL('/agent', `${tracker.protocol === 'wss:' ? 'https' : 'http'}://${tracker.host}`);
  page.searchParams.set('token', opts.token);
  page.searchParams.set('name', `${opts.name}-${index}`);
  page.searchParams.set('targets', opts.targets);
  // Extra page parameters for experiments, e.g. WEBTUNE_AGENT_PARAMS="sync=finish".
  for (const [k, v] of new URLSearchParams(process.env.WEBTUNE_AGENT_PARAMS || '')) {
    page.searchParams.set(k, v);
  }
  return page.toString();
}

function chromiumArgs() {
  const args = [
    '--no-sandbox', '--disable-quic', '--no-first-run', '--disable-background-networking',
    '--disable-component-update', '--disable-sync',
    // Every tab works, visible or not: no timer throttling or renderer backgrounding.
    '--disable-background-timer-throttling', '--disable-renderer-backgrounding',
    '--disable-backgrounding-occluded-windows',
  ];
  if (opts.gl === 'llvmpipe') {
    // WebGL2 through ANGLE on the system's EGL (Mesa llvmpipe): about twice SwiftShader's speed.
    args.push('--use-gl=angle', '--use-angle=gl-egl', '--ignore-gpu-blocklist');
  } else {
    args.push('--enable-unsafe-swiftshader');
  }
  // Headless Chromium exposes navigator.gpu only with this flag (the adapter is SwiftShader).
  if (targets.includes('webgpu')) args.push('--enable-unsafe-webgpu');
  if (trustedSpki) args.push(`--ignore-certificate-errors-spki-list=${trustedSpki}`);
  return args;
}

let stopping = false;
let browser = null;
let profileDir = null;
const tabs = [];

function say(line) {
  process.stdout.write(`farm: ${line}\n`);
}

class Tab {
  constructor(index) {
    this.index = index;
    this.page = null;
    this.restarts = 0;
  }

  async open() {
    // A reopen timer and a relaunched browser may both get here: one page per tab.
    if (stopping || !browser || this.page || this.opening) return;
    this.opening = true;
    try {
      await this.openPage();
    } finally {
      this.opening = false;
    }
  }

  async openPage() {
    const page = await browser.newPage();
    this.page = page;
    page.on('console', (message) => {
      const text = message.text();
      if (text.startsWith('[webtune]')) say(`tab ${this.index}: ${text.slice(10)}`);
    });
    page.on('pageerror', (error) => say(`tab ${this.index}: page error: ${error.message}`));
    page.on('error', (error) => {
      // The renderer crashed: close what is left and reopen.
      say(`tab ${this.index}: crashed (${error.message})`);
      page.close().catch(() => {});
    });
    page.on('close', () => {
      if (this.page !== page) return;
      this.page = null;
      this.reopenLater('closed');
    });
    await page.goto(agentUrl(this.index), { waitUntil: 'load', timeout: 60000 });
  }

  reopenLater(why) {
    if (stopping || opts['no-restart'] || !browser?.connected) return;
    this.restarts += 1;
    const delay = Math.min(500 * 2 ** Math.min(this.restarts - 1, 5), 15000);
    say(`tab ${this.index}: ${why}; reopening in ${delay} ms`);
    setTimeout(() => this.open().catch((e) => {
      say(`tab ${this.index}: cannot reopen: ${e.message}`);
      this.reopenLater('reopen failed');
    }), delay);
  }

  async close() {
    const page = this.page;
    if (page) await page.close();
  }

  /** Closes (and so reopens, like a crashed tab) a page whose agent says 'failed'. */
  async reloadIfFailed() {
    const page = this.page;
    if (!page || this.opening) return;
    const s = await page.evaluate(() => window.webtuneAgent?.state ?? null).catch(() => null);
    if (s?.status !== 'failed' || this.page !== page) return;
    say(`tab ${this.index}: agent failed (${s.lastError || 'no reason given'})`);
    await page.close().catch(() => {});
  }

  async state() {
    if (!this.page) return { tab: this.index, open: false };
    try {
      // The agent's state and the page's executor lines ("webgpu: navigator.gpu is undefined").
      const s = await this.page.evaluate(() => ({
        ...(window.webtuneAgent?.state ?? {}),
        executors: [...document.querySelectorAll('#executors li')].map((li) => li.textContent),
      }));
      return { tab: this.index, open: true, ...s };
    } catch (e) {
      return { tab: this.index, open: true, error: e.message };
    }
  }
}

let browserRestarts = 0;

// How often tabs are asked whether their agent failed.
const FAILED_POLL_MS = 1000;
setInterval(() => {
  for (const tab of tabs) tab.reloadIfFailed();
}, FAILED_POLL_MS).unref();

/**
 * Firefox preferences of the farm's profile (on top of puppeteer's own): every tab works,
 * visible or not (background tabs would otherwise get 1 s timers and a timer budget), and
 * nothing phones home.
 */
const FIREFOX_PREFS = {
  'dom.min_background_timeout_value': 4,
  'dom.timeout.enable_budget_timer_throttling': false,
  'dom.ipc.processPriorityManager.enabled': false,
  'browser.tabs.unloadOnLowMemory': false,
  'app.update.enabled': false,
  'datareporting.policy.dataSubmissionEnabled': false,
  'toolkit.telemetry.enabled': false,
  'browser.shell.checkDefaultBrowser': false,
};

// The private X display of a windowed Firefox (--display xvfb): {display, holder}.
let xvfb = null;

/**
 * Starts Xvfb on a free display through a holder shell: Xvfb writes the display number to the
 * holder's stdout (-displayfd), and the holder kills Xvfb once its stdin (a pipe from this
 * process) ends, i.e. when this process exits however it ends. Resolves to ':N'.
 */
function startXvfb() {
  const script = 'Xvfb -displayfd 3 -screen 0 1280x800x24 -nolisten tcp 3>&1 >/dev/null 2>&1 & ' +
    'x=$!; cat >/dev/null; kill $x 2>/dev/null; wait $x';
  const holder = spawn('/bin/sh', ['-c', script], { stdio: ['pipe', 'pipe', 'inherit'] });
  return new Promise((resolve, reject) => {
    let text = '';
    const timer = setTimeout(() => reject(new Error('Xvfb did not report a display within 20 s')), 20000);
    holder.on('error', (e) => { clearTimeout(timer); reject(e); });
    holder.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`Xvfb ended at start (exit code ${code}; apt-get install xvfb, or --display headless)`));
    });
    holder.stdout.on('data', (chunk) => {
      text += chunk;
      const m = /^(\d+)\n/.exec(text);
      if (!m) return;
      clearTimeout(timer);
      holder.removeAllListeners('exit');
      resolve({ display: `:${m[1]}`, holder });
    });
  });
}

function stopXvfb() {
  if (!xvfb) return;
  xvfb.holder.stdin.end();
  xvfb = null;
}

/** puppeteer.launch options for --browser. */
async function launchOptions() {
  if (!firefox) {
    return {
      executablePath, headless: true,
      pipe: true,  // the browser ends with this process even when it is killed
      userDataDir: profileDir, args: chromiumArgs(), protocolTimeout: 120000,
    };
  }
  const env = { ...process.env };
  let headless = true;
  if (opts.display === 'xvfb') {
    if (!xvfb) xvfb = await startXvfb();
    env.DISPLAY = xvfb.display;
    delete env.WAYLAND_DISPLAY;
    headless = false;
  }
  return {
    browser: 'firefox', executablePath, headless, env,
    userDataDir: profileDir,
    extraPrefsFirefox: FIREFOX_PREFS,
    protocolTimeout: 120000,
  };
}

async function launchBrowser() {
  profileDir = fs.mkdtempSync(path.join(os.tmpdir(), 'webtune-farm-'));
  browser = await puppeteer.launch(await launchOptions());
  const launched = browser;
  launched.on('disconnected', () => {
    if (browser !== launched) return;
    browser = null;
    for (const tab of tabs) tab.page = null;  // gone with their browser
    removeProfile();
    if (stopping || opts['no-restart']) return;
    browserRestarts += 1;
    const delay = Math.min(1000 * 2 ** Math.min(browserRestarts - 1, 4), 15000);
    say(`the browser went away; relaunching in ${delay} ms`);
    setTimeout(() => start().catch((e) => {
      say(`cannot relaunch the browser: ${e.message}`);
      launched.emit('disconnected');
    }), delay);
  });
  // The first blank tab is of no use.
  for (const page of await browser.pages()) await page.close().catch(() => {});
  const how = firefox ? (opts.display === 'xvfb' ? `windowed on Xvfb ${xvfb.display}` : 'headless: no WebGL')
                      : opts.gl;
  say(`${firefox ? '' : 'chromium '}${await browser.version()} (${how}), ${tabCount} tab(s) for ${opts.tracker}`);
}

async function start() {
  await launchBrowser();
  for (let i = 0; i < tabCount; ++i) {
    if (!tabs[i]) tabs[i] = new Tab(i);
    await tabs[i].open();
  }
}

function removeProfile() {
  if (!profileDir) return;
  try {
    fs.rmSync(profileDir, { recursive: true, force: true });
  } catch {
    // A profile left in /tmp is harmless.
  }
  profileDir = null;
}

async function shutdown(code) {
  if (stopping) return;
  stopping = true;
  const b = browser;
  browser = null;
  if (b) await Promise.race([b.close().catch(() => {}), new Promise((r) => setTimeout(r, 5000))]);
  removeProfile();
  stopXvfb();
  process.exit(code);
}

process.on('SIGINT', () => shutdown(0));
process.on('SIGTERM', () => shutdown(0));

const parentPid = Number.parseInt(opts['parent-pid'], 10);
if (parentPid > 0) {
  // Like the native agents' PR_SET_PDEATHSIG: a farm never outlives the program that started it.
  setInterval(() => {
    try {
      process.kill(parentPid, 0);
    } catch {
      say(`parent ${parentPid} is gone; stopping`);
      shutdown(0);
    }
  }, 500).unref();
}

readline.createInterface({ input: process.stdin }).on('line', async (line) => {
  const [command, arg] = line.trim().split(/\s+/);
  if (command === 'close') {
    const tab = tabs[Number.parseInt(arg, 10)];
    if (!tab) return say(`no tab ${arg}`);
    say(`tab ${tab.index}: closing on request`);
    await tab.close().catch((e) => say(`tab ${tab.index}: close failed: ${e.message}`));
  } else if (command === 'lose') {
    const tab = tabs[Number.parseInt(arg, 10)];
    if (!tab?.page) return say(`no open tab ${arg}`);
    const lost = await tab.page.evaluate(() => window.webtuneAgent.executors[0].loseContext())
      .catch((e) => `failed: ${e.message}`);
    say(`tab ${tab.index}: lose context: ${lost}`);
  } else if (command === 'kill-browser') {
    const child = browser?.process();
    if (!child) return say('no browser to kill');
    say(`killing the browser (pid ${child.pid}) on request`);
    child.kill('SIGKILL');
  } else if (command === 'status') {
    const states = await Promise.all(tabs.map((t) => t.state()));
    say(`status ${JSON.stringify(states)}`);
  } else if (command === 'quit') {
    await shutdown(0);
  } else if (command) {
    say(`unknown command '${command}' (close N, lose N, kill-browser, status, quit)`);
  }
});

start().catch((e) => {
  console.error(`farm: cannot start: ${e.message}`);
  shutdown(1).then(() => process.exit(1));
});
