// webgl2.mjs — the WebGL2 executor: runs the GLSL ES 3.00 kernels of the gles-frag template
// (KernelArtifact JSON, codegen/include/codegen/kernel_artifact.hpp) unchanged, the way
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
import { channels, feedbackVaryings, pack, packedShape, shapeSize, unpack } from './layout.mjs';
import { cachedSeededTensor } from './seeded_random.mjs';
import { deviceClassKey, platformDevice } from './device_class.mjs';

/** The vertex shader every fragment kernel is drawn with (kFullscreenVertexShader in C++). */
export const FULLSCREEN_VERTEX_SHADER = `#version 300 es
// One triangle that covers the viewport: vertices (-1,-1), (3,-1), (-1,3).
void main() {
  vec2 corner = vec2(float((gl_VertexID << 1) & 2), float(gl_VertexID & 2));
  gl_Position = vec4(corner * 2.0 - 1.0, 0.0, 1.0);
}
`;

/** The fragment shader every vertex-stage kernel is linked with (kFeedbackFragmentShader). */
export const FEEDBACK_FRAGMENT_SHADER = `#version 300 es
// Never runs: a vertex-stage kernel draws with GL_RASTERIZER_DISCARD.
precision mediump float;
out vec4 unused;
void main() {
  unused = vec4(0.0);
}
`;

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

export class WebGL2Executor {
  /** The target family this executor serves, the first part of its key. */
  static family = 'webgl2';
  /** Artifact targets (KernelArtifact.target) this executor runs. */
  static artifactTargets = ['gles-frag'];

  /**
   * Creates the executor and its context; throws when the browser has no usable WebGL2.
   * `options.sync`: how a timed batch waits for the GPU: "fence" (default; fenceSync polled
   * between tasks), "readpixels" (a blocking 1-texel read of target 0, which waits for the
   * draws), or "finish" (gl.finish), for comparison only: in Chromium 156 on SwiftShader
   * finish returns before the draws are done (dense 256³ "times" at 503 GFLOP/s with finish,
   * 0.44 GFLOP/s with the fence; native llvmpipe does 1.6).
   */
  constructor(options = {}) {
    this.sync = ['finish', 'readpixels'].includes(options.sync) ? options.sync : 'fence';
    this.generation = 0;
    this.createContext();
  }

  createContext() {
    // OffscreenCanvas: nothing is ever shown, and no compositor frame is involved.
    this.canvas = typeof OffscreenCanvas !== 'undefined' ? new OffscreenCanvas(1, 1)
                                                        : document.createElement('canvas');
    const gl = this.canvas.getContext('webgl2', {
      alpha: true, antialias: false, depth: false, stencil: false,
      preserveDrawingBuffer: false, powerPreference: 'high-performance',
      failIfMajorPerformanceCaveat: false,
    });
    if (!gl) throw new Error('this browser offers no WebGL2 context');
    this.gl = gl;
    this.lost = false;
    this.generation += 1;
    this.canvas.addEventListener('webglcontextlost', (event) => {
      // No preventDefault: the context is never restored; a fresh one replaces it.
      this.lost = true;
      console.warn('[webtune] WebGL context lost');
    });
    this.colorBufferFloat = gl.getExtension('EXT_color_buffer_float') !== null;
    const debug = gl.getExtension('WEBGL_debug_renderer_info');
    this.vendor = debug ? gl.getParameter(debug.UNMASKED_VENDOR_WEBGL) : gl.getParameter(gl.VENDOR);
    this.renderer = debug ? gl.getParameter(debug.UNMASKED_RENDERER_WEBGL) : gl.getParameter(gl.RENDERER);
    this.version = gl.getParameter(gl.VERSION);
    this.glslVersion = gl.getParameter(gl.SHADING_LANGUAGE_VERSION);
    this.limits = {
      max_texture_size: gl.getParameter(gl.MAX_TEXTURE_SIZE),
      max_draw_buffers: Math.min(gl.getParameter(gl.MAX_DRAW_BUFFERS),
                                 gl.getParameter(gl.MAX_COLOR_ATTACHMENTS)),
      // Vertex-stage kernels: one output varying per block row (two for 8-column blocks),
      // captured interleaved.
      max_varying_vectors: gl.getParameter(gl.MAX_VARYING_VECTORS),
      max_feedback_components: gl.getParameter(gl.MAX_TRANSFORM_FEEDBACK_INTERLEAVED_COMPONENTS),
      // WebGL2 has no compute shaders; the fields keep DeviceLimits' JSON shape
      // (codegen/config_space.hpp) with its defaults.
      max_workgroup_invocations: 128,
      max_workgroup_size: [128, 128, 64],
      max_shared_memory_bytes: 16384,
    };
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

function glErrorName(gl, code) {
  const names = {
    [gl.INVALID_ENUM]: 'GL_INVALID_ENUM', [gl.INVALID_VALUE]: 'GL_INVALID_VALUE',
    [gl.INVALID_OPERATION]: 'GL_INVALID_OPERATION',
    [gl.INVALID_FRAMEBUFFER_OPERATION]: 'GL_INVALID_FRAMEBUFFER_OPERATION',
    [gl.OUT_OF_MEMORY]: 'GL_OUT_OF_MEMORY', [gl.CONTEXT_LOST_WEBGL]: 'GL_CONTEXT_LOST',
  };
  return names[code] || `GL error 0x${code.toString(16)}`;
}

class Trial {
  constructor(executor, input, start, shouldStop) {
    this.executor = executor;
    this.gl = executor.gl;
    this.input = input;
    this.artifact = input.artifact;
    this.start = start;
    this.shouldStop = shouldStop;
    this.objects = { shaders: [], textures: [], framebuffers: [], vertexArrays: [], program: null,
                     buffers: [], feedback: null };
    this.feedback = Boolean(input.artifact?.output?.feedback);
  }

  async run() {
    this.drainErrors();
    this.validate();
    this.compile();
    this.uploadInputs();
    this.prepareOutputs();
    this.checkGl('setting up the kernel\'s inputs and outputs');
    // The checked run is also TVM's untimed warm-up run. Outputs start as NaN so that a kernel
    // that skips some outputs cannot pass with values left from an earlier run.
    this.fillOutputsWithNaN();
    this.runOnce();
    const output = this.readOutput();  // readPixels waits for the draw
    this.checkGl('running the kernel');
    requireSamplesMatch(output, this.input);
    this.checkDeadline(0, 0);
    return this.timeRuns();
  }

  instantiation(message) {
    throw new MeasureError(ErrorNo.INSTANTIATION, message);
  }

  checkLost(what) {
    if (this.executor.lost || this.gl.isContextLost()) {
      throw new MeasureError(ErrorNo.RUNTIME_DEVICE, `the WebGL context was lost while ${what}`);
    }
  }

  drainErrors() {
    const names = [];
    for (let i = 0; i < 16; ++i) {
      const code = this.gl.getError();
      if (code === this.gl.NO_ERROR) break;
      names.push(glErrorName(this.gl, code));
    }
    return names.join(', ');
  }

  checkGl(what) {
    this.checkLost(what);
    const errors = this.drainErrors();
    if (errors) throw new MeasureError(ErrorNo.RUNTIME_DEVICE, `${errors} while ${what}`);
  }

  // ---- checks before touching GL: a bad artifact is reported as such, not as a GL error ----
  validate() {
    const { artifact, input } = this;
    const limits = this.executor.limits;
    if (!artifact || typeof artifact.source !== 'string') this.instantiation('the measure input has no artifact source');
    if (!WebGL2Executor.artifactTargets.includes(artifact.target)) {
      this.instantiation(`WebGL2 runs gles-frag kernels, not '${artifact.target}'`);
    }
    refuseScratch(artifact, 'WebGL2');
    if (!this.feedback && !this.executor.colorBufferFloat) {
      throw new MeasureError(ErrorNo.RUNTIME_DEVICE,
        `fragment kernels render to float textures, which needs EXT_color_buffer_float; this device (${this.executor.renderer}) lacks it`);
    }
    this.sizes = workloadSizes(input.workload);
    checkInputShapes(artifact, input.workload, (m) => this.instantiation(m));
    const checkSize = (what, w, h) => {
      if (w <= 0 || h <= 0) this.instantiation(`${what} has an empty texture size ${w}x${h}`);
      if (w > limits.max_texture_size || h > limits.max_texture_size) {
        this.instantiation(`${what} needs a ${w}x${h} texture but this device's MAX_TEXTURE_SIZE is ${limits.max_texture_size} (use a wrapped layout, or filter configs with the device limits)`);
      }
    };
    artifact.inputs.forEach((layout, i) => {
      checkSize(`input ${i}`, layout.width, layout.height);
      if (layout.width * layout.height < shapeSize(packedShape(layout))) {
        this.instantiation(`input ${i} has ${shapeSize(packedShape(layout))} packed elements but its ${layout.width}x${layout.height} texture holds fewer`);
      }
    });
    const out = artifact.output;
    if (out.rows * out.cols !== this.sizes.output) {
      this.instantiation(`the artifact's output is ${out.rows}x${out.cols} = ${out.rows * out.cols} elements but the workload has ${this.sizes.output}`);
    }
    if (out.channels !== 1 && out.channels !== 4 && !(this.feedback && out.channels === 8)) {
      this.instantiation(`output channels must be 1 (R32F) or 4 (RGBA32F), or 8 with feedback, not ${out.channels}`);
    }
    const items = Math.ceil(out.rows / out.rows_per_item) * Math.ceil(out.cols / out.channels);
    if (this.feedback) {
      if (out.rows_per_item < 1 || feedbackVaryings(out) > limits.max_varying_vectors ||
          out.rows_per_item * out.channels > limits.max_feedback_components) {
        this.instantiation(`the output needs ${feedbackVaryings(out)} varyings, ${out.rows_per_item * out.channels} floats, but this device allows ${limits.max_varying_vectors} varyings and ${limits.max_feedback_components} captured components`);
      }
      if (out.height !== 1 || out.width < items) {
        this.instantiation(`a feedback output of ${items} items needs width >= ${items} and height 1, not ${out.width}x${out.height}`);
      }
      return;
    }
    if (out.rows_per_item < 1 || out.rows_per_item > limits.max_draw_buffers) {
      this.instantiation(`the output needs ${out.rows_per_item} draw buffers but this device allows 1 to ${limits.max_draw_buffers}`);
    }
    checkSize('the output', out.width, out.height);
    if (out.width * out.height < items) {
      this.instantiation(`the output has ${items} items but its ${out.width}x${out.height} render targets hold fewer`);
    }
  }

  // ---- compile and link ----
  compileShader(type, source, stage) {
    const gl = this.gl;
    const shader = gl.createShader(type);
    if (!shader) {
      this.checkLost('creating a shader');
      throw new MeasureError(ErrorNo.RUNTIME_DEVICE, 'createShader returned null');
    }
    this.objects.shaders.push(shader);
    gl.shaderSource(shader, source);
    gl.compileShader(shader);
    if (!gl.getShaderParameter(shader, gl.COMPILE_STATUS)) {
      this.checkLost('compiling the kernel');
      const log = (gl.getShaderInfoLog(shader) || '').trim();
      throw new MeasureError(ErrorNo.COMPILE_DEVICE,
        `${stage} shader failed to compile: ${log || '(the browser gave no log)'}`);
    }
    return shader;
  }

  compile() {
    const gl = this.gl;
    const program = gl.createProgram();
    this.objects.program = program;
    if (this.feedback) {
      gl.attachShader(program, this.compileShader(gl.VERTEX_SHADER, this.artifact.source, 'vertex'));
      gl.attachShader(program, this.compileShader(gl.FRAGMENT_SHADER, FEEDBACK_FRAGMENT_SHADER, 'fragment'));
      const varyings = Array.from({ length: feedbackVaryings(this.artifact.output) }, (_, j) => `o${j}`);
      gl.transformFeedbackVaryings(program, varyings, gl.INTERLEAVED_ATTRIBS);
    } else {
      gl.attachShader(program, this.compileShader(gl.VERTEX_SHADER, FULLSCREEN_VERTEX_SHADER, 'vertex'));
      gl.attachShader(program, this.compileShader(gl.FRAGMENT_SHADER, this.artifact.source, 'fragment'));
    }
    gl.linkProgram(program);
    if (!gl.getProgramParameter(program, gl.LINK_STATUS)) {
      this.checkLost('linking the kernel');
      const log = (gl.getProgramInfoLog(program) || '').trim();
      throw new MeasureError(ErrorNo.COMPILE_DEVICE, `program failed to link: ${log || '(the browser gave no log)'}`);
    }
    this.checkGl('compiling the kernel');
  }

  // ---- inputs ----
  uploadInputs() {
    const gl = this.gl;
    const seed = this.input.seed;
    const logical = this.sizes.inputs.map((count, i) => cachedSeededTensor(seed, i, count));
    gl.pixelStorei(gl.UNPACK_ALIGNMENT, 4);
    gl.bindBuffer(gl.PIXEL_UNPACK_BUFFER, null);
    this.artifact.inputs.forEach((layout, i) => {
      let packed;
      try {
        packed = pack(layout, logical[i]);
      } catch (e) {
        this.instantiation(`cannot pack input ${i}: ${e.message}`);
      }
      const rgba = channels(layout) === 4;
      const expected = layout.width * layout.height * channels(layout);
      if (packed.length !== expected) {
        this.instantiation(`input ${i} packs into ${packed.length} floats, not the ${expected} of its texture`);
      }
      const texture = gl.createTexture();
      this.objects.textures.push(texture);
      gl.activeTexture(gl.TEXTURE0 + i);
      gl.bindTexture(gl.TEXTURE_2D, texture);
      // NEAREST and no mipmaps: kernels read with texelFetch, and float textures are not
      // filterable without OES_texture_float_linear (the texture would be incomplete).
      gl.texParameteri(gl.TEXTURE_2D, gl.TEXTURE_MIN_FILTER, gl.NEAREST);
      gl.texParameteri(gl.TEXTURE_2D, gl.TEXTURE_MAG_FILTER, gl.NEAREST);
      gl.texParameteri(gl.TEXTURE_2D, gl.TEXTURE_WRAP_S, gl.CLAMP_TO_EDGE);
      gl.texParameteri(gl.TEXTURE_2D, gl.TEXTURE_WRAP_T, gl.CLAMP_TO_EDGE);
      gl.texStorage2D(gl.TEXTURE_2D, 1, rgba ? gl.RGBA32F : gl.R32F, layout.width, layout.height);
      gl.texSubImage2D(gl.TEXTURE_2D, 0, 0, 0, layout.width, layout.height, rgba ? gl.RGBA : gl.RED,
                       gl.FLOAT, packed);
    });
    this.checkGl('uploading the inputs');
  }

  // ---- outputs ----
  prepareOutputs() {
    if (this.feedback) {
      this.prepareFeedback();
    } else {
      this.prepareRenderTargets();
    }
    const gl = this.gl;
    const vertexArray = gl.createVertexArray();
    this.objects.vertexArrays.push(vertexArray);
    gl.bindVertexArray(vertexArray);
    gl.useProgram(this.objects.program);
    this.artifact.inputs.forEach((_, i) => {
      const name = `in${i}`;
      const location = gl.getUniformLocation(this.objects.program, name);
      if (location !== null) gl.uniform1i(location, i);
    });
  }

  /** Floats of the feedback buffer: every varying of every item. */
  feedbackFloats() {
    const out = this.artifact.output;
    return out.width * out.rows_per_item * out.channels;
  }

  prepareFeedback() {
    const gl = this.gl;
    const buffer = gl.createBuffer();
    this.objects.buffers.push(buffer);
    gl.bindBuffer(gl.COPY_WRITE_BUFFER, buffer);
    // COPY, not READ, usage: Chromium keeps a client-side shadow of READ buffers at every fence
    // and warns (and drops it) when the next timed run writes the buffer again; the output is
    // read back once per trial.
    gl.bufferData(gl.COPY_WRITE_BUFFER, this.feedbackFloats() * 4, gl.DYNAMIC_COPY);
    gl.bindBuffer(gl.COPY_WRITE_BUFFER, null);
    this.objects.feedback = gl.createTransformFeedback();
    this.feedbackBuffer = buffer;
    this.checkGl('creating the feedback buffer');
    // No fragment ever runs: points are discarded before rasterization.
    gl.enable(gl.RASTERIZER_DISCARD);
  }

  prepareRenderTargets() {
    const gl = this.gl;
    const out = this.artifact.output;
    const framebuffer = gl.createFramebuffer();
    this.objects.framebuffers.push(framebuffer);
    gl.bindFramebuffer(gl.FRAMEBUFFER, framebuffer);
    const drawBuffers = [];
    // The first unit past the inputs for the targets, so that binding them never disturbs the
    // inputs in0 … on units 0 ….
    gl.activeTexture(gl.TEXTURE0 + this.artifact.inputs.length);
    for (let j = 0; j < out.rows_per_item; ++j) {
      const texture = gl.createTexture();
      this.objects.textures.push(texture);
      gl.bindTexture(gl.TEXTURE_2D, texture);
      gl.texParameteri(gl.TEXTURE_2D, gl.TEXTURE_MIN_FILTER, gl.NEAREST);
      gl.texParameteri(gl.TEXTURE_2D, gl.TEXTURE_MAG_FILTER, gl.NEAREST);
      gl.texStorage2D(gl.TEXTURE_2D, 1, out.channels === 1 ? gl.R32F : gl.RGBA32F, out.width, out.height);
      gl.framebufferTexture2D(gl.FRAMEBUFFER, gl.COLOR_ATTACHMENT0 + j, gl.TEXTURE_2D, texture, 0);
      drawBuffers.push(gl.COLOR_ATTACHMENT0 + j);
    }
    gl.bindTexture(gl.TEXTURE_2D, null);
    gl.drawBuffers(drawBuffers);
    this.checkGl('creating the render targets');
    const status = gl.checkFramebufferStatus(gl.FRAMEBUFFER);
    if (status !== gl.FRAMEBUFFER_COMPLETE) {
      throw new MeasureError(ErrorNo.RUNTIME_DEVICE,
        `the framebuffer of ${out.rows_per_item} ${out.channels === 1 ? 'R32F' : 'RGBA32F'} ${out.width}x${out.height} render targets is incomplete: status 0x${status.toString(16)}`);
    }
    // All state of a run is set once here, so that a timed run is only the draw call.
    gl.viewport(0, 0, out.width, out.height);
    for (const cap of [gl.BLEND, gl.DEPTH_TEST, gl.STENCIL_TEST, gl.SCISSOR_TEST, gl.DITHER]) gl.disable(cap);
    gl.colorMask(true, true, true, true);
  }

  fillOutputsWithNaN() {
    if (this.feedback) {
      const gl = this.gl;
      gl.bindBuffer(gl.COPY_WRITE_BUFFER, this.feedbackBuffer);
      gl.bufferSubData(gl.COPY_WRITE_BUFFER, 0, new Float32Array(this.feedbackFloats()).fill(NaN));
      gl.bindBuffer(gl.COPY_WRITE_BUFFER, null);
      this.checkGl('filling the feedback buffer with NaN');
      return;
    }
    const nan = new Float32Array([NaN, NaN, NaN, NaN]);
    for (let j = 0; j < this.artifact.output.rows_per_item; ++j) this.gl.clearBufferfv(this.gl.COLOR, j, nan);
    this.checkGl('filling the outputs with NaN');
  }

  runOnce() {
    if (this.feedback) {
      // The buffer is bound only while the draw captures into it: WebGL forbids reading a buffer
      // (getBufferSubData) that is also bound for transform feedback.
      const gl = this.gl;
      gl.bindTransformFeedback(gl.TRANSFORM_FEEDBACK, this.objects.feedback);
      gl.bindBufferBase(gl.TRANSFORM_FEEDBACK_BUFFER, 0, this.feedbackBuffer);
      gl.beginTransformFeedback(gl.POINTS);
      gl.drawArrays(gl.POINTS, 0, this.artifact.output.width);
      gl.endTransformFeedback();
      gl.bindBufferBase(gl.TRANSFORM_FEEDBACK_BUFFER, 0, null);
      gl.bindTransformFeedback(gl.TRANSFORM_FEEDBACK, null);
      gl.flush();
      return;
    }
    this.gl.drawArrays(this.gl.TRIANGLES, 0, 3);
    // One flush per run, as the native runtime does: a tiling rasterizer (llvmpipe under ANGLE)
    // may otherwise fold back-to-back draws that cover the same tiles into one.
    this.gl.flush();
  }

  // ---- reading back ----
  /** Reads `floats.length` floats from the start of the feedback buffer (waits for the draws). */
  readFeedback(floats) {
    const gl = this.gl;
    gl.bindBuffer(gl.COPY_READ_BUFFER, this.feedbackBuffer);
    gl.getBufferSubData(gl.COPY_READ_BUFFER, 0, floats);
    gl.bindBuffer(gl.COPY_READ_BUFFER, null);
    return floats;
  }

  readOutput() {
    const gl = this.gl;
    const out = this.artifact.output;
    if (this.feedback) {
      const captured = this.readFeedback(new Float32Array(this.feedbackFloats()));
      this.checkGl('reading the feedback buffer back');
      try {
        return unpack(out, [captured]);
      } catch (e) {
        this.instantiation(e.message);
      }
    }
    const texels = out.width * out.height;
    gl.pixelStorei(gl.PACK_ALIGNMENT, 4);
    gl.bindBuffer(gl.PIXEL_PACK_BUFFER, null);
    const targets = [];
    const rgba = new Float32Array(texels * 4);
    for (let j = 0; j < out.rows_per_item; ++j) {
      gl.readBuffer(gl.COLOR_ATTACHMENT0 + j);
      // RGBA/FLOAT is the read format EXT_color_buffer_float always allows.
      gl.readPixels(0, 0, out.width, out.height, gl.RGBA, gl.FLOAT, rgba);
      if (out.channels === 4) {
        targets.push(rgba.slice());
      } else {
        const red = new Float32Array(texels);
        for (let t = 0; t < texels; ++t) red[t] = rgba[4 * t];
        targets.push(red);
      }
    }
    gl.readBuffer(gl.COLOR_ATTACHMENT0);
    this.checkGl('reading the render targets back');
    try {
      return unpack(out, targets);
    } catch (e) {
      this.instantiation(e.message);
    }
  }

  // ---- timing ----
  /** Waits until every command issued so far has finished on the GPU. */
  async sync() {
    const gl = this.gl;
    if (this.executor.sync === 'readpixels' && this.feedback) {
      // Reading the first captured vec4 must wait for every draw that writes the buffer.
      this.readFeedback(this.texel || (this.texel = new Float32Array(4)));
      return;
    }
    if (this.executor.sync === 'readpixels') {
      // Reading one texel of target 0 must wait for every draw that writes it.
      gl.readBuffer(gl.COLOR_ATTACHMENT0);
      gl.readPixels(0, 0, 1, 1, gl.RGBA, gl.FLOAT, this.texel || (this.texel = new Float32Array(4)));
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
        this.checkLost('waiting for the kernel');
        status = gl.clientWaitSync(fence, 0, 0);
      }
      if (status === gl.WAIT_FAILED) {
        this.checkLost('waiting for the kernel');
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
   * tuner never sets it) each timed batch also reads the whole output back after the fence, as
   * TensorFlow.js's `await y.data()` does (fence, then download), so both sides can be timed
   * with read-back.
   */
  async timeRuns() {
    const readback = Boolean(this.input.options?.readback);
    return timeEvaluator(this.input.options || {}, async (number) => {
      const begin = performance.now();
      for (let j = 0; j < number; ++j) this.runOnce();
      await this.sync();
      if (readback) this.readOutput();
      return (performance.now() - begin) / 1e3;
    }, (timedRuns, perRunS) => {
      this.checkGl('timing the kernel');
      this.checkDeadline(timedRuns, perRunS);
    });
  }

  release() {
    const gl = this.gl;
    if (gl.isContextLost()) return;  // objects of a lost context are gone already
    gl.useProgram(null);
    gl.bindFramebuffer(gl.FRAMEBUFFER, null);
    gl.disable(gl.RASTERIZER_DISCARD);
    gl.bindTransformFeedback(gl.TRANSFORM_FEEDBACK, null);
    gl.bindVertexArray(null);
    // Units 0 … 4: up to four inputs and the render targets' unit after them.
    for (const unit of [gl.TEXTURE4, gl.TEXTURE3, gl.TEXTURE2, gl.TEXTURE1, gl.TEXTURE0]) {
      gl.activeTexture(unit);
      gl.bindTexture(gl.TEXTURE_2D, null);
    }
    const o = this.objects;
    if (o.program) gl.deleteProgram(o.program);
    o.shaders.forEach((s) => gl.deleteShader(s));
    o.textures.forEach((t) => gl.deleteTexture(t));
    o.framebuffers.forEach((f) => gl.deleteFramebuffer(f));
    o.vertexArrays.forEach((v) => gl.deleteVertexArray(v));
    o.buffers.forEach((b) => gl.deleteBuffer(b));
    if (o.feedback) gl.deleteTransformFeedback(o.feedback);
    this.drainErrors();
  }
}
