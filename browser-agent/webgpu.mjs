// webgpu.mjs — the WebGPU executor: runs the WGSL compute kernels of the webgpu template
// (codegen/wgsl_emitter.cpp; KernelArtifact JSON, codegen/include/codegen/kernel_artifact.hpp)
// through the kernel runner it shares with the model runtime (runtime/webgpu.mjs: GPUKernel):
// seeded inputs into storage buffers (bindings 0 and 1, the epilogue's 3 and 4; row-major floats; the kernel may view
// them as vec4s), one dispatch writing binding 2, a checked (and warm-up) run read back with
// mapAsync that must match the reference samples, then TVM time_evaluator timing with
// performance.now() around queue.onSubmittedWorkDone().
//
// A WGSL error (getCompilationInfo, or a validation error while building the pipeline) fails the
// trial with COMPILE_DEVICE and the browser's message. A lost device fails it with
// RUNTIME_DEVICE; the executor then requests a fresh device for the next one. When that fails
// too (requestAdapter() returns null: Chromium stops handing out adapters once its GPU process
// has gone), the job in flight fails with RUNTIME_DEVICE saying the adapter is gone and the
// executor is marked failed (`failed`, `failedMessage`): the agent then stops serving its key.
// Every trial owns its buffers and destroys them however it ends.
//
// Test hook (option / URL parameter `test_hook=webgpu-no-adapter-after-loss`): after a device
// loss, requestAdapter() is treated as returning null, to exercise the failed path in tests.
//
// WebGPU needs a secure context (http://127.0.0.1 is one) and, in headless Chromium,
// --enable-unsafe-webgpu (farm.mjs adds it); the adapter is then SwiftShader.

import { ErrorNo, MeasureError, checkJobDeadline, checkPlainInputs, refuseScratch, requireSamplesMatch, timeEvaluator, workloadSizes } from './measure.mjs';
import { GPUKernel, createBuffer, requestDevice, scoped } from '../runtime/webgpu.mjs';
import { touchedFloat32Array } from '../runtime/host_array.mjs';
import { cachedSeededTensor } from './seeded_random.mjs';
import { deviceClassKey, platformDevice } from './device_class.mjs';

/** A short, stable adapter name for the key `webgpu:<name>`, from GPUAdapterInfo fields. */
export function shortAdapterName(info = {}) {
  const text = [info.description, info.vendor, info.architecture, info.device]
    .filter((s) => typeof s === 'string' && s).join(' ');
  if (/swiftshader/i.test(text)) return 'swiftshader';
  if (/llvmpipe/i.test(text)) return 'llvmpipe';
  const parts = info.description ? [info.description] : [info.vendor, info.architecture];
  const name = parts.filter(Boolean).join('-').toLowerCase()
    .replace(/\((r|tm)\)/g, '').replace(/[^a-z0-9]+/g, '-').replace(/^-+|-+$/g, '');
  return name || 'unknown';
}

/** The test hook that makes the adapter disappear after a device loss (see the file comment). */
export const TEST_HOOK_NO_ADAPTER_AFTER_LOSS = 'webgpu-no-adapter-after-loss';

/** Dispatches per command buffer in a timed batch: bounds encoding work and memory. */
const RUNS_PER_SUBMIT = 1024;

export class WebGPUExecutor {
  /** The target family this executor serves, the first part of its key. */
  static family = 'webgpu';
  /** Artifact targets (KernelArtifact.target) this executor runs. */
  static artifactTargets = ['webgpu'];

  /**
   * Requests an adapter and a device (async, unlike WebGL2's context); rejects when the browser
   * offers no WebGPU. The agent calls this instead of the constructor.
   */
  static async create(options = {}) {
    const executor = new WebGPUExecutor(options);
    await executor.createDevice();
    return executor;
  }

  constructor(options = {}) {
    this.options = options;
    this.generation = 0;
    this.gpu = null;  // the GPUDevice (device() is the hello's description)
    this.lost = false;
    // Set once no fresh device can be had: the agent stops advertising this executor's key.
    this.failed = false;
    this.failedMessage = '';
  }

  /** navigator.gpu.requestAdapter(), or null under the test hook once a device was lost. */
  async requestAdapter() {
    if (this.options.test_hook === TEST_HOOK_NO_ADAPTER_AFTER_LOSS && this.generation > 0) {
      console.warn('[webtune] test hook: requestAdapter() returns null after the device loss');
      return null;
    }
    return navigator.gpu.requestAdapter({ powerPreference: 'high-performance' });
  }

  async createDevice() {
    const { device, adapterInfo, features, limits } = await requestDevice(() => this.requestAdapter());
    this.adapterInfo = adapterInfo;
    this.features = features;
    this.gpu = device;
    this.lost = false;
    this.lostMessage = '';
    this.generation += 1;
    device.lost.then((info) => {
      if (this.gpu !== device) return;
      this.lost = true;
      this.lostMessage = `${info.reason || 'unknown'}${info.message ? `: ${info.message}` : ''}`;
      console.warn(`[webtune] WebGPU device lost (${this.lostMessage})`);
    });
    device.addEventListener?.('uncapturederror', (event) => {
      console.warn(`[webtune] WebGPU uncaptured error: ${event.error?.message}`);
    });
    this.limits = limits;
  }

  /** The tracker key of this device class, e.g. "webgpu:swiftshader:chromium-156:linux-x86_64:2t". */
  key() {
    return deviceClassKey('webgpu', shortAdapterName(this.adapterInfo || {}));
  }


  /** The `device` object of the agent's hello. */
  device() {
    const info = this.adapterInfo || {};
    const d = this.gpu.limits;
    return {
      platform: 'webgpu',
      vendor: info.vendor || '',
      renderer: info.description || [info.vendor, info.architecture, info.device].filter(Boolean).join(' '),
      architecture: info.architecture || '',
      features: this.features,
      limits: this.limits,
      max_workgroups_per_dimension: d.maxComputeWorkgroupsPerDimension,
      max_storage_buffer_binding_size: d.maxStorageBufferBindingSize,
      short_name: shortAdapterName(info),
      user_agent: typeof navigator !== 'undefined' ? navigator.userAgent : '',
      cross_origin_isolated: typeof crossOriginIsolated !== 'undefined' && crossOriginIsolated,
      ...platformDevice(),
    };
  }

  /**
   * Runs one MeasureInput; resolves to {costs} (seconds) or throws MeasureError. `shouldStop`
   * is polled between timed batches (a cancelled job or the agent's watchdog).
   */
  async measure(input, { start = performance.now(), shouldStop = () => false } = {}) {
    if (this.failed) throw new MeasureError(ErrorNo.RUNTIME_DEVICE, this.failedMessage);
    if (this.lost) await this.recreateDevice();
    const trial = new Trial(this, input, start, shouldStop);
    try {
      return await trial.run();
    } finally {
      trial.release();
      // A throw here replaces the trial's own outcome: the job reports that the adapter is gone.
      if (this.lost) await this.recreateDevice();
    }
  }

  /**
   * A fresh device after a loss; when none can be had the executor is failed for good and this
   * throws RUNTIME_DEVICE saying so.
   */
  async recreateDevice() {
    const lostMessage = this.lostMessage || 'no reason given';
    try {
      await this.createDevice();
    } catch (e) {
      this.failed = true;
      this.failedMessage = `the WebGPU device was lost (${lostMessage}) and the adapter is gone: ` +
        `no fresh device (${e.message}); this tab stops serving webgpu`;
      console.error(`[webtune] ${this.failedMessage}`);
      throw new MeasureError(ErrorNo.RUNTIME_DEVICE, this.failedMessage);
    }
  }

  /** Destroys the device on purpose (device.lost fires), for tests of the recovery path. */
  loseContext() {
    this.gpu.destroy();
    return true;
  }
}

class Trial {
  constructor(executor, input, start, shouldStop) {
    this.executor = executor;
    this.device = executor.gpu;
    this.input = input;
    this.artifact = input.artifact;
    this.start = start;
    this.shouldStop = shouldStop;
    this.buffers = [];
    this.kernel = new GPUKernel(this.device, this.artifact, (what) => this.checkLost(what));
  }

  async run() {
    this.validate();
    await this.kernel.compile();
    await this.setUp();
    // The checked run is also TVM's untimed warm-up run. The output starts as NaN so that a
    // kernel that skips some outputs cannot pass with values left from an earlier run.
    const output = await this.runChecked();
    requireSamplesMatch(output, this.input);
    this.checkDeadline(0, 0);
    return this.timeRuns();
  }

  instantiation(message) {
    throw new MeasureError(ErrorNo.INSTANTIATION, message);
  }

  checkLost(what) {
    if (this.executor.lost || this.executor.gpu !== this.device) {
      throw new MeasureError(ErrorNo.RUNTIME_DEVICE,
        `the WebGPU device was lost while ${what} (${this.executor.lostMessage || 'no reason given'})`);
    }
  }

  /** Runs `fn` inside validation and out-of-memory error scopes; a captured error → `errorNo`. */
  scoped(what, errorNo, fn) {
    return scoped(this.device, what, errorNo, fn, (w) => this.checkLost(w));
  }

  // ---- checks before touching the device: a bad artifact is reported as such ----
  validate() {
    const { artifact, input } = this;
    if (!artifact || typeof artifact.source !== 'string') this.instantiation('the measure input has no artifact source');
    if (!WebGPUExecutor.artifactTargets.includes(artifact.target)) {
      this.instantiation(`WebGPU runs webgpu (WGSL) kernels, not '${artifact.target}'`);
    }
    refuseScratch(artifact, 'WebGPU');
    this.sizes = workloadSizes(input.workload);
    checkPlainInputs(artifact, input.workload, 'WGSL kernels read plain row-major buffers');
    const out = artifact.output;
    if (out.rows * out.cols !== this.sizes.output) {
      this.instantiation(`the artifact's output is ${out.rows}x${out.cols} = ${out.rows * out.cols} elements but the workload has ${this.sizes.output}`);
    }
    this.kernel.validate(this.executor.limits);
  }

  createBuffer(bytes, usage) {
    // Sizes rounded up to 16 bytes: an array<vec4<f32>> view needs whole vec4s.
    const buffer = createBuffer(this.device, bytes, usage);
    this.buffers.push(buffer);
    return buffer;
  }

  // ---- inputs, output, bind group ----
  async setUp() {
    await this.scoped('setting up the kernel\'s buffers', ErrorNo.RUNTIME_DEVICE, () => {
      const { device, sizes } = this;
      const seed = this.input.seed;
      const logical = sizes.inputs.map((count, i) => cachedSeededTensor(seed, i, count));
      const S = GPUBufferUsage;
      this.inputBuffers = logical.map((values) => {
        const buffer = this.createBuffer(values.byteLength, S.STORAGE | S.COPY_DST);
        device.queue.writeBuffer(buffer, 0, values);
        return buffer;
      });
      const outBytes = sizes.output * 4;
      this.outputBuffer = this.createBuffer(outBytes, S.STORAGE | S.COPY_SRC | S.COPY_DST);
      this.readBuffer = this.createBuffer(outBytes, S.MAP_READ | S.COPY_DST);
      this.outputBytes = this.outputBuffer.size;
      device.queue.writeBuffer(this.outputBuffer, 0, new Float32Array(this.outputBytes / 4).fill(NaN));
      // data 0, weight 1, output 2, then the epilogue's bias / residual 3, 4
      // (codegen/include/codegen/kernel_artifact.hpp).
      this.kernel.bind(this.inputBuffers, this.outputBuffer);
    });
  }

  encodeRuns(encoder, count) {
    const pass = encoder.beginComputePass();
    this.kernel.encode(pass, count);
    pass.end();
  }

  async runChecked() {
    return this.scoped('running the kernel', ErrorNo.RUNTIME_DEVICE, async () => {
      const encoder = this.device.createCommandEncoder();
      this.encodeRuns(encoder, 1);
      encoder.copyBufferToBuffer(this.outputBuffer, 0, this.readBuffer, 0, this.outputBytes);
      this.device.queue.submit([encoder.finish()]);
      try {
        await this.readBuffer.mapAsync(GPUMapMode.READ);
      } catch (e) {
        this.checkLost('reading the output back');
        throw e;
      }
      const all = new Float32Array(this.readBuffer.getMappedRange().slice(0));
      this.readBuffer.unmap();
      // Compute targets store the plain row-major tensor (OutputLayout rows_per_item = 1).
      return all.subarray(0, this.sizes.output);
    });
  }

  // ---- timing ----
  /** The soft timeout, checked between batches: a dispatch in flight cannot be interrupted. */
  checkDeadline(timedRuns, lastRunS) {
    checkJobDeadline(this, timedRuns, lastRunS);
  }

  /**
   * `number` runs, submitted in command buffers of at most RUNS_PER_SUBMIT dispatches. With
   * `readback` (options.readback: bench/web_vs_tfjs only) the last command buffer also copies
   * the output to the read buffer, which is then mapped and copied out, as TensorFlow.js's
   * `await y.data()` does; otherwise the batch ends at onSubmittedWorkDone. The array returned
   * is made, its pages written once, while the GPU process runs the batch
   * (runtime/host_array.mjs says why), and filled from the mapped range.
   */
  async runBatch(number, readback = false) {
    const queue = this.device.queue;
    for (let done = 0; done < number; done += RUNS_PER_SUBMIT) {
      const encoder = this.device.createCommandEncoder();
      this.encodeRuns(encoder, Math.min(RUNS_PER_SUBMIT, number - done));
      if (readback && done + RUNS_PER_SUBMIT >= number) {
        encoder.copyBufferToBuffer(this.outputBuffer, 0, this.readBuffer, 0, this.outputBytes);
      }
      queue.submit([encoder.finish()]);
    }
    if (!readback) {
      await queue.onSubmittedWorkDone();
      return;
    }
    const mapped = this.readBuffer.mapAsync(GPUMapMode.READ);
    // One microtask turn first: submit() queues the flush of its commands to the GPU process as
    // a microtask (Chromium), and the work must be on its way while the pages are written.
    await null;
    const output = touchedFloat32Array(this.outputBytes / 4);
    await mapped;
    output.set(new Float32Array(this.readBuffer.getMappedRange()));
    this.readBuffer.unmap();
    return output;
  }

  async timeRuns() {
    return timeEvaluator(this.input.options || {}, (number) =>
      // The clock runs inside the error scope: popping it is a round trip of its own.
      this.scoped('timing the kernel', ErrorNo.RUNTIME_DEVICE, async () => {
        const begin = performance.now();
        await this.runBatch(number, Boolean(this.input.options?.readback));
        return (performance.now() - begin) / 1e3;
      }), (timedRuns, perRunS) => {
      this.checkLost('timing the kernel');
      this.checkDeadline(timedRuns, perRunS);
    });
  }

  release() {
    for (const buffer of this.buffers) {
      try { buffer.destroy(); } catch { /* the device is gone */ }
    }
    this.buffers = [];
  }
}
