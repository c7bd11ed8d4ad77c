// model_job.mjs — model jobs on the browser agent (issue 16 item 3; the contract is
// MODEL_JOBS.md): a whole package built by `webtune build` for webgl2, webgpu or wasm, measured
// end to end on this tab's device.
//
// A job whose input has "kind":"model" names a package the tracker serves at /models/<model>/
// (same origin as the tracker's WebSocket). runModelJob:
//   1. fetches manifest.json and checks its SHA-256 (crypto.subtle, or the small fallback below
//      on pages that are not a secure context) against manifest_sha256: a package rebuilt since
//      the job was submitted is COMPILE_HOST "package changed: manifest sha256 <got> != <want>";
//   2. loads the package with the model runtime (runtime/model.mjs, load(baseUrl)), handing it
//      the very manifest bytes that were hashed; the model gets a context / device of its own
//      and is disposed after the job (no cache: a job per package is rare next to its runs, and
//      a held context would count against the browser's limit while kernel jobs run);
//   3. makes the input with seededTensor(seed, 0, input elements) (seeded_random.mjs, the
//      generator kernel inputs use), runs `warmup` untimed inferences (default 3; the first one's
//      output is checked: every element finite, the reference samples within tolerance, else
//      WRONG_ANSWER), then `repeat` measurements of `number` inferences (time_evaluator's growth
//      by min_repeat_ms), each inference timed with performance.now() around `await m.run(x)`,
//      input upload and read-back included.
// Errors: a package that cannot be fetched or parsed is COMPILE_HOST; a kernel the browser
// rejects at load COMPILE_DEVICE (the runtime's StepError names step, node and kernel file); a
// run that fails RUNTIME_DEVICE (or the runtime's own error number); past timeout_s (the whole
// job's budget) RUN_TIMEOUT.

import { ErrorNo, MeasureError, checkJobDeadline, requireSamplesMatch, timeEvaluator } from './measure.mjs';
import { seededTensor } from './seeded_random.mjs';
import { load as loadPackage } from '../runtime/model.mjs';

/** Warm-up inferences when the options name none, and the most allowed. */
export const DEFAULT_WARMUP = 3;
export const MAX_WARMUP = 100;

// The bounds of the farm's own parser (tracker/model_job.cpp, codegen/measure.hpp's
// MeasureOptions and kMaxSamples): the tab refuses what the tracker would.
const MAX_SAMPLES = 4096;
const MAX_NUMBER = 1000000;
const MAX_REPEAT = 1000;
const MAX_MIN_REPEAT_MS = 60000;
const MAX_TIMEOUT_S = 3600;
const MAX_SEED = 2n ** 64n - 1n;

/**
 * Whether a job input is a model measure input ("kind":"model"); false for a kernel input (no
 * kind, or "kind":"kernel"). Throws INSTANTIATION for any other kind, as the tracker does.
 */
export function isModelInput(input) {
  if (input === null || typeof input !== 'object' || !('kind' in input)) return false;
  if (input.kind === 'model') return true;
  if (input.kind === 'kernel') return false;
  throw new MeasureError(ErrorNo.INSTANTIATION, `bad measure input: 'kind' must be "kernel" or "model"`);
}

const MODEL_NAME = /^[A-Za-z0-9_-][A-Za-z0-9._-]{0,99}$/;
const SHA256_HEX = /^[0-9a-f]{64}$/;

/** The package folder URL for `model` on the tracker of WebSocket URL `trackerUrl`. */
export function modelBaseUrl(trackerUrl, model) {
  const url = new URL(trackerUrl);
  url.protocol = url.protocol === 'wss:' ? 'https:' : 'http:';
  return new URL(`/models/${model}/`, url.origin);
}

// ---- SHA-256 ----

// FIPS 180-4. Only for pages without crypto.subtle (an http:// page on a LAN address is not a
// secure context); manifests are small.
const K = new Uint32Array([
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
  0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
  0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
  0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
  0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
  0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
  0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
  0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
]);

/** SHA-256 of `bytes` (Uint8Array) in plain JavaScript, as a Uint8Array of 32 bytes. */
export function sha256Js(bytes) {
  const length = bytes.length;
  const blocks = Math.ceil((length + 9) / 64);
  const data = new Uint8Array(blocks * 64);
  data.set(bytes);
  data[length] = 0x80;
  const view = new DataView(data.buffer);
  view.setUint32(data.length - 8, Math.floor(length / 0x20000000));
  view.setUint32(data.length - 4, (length * 8) >>> 0);
  const h = new Uint32Array([0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19]);
  const w = new Uint32Array(64);
  const rotr = (x, n) => (x >>> n) | (x << (32 - n));
  for (let b = 0; b < blocks; ++b) {
    for (let i = 0; i < 16; ++i) w[i] = view.getUint32(b * 64 + i * 4);
    for (let i = 16; i < 64; ++i) {
      const s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >>> 3);
      const s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >>> 10);
      w[i] = (w[i - 16] + s0 + w[i - 7] + s1) >>> 0;
    }
    let [a, bb, c, d, e, f, g, hh] = h;
    for (let i = 0; i < 64; ++i) {
      const t1 = (hh + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + w[i]) >>> 0;
      const t2 = ((rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & bb) ^ (a & c) ^ (bb & c))) >>> 0;
      hh = g; g = f; f = e; e = (d + t1) >>> 0; d = c; c = bb; bb = a; a = (t1 + t2) >>> 0;
    }
    h[0] += a; h[1] += bb; h[2] += c; h[3] += d; h[4] += e; h[5] += f; h[6] += g; h[7] += hh;
  }
  const out = new Uint8Array(32);
  const outView = new DataView(out.buffer);
  for (let i = 0; i < 8; ++i) outView.setUint32(i * 4, h[i]);
  return out;
}

/** Lowercase hex SHA-256 of `bytes` (Uint8Array): crypto.subtle where there is one. */
export async function sha256Hex(bytes) {
  const digest = globalThis.crypto?.subtle
    ? new Uint8Array(await globalThis.crypto.subtle.digest('SHA-256', bytes))
    : sha256Js(bytes);
  return Array.from(digest, (x) => x.toString(16).padStart(2, '0')).join('');
}

// ---- the job ----

function badInput(message) {
  throw new MeasureError(ErrorNo.INSTANTIATION, `bad model input: ${message}`);
}

/** Checks the fields runModelJob reads (MODEL_JOBS.md); throws INSTANTIATION naming one. */
export function checkModelInput(input) {
  if (typeof input.model !== 'string' || !MODEL_NAME.test(input.model)) {
    badInput("'model' must be 1-100 characters of [A-Za-z0-9._-], not starting with '.'");
  }
  if (typeof input.manifest_sha256 !== 'string' || !SHA256_HEX.test(input.manifest_sha256)) {
    badInput("'manifest_sha256' must be 64 lowercase hex digits");
  }
  const seed = input.seed;
  if (!(typeof seed === 'bigint' ? seed >= 0n && seed <= MAX_SEED : Number.isInteger(seed) && seed >= 0)) {
    badInput("'seed' must be a whole number >= 0");
  }
  if ('samples' in input) {
    const samples = input.samples;
    if (!Array.isArray(samples)) badInput("'samples' must be an array");
    if (samples.length > MAX_SAMPLES) badInput(`${samples.length} samples, more than the limit of ${MAX_SAMPLES}`);
    samples.forEach((s, i) => {
      if (s === null || typeof s !== 'object' || !Number.isInteger(s.index) || s.index < 0 ||
          !Number.isFinite(s.value) || !Number.isFinite(s.tolerance) || s.tolerance < 0) {
        badInput(`samples[${i}] must be {index ≥ 0, value, tolerance ≥ 0}, all finite`);
      }
    });
  }
  if ('options' in input) {
    const options = input.options;
    if (options === null || typeof options !== 'object' || Array.isArray(options)) badInput("'options' must be an object");
    const bounded = (key, lo, hi) => {
      const v = options[key];
      if (v !== undefined && !(Number.isInteger(v) && v >= lo && v <= hi)) badInput(`options.${key} = ${v} must be in [${lo}, ${hi}]`);
    };
    bounded('number', 1, MAX_NUMBER);
    bounded('repeat', 1, MAX_REPEAT);
    bounded('min_repeat_ms', 0, MAX_MIN_REPEAT_MS);
    bounded('warmup', 0, MAX_WARMUP);
    // Written so that NaN fails too; 0 is refused (the tracker's bound), not "no limit".
    const t = options.timeout_s;
    if (t !== undefined && !(typeof t === 'number' && t > 0 && t <= MAX_TIMEOUT_S)) {
      badInput(`options.timeout_s = ${t} must be in (0, ${MAX_TIMEOUT_S}] seconds`);
    }
  }
}

/** The first element that is not finite, as a message ('' when all are). */
function nonFinite(output) {
  for (let i = 0; i < output.length; ++i) {
    if (!Number.isFinite(output[i])) return `output[${i}] = ${output[i]} is not finite`;
  }
  return '';
}

/** A load() rejection as a MeasureError: the step's kernel is the device's, the rest the package's. */
function loadError(e) {
  if (e instanceof MeasureError) return e;
  if (e?.name === 'StepError') {
    const no = e.errorNo && e.errorNo !== ErrorNo.UNKNOWN ? e.errorNo : ErrorNo.COMPILE_DEVICE;
    return new MeasureError(no, e.message);
  }
  return new MeasureError(ErrorNo.COMPILE_HOST, `cannot load the package: ${e?.message ?? e}`);
}

function runError(e) {
  if (e instanceof MeasureError) return e;
  const no = e?.errorNo && e.errorNo !== ErrorNo.UNKNOWN ? e.errorNo : ErrorNo.RUNTIME_DEVICE;
  return new MeasureError(no, e?.message ?? String(e));
}

/**
 * Measures the model job `input` (see the file comment). `trackerUrl`: the agent's ws(s):// URL;
 * `targets`: the package targets this tab runs (its executors' families); `start`
 * (performance.now() at the job's start) and `shouldStop` as executors get them; `load` and
 * `fetch` replace the runtime's load() and globalThis.fetch (tests). Resolves to {costs}
 * (seconds per inference) or rejects with a MeasureError.
 */
export async function runModelJob(input, { trackerUrl, targets, start, shouldStop, load = loadPackage, fetch: fetchFn = globalThis.fetch }) {
  checkModelInput(input);
  const deadline = { input, start, shouldStop };
  const base = modelBaseUrl(trackerUrl, input.model);
  const manifestUrl = new URL('manifest.json', base);
  let bytes;
  try {
    const response = await fetchFn(manifestUrl);
    if (!response.ok) throw new Error(`HTTP ${response.status}`);
    bytes = new Uint8Array(await response.arrayBuffer());
  } catch (e) {
    throw new MeasureError(ErrorNo.COMPILE_HOST, `cannot fetch the package: GET ${manifestUrl}: ${e.message}`);
  }
  const got = await sha256Hex(bytes);
  if (got !== input.manifest_sha256) {
    throw new MeasureError(ErrorNo.COMPILE_HOST, `package changed: manifest sha256 ${got} != ${input.manifest_sha256}`);
  }
  let manifest;
  try {
    manifest = JSON.parse(new TextDecoder().decode(bytes));
  } catch (e) {
    throw new MeasureError(ErrorNo.COMPILE_HOST, `${manifestUrl} is not JSON: ${e.message}`);
  }
  if (!targets.includes(manifest.target)) {
    throw new MeasureError(ErrorNo.INSTANTIATION, `the package ${input.model} is for ${manifest.target}; this tab runs ${targets.join(', ') || 'no target'}`);
  }
  checkJobDeadline(deadline, 0, 0);

  // load() reads the manifest bytes that were hashed, not a second fetch that might differ.
  const through = (url, ...rest) => (String(url) === String(manifestUrl)
    ? Promise.resolve(new Response(bytes, { status: 200, headers: { 'Content-Type': 'application/json' } }))
    : fetchFn(url, ...rest));
  let model;
  try {
    model = await load(base, { target: manifest.target, fetch: through });
  } catch (e) {
    throw loadError(e);
  }
  try {
    checkJobDeadline(deadline, 0, 0);
    const count = (manifest.inputs?.[0]?.shape ?? []).reduce((a, b) => a * b, 1);
    const data = seededTensor(input.seed, 0, count);
    const samples = (input.samples ?? []).map((s) => [s.index, s.value, 0, s.tolerance]);
    const check = (output) => {
      const first = Array.isArray(output) ? output[0] : output;
      const bad = nonFinite(first);
      if (bad) throw new MeasureError(ErrorNo.WRONG_ANSWER, bad);
      requireSamplesMatch(first, { samples });
    };
    const infer = async () => {
      try {
        return await model.run(data);
      } catch (e) {
        throw runError(e);
      }
    };
    const warmup = input.options?.warmup ?? DEFAULT_WARMUP;
    let output = null;
    for (let i = 0; i < warmup; ++i) {
      output = await infer();
      if (i === 0) check(output);
      checkJobDeadline(deadline, 0, 0);
    }
    const measured = await timeEvaluator(input.options ?? {}, async (n) => {
      let seconds = 0;
      for (let j = 0; j < n; ++j) {
        const t0 = performance.now();
        output = await infer();
        seconds += (performance.now() - t0) / 1e3;
      }
      return seconds;
    }, (timedRuns, perRunS) => checkJobDeadline(deadline, timedRuns, perRunS));
    if (warmup === 0) check(output);
    return measured;
  } finally {
    model.dispose();
  }
}
