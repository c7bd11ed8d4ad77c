// The page of a built model package (docs/package.md): runs the model on this tab's own device
// with ./model.mjs, on an image or raw float32 file the person picks (or a seeded input), and
// shows the end-to-end latency (median of N runs after warm-up, each from the input's upload to
// the output's read-back) and the top-5 classes. The tracker serves it under /models/<name>/.
// For tests the last result is also on `window.webtuneResult`. The package's index.html (at its
// root, beside manifest.json) loads this module from runtime/.
import { load } from './model.mjs';

const $ = (id) => document.getElementById(id);
const IMAGENET_MEAN = [0.485, 0.456, 0.406];
const IMAGENET_STD = [0.229, 0.224, 0.225];
const WARMUP_RUNS = 2;

let model = null;
let labels = null;
let input = null;

function setStatus(text, error = false) {
  $('status').textContent = text;
  $('status').className = error ? 'error' : 'muted';
}

function shapeOf(manifest) {
  return manifest.inputs[0].shape;
}

function elements(shape) {
  return shape.reduce((a, b) => a * b, 1);
}

// Deterministic stand-in input in [-1, 1) (xorshift32), so the page works without a file.
export function seededInput(count, seed = 1) {
  const out = new Float32Array(count);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < count; ++i) {
    x ^= x << 13; x >>>= 0; x ^= x >>> 17; x ^= x << 5; x >>>= 0;
    out[i] = (x / 4294967296) * 2 - 1;
  }
  return out;
}

// NCHW float input from an image: resized to H×W, RGB scaled to [0, 1], ImageNet-normalised.
async function imageInput(file, shape) {
  const [n, c, h, w] = shape;
  if (shape.length !== 4 || n !== 1 || c !== 3)
    throw new Error(`an image needs an input of shape [1, 3, H, W]; this model takes [${shape}]`);
  const bitmap = await createImageBitmap(file);
  const canvas = $('preview');
  canvas.width = w;
  canvas.height = h;
  canvas.hidden = false;
  const ctx = canvas.getContext('2d', { willReadFrequently: true });
  ctx.drawImage(bitmap, 0, 0, w, h);
  const rgba = ctx.getImageData(0, 0, w, h).data;
  const out = new Float32Array(3 * h * w);
  for (let ch = 0; ch < 3; ++ch) {
    for (let p = 0; p < h * w; ++p)
      out[ch * h * w + p] = (rgba[p * 4 + ch] / 255 - IMAGENET_MEAN[ch]) / IMAGENET_STD[ch];
  }
  return out;
}

async function fileInput(file, shape) {
  if (file.type.startsWith('image/')) return imageInput(file, shape);
  const bytes = await file.arrayBuffer();
  const expected = elements(shape) * 4;
  if (bytes.byteLength !== expected)
    throw new Error(`${file.name}: ${bytes.byteLength} bytes; the input [${shape}] takes ${expected} bytes of float32`);
  return new Float32Array(bytes);
}

function median(values) {
  const s = [...values].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

export function topK(output, k) {
  return [...output.keys()].sort((a, b) => output[b] - output[a]).slice(0, k)
    .map((index) => ({ index, value: output[index] }));
}

function row(table, cells) {
  const tr = document.createElement('tr');
  cells.forEach(([text, num]) => {
    const td = document.createElement('td');
    td.textContent = text;
    if (num) td.className = 'num';
    tr.appendChild(td);
  });
  table.appendChild(tr);
}

function clearTable(table) {
  while (table.rows.length > 1) table.deleteRow(1);
}

async function runModel() {
  $('run').disabled = true;
  try {
    const runs = Math.max(1, Math.min(1000, Number($('runs').value) || 20));
    const x = input ?? seededInput(elements(shapeOf(model.manifest)));
    setStatus(`warming up (${WARMUP_RUNS} runs)…`);
    for (let i = 0; i < WARMUP_RUNS; ++i) await model.run(x);
    const times = [];
    let output = null;
    for (let i = 0; i < runs; ++i) {
      setStatus(`run ${i + 1} of ${runs}…`);
      const t0 = performance.now();
      output = await model.run(x);
      times.push(performance.now() - t0);
    }
    const result = {
      runs, medianMs: median(times), minMs: Math.min(...times), maxMs: Math.max(...times),
      top5: topK(output, 5), outputLength: output.length,
      finite: output.every(Number.isFinite),
    };
    clearTable($('latency'));
    row($('latency'), [[`median of ${runs}`], [result.medianMs.toFixed(2), true]]);
    row($('latency'), [['min'], [result.minMs.toFixed(2), true]]);
    row($('latency'), [['max'], [result.maxMs.toFixed(2), true]]);
    $('latency').hidden = false;
    clearTable($('top'));
    result.top5.forEach(({ index, value }, rank) => {
      const name = labels?.[index] ?? `class ${index}`;
      row($('top'), [[String(rank + 1)], [name], [value.toFixed(3), true]]);
    });
    $('top').hidden = false;
    setStatus(result.finite ? 'done' : 'done, but the output has non-finite values', !result.finite);
    window.webtuneResult = result;
  } catch (e) {
    setStatus(`the model failed: ${e.message}`, true);
    window.webtuneResult = { error: e.message };
  } finally {
    $('run').disabled = false;
  }
}

async function main() {
  // The package's root: the page's own folder (this module lives in its runtime/ folder).
  const base = new URL('./', document.baseURI).href;
  try {
    model = await load(base);
  } catch (e) {
    $('facts').textContent = '';
    setStatus(`the package did not load: ${e.message}`, true);
    window.webtuneResult = { error: e.message };
    return;
  }
  const m = model.manifest;
  document.title = `${m.model?.name ?? 'model'} · webtune`;
  $('title').textContent = m.model?.name ?? 'model';
  $('facts').textContent = `target ${m.target} · input [${shapeOf(m)}] · ${m.tasks?.length ?? 0} tuned tasks` +
    (m.device_key ? ` · tuned for ${m.device_key}` : '') +
    (m.estimated_ms != null ? ` · estimated ${Number(m.estimated_ms).toFixed(2)} ms` : '');
  try {
    const r = await fetch(new URL('labels.json', base));
    if (r.ok) labels = await r.json();
  } catch { /* no labels: class indices */ }
  $('file').addEventListener('change', async () => {
    const file = $('file').files[0];
    if (!file) return;
    try {
      input = await fileInput(file, shapeOf(m));
      setStatus(`input: ${file.name}`);
    } catch (e) {
      input = null;
      setStatus(e.message, true);
    }
  });
  $('run').addEventListener('click', runModel);
  $('run').disabled = false;
  setStatus('ready');
  window.webtunePageReady = true;
  if (new URLSearchParams(location.search).has('autorun')) runModel();
}

main();
