// model.mjs — the model runtime: runs a model package written by `webtune build`
// (docs/package.md, the contract) on the page's device, with no dependency. The package's own
// model.mjs re-exports load() from here; kernels run through the same kernel runners as the
// browser agent's executors (webgl2.mjs, webgpu.mjs, wasm.mjs).
//
//   import { load } from './model.mjs';
//   const m = await load('https://host/models/resnet18/', { device });  // device: optional
//   const logits = await m.run(inputFloat32Array);                      // row-major in and out
//   m.dispose();
//
// load() fetches manifest.json, weights.bin and every kernel once, creates every slot (textures,
// buffers or arrays) once, uploads every weight once, compiles every kernel once (a wasm kernel's
// module is instantiated with its own memory, its weights written once at the artifact's
// offsets): a kernel the browser refuses is found at load with its step named. run() executes
// the steps: upload (the input packed into its value's storage), kernel (one draw / dispatch /
// wasm call, or on wasm a JavaScript operator, ops.mjs), alias (nothing), download (read back
// and unpacked to row-major). Until a run has succeeded, runs are checked step by step (GL /
// WebGPU errors looked for after every step, so a kernel failing at run time is named); later
// runs record the steps without stopping and check once at their end (a model is not run twice
// at load: on SwiftShader a ResNet-18 run takes minutes).
//
// Errors: load() and run() reject with an Error whose message names the step (its index and
// role), its node and its kernel file, then what failed (compile error, lost context or device,
// trap, ...); the Error also carries `step`, `node`, `kernel` and `errorNo` (errors.mjs). A
// package for another target, a missing file or a manifest that breaks the format rejects
// load() naming the field. Never a silently wrong output: a WebGL2 or WebGPU error raised while
// running rejects the run.

import { ErrorNo, MeasureError, errorName } from './errors.mjs';
import { pack, unpack, unpackTensor } from './layout.mjs';
import { OP_TYPES, runOp } from './ops.mjs';
import { GLKernel, checkGl, contextInfo, createArrayTexture, createContext, createTexture, readLayers, readTextures, writeTexture } from './webgl2.mjs';
import { GPUKernel, createBuffer, deviceLimits, readBuffer, requestDevice, scoped } from './webgpu.mjs';
import { PAGE_BYTES, WasmKernel, createMemory, defaultWorkerFactory, hasThreads, writeFloats } from './wasm.mjs';
import { WasmHelperPool } from './wasm_pool.mjs';

/** The package format this runtime reads (manifest "format" and "version"). */
export const FORMAT = 'webtune-package';
export const VERSION = 1;

const product = (dims) => dims.reduce((a, b) => a * b, 1);

/** An Error that names a step of the package (see the file comment). */
export class StepError extends Error {
  constructor(index, step, cause) {
    const what = step.kind === 'kernel' ? `${step.role || 'kernel'} step` : `${step.kind} step`;
    const node = step.node ? ` of node '${step.node}'` : '';
    const kernel = step.kind === 'kernel' ? (step.kernel ? ` (kernel ${step.kernel})` : ` (op ${step.op?.type ?? '?'} in JavaScript)`) : '';
    const kind = cause instanceof MeasureError ? `${errorName(cause.errorNo)}: ` : '';
    super(`${what} ${index}${node}${kernel} failed: ${kind}${cause?.message ?? cause}`);
    this.name = 'StepError';
    this.step = index;
    this.node = step.node ?? null;
    this.kernel = step.kernel ?? null;
    this.errorNo = cause instanceof MeasureError ? cause.errorNo : ErrorNo.UNKNOWN;
    this.cause = cause;
  }
}

function bad(message) {
  throw new Error(`the package's manifest: ${message}`);
}

async function fetchOk(url, what, fetchFn = globalThis.fetch) {
  let response;
  try {
    response = await fetchFn(url);
  } catch (e) {
    throw new Error(`cannot fetch ${what} (${url}): ${e.message}`);
  }
  if (!response.ok) throw new Error(`cannot fetch ${what} (${url}): HTTP ${response.status}`);
  return response;
}

/** Checks the fields every runtime reads; returns maps of values, weights and slots by id. */
function index(manifest) {
  if (manifest.format !== FORMAT) bad(`format is '${manifest.format}', not '${FORMAT}'`);
  if (manifest.version !== VERSION) bad(`version ${manifest.version} is not ${VERSION}, the one this runtime reads`);
  for (const key of ['inputs', 'outputs', 'slots', 'values', 'weights', 'steps']) {
    if (!Array.isArray(manifest[key])) bad(`'${key}' is not an array`);
  }
  const byId = (list, what) => {
    const map = new Map();
    for (const item of list) {
      if (!Number.isInteger(item.id)) bad(`a ${what} has no integer id: ${JSON.stringify(item).slice(0, 80)}`);
      map.set(item.id, item);
    }
    return map;
  };
  const values = byId(manifest.values, 'value');
  const weights = byId(manifest.weights, 'weight');
  const slots = byId(manifest.slots, 'slot');
  for (const v of manifest.values) {
    if (!Array.isArray(v.shape)) bad(`value ${v.id} has no shape`);
    if (!v.storage || typeof v.storage.kind !== 'string') bad(`value ${v.id} has no storage`);
  }
  return { values, weights, slots };
}

/**
 * Loads a package. `baseUrl`: the package directory (default: the directory above this file,
 * i.e. the package this runtime was copied into). Options: `device` (a WebGL2RenderingContext or
 * GPUDevice to share; otherwise the runtime makes its own), `target` (when given, the package
 * must be for it: "webgl2", "webgpu" or "wasm"), `workerFactory` (wasm threads: a function
 * returning a Worker running wasm_worker.mjs; default module workers), `fetch` (replaces
 * globalThis.fetch: node tests read the package's files).
 * Resolves to {run(input) → Promise<output>, profile(input) → Promise<{total_ms, steps, outputs}>,
 * dispose(), manifest}; run takes a Float32Array
 * (row-major, the graph input's shape; an array of them for several inputs) and resolves to a
 * Float32Array (an array of them for several outputs).
 */
export async function load(baseUrl = new URL('..', import.meta.url), options = {}) {
  const base = new URL(String(baseUrl).endsWith('/') ? String(baseUrl) : `${baseUrl}/`, globalThis.location?.href);
  const get = (name, what) => fetchOk(new URL(name, base), what, options.fetch);
  const manifest = await (await get('manifest.json', 'manifest.json')).json();
  const maps = index(manifest);
  if (options.target && options.target !== manifest.target) {
    throw new Error(`the package at ${base} is for target '${manifest.target}', not '${options.target}'`);
  }
  const weights = new Float32Array(await (await get('weights.bin', 'weights.bin')).arrayBuffer());
  const files = [...new Set(manifest.steps.filter((s) => s.kind === 'kernel' && s.kernel).map((s) => s.kernel))];
  const kernels = new Map();
  await Promise.all(files.map(async (file) => {
    kernels.set(file, await (await get(file, `kernel ${file}`)).json());
  }));
  const Runner = { 'gles-frag': GLModel, webgpu: GPUModel, wasm: WasmModel }[manifest.artifact_target];
  if (!Runner) bad(`artifact_target '${manifest.artifact_target}' is not one a web page runs (gles-frag, webgpu, wasm)`);
  const model = new Runner(manifest, maps, weights, kernels, options);
  try {
    await model.setUp();
  } catch (e) {
    model.dispose();
    throw e;
  }
  let busy = Promise.resolve();
  let checkedRuns = 0;
  return {
    manifest,
    /**
     * Runs the model once; runs are queued (one at a time, the slots are shared). Until one run
     * has succeeded, runs are checked step by step (errors looked for after every step, so that
     * a kernel that fails at run time is named); later runs check once, at their end (and after
     * a failed run, the next is checked step by step again).
     */
    run(input) {
      const inputs = Array.isArray(input) ? input : [input];
      const result = busy.then(async () => {
        try {
          const outputs = await model.execute(inputs, checkedRuns === 0);
          checkedRuns += 1;
          return outputs;
        } catch (e) {
          checkedRuns = 0;  // the next run is checked step by step again, and names the step
          throw e;
        }
      });
      busy = result.catch(() => {});
      return result.then((outputs) => (Array.isArray(input) || outputs.length > 1 ? outputs : outputs[0]));
    },
    /**
     * Runs the model once more with every step timed, queued like run(): each step runs alone
     * (the device is waited for after it: a WebGL2 fence, WebGPU's onSubmittedWorkDone, wasm
     * steps are synchronous already), checked step by step. Resolves to {total_ms, steps:
     * [{step, kind, role, node, task, ms}], outputs}; ms are host milliseconds from the step's
     * start to the device's end of it, so they include each step's submit and wait, which a
     * normal run overlaps — their sum is above run()'s latency, and the difference is what the
     * overlap saves. The model is run once unprofiled first when no run has succeeded yet
     * (compiles and first-use costs stay out of the figures).
     */
    profile(input) {
      const inputs = Array.isArray(input) ? input : [input];
      const result = busy.then(async () => {
        if (checkedRuns === 0) {
          await model.execute(inputs, true);
          checkedRuns += 1;
        }
        const steps = [];
        const begin = performance.now();
        const outputs = await model.execute(inputs, true, steps);
        return { total_ms: performance.now() - begin, steps, outputs };
      });
      busy = result.catch(() => {});
      return result;
    },
    dispose() {
      model.dispose();
    },
  };
}

/** What every target's model shares: values, steps, inputs and outputs. */
class Model {
  constructor(manifest, maps, weights, kernels, options) {
    this.manifest = manifest;
    this.values = maps.values;
    this.weights = maps.weights;
    this.slots = maps.slots;
    this.weightData = weights;
    this.kernels = kernels;
    this.options = options;
    this.disposed = false;
  }

  /** The value `id`, aliases followed to the value that owns the storage. */
  owner(id) {
    let v = this.values.get(id);
    for (let hops = 0; v && v.storage.kind === 'alias'; ++hops) {
      if (hops > this.values.size) bad(`value ${id} is an alias cycle`);
      v = this.values.get(v.storage.of);
    }
    if (!v) bad(`value ${id} is not among the values`);
    return v;
  }

  weight(id) {
    const w = this.weights.get(id);
    if (!w) bad(`weight ${id} is not among the weights`);
    if (!Number.isInteger(w.offset) || w.offset % 4 !== 0 || !Number.isInteger(w.floats) ||
        w.offset / 4 + w.floats > this.weightData.length) {
      bad(`weight ${id} ('${w.name}': ${w.floats} floats at byte ${w.offset}) lies outside weights.bin (${this.weightData.length * 4} bytes)`);
    }
    return w;
  }

  /** The floats of weight `w` in weights.bin. */
  weightFloats(w) {
    return this.weightData.subarray(w.offset / 4, w.offset / 4 + w.floats);
  }

  artifact(step) {
    const artifact = this.kernels.get(step.kernel);
    if (!artifact) bad(`step of node '${step.node}' names kernel ${step.kernel}, which was not loaded`);
    return artifact;
  }

  /**
   * Runs every step; `checked`: errors are looked for after each step (until a run succeeded).
   * `timings` (an array, profile() only): each step then runs alone — the device is waited for
   * after it (settle()) — and {step, kind, role, node, task, op, ms} is pushed for it (op: the
   * operator type of a JavaScript op step, else null), ms the host
   * time from the step's start to the device's end of it.
   */
  async execute(inputs, checked, timings = null) {
    if (this.disposed) throw new Error('the model was disposed');
    const { manifest } = this;
    if (inputs.length !== manifest.inputs.length) {
      throw new Error(`the model takes ${manifest.inputs.length} input(s), ${inputs.length} given`);
    }
    const byValue = new Map();
    manifest.inputs.forEach((spec, i) => {
      const data = inputs[i];
      if (!(data instanceof Float32Array)) throw new Error(`input '${spec.name}' must be a Float32Array`);
      if (data.length !== product(spec.shape)) {
        throw new Error(`input '${spec.name}' has ${data.length} elements; its shape [${spec.shape}] needs ${product(spec.shape)}`);
      }
      byValue.set(spec.value, data);
    });
    const outputs = new Map();
    await this.begin?.(checked);
    if (timings) await this.settle();
    for (let i = 0; i < manifest.steps.length; ++i) {
      const step = manifest.steps[i];
      const begin = timings ? performance.now() : 0;
      try {
        if (step.kind === 'upload') {
          const data = byValue.get(step.value);
          if (!data) bad(`upload step ${i} writes value ${step.value}, which is no graph input`);
          this.upload(this.owner(step.value), data);
        } else if (step.kind === 'kernel') {
          await this.kernel(i, step);
        } else if (step.kind === 'download') {
          outputs.set(step.value, await this.download(this.values.get(step.value), this.owner(step.value)));
        } else if (step.kind !== 'alias') {
          bad(`step ${i} has kind '${step.kind}'`);
        }
        if (checked) await this.check(`running step ${i}`);
        if (timings) {
          await this.settle(i, step);
          timings.push({ step: i, kind: step.kind, role: step.role ?? null, node: step.node ?? null,
            task: step.task ?? null, op: step.op?.type ?? null, ms: performance.now() - begin });
        }
      } catch (e) {
        await this.abort?.();
        throw e instanceof StepError || e.message.startsWith('the package') ? e : new StepError(i, step, e);
      }
    }
    await this.end?.(checked);
    return manifest.outputs.map((spec) => {
      const out = outputs.get(spec.value);
      if (!out) bad(`output '${spec.name}' (value ${spec.value}) has no download step`);
      return out;
    });
  }

  async check() {}

  /**
   * Waits until the device has finished every command issued so far (profile() only); `index`
   * and `step`: the step just issued, if any (a backend may wait on its output).
   */
  async settle(index = -1, step = null) {}
}

// ---- WebGL2 (artifact target gles-frag) ----

class GLModel extends Model {
  async setUp() {
    const shared = this.options.device;
    if (shared) {
      if (typeof WebGL2RenderingContext === 'undefined' || !(shared instanceof WebGL2RenderingContext)) {
        throw new Error('options.device must be a WebGL2RenderingContext for a webgl2 package');
      }
      this.gl = shared;
    } else {
      this.canvas = createContext();
      this.gl = this.canvas.gl;
    }
    const gl = this.gl;
    this.lost = false;
    gl.canvas?.addEventListener?.('webglcontextlost', () => { this.lost = true; });
    this.info = contextInfo(gl);
    this.textures = new Map();  // slot id → texture
    this.owned = [];
    for (const slot of this.manifest.slots) {
      if (slot.kind !== 'texture') bad(`slot ${slot.id} has kind '${slot.kind}'; a webgl2 package has texture slots`);
      if (slot.channels !== 1 && slot.channels !== 4) bad(`slot ${slot.id} has ${slot.channels} channels, not 1 or 4`);
      if (slot.layers && !(slot.channels === 4 && slot.layers >= 1 && slot.layers <= 32)) bad(`slot ${slot.id} has ${slot.layers} layers; an array slot has 1 to 32 layers of 4 channels`);
      const texture = slot.layers ? createArrayTexture(gl, slot.width, slot.height, slot.layers)
        : createTexture(gl, slot.width, slot.height, slot.channels);
      this.owned.push(texture);
      this.textures.set(slot.id, texture);
    }
    this.weightTextures = new Map();
    for (const w of this.manifest.weights) {
      this.weight(w.id);
      const t = w.texture;
      if (!t) continue;  // only op steps of other targets read weights without a texture
      const floats = t.width * t.height * t.channels;
      let data = this.weightFloats(w);
      if (data.length < floats) {
        const padded = new Float32Array(floats);
        padded.set(data);
        data = padded;
      }
      const texture = createTexture(gl, t.width, t.height, t.channels, data);
      this.owned.push(texture);
      this.weightTextures.set(w.id, texture);
    }
    checkGl(gl, 'creating the slots and weights', () => this.lost);
    this.steps = new Map();
    const steps = this.manifest.steps;
    for (let i = 0; i < steps.length; ++i) {
      const step = steps[i];
      if (step.kind !== 'kernel') continue;
      try {
        if (!step.kernel) bad('a webgl2 package runs every step as a kernel ("kernel" is null)');
        const artifact = this.artifact(step);
        const kernel = new GLKernel(gl, artifact, () => this.lost);
        this.steps.set(i, { kernel, inputs: this.inputTextures(step, artifact) });
        kernel.validate(this.info.limits, this.info.colorBufferFloat, this.info.renderer);
        kernel.compile();
        kernel.useOutputTextures(this.outputTextures(step, artifact), this.steps.get(i).inputs.length);
        kernel.checkGl('setting up the kernel');
      } catch (e) {
        throw new StepError(i, step, e);
      }
    }
  }

  /** The textures a value is stored in (one, or one per render target). */
  valueTextures(value) {
    const s = value.storage;
    if (s.kind === 'texture') return [this.slotTexture(s.slot, value)];
    if (s.kind === 'targets' && s.layout.quad_layers) {
      if (s.slots.length !== 1) bad(`value ${value.id} is stored as quad layers, which live in one slot, not ${s.slots.length}`);
      return [this.slotTexture(s.slots[0], value)];
    }
    if (s.kind === 'targets') return s.slots.map((slot) => this.slotTexture(slot, value));
    return bad(`value ${value.id} has storage '${s.kind}'; a webgl2 package stores values in textures`);
  }

  slotTexture(id, value) {
    const texture = this.textures.get(id);
    if (!texture) bad(`value ${value.id} lives in slot ${id}, which is not among the slots`);
    return texture;
  }

  inputTextures(step, artifact) {
    const textures = [];
    for (const input of step.inputs) {
      if (input.weight !== undefined) {
        const texture = this.weightTextures.get(input.weight);
        if (!texture) bad(`weight ${input.weight} has no texture`);
        textures.push(texture);
      } else {
        textures.push(...this.valueTextures(this.owner(input.value)));
      }
    }
    if (textures.length < artifact.inputs.length) {
      throw new MeasureError(ErrorNo.INSTANTIATION, `the kernel reads ${artifact.inputs.length} inputs, the step binds ${textures.length} textures`);
    }
    return textures;
  }

  outputTextures(step, artifact) {
    const value = this.owner(step.output);
    const out = artifact.output;
    const slots = value.storage.kind === 'targets' ? value.storage.slots : [value.storage.slot];
    for (const id of slots) {
      const slot = this.slots.get(id);
      if (!slot || slot.width !== out.width || slot.height !== out.height || slot.channels !== (out.channels === 1 ? 1 : 4) ||
          (slot.layers ?? 0) !== (out.quad_layers ? out.rows_per_item : 0)) {
        throw new MeasureError(ErrorNo.INSTANTIATION,
          `the kernel writes ${out.width}x${out.height}x${out.channels} render targets but value ${value.id} lives in slot ${id} (${slot ? `${slot.width}x${slot.height}x${slot.channels}` : 'missing'})`);
      }
    }
    return this.valueTextures(value);
  }

  upload(value, data) {
    const s = value.storage;
    if (s.kind !== 'texture') bad(`input value ${value.id} must be stored in a texture, not '${s.kind}'`);
    const layout = s.layout;
    const slot = this.slots.get(s.slot);
    writeTexture(this.gl, this.slotTexture(s.slot, value), slot.width, slot.height, slot.channels, pack(layout, data));
  }

  async kernel(index) {
    const { kernel, inputs } = this.steps.get(index);
    kernel.activate();
    kernel.bindInputs(inputs);
    kernel.runOnce();
  }

  async begin() {
    checkGl(this.gl, 'starting a run', () => this.lost);
  }

  async download(value, owner) {
    const s = owner.storage;
    const gl = this.gl;
    checkGl(gl, 'running the steps before this download', () => this.lost);
    let out;
    if (s.kind === 'texture') {
      const slot = this.slots.get(s.slot);
      const [texels] = readTextures(gl, [this.slotTexture(s.slot, owner)], slot.width, slot.height, slot.channels);
      out = unpackTensor(s.layout, texels);
    } else if (s.kind === 'targets' && s.layout.quad_layers) {
      const slot = this.slots.get(s.slots[0]);
      out = unpack(s.layout, readLayers(gl, this.slotTexture(s.slots[0], owner), slot.layers, slot.width, slot.height));
    } else if (s.kind === 'targets') {
      const slots = s.slots.map((id) => this.slots.get(id));
      const targets = s.slots.map((id, j) => readTextures(gl, [this.slotTexture(id, owner)], slots[j].width, slots[j].height, slots[j].channels)[0]);
      out = unpack(s.layout, targets);
    } else {
      bad(`value ${owner.id} has storage '${s.kind}'`);
    }
    checkGl(gl, 'reading the output back', () => this.lost);
    const count = product(value.shape);
    if (out.length < count) throw new MeasureError(ErrorNo.INSTANTIATION, `value ${value.id} reads back ${out.length} elements, its shape [${value.shape}] needs ${count}`);
    return out.length === count ? out : out.slice(0, count);
  }

  async check(what) {
    checkGl(this.gl, what, () => this.lost);
  }

  async settle(index = -1, step = null) {
    // Firefox sees a fence signaled only about a frame late (browser-agent/webgl2.mjs,
    // defaultSync), and its gl.finish() does wait for the draws. Elsewhere a step is waited for
    // with a blocking read of one element of what it wrote: a fence polled on setTimeout turns
    // is seen late (8.6 ms for a trivial draw in Chromium 156, bench/web_vs_tfjs/latency_floor.mjs).
    // Downloads read synchronously already; the wait before the first step polls a fence.
    const gl = this.gl;
    if (/\bFirefox\//.test(globalThis.navigator?.userAgent ?? '')) {
      gl.finish();
      return;
    }
    if (step?.kind === 'kernel') {
      this.steps.get(index).kernel.waitForDraws();
      checkGl(gl, 'waiting for the device', () => this.lost);
      return;
    }
    if (step?.kind === 'upload') {
      const owner = this.owner(step.value);
      readTextures(gl, [this.slotTexture(owner.storage.slot, owner)], 1, 1, 4);
      checkGl(gl, 'waiting for the device', () => this.lost);
      return;
    }
    if (step) return;
    const fence = gl.fenceSync(gl.SYNC_GPU_COMMANDS_COMPLETE, 0);
    try {
      let status = gl.clientWaitSync(fence, gl.SYNC_FLUSH_COMMANDS_BIT, 0);
      while (status === gl.TIMEOUT_EXPIRED) {
        await new Promise((r) => setTimeout(r, 0));
        checkGl(gl, 'waiting for the device', () => this.lost);
        status = gl.clientWaitSync(fence, 0, 0);
      }
      if (status === gl.WAIT_FAILED) throw new MeasureError(ErrorNo.RUNTIME_DEVICE, 'clientWaitSync failed while profiling');
    } finally {
      gl.deleteSync(fence);
    }
  }

  async end() {
    // Any GL error of the run (a draw the driver refused, a lost context) rejects it.
    checkGl(this.gl, 'running the model', () => this.lost);
  }

  dispose() {
    if (this.disposed) return;
    this.disposed = true;
    const gl = this.gl;
    if (!gl) return;
    for (const { kernel } of this.steps?.values() ?? []) kernel.release();
    if (!gl.isContextLost()) for (const t of this.owned ?? []) gl.deleteTexture(t);
    this.owned = [];
    // A context of its own is given back at once rather than when the garbage collector runs.
    if (this.canvas && !gl.isContextLost()) gl.getExtension('WEBGL_lose_context')?.loseContext();
  }
}

// ---- WebGPU (artifact target webgpu) ----

class GPUModel extends Model {
  async setUp() {
    const shared = this.options.device;
    if (shared) {
      if (typeof shared.createComputePipelineAsync !== 'function') throw new Error('options.device must be a GPUDevice for a webgpu package');
      this.device = shared;
      this.limits = deviceLimits(shared);
    } else {
      const { device, limits } = await requestDevice();
      this.device = device;
      this.limits = limits;
      this.ownDevice = true;
    }
    this.lostMessage = null;
    this.device.lost.then((info) => {
      this.lostMessage = `${info.reason || 'unknown'}${info.message ? `: ${info.message}` : ''}`;
    });
    const S = GPUBufferUsage;
    const device = this.device;
    this.buffers = [];
    this.slotBuffers = new Map();
    this.weightBuffers = new Map();
    await this.scoped('creating the slots and weights', () => {
      for (const slot of this.manifest.slots) {
        if (slot.kind !== 'buffer') bad(`slot ${slot.id} has kind '${slot.kind}'; a webgpu package has buffer slots`);
        const buffer = createBuffer(device, slot.floats * 4, S.STORAGE | S.COPY_DST | S.COPY_SRC);
        this.buffers.push(buffer);
        this.slotBuffers.set(slot.id, buffer);
      }
      for (const w of this.manifest.weights) {
        this.weight(w.id);
        const buffer = createBuffer(device, w.floats * 4, S.STORAGE | S.COPY_DST);
        this.buffers.push(buffer);
        device.queue.writeBuffer(buffer, 0, this.weightFloats(w));
        this.weightBuffers.set(w.id, buffer);
      }
    });
    this.steps = new Map();
    const steps = this.manifest.steps;
    for (let i = 0; i < steps.length; ++i) {
      const step = steps[i];
      if (step.kind !== 'kernel') continue;
      try {
        if (!step.kernel) bad('a webgpu package runs every step as a kernel ("kernel" is null)');
        const kernel = new GPUKernel(device, this.artifact(step), (what) => this.checkLost(what));
        kernel.validate(this.limits);
        await kernel.compile();
        const inputs = step.inputs.map((input) => (input.weight !== undefined ? this.weightBuffer(input.weight) : this.valueBuffer(this.owner(input.value))));
        await this.scoped('binding the kernel\'s buffers', () => kernel.bind(inputs, this.valueBuffer(this.owner(step.output))));
        this.steps.set(i, kernel);
      } catch (e) {
        throw new StepError(i, step, e);
      }
    }
    this.staging = new Map();
  }

  checkLost(what) {
    if (this.lostMessage !== null) {
      throw new MeasureError(ErrorNo.RUNTIME_DEVICE, `the WebGPU device was lost while ${what} (${this.lostMessage})`);
    }
  }

  scoped(what, fn) {
    return scoped(this.device, what, ErrorNo.RUNTIME_DEVICE, fn, (w) => this.checkLost(w));
  }

  weightBuffer(id) {
    const buffer = this.weightBuffers.get(id);
    if (!buffer) bad(`weight ${id} is not among the weights`);
    return buffer;
  }

  valueBuffer(value) {
    const s = value.storage;
    if (s.kind !== 'buffer') bad(`value ${value.id} has storage '${s.kind}'; a webgpu package stores values in buffers`);
    const buffer = this.slotBuffers.get(s.slot);
    if (!buffer) bad(`value ${value.id} lives in slot ${s.slot}, which is not among the slots`);
    const floats = this.slots.get(s.slot).floats;
    if (floats < product(value.shape)) bad(`value ${value.id} [${value.shape}] does not fit slot ${s.slot} (${floats} floats)`);
    return buffer;
  }

  /**
   * A run records every kernel step into one command encoder, submitted at a download or at the
   * end, inside validation and out-of-memory error scopes; a checked run (until one succeeded) submits and
   * checks step by step instead, so that an error names its step.
   */
  async begin(checked) {
    this.checked = checked;
    this.encoder = null;
    this.pending = 0;
    if (checked) return;
    this.device.pushErrorScope('out-of-memory');
    this.device.pushErrorScope('validation');
    this.scopes = true;
  }

  /** Submits what the run has recorded so far. */
  flush() {
    if (this.encoder && this.pending) this.device.queue.submit([this.encoder.finish()]);
    this.encoder = null;
    this.pending = 0;
  }

  upload(value, data) {
    // queue.writeBuffer is ordered before command buffers submitted after it: submit the
    // kernels recorded so far first.
    this.flush();
    this.device.queue.writeBuffer(this.valueBuffer(value), 0, data);
  }

  async kernel(index) {
    const kernel = this.steps.get(index);
    if (!this.checked) {
      this.encoder = this.encoder || this.device.createCommandEncoder();
      const pass = this.encoder.beginComputePass();
      kernel.encode(pass);
      pass.end();
      this.pending += 1;
      return;
    }
    await this.scoped('running the kernel', async () => {
      const encoder = this.device.createCommandEncoder();
      const pass = encoder.beginComputePass();
      kernel.encode(pass);
      pass.end();
      this.device.queue.submit([encoder.finish()]);
      await this.device.queue.onSubmittedWorkDone();
    });
  }

  async settle() {
    this.flush();
    await this.device.queue.onSubmittedWorkDone();
  }

  async download(value, owner) {
    const count = product(value.shape);
    const source = this.valueBuffer(owner);
    let staging = this.staging.get(owner.id);
    if (!staging) {
      staging = createBuffer(this.device, count * 4, GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST);
      this.buffers.push(staging);
      this.staging.set(owner.id, staging);
    }
    const encoder = this.encoder || this.device.createCommandEncoder();
    this.encoder = null;
    this.pending = 0;
    try {
      return Float32Array.from(await readBuffer(this.device, source, staging, count, encoder));
    } catch (e) {
      this.checkLost('reading the output back');
      throw e;
    }
  }

  async popScopes() {
    if (!this.scopes) return null;
    this.scopes = false;
    const validation = await this.device.popErrorScope();
    const memory = await this.device.popErrorScope();
    return validation || memory;
  }

  async end(checked) {
    if (checked) return;
    this.flush();
    const error = await this.popScopes();
    this.checkLost('running the model');
    if (error) throw new MeasureError(ErrorNo.RUNTIME_DEVICE, `${error.constructor?.name || 'GPUError'} while running the model: ${error.message}`);
  }

  async abort() {
    this.encoder = null;
    await this.popScopes().catch(() => null);
  }

  dispose() {
    if (this.disposed) return;
    this.disposed = true;
    for (const buffer of this.buffers ?? []) {
      try { buffer.destroy(); } catch { /* the device is gone */ }
    }
    if (this.ownDevice) this.device?.destroy();
  }
}

// ---- WebAssembly (artifact target wasm) ----

class WasmModel extends Model {
  async setUp() {
    if (this.manifest.wasm_memory) return this.setUpLinear(this.manifest.wasm_memory);
    this.arrays = new Map();
    for (const slot of this.manifest.slots) {
      if (slot.kind !== 'array' && slot.kind !== 'buffer') bad(`slot ${slot.id} has kind '${slot.kind}'; a wasm package has array slots`);
      this.arrays.set(slot.id, new Float32Array(slot.floats));
    }
    await this.setUpSteps(async (i, step) => {
      const artifact = this.artifact(step);
      const counts = step.inputs.map((input) => (input.weight !== undefined ? this.weight(input.weight).floats : product(this.values.get(input.value).shape)));
      const kernel = new WasmKernel(artifact, { inputs: counts, output: product(this.values.get(step.output).shape) });
      await kernel.compile();
      const weights = [];
      step.inputs.forEach((input, k) => {
        if (input.weight !== undefined) weights.push({ offset: kernel.plan.offsets[k], values: this.weightFloats(this.weight(input.weight)) });
      });
      if (kernel.plan.threads === 1) {
        await kernel.instantiateHere();
      } else {
        if (!hasThreads()) {
          throw new MeasureError(ErrorNo.RUNTIME_DEVICE, `the kernel uses ${kernel.plan.threads} threads; threads need a cross-origin isolated page (COOP same-origin, COEP require-corp)`);
        }
        try {
          kernel.memory = createMemory(kernel.plan);  // shared: the pool's workers run over it
        } catch (e) {
          throw new MeasureError(ErrorNo.RUNTIME_DEVICE, `cannot allocate ${kernel.plan.pages} shared pages: ${e.message}`);
        }
      }
      for (const { offset, values } of weights) writeFloats(kernel.memory, offset, values);
      this.steps.set(i, { kernel });
    });
    await this.startPool();
  }

  /**
   * A package with a linear memory (docs/package.md "wasm linear memory"): one memory that every
   * kernel imports, the slots as views of it, the kernels' weights written into it once; each
   * kernel was built with its tensors at their offsets, so steps copy nothing.
   */
  async setUpLinear(lm) {
    const pages = lm.pages;
    if (!Number.isInteger(pages) || pages < 1 || pages > 16384) bad(`wasm_memory.pages ${pages} is outside 1..16384`);
    const slots = this.manifest.slots;
    const weights = this.manifest.weights ?? [];
    if (!Array.isArray(lm.slot_offsets) || lm.slot_offsets.length !== slots.length) bad(`wasm_memory.slot_offsets must give one offset per slot (${slots.length})`);
    if (!Array.isArray(lm.weight_offsets) || lm.weight_offsets.length !== weights.length) bad(`wasm_memory.weight_offsets must give one offset per weight (${weights.length})`);
    if (lm.shared && !hasThreads()) {
      throw new MeasureError(ErrorNo.RUNTIME_DEVICE, 'the package\'s kernels use threads, which need a cross-origin isolated page (COOP same-origin, COEP require-corp)');
    }
    try {
      this.memory = new WebAssembly.Memory({ initial: pages, maximum: pages, shared: Boolean(lm.shared) });
    } catch (e) {
      throw new MeasureError(ErrorNo.RUNTIME_DEVICE, `cannot allocate the package's ${pages} pages of linear memory: ${e.message}`);
    }
    const end = pages * PAGE_BYTES;
    const view = (what, offset, floats) => {
      if (!Number.isInteger(offset) || offset < 65536 || offset % 64 !== 0 || offset + floats * 4 > end) {
        bad(`${what} (${floats} floats at byte ${offset}) does not lie 64-byte aligned inside the ${end} bytes of linear memory`);
      }
      return new Float32Array(this.memory.buffer, offset, floats);
    };
    this.arrays = new Map();
    slots.forEach((slot, i) => {
      if (slot.kind !== 'array' && slot.kind !== 'buffer') bad(`slot ${slot.id} has kind '${slot.kind}'; a wasm package has array slots`);
      this.arrays.set(slot.id, view(`slot ${slot.id}`, lm.slot_offsets[i], slot.floats));
    });
    weights.forEach((w, i) => {
      if (lm.weight_offsets[i] !== -1) view(`weight ${w.id}`, lm.weight_offsets[i], w.floats).set(this.weightFloats(this.weight(w.id)));
    });
    const byFile = new Map();  // steps of one placement share the kernel file, and its instance
    await this.setUpSteps(async (i, step) => {
      let kernel = byFile.get(step.kernel);
      if (!kernel) {
        const counts = step.inputs.map((input) => (input.weight !== undefined ? this.weight(input.weight).floats : product(this.values.get(input.value).shape)));
        kernel = new WasmKernel(this.artifact(step), { inputs: counts, output: product(this.values.get(step.output).shape) });
        if (kernel.plan.pages !== pages) bad(`kernel ${step.kernel} imports ${kernel.plan.pages} pages, the package's linear memory has ${pages}`);
        if (kernel.plan.shared !== Boolean(lm.shared)) bad(`kernel ${step.kernel} ${kernel.plan.shared ? 'imports a shared memory' : 'imports an unshared memory'}; the package's linear memory is ${lm.shared ? 'shared' : 'not shared'}`);
        await kernel.compile();
        if (kernel.plan.threads === 1) await kernel.instantiateHere(this.memory);
        else kernel.memory = this.memory;
        byFile.set(step.kernel, kernel);
      }
      this.steps.set(i, { kernel });
    });
    this.linear = true;
    await this.startPool();
  }

  /**
   * Sets up every kernel step: an op step (no kernel file) as setUpOp, a kernel step by
   * `kernelStep(i, step)`; an error names the step (StepError).
   */
  async setUpSteps(kernelStep) {
    this.steps = new Map();
    const steps = this.manifest.steps;
    for (let i = 0; i < steps.length; ++i) {
      const step = steps[i];
      if (step.kind !== 'kernel') continue;
      try {
        if (step.kernel) await kernelStep(i, step);
        else this.setUpOp(i, step);
      } catch (e) {
        throw new StepError(i, step, e);
      }
    }
  }

  /** An op step (no kernel file): the JavaScript operator of ops.mjs. */
  setUpOp(i, step) {
    if (!step.op || typeof step.op.type !== 'string') bad(`step ${i} has neither a kernel nor an op`);
    if (!OP_TYPES.includes(step.op.type)) {
      throw new Error(`${step.op.type}: is not an operator the wasm runtime runs (it runs ${OP_TYPES.join(', ')})`);
    }
    step.inputs.forEach((input) => this.operand(input));
    this.steps.set(i, { op: step.op });
  }

  /**
   * One pool of workers for every threaded kernel (as many as the most threads a kernel uses,
   * minus this thread, which is tid 0 of each: wasm_pool.mjs): each worker instantiates every
   * threaded kernel over its shared memory, then serves executions of whichever kernel this
   * thread names, so a package starts max T − 1 workers, not one set per kernel.
   */
  async startPool() {
    // Each threaded kernel once, keyed by the first step that runs it (steps of a linear-memory
    // package share a kernel file when their tensors sit at the same offsets).
    const threaded = [];
    const keyOf = new Map();
    for (const [i, entry] of this.steps) {
      if (!entry.kernel || entry.kernel.plan.threads === 1) continue;
      if (!keyOf.has(entry.kernel)) {
        keyOf.set(entry.kernel, i);
        threaded.push([i, entry]);
      }
      entry.key = keyOf.get(entry.kernel);
    }
    if (!threaded.length) return;
    const size = Math.max(...threaded.map(([, e]) => e.kernel.plan.threads));
    const factory = this.options.workerFactory || await defaultWorkerFactory();
    this.helperPool = new WasmHelperPool(size - 1, factory);
    await this.helperPool.start();
    for (const [i, { kernel }] of threaded) {
      try {
        await this.helperPool.add(i, kernel);
      } catch (e) {
        throw new StepError(i, this.manifest.steps[i], e);
      }
    }
    await this.helperPool.serve();
  }

  /** One execution of a threaded kernel (WasmHelperPool.run); a hung helper disposes the model. */
  runThreaded(entry) {
    this.helperPool.run(entry.key, entry.kernel, () => this.dispose(), 'the model was disposed');
  }

  valueArray(value) {
    const s = value.storage;
    if (s.kind !== 'array' && s.kind !== 'buffer') bad(`value ${value.id} has storage '${s.kind}'; a wasm package stores values in arrays`);
    const array = this.arrays.get(s.slot);
    if (!array) bad(`value ${value.id} lives in slot ${s.slot}, which is not among the slots`);
    const count = product(value.shape);
    if (array.length < count) bad(`value ${value.id} [${value.shape}] does not fit slot ${s.slot} (${array.length} floats)`);
    return array.subarray(0, count);
  }

  upload(value, data) {
    this.valueArray(value).set(data);
  }

  /**
   * The data of an op step's input: a value's array (its own shape), a weight's floats (its
   * "shape" when the manifest gives one, else 1-D), an inline int64 constant ({"ints": [...]}: a
   * 1-D operand) or, for null (an omitted optional input), undefined.
   */
  operand(input) {
    if (input === null || input === undefined) return undefined;
    if (Array.isArray(input.ints)) return { data: Float32Array.from(input.ints), ints: input.ints, shape: [input.ints.length] };
    if (input.weight !== undefined) {
      const w = this.weight(input.weight);
      return { data: this.weightFloats(w), shape: Array.isArray(w.shape) ? w.shape : [w.floats] };
    }
    const value = this.values.get(input.value);
    return { data: this.valueArray(this.owner(input.value)).subarray(0, product(value.shape)), shape: value.shape };
  }

  async kernel(index, step) {
    const entry = this.steps.get(index);
    const output = this.values.get(step.output);
    const target = this.valueArray(this.owner(step.output));
    if (entry.op) {
      const y = runOp(entry.op.type, entry.op.attributes, step.inputs.map((input) => this.operand(input)), output.shape, entry.op.opset ?? 13);
      target.set(y.subarray(0, target.length));
      return;
    }
    const { kernel } = entry;
    // A linear-memory package's kernel reads and writes the slots where they are.
    if (!this.linear) {
      step.inputs.forEach((input, k) => {
        if (input.value !== undefined) writeFloats(kernel.memory, kernel.plan.offsets[k], this.operand(input).data);
      });
    }
    if (kernel.plan.threads === 1) kernel.runHere();
    else this.runThreaded(entry);
    if (!this.linear) target.set(kernel.outputView());
  }

  async download(value, owner) {
    return Float32Array.from(this.valueArray(owner).subarray(0, product(value.shape)));
  }

  dispose() {
    if (this.disposed) return;
    this.disposed = true;
    this.helperPool?.dispose();
    this.helperPool = null;
  }
}
