// model_job.test.mjs — node --test checks of model_job.mjs with a fake tracker (fetch) and a
// fake model (load): the SHA-256 fallback against node's crypto, the manifest hash check and its
// message, that load() reads the bytes that were hashed, the seeded input, warm-up and timed
// inference counts, costs = repeat, the samples and finiteness checks, the error numbers of load
// and run failures, the URL of a wss:// tracker's packages, and the refused inputs.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import test from 'node:test';

import { ErrorNo, MeasureError } from '../measure.mjs';
import { checkModelInput, isModelInput, modelBaseUrl, runModelJob, sha256Hex, sha256Js } from '../model_job.mjs';
import { seededTensor } from '../seeded_random.mjs';

const MANIFEST = JSON.stringify({ format: 'webtune-package', version: 1, target: 'wasm', inputs: [{ name: 'x', shape: [1, 6] }] });
const HASH = createHash('sha256').update(MANIFEST).digest('hex');
const TRACKER = 'ws://127.0.0.1:9190/ws';

/** A fake tracker serving MANIFEST (or `manifest`) and counting requests. */
function fakeFetch(manifest = MANIFEST) {
  const calls = [];
  const fn = async (url) => {
    calls.push(String(url));
    if (String(url).endsWith('/models/tiny/manifest.json')) return new Response(manifest);
    return new Response('no such model', { status: 404 });
  };
  return { fn, calls };
}

/** A fake model: output = 2 × input; records the inputs it ran and whether it was disposed. */
function fakeLoad({ output = (x) => x.map((v) => 2 * v), failLoad = null, failRun = null } = {}) {
  const seen = { runs: 0, inputs: [], disposed: false, manifestText: null, base: null };
  const load = async (base, options) => {
    seen.base = String(base);
    seen.manifestText = await (await options.fetch(new URL('manifest.json', base))).text();
    if (failLoad) throw failLoad;
    return {
      async run(x) {
        seen.runs += 1;
        seen.inputs.push(x);
        if (failRun) throw failRun;
        return Float32Array.from(output(x));
      },
      dispose() { seen.disposed = true; },
    };
  };
  return { load, seen };
}

function input(extra = {}) {
  const x = seededTensor(7n, 0, 6);
  return {
    kind: 'model', model: 'tiny', manifest_sha256: HASH, seed: 7n,
    samples: [{ index: 0, value: 2 * x[0], tolerance: 1e-6 }, { index: 5, value: 2 * x[5], tolerance: 1e-6 }],
    options: { number: 2, repeat: 4, warmup: 3, timeout_s: 30 },
    ...extra,
  };
}

const job = (fetch, load) => ({ trackerUrl: TRACKER, targets: ['wasm'], start: performance.now(), shouldStop: () => false, fetch, load });

test('the plain SHA-256 matches node crypto', async () => {
  for (const text of ['', 'abc', 'a'.repeat(55), 'b'.repeat(56), 'c'.repeat(64), MANIFEST.repeat(9)]) {
    const bytes = new TextEncoder().encode(text);
    const want = createHash('sha256').update(bytes).digest('hex');
    assert.equal(Buffer.from(sha256Js(bytes)).toString('hex'), want, text.slice(0, 10));
    assert.equal(await sha256Hex(bytes), want);
  }
});

test('a model job measures repeat costs of the seeded input and disposes the model', async () => {
  const { fn, calls } = fakeFetch();
  const { load, seen } = fakeLoad();
  const { costs } = await runModelJob(input(), job(fn, load));
  assert.equal(costs.length, 4);
  for (const c of costs) assert.ok(c >= 0 && c < 1, String(c));
  assert.equal(seen.runs, 3 + 4 * 2);  // warm-up, then repeat × number
  assert.deepEqual(Array.from(seen.inputs[0]), Array.from(seededTensor(7n, 0, 6)));
  assert.equal(seen.manifestText, MANIFEST);  // the hashed bytes, not a second fetch
  assert.equal(calls.length, 1);
  assert.equal(seen.base, 'http://127.0.0.1:9190/models/tiny/');
  assert.ok(seen.disposed);
});

test('a package rebuilt since the submit is COMPILE_HOST naming both hashes', async () => {
  const rebuilt = `${MANIFEST}\n`;
  const got = createHash('sha256').update(rebuilt).digest('hex');
  const { load, seen } = fakeLoad();
  await assert.rejects(runModelJob(input(), job(fakeFetch(rebuilt).fn, load)), (e) => {
    assert.ok(e instanceof MeasureError);
    assert.equal(e.errorNo, ErrorNo.COMPILE_HOST);
    assert.equal(e.message, `package changed: manifest sha256 ${got} != ${HASH}`);
    return true;
  });
  assert.equal(seen.runs, 0);
});

test('a missed sample or a non-finite output is WRONG_ANSWER and nothing is timed', async () => {
  const wrong = input();
  wrong.samples[1].value += 1;
  let fake = fakeLoad();
  await assert.rejects(runModelJob(wrong, job(fakeFetch().fn, fake.load)),
    (e) => e.errorNo === ErrorNo.WRONG_ANSWER && /output\[5\]/.test(e.message));
  assert.equal(fake.seen.runs, 1);
  assert.ok(fake.seen.disposed);
  fake = fakeLoad({ output: (x) => x.map((v, i) => (i === 3 ? NaN : 2 * v)) });
  await assert.rejects(runModelJob(input(), job(fakeFetch().fn, fake.load)),
    (e) => e.errorNo === ErrorNo.WRONG_ANSWER && e.message === 'output[3] = NaN is not finite');
});

test('load and run failures keep their error numbers', async () => {
  const step = Object.assign(new Error('kernel step 2 of node \'conv\' (kernel kernels/000.json) failed: shader'), { name: 'StepError', errorNo: ErrorNo.UNKNOWN });
  await assert.rejects(runModelJob(input(), job(fakeFetch().fn, fakeLoad({ failLoad: step }).load)),
    (e) => e.errorNo === ErrorNo.COMPILE_DEVICE && e.message.includes('kernels/000.json'));
  await assert.rejects(runModelJob(input(), job(fakeFetch().fn, fakeLoad({ failLoad: new Error('cannot fetch weights.bin') }).load)),
    (e) => e.errorNo === ErrorNo.COMPILE_HOST && e.message.includes('weights.bin'));
  await assert.rejects(runModelJob(input(), job(fakeFetch().fn, fakeLoad({ failRun: new Error('context lost') }).load)),
    (e) => e.errorNo === ErrorNo.RUNTIME_DEVICE && e.message === 'context lost');
  const missing = input({ model: 'gone' });
  await assert.rejects(runModelJob(missing, job(fakeFetch().fn, fakeLoad().load)),
    (e) => e.errorNo === ErrorNo.COMPILE_HOST && e.message.includes('/models/gone/manifest.json: HTTP 404'));
  await assert.rejects(runModelJob(input(), { ...job(fakeFetch().fn, fakeLoad().load), targets: ['webgl2'] }),
    (e) => e.errorNo === ErrorNo.INSTANTIATION && e.message.includes('is for wasm'));
});

test('packages come from the tracker origin; bad inputs are refused by field', () => {
  assert.equal(String(modelBaseUrl('wss://farm.example:8443/ws', 'r18')), 'https://farm.example:8443/models/r18/');
  const refused = (extra) => {
    try {
      checkModelInput(input(extra));
      return 'accepted';
    } catch (e) {
      return e.message;
    }
  };
  assert.equal(refused({}), 'accepted');
  assert.match(refused({ model: '../x' }), /'model'/);
  assert.match(refused({ model: '.x' }), /'model'/);
  assert.match(refused({ manifest_sha256: 'F'.repeat(64) }), /manifest_sha256/);
  assert.match(refused({ samples: [{ index: -1, value: 0, tolerance: 0 }] }), /samples\[0\]/);
  assert.match(refused({ options: { warmup: 101 } }), /warmup/);
  // The tracker's bounds (tracker/model_job.cpp, MeasureOptions): what it refuses, so does the tab.
  assert.match(refused({ seed: -1n }), /'seed'/);
  assert.match(refused({ seed: -1 }), /'seed'/);
  assert.match(refused({ seed: 2n ** 64n }), /'seed'/);
  assert.equal(refused({ seed: 2n ** 64n - 1n }), 'accepted');
  assert.match(refused({ samples: null }), /'samples'/);
  assert.match(refused({ samples: Array.from({ length: 4097 }, () => ({ index: 0, value: 0, tolerance: 0 })) }), /4097 samples/);
  assert.match(refused({ options: null }), /'options'/);
  assert.match(refused({ options: { repeat: 0 } }), /options\.repeat/);
  assert.match(refused({ options: { repeat: 1001 } }), /options\.repeat/);
  assert.match(refused({ options: { number: 1000001 } }), /options\.number/);
  assert.match(refused({ options: { min_repeat_ms: 60001 } }), /options\.min_repeat_ms/);
  assert.match(refused({ options: { timeout_s: 0 } }), /options\.timeout_s/);
  assert.match(refused({ options: { timeout_s: 3601 } }), /options\.timeout_s/);
  assert.equal(refused({ options: { number: 1000000, repeat: 1000, min_repeat_ms: 60000, timeout_s: 3600, warmup: 0 } }), 'accepted');
  // A kind is "kernel" or "model"; anything else is refused, not taken for a kernel input.
  assert.equal(isModelInput(input()), true);
  assert.equal(isModelInput({ workload: {} }), false);
  assert.equal(isModelInput({ kind: 'kernel' }), false);
  assert.throws(() => isModelInput({ kind: 'graph' }), (e) => e.errorNo === ErrorNo.INSTANTIATION && /'kind'/.test(e.message));
});
