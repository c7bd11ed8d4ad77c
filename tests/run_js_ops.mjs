// Runs the wasm runtime's JavaScript operators (runtime/ops.mjs) on cases for the C++ tests,
// which compare them with the reference executor (graph/kernels/*.cpp):
//
//   node tests/run_js_ops.mjs IN.json OUT.json
//
// IN:  {"cases": [{"name", "type", "attributes": {...}, "opset": n, "out_shape": [...],
//                  "inputs": [null | {"shape": [...], "data": [...]} | {"ints": [...]}]}]}
// OUT: {"results": [{"name", "output": [...]} | {"name", "error": "message"}]}, one per case, in
//      order.
// An input is what model.mjs's operand() hands runOp: null an omitted optional input, {"ints"}
// an int64 constant ({data, ints, shape: [ints.length]}, exactly as model.mjs builds it), else
// float32 data of its shape. JSON has no NaN or infinities: in "data" and "output" null stands
// for NaN and the strings "inf" / "-inf" for ±Infinity ("nan" is read as NaN too).
// A case that throws (a refusal, a shape that does not fit, a malformed case) gets its message
// as "error"; the exit status is 0 then too. Exit 2 (with a message on stderr) only when IN
// cannot be read or parsed, or OUT cannot be written.
import { readFileSync, writeFileSync } from 'node:fs';

const { runOp } = await import(new URL('../runtime/ops.mjs', import.meta.url));

function die(message) {
  process.stderr.write(`run_js_ops: ${message}\n`);
  process.exit(2);
}

const [inPath, outPath] = process.argv.slice(2);
if (!inPath || !outPath) die('usage: node tests/run_js_ops.mjs IN.json OUT.json');

let job;
try {
  job = JSON.parse(readFileSync(inPath, 'utf8'));
} catch (e) {
  die(`cannot read ${inPath}: ${e.message}`);
}
if (!job || typeof job !== 'object' || !Array.isArray(job.cases)) die(`${inPath} has no "cases" array`);

function number(v) {
  if (v === null || v === 'nan') return NaN;
  if (v === 'inf') return Infinity;
  if (v === '-inf') return -Infinity;
  if (typeof v !== 'number') throw new Error(`${JSON.stringify(v)} is not a number, null, "inf" or "-inf"`);
  return v;
}

/** The encoding of one output value: null for NaN, "inf" / "-inf" for the infinities. */
const encode = (v) => (Number.isNaN(v) ? null : v === Infinity ? 'inf' : v === -Infinity ? '-inf' : v);

function operand(input, k) {
  if (input === null || input === undefined) return undefined;
  if (Array.isArray(input.ints)) return { data: Float32Array.from(input.ints), ints: input.ints, shape: [input.ints.length] };
  if (!Array.isArray(input.shape) || !Array.isArray(input.data)) throw new Error(`input ${k} is neither null, {"ints"} nor {"shape", "data"}`);
  return { data: Float32Array.from(input.data, number), shape: input.shape };
}

const results = job.cases.map((c, i) => {
  const name = c && typeof c.name === 'string' ? c.name : `case ${i}`;
  try {
    if (!c || typeof c.type !== 'string') throw new Error('the case has no "type"');
    if (!Array.isArray(c.inputs)) throw new Error('the case has no "inputs" array');
    const inputs = c.inputs.map(operand);
    const y = runOp(c.type, c.attributes ?? {}, inputs, c.out_shape, c.opset ?? 13);
    return { name, output: Array.from(y, encode) };
  } catch (e) {
    return { name, error: e instanceof Error ? e.message : String(e) };
  }
});

try {
  writeFileSync(outPath, JSON.stringify({ results }));
} catch (e) {
  die(`cannot write ${outPath}: ${e.message}`);
}
