// run_js_ops.test.mjs — node --test checks of tests/run_js_ops.mjs, the runner through which the
// C++ tests compare runtime/ops.mjs with the reference executor: one case that runs, one that is
// refused, one with NaN and infinities (null and "inf" / "-inf" in JSON), in order; exit 2 only
// for an input file that does not parse.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import test from 'node:test';
import { fileURLToPath } from 'node:url';

const runner = fileURLToPath(new URL('../../tests/run_js_ops.mjs', import.meta.url));

function withDir(f) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'run-js-ops-'));
  try {
    return f(dir);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

test('run_js_ops: a good case, an error and NaN, one result each in order', () => withDir((dir) => {
  const inPath = path.join(dir, 'in.json');
  const outPath = path.join(dir, 'out.json');
  fs.writeFileSync(inPath, JSON.stringify({
    cases: [
      { name: 'add', type: 'Add', attributes: {}, opset: 13, inputs: [{ shape: [2], data: [1, 2] }, { shape: [1], data: [10] }], out_shape: [2] },
      { name: 'gather out of range', type: 'Gather', attributes: { axis: 0 }, opset: 13, inputs: [{ shape: [2], data: [1, 2] }, { ints: [5] }], out_shape: [1] },
      { name: 'max nan', type: 'Max', attributes: {}, opset: 13, inputs: [{ shape: [3], data: [null, 1, 'inf'] }, { shape: [3], data: [0, '-inf', 2] }], out_shape: [3] },
    ],
  }));
  const r = spawnSync(process.execPath, [runner, inPath, outPath], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  const out = JSON.parse(fs.readFileSync(outPath, 'utf8'));
  assert.deepEqual(out, {
    results: [
      { name: 'add', output: [11, 12] },
      { name: 'gather out of range', error: 'Gather: index 5 is outside [-2, 1]' },
      { name: 'max nan', output: [null, 1, 'inf'] },
    ],
  });
}));

test('run_js_ops: Min gives -inf; a malformed case is an error result; unreadable IN exits 2', () => withDir((dir) => {
  const inPath = path.join(dir, 'in.json');
  const outPath = path.join(dir, 'out.json');
  fs.writeFileSync(inPath, JSON.stringify({
    cases: [
      { name: 'min', type: 'Min', inputs: [{ shape: [1], data: ['-inf'] }, { shape: [1], data: [3] }], out_shape: [1] },
      { name: 'bad input', type: 'Relu', inputs: [{ shape: [1] }], out_shape: [1] },
    ],
  }));
  let r = spawnSync(process.execPath, [runner, inPath, outPath], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  assert.deepEqual(JSON.parse(fs.readFileSync(outPath, 'utf8')).results, [
    { name: 'min', output: ['-inf'] },
    { name: 'bad input', error: 'input 0 is neither null, {"ints"} nor {"shape", "data"}' },
  ]);
  fs.writeFileSync(inPath, '{"cases": [');
  r = spawnSync(process.execPath, [runner, inPath, outPath], { encoding: 'utf8' });
  assert.equal(r.status, 2);
  assert.match(r.stderr, /^run_js_ops: cannot read .*in\.json: /);
  r = spawnSync(process.execPath, [runner, path.join(dir, 'missing.json'), outPath], { encoding: 'utf8' });
  assert.equal(r.status, 2);
}));
