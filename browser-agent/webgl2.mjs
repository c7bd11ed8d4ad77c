// webgl2.mjs — the WebGL2 executor: runs the GLSL ES 3.00 kernels of the gles-frag template
// (KernelArtifact JSON, codegen/include/codegen/kernel_artifact.hpp) unchanged through the kernel
// runner it shares with the model runtime (runtime/webgl2.mjs: GLKernel), the way
// native-agent/gl_runtime.cpp does over EGL: seeded inputs into float textures, one full-screen
// triangle into `rows_per_item` float render targets (or, for a vertex-stage kernel whose
// output.feedback is set, one point per item captured by transform feedback into one buffer),
// a checked (and warm-up) run whose read-back must match the reference samples, then TVM
// time_evaluator timing.
//
// Every trial owns its GL objects and deletes them however it ends. A lost context (the browser
// resets the GPU process, the page calls WEBGL_lose_context, ...) fails the trial with
// RUNTIME_DEVICE; the executor then builds a fresh canvas and context for the next one.

import { ErrorNo, MeasureError, checkJobDeadline, refuseScratch, requireSamplesMatch, checkInputShapes, timeEvaluator, workloadSizes } from './measure.mjs';
import { pack } from '../runtime/layout.mjs';
import { GLKernel, contextInfo, createContext } from '../runtime/webgl2.mjs';
import { cachedSeededTensor } from './seeded_random.mjs';
import { deviceClassKey, platformDevice } from './device_class.mjs';

export { FEEDBACK_FRAGMENT_SHADER, FULLSCREEN_VERTEX_SHADER } from '../runtime/webgl2.mjs';

/**
 * A short, stable device name from a renderer string, for the key `webgl2:<name>`. ANGLE wraps
 * the real renderer ("ANGLE (Google, Vulkan 1.3.0 (SwiftShader Device (Subzero)...), SwiftShader
 * driver)"); software renderers are named as such, anything else is slugified like the native
 * agent's GlDeviceInfo::short_name (text before the first "/" or "(").
 */
export function shortRendererName(renderer) {
  if (/swiftshader/i.test(renderer)) return 'swiftshader';
  if (/llvmpipe/i.test(renderer)) return 'llvmpipe';
  let text = renderer;
  const angle = /^ANGLE \((.*)\)$/.exec(text);
  if (angle) {
    const fields = angle[1].split(', ');
    text = fields.length >= 2 ? fields[1] : fields[0];
  }
  text = text.replace(/\((R|TM)\)/gi, '');
  const cut = text.search(/\/| ?\(/);
  if (cut >= 0) text = text.slice(0, cut);
  const name = text.toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-+|-+$/g, '');
  return name || 'unknown';
}

// Resolves after the event loop has turned once, without the 4 ms clamp of nested timers:
// WebGL updates sync object status only between tasks.
// Created on first use: an open port would keep a node process (the unit tests) alive.
let channel = null;
const waiting = [];
function nextTask() {
  if (typeof MessageChannel === 'undefined') return new Promise((resolve) => setTimeout(resolve, 0));
  if (!channel) {
    channel = new MessageChannel();
    channel.port1.onmessage = () => waiting.shift()?.();
  }
  return new Promise((resolve) => {
    waiting.push(resolve);
    channel.port2.postMessage(0);
  });
}

/**
 * How a timed batch waits for the GPU in this browser when the page does not say (`sync=`):
 * "finish" in Firefox, "readpixels" elsewhere.
 *
 * Chromium (156, SwiftShader): a blocking 1-texel readPixels is a synchronous round trip to the
 * GPU process that returns once the draws before it are done, with no task turns in between.
 * A fence polled between tasks is seen signaled late: WebGL refreshes a sync object's status
 * only between tasks, and once the 2 ms of MessageChannel polls are over, the 1 ms timers
 * wake up in steps of about 4 ms. Measured 2026-11-28 with the same tuned kernels, ms a run
 * (median of 15, number = 1 / 16): MobileNet-v2 DW4 fence 5.71 / 1.42, readpixels 1.67 / 1.17;
 * DW9 4.53 / 0.68 against 0.95 / 0.41; PW9 4.57 / 1.31 against 1.26 / 0.98. Polling on
 * MessageChannel turns only (2.96 / 2.00 on DW4) takes a core from the CPU renderer that draws.
 *
 * Firefox (153 ESR, remoted WebGL on Mesa llvmpipe under Xvfb) reports a fence signaled only
 * about one frame after the draws end, however often it is polled: an empty clear took 8 to 16
 * ms to signal polled on timers, up to 300 ms spinning on MessageChannel tasks, one animation
 * frame with requestAnimationFrame; dense 128³ grid configs 0, 1, 2 "took" 65.5, 13.3 and 13.6
 * ms with the fence against 9.4, 5.7 and 5.9 ms with finish. Its gl.finish() is a synchronous
 * call into the process that owns the GL context and returns once the draws are done (a
 * readPixels right after it takes 1 to 14 ms instead of the draw's 130 to 320 ms).
 */
export function defaultSync(env = globalThis) {
  const ua = env.navigator?.userAgent || '';
  return /\bFirefox\//.test(ua) ? 'finish' : 'readpixels';
}

export class WebGL2Executor {
  /** The target family this executor serves, the first part of its key. */
  static family = 'webgl2';
  /** Artifact targets (KernelArtifact.target) this executor runs. */
  static artifactTargets = ['gles-frag'];

  /**
   * Creates the executor and its context; throws when the browser has no usable WebGL2.
   * `options.sync`: how a timed batch waits for the GPU: "readpixels" (a blocking 1-texel read
   * of target 0, or of the first captured vec4 of a vertex-stage kernel, which waits for the
   * draws), "fence" (fenceSync polled between tasks, so the page stays responsive during a
   * long batch), or "finish" (gl.finish). The default is the browser's (defaultSync): in
   * Chromium 156 a polled fence is seen 1–4 ms late, and on SwiftShader finish returns before
   * the draws are done (dense 256³ "times" at 503 GFLOP/s with finish, 0.44 GFLOP/s with the
   * fence; native llvmpipe does 1.6); in Firefox a fence is seen signaled only about a frame
   * later (8 to 16 ms for a clear), while finish is a synchronous round trip that waits for the
   * draws.
   */
  constructor(options = {}) {
    this.sync = ['fence', 'finish', 'readpixels'].includes(options.sync) ? options.sync : defaultSync();
    this.generation = 0;
    this.createContext();
  }

  createContext() {
    const { canvas, gl } = createContext();
    this.canvas = canvas;
    this.gl = gl;
    this.lost = false;
    this.generation += 1;
    this.canvas.addEventListener('webglcontextlost', (event) => {
      // No preventDefault: the context is never restored; a fresh one replaces it.
      this.lost = true;
      console.warn('[webtune] WebGL context lost');
    });
    const info = contextInfo(gl);
    this.colorBufferFloat = info.colorBufferFloat;
    this.vendor = info.vendor;
    this.renderer = info.renderer;
    this.version = info.version;
    this.glslVersion = info.glslVersion;
    this.limits = info.limits;
  }

  /** The tracker key of this device class, e.g. "webgl2:swiftshader:chromium-156:linux-x86_64:2t". */
  key() {
    return deviceClassKey('webgl2', shortRendererName(this.renderer));
  }

  /** The `device` object of the agent's hello, in the shape of the native GlDeviceInfo JSON. */
  device() {
    return {
      platform: 'webgl2',
      vendor: this.vendor,
      renderer: this.renderer,
      version: this.version,
      glsl_version: this.glslVersion,
      major: 3,
      minor: 0,
      color_buffer_float: this.colorBufferFloat,
      sync: this.sync,
      limits: this.limits,
      short_name: shortRendererName(this.renderer),
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
    if (this.lost || this.gl.isContextLost()) this.createContext();
    const trial = new Trial(this, input, start, shouldStop);
    try {
      return await trial.run();
    } finally {
      trial.release();
      if (this.lost || this.gl.isContextLost()) {
        // Leave a working context for the next job.
        try { this.createContext(); } catch (e) { console.error('[webtune] cannot recreate the WebGL context', e); }
      }
    }
  }

  /** Loses the context on purpose (WEBGL_lose_context), for tests of the recovery path. */
  loseContext() {
    const ext = this.gl.getExtension('WEBGL_lose_context');
    if (!ext) return false;
    ext.loseContext();
    return true;
  }
}

class Trial {
  constructor(executor, input, start, shouldStop) {
    this.executor = executor;
    this.gl = executor.gl;
    this.input = input;
    this.artifact = input.artifact;
    this.start = start;
    this.shouldStop = shouldStop;
    this.kernel = new GLKernel(executor.gl, input.artifact, () => executor.lost);
  }

  async run() {
    const kernel = this.kernel;
    kernel.drainErrors();
    this.validate();
    kernel.compile();
    this.uploadInputs();
    kernel.createOutputs();
    kernel.checkGl('setting up the kernel\'s inputs and outputs');
    // The checked run is also TVM's untimed warm-up run. Outputs start as NaN so that a kernel
    // that skips some outputs cannot pass with values left from an earlier run.
    kernel.fillOutputsWithNaN();
    kernel.runOnce();
    const output = kernel.readOutput();  // readPixels waits for the draw
    kernel.checkGl('running the kernel');
    requireSamplesMatch(output, this.input);
    this.checkDeadline(0, 0);
    return this.timeRuns();
  }

  instantiation(message) {
    throw new MeasureError(ErrorNo.INSTANTIATION, message);
  }

  // ---- checks before touching GL: a bad artifact is reported as such, not as a GL error ----
  validate() {
    const { artifact, input } = this;
    if (!artifact || typeof artifact.source !== 'string') this.instantiation('the measure input has no artifact source');
    if (!WebGL2Executor.artifactTargets.includes(artifact.target)) {
      this.instantiation(`WebGL2 runs gles-frag kernels, not '${artifact.target}'`);
    }
    refuseScratch(artifact, 'WebGL2');
    if (!this.kernel.feedback && !this.executor.colorBufferFloat) {
      throw new MeasureError(ErrorNo.RUNTIME_DEVICE,
        `fragment kernels render to float textures, which needs EXT_color_buffer_float; this device (${this.executor.renderer}) lacks it`);
    }
    this.sizes = workloadSizes(input.workload);
    checkInputShapes(artifact, input.workload, (m) => this.instantiation(m));
    const out = artifact.output;
    if (out.rows * out.cols !== this.sizes.output) {
      this.instantiation(`the artifact's output is ${out.rows}x${out.cols} = ${out.rows * out.cols} elements but the workload has ${this.sizes.output}`);
    }
    this.kernel.validate(this.executor.limits, this.executor.colorBufferFloat, this.executor.renderer);
  }

  // ---- inputs ----
  uploadInputs() {
    const seed = this.input.seed;
    const logical = this.sizes.inputs.map((count, i) => cachedSeededTensor(seed, i, count));
    const packed = this.artifact.inputs.map((layout, i) => {
      try {
        return pack(layout, logical[i]);
      } catch (e) {
        return this.instantiation(`cannot pack input ${i}: ${e.message}`);
      }
    });
    this.kernel.createInputTextures(packed);
    this.kernel.checkGl('uploading the inputs');
  }

  // ---- timing ----
  /** Waits until every command issued so far has finished on the GPU. */
  async sync() {
    const gl = this.gl;
    if (this.executor.sync === 'readpixels') {
      // Reading one output element must wait for every draw that writes it.
      this.kernel.waitForDraws();
      // A lost context returns from the read at once, having waited for nothing: that batch's
      // time must not become a cost.
      this.kernel.checkLost('waiting for the kernel');
      return;
    }
    const fence = this.executor.sync === 'fence' ? gl.fenceSync(gl.SYNC_GPU_COMMANDS_COMPLETE, 0) : null;
    if (!fence) {
      gl.finish();
      return;
    }
    try {
      // Flush once, then poll between tasks: the page stays responsive (socket, cancel, the
      // watchdog). The first 2 ms poll through MessageChannel turns (microseconds, exact for
      // short batches); later polls sleep on timers (≤ 4 ms late, which min_repeat_ms amortizes),
      // so that a spinning page does not take a core from a CPU renderer (SwiftShader,
      // llvmpipe) that draws the batch.
      const begin = performance.now();
      let status = gl.clientWaitSync(fence, gl.SYNC_FLUSH_COMMANDS_BIT, 0);
      while (status === gl.TIMEOUT_EXPIRED) {
        await (performance.now() - begin < 2 ? nextTask() : new Promise((r) => setTimeout(r, 1)));
        this.kernel.checkLost('waiting for the kernel');
        status = gl.clientWaitSync(fence, 0, 0);
      }
      if (status === gl.WAIT_FAILED) {
        this.kernel.checkLost('waiting for the kernel');
        throw new MeasureError(ErrorNo.RUNTIME_DEVICE, 'clientWaitSync failed while waiting for the kernel');
      }
    } finally {
      gl.deleteSync(fence);
    }
  }

  /** The soft timeout, checked between batches: a draw in flight cannot be interrupted. */
  checkDeadline(timedRuns, lastRunS) {
    checkJobDeadline(this, timedRuns, lastRunS);
  }

  /**
   * TVM time_evaluator over the kernel. With `options.readback` (bench/web_vs_tfjs only; the
   * tuner never sets it) each timed batch also reads the whole output back, as TensorFlow.js's
   * `dataSync()` does, so both sides can be timed with read-back.
   */
  async timeRuns() {
    const readback = Boolean(this.input.options?.readback);
    let checkedReadback = false;
    return timeEvaluator(this.input.options || {}, async (number) => {
      const begin = performance.now();
      for (let j = 0; j < number; ++j) this.kernel.runOnce();
      // The read is queued behind the draws. Its getBufferSubData blocks until the draws and
      // the read are done, as the 1-texel read of the "readpixels" wait would: that wait before
      // it was one more round trip to the GPU process, 0.1–0.4 ms of a read-back sample
      // (bench/web_vs_tfjs/probe_readback.mjs). A fence or finish wait still comes first.
      if (readback) this.kernel.startReadOutput();
      if (!readback || this.executor.sync !== 'readpixels') await this.sync();
      if (readback) {
        // getError after the read is a round trip too: the first batch checks it here, so a
        // failed read is RUNTIME_DEVICE rather than WRONG_ANSWER; later batches leave it to the
        // check after every batch (untimed, below), which runs before any cost is kept.
        const output = this.kernel.finishReadOutput({ checkErrors: !checkedReadback });
        // A lost context returns from the read at once, having waited for nothing.
        this.kernel.checkLost('reading the output back');
        // The first batch's read-back is checked as the untimed run was: a wrong offset in the
        // pixel-pack buffer is a wrong answer, not a silently faster sample.
        if (!checkedReadback) requireSamplesMatch(output, this.input);
        checkedReadback = true;
      }
      const seconds = (performance.now() - begin) / 1e3;
      // One turn of the event loop between batches, untimed: a blocking wait (readpixels,
      // finish) gives none, and the page must still see its socket, a cancel, the watchdog and
      // a lost context while a job times hundreds of batches.
      await nextTask();
      return seconds;
    }, (timedRuns, perRunS) => {
      this.kernel.checkLost('timing the kernel');
      this.kernel.checkGl('timing the kernel');
      this.checkDeadline(timedRuns, perRunS);
    });
  }

  release() {
    this.kernel.release();
  }
}
