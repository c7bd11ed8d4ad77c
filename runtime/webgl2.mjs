// webgl2.mjs — the WebGL2 kernel runner: runs the GLSL ES 3.00 kernels of the gles-frag template
// (KernelArtifact JSON, codegen/include/codegen/kernel_artifact.hpp) unchanged, the way
// native-agent/gl_runtime.cpp does over EGL: inputs in float textures, one full-screen triangle
// into `rows_per_item` float render targets (or, for a vertex-stage kernel whose output.feedback
// is set, one point per item captured by transform feedback into one buffer). Shared by the
// browser agent's executor (browser-agent/webgl2.mjs: measure) and the model runtime (model.mjs:
// one kernel step over the package's slot textures).
//
// A GLKernel owns the GL objects it creates (program, shaders, its own textures, framebuffer,
// vertex array, feedback buffer) and deletes them in release(). Errors are MeasureErrors
// (errors.mjs): a shader the driver refuses is COMPILE_DEVICE with its log, a lost context or a
// GL error RUNTIME_DEVICE, an artifact this device cannot hold INSTANTIATION.

import { ErrorNo, MeasureError, refuseScratch } from './errors.mjs';
import { touchedFloat32Array } from './host_array.mjs';
import { channels, feedbackVaryings, packedShape, shapeSize, unpack } from './layout.mjs';

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
 * A fresh WebGL2 context on an OffscreenCanvas (nothing is ever shown, no compositor frame) or,
 * without one, a detached canvas: {canvas, gl}. Throws when the browser has no WebGL2, with the
 * browser's own reason when it gives one (the webglcontextcreationerror event's statusMessage:
 * e.g. headless Firefox's "AllowWebgl2:false restricts context creation on this system").
 */
export function createContext() {
  const canvas = typeof OffscreenCanvas !== 'undefined' ? new OffscreenCanvas(1, 1)
                                                       : document.createElement('canvas');
  const attributes = {
    alpha: true, antialias: false, depth: false, stencil: false,
    preserveDrawingBuffer: false, powerPreference: 'high-performance',
    failIfMajorPerformanceCaveat: false,
  };
  const gl = getContextOrReason(canvas, attributes);
  if (typeof gl === 'string') {
    // An OffscreenCanvas may not deliver the event: ask a document canvas for the reason.
    const reason = gl || (typeof document !== 'undefined'
      ? getContextOrReason(document.createElement('canvas'), attributes) : '');
    throw new Error(`getContext('webgl2') returned null${typeof reason === 'string' && reason ? `: ${reason}` : ''}`);
  }
  return { canvas, gl };
}

/**
 * A context creation error's statusMessage on one line: Firefox's "WebGL creation failed:\n*
 * tryNativeGL ()\n* Exhausted GL driver options. (FEATURE_...)" becomes "tryNativeGL; Exhausted
 * GL driver options. (FEATURE_...)".
 */
export function creationReason(statusMessage) {
  return String(statusMessage || '').replace(/^\s*WebGL creation failed:\s*/, '')
    .split(/\s*\n\s*/).map((line) => line.replace(/^\*\s*/, '').replace(/\s*\(\)$/, '').trim())
    .filter(Boolean).join('; ');
}

/** canvas.getContext('webgl2'), or the creation error's reason ('' without one). */
function getContextOrReason(canvas, attributes) {
  let reason = '';
  const listener = (event) => { reason = String(event.statusMessage || ''); };
  canvas.addEventListener?.('webglcontextcreationerror', listener);
  try {
    const gl = canvas.getContext('webgl2', attributes);
    if (gl) return gl;
  } finally {
    canvas.removeEventListener?.('webglcontextcreationerror', listener);
  }
  return creationReason(reason);
}

/**
 * What a context offers: {colorBufferFloat (EXT_color_buffer_float enabled), vendor, renderer,
 * version, glslVersion, limits (DeviceLimits' JSON shape, codegen/config_space.hpp)}.
 */
export function contextInfo(gl) {
  const colorBufferFloat = gl.getExtension('EXT_color_buffer_float') !== null;
  const debug = gl.getExtension('WEBGL_debug_renderer_info');
  return {
    colorBufferFloat,
    vendor: debug ? gl.getParameter(debug.UNMASKED_VENDOR_WEBGL) : gl.getParameter(gl.VENDOR),
    renderer: debug ? gl.getParameter(debug.UNMASKED_RENDERER_WEBGL) : gl.getParameter(gl.RENDERER),
    version: gl.getParameter(gl.VERSION),
    glslVersion: gl.getParameter(gl.SHADING_LANGUAGE_VERSION),
    limits: {
      max_texture_size: gl.getParameter(gl.MAX_TEXTURE_SIZE),
      max_draw_buffers: Math.min(gl.getParameter(gl.MAX_DRAW_BUFFERS),
                                 gl.getParameter(gl.MAX_COLOR_ATTACHMENTS)),
      // Vertex-stage kernels: one output varying per block row (two for 8-column blocks),
      // captured interleaved.
      max_varying_vectors: gl.getParameter(gl.MAX_VARYING_VECTORS),
      max_feedback_components: gl.getParameter(gl.MAX_TRANSFORM_FEEDBACK_INTERLEAVED_COMPONENTS),
      // WebGL2 has no compute shaders; the fields keep DeviceLimits' JSON shape with its defaults.
      max_workgroup_invocations: 128,
      max_workgroup_size: [128, 128, 64],
      max_shared_memory_bytes: 16384,
    },
  };
}

export function glErrorName(gl, code) {
  const names = {
    [gl.INVALID_ENUM]: 'GL_INVALID_ENUM', [gl.INVALID_VALUE]: 'GL_INVALID_VALUE',
    [gl.INVALID_OPERATION]: 'GL_INVALID_OPERATION',
    [gl.INVALID_FRAMEBUFFER_OPERATION]: 'GL_INVALID_FRAMEBUFFER_OPERATION',
    [gl.OUT_OF_MEMORY]: 'GL_OUT_OF_MEMORY', [gl.CONTEXT_LOST_WEBGL]: 'GL_CONTEXT_LOST',
  };
  return names[code] || `GL error 0x${code.toString(16)}`;
}

/** Drains GL's error flags; returns their names joined, '' when there were none. */
export function drainErrors(gl) {
  const names = [];
  for (let i = 0; i < 16; ++i) {
    const code = gl.getError();
    if (code === gl.NO_ERROR) break;
    names.push(glErrorName(gl, code));
  }
  return names.join(', ');
}

/** Throws RUNTIME_DEVICE when the context is lost (`lost()` also true) or a GL error is pending. */
export function checkGl(gl, what, lost = () => false) {
  if (lost() || gl.isContextLost()) {
    throw new MeasureError(ErrorNo.RUNTIME_DEVICE, `the WebGL context was lost while ${what}`);
  }
  const errors = drainErrors(gl);
  if (errors) throw new MeasureError(ErrorNo.RUNTIME_DEVICE, `${errors} while ${what}`);
}

/**
 * A 2D float texture of width × height texels, R32F (channels 1) or RGBA32F (4), NEAREST,
 * no mipmaps (kernels read with texelFetch; float textures are not filterable without
 * OES_texture_float_linear, and would be incomplete), filled with `data` (width·height·channels
 * floats) when given. Binds it on the active unit.
 */
export function createTexture(gl, width, height, ch, data = null) {
  const texture = sampledTexture(gl, gl.TEXTURE_2D);
  gl.texStorage2D(gl.TEXTURE_2D, 1, ch === 1 ? gl.R32F : gl.RGBA32F, width, height);
  if (data) writeTexture(gl, texture, width, height, ch, data);
  return texture;
}

/** A new texture bound to `target` on the active unit, NEAREST and clamped. */
function sampledTexture(gl, target) {
  const texture = gl.createTexture();
  gl.bindTexture(target, texture);
  gl.texParameteri(target, gl.TEXTURE_MIN_FILTER, gl.NEAREST);
  gl.texParameteri(target, gl.TEXTURE_MAG_FILTER, gl.NEAREST);
  gl.texParameteri(target, gl.TEXTURE_WRAP_S, gl.CLAMP_TO_EDGE);
  gl.texParameteri(target, gl.TEXTURE_WRAP_T, gl.CLAMP_TO_EDGE);
  return texture;
}

/** The textures createArrayTexture made: bindInputs binds them to TEXTURE_2D_ARRAY. */
const arrayTextures = new WeakSet();

/**
 * A 2D array texture of `layers` layers of width × height RGBA32F texels, NEAREST, no
 * mipmaps: the quad layers a fragment kernel with output.quad_layers renders into, one layer per
 * draw buffer, and the next kernel reads as a sampler2DArray (kernel_artifact.hpp). Binds it
 * on the active unit.
 */
export function createArrayTexture(gl, width, height, layers) {
  const texture = sampledTexture(gl, gl.TEXTURE_2D_ARRAY);
  gl.texStorage3D(gl.TEXTURE_2D_ARRAY, 1, gl.RGBA32F, width, height, layers);
  arrayTextures.add(texture);
  return texture;
}

/** Whether `texture` is a 2D array texture (createArrayTexture). */
export function isArrayTexture(texture) {
  return arrayTextures.has(texture);
}

/** Replaces the texels of `texture` (width·height·channels floats of `data`, texel order). */
export function writeTexture(gl, texture, width, height, ch, data) {
  gl.pixelStorei(gl.UNPACK_ALIGNMENT, 4);
  gl.bindBuffer(gl.PIXEL_UNPACK_BUFFER, null);
  gl.bindTexture(gl.TEXTURE_2D, texture);
  gl.texSubImage2D(gl.TEXTURE_2D, 0, 0, 0, width, height, ch === 1 ? gl.RED : gl.RGBA, gl.FLOAT,
                   data.subarray(0, width * height * ch));
}

/**
 * Reads the bound READ framebuffer's color attachment `attachment` (width × height texels) as
 * width·height·ch floats: RGBA/FLOAT is the read format EXT_color_buffer_float always allows,
 * so R targets are read as RGBA and their red channel kept.
 */
export function readAttachment(gl, attachment, width, height, ch) {
  const texels = width * height;
  gl.pixelStorei(gl.PACK_ALIGNMENT, 4);
  gl.bindBuffer(gl.PIXEL_PACK_BUFFER, null);
  const rgba = new Float32Array(texels * 4);
  gl.readBuffer(gl.COLOR_ATTACHMENT0 + attachment);
  gl.readPixels(0, 0, width, height, gl.RGBA, gl.FLOAT, rgba);
  return keepChannels(rgba, texels, ch);
}

/** `texels` RGBA texels read back, as `ch` floats a texel: all four, or the red one. */
function keepChannels(rgba, texels, ch) {
  if (ch === 4) return rgba;
  const red = new Float32Array(texels);
  for (let t = 0; t < texels; ++t) red[t] = rgba[4 * t];
  return red;
}

/**
 * Reads whole textures back (each width × height × ch) through a framebuffer of its own, made
 * and deleted here: one Float32Array per texture.
 */
export function readTextures(gl, textures, width, height, ch) {
  return readImages(gl, textures.map((texture) => ({ texture, layer: -1 })), width, height, ch);
}

/** Reads each layer of an array texture (createArrayTexture) back: one Float32Array each. */
export function readLayers(gl, texture, layers, width, height) {
  return readImages(gl, Array.from({ length: layers }, (_, layer) => ({ texture, layer })), width, height, 4);
}

function readImages(gl, images, width, height, ch) {
  const framebuffer = gl.createFramebuffer();
  gl.bindFramebuffer(gl.FRAMEBUFFER, framebuffer);
  try {
    return images.map(({ texture, layer }) => {
      if (layer < 0) gl.framebufferTexture2D(gl.FRAMEBUFFER, gl.COLOR_ATTACHMENT0, gl.TEXTURE_2D, texture, 0);
      else gl.framebufferTextureLayer(gl.FRAMEBUFFER, gl.COLOR_ATTACHMENT0, texture, 0, layer);
      const status = gl.checkFramebufferStatus(gl.FRAMEBUFFER);
      if (status !== gl.FRAMEBUFFER_COMPLETE) {
        throw new MeasureError(ErrorNo.RUNTIME_DEVICE, `a ${width}x${height} texture cannot be read back: framebuffer status 0x${status.toString(16)}`);
      }
      return readAttachment(gl, 0, width, height, ch);
    });
  } finally {
    gl.bindFramebuffer(gl.FRAMEBUFFER, null);
    gl.deleteFramebuffer(framebuffer);
  }
}

/**
 * One gles-frag kernel on `gl`. `lost()` says whether the owner saw the context go (its
 * webglcontextlost handler). Use: validate(limits, colorBufferFloat) → compile() → inputs as
 * textures (createInputTextures, or the caller's) → createOutputs() or useOutputTextures() →
 * bindInputs(textures) → runOnce() … → readOutput(); release() however it ends.
 */
export class GLKernel {
  constructor(gl, artifact, lost = () => false) {
    this.gl = gl;
    this.artifact = artifact;
    this.lost = lost;
    this.objects = { shaders: [], textures: [], framebuffers: [], vertexArrays: [], program: null,
                     buffers: [], feedback: null };
    this.feedback = Boolean(artifact?.output?.feedback);
    this.outputTextures = [];
  }

  instantiation(message) {
    throw new MeasureError(ErrorNo.INSTANTIATION, message);
  }

  checkLost(what) {
    if (this.lost() || this.gl.isContextLost()) {
      throw new MeasureError(ErrorNo.RUNTIME_DEVICE, `the WebGL context was lost while ${what}`);
    }
  }

  drainErrors() {
    return drainErrors(this.gl);
  }

  checkGl(what) {
    checkGl(this.gl, what, this.lost);
  }

  // ---- checks before touching GL: a bad artifact is reported as such, not as a GL error ----
  /**
   * Checks the artifact's textures and outputs against `limits` (contextInfo().limits); throws
   * INSTANTIATION (RUNTIME_DEVICE without float render targets, named by `renderer`).
   */
  validate(limits, colorBufferFloat, renderer = 'this device') {
    const { artifact } = this;
    if (!artifact || typeof artifact.source !== 'string') this.instantiation('the artifact has no source');
    if (artifact.target !== 'gles-frag') this.instantiation(`WebGL2 runs gles-frag kernels, not '${artifact.target}'`);
    refuseScratch(artifact, 'WebGL2');
    if (!this.feedback && !colorBufferFloat) {
      throw new MeasureError(ErrorNo.RUNTIME_DEVICE,
        `fragment kernels render to float textures, which needs EXT_color_buffer_float; this device (${renderer}) lacks it`);
    }
    const checkSize = (what, w, h) => {
      if (w <= 0 || h <= 0) this.instantiation(`${what} has an empty texture size ${w}x${h}`);
      if (w > limits.max_texture_size || h > limits.max_texture_size) {
        this.instantiation(`${what} needs a ${w}x${h} texture but this device's MAX_TEXTURE_SIZE is ${limits.max_texture_size} (use a wrapped layout, or filter configs with the device limits)`);
      }
    };
    artifact.inputs.forEach((layout, i) => {
      checkSize(`input ${i}`, layout.width, layout.height);
      if (layout.layers) {  // another kernel's quad layers: an array texture the runtime binds
        if (!(layout.layers >= 4 && layout.layers <= 32 && layout.layers % 4 === 0)) this.instantiation(`input ${i} has ${layout.layers} layers, not a multiple of 4 up to 32`);
        return;
      }
      if (layout.width * layout.height < shapeSize(packedShape(layout))) {
        this.instantiation(`input ${i} has ${shapeSize(packedShape(layout))} packed elements but its ${layout.width}x${layout.height} texture holds fewer`);
      }
    });
    const out = artifact.output;
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

  /** Compiles and links the program; COMPILE_DEVICE with the driver's log when it refuses. */
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
  /**
   * Textures of this kernel's own for `packed[i]` (each already packed into its layout's texel
   * order: layout.mjs pack), bound on units 0 …; INSTANTIATION when one has the wrong size.
   */
  createInputTextures(packed) {
    const gl = this.gl;
    return this.artifact.inputs.map((layout, i) => {
      if (layout.layers) this.instantiation(`input ${i} is another kernel's quad layers, which only a model package binds`);
      const ch = channels(layout);
      const expected = layout.width * layout.height * ch;
      if (packed[i].length !== expected) {
        this.instantiation(`input ${i} packs into ${packed[i].length} floats, not the ${expected} of its texture`);
      }
      gl.activeTexture(gl.TEXTURE0 + i);
      const texture = createTexture(gl, layout.width, layout.height, ch, packed[i]);
      this.objects.textures.push(texture);
      return texture;
    });
  }

  /**
   * Binds `textures` on units 0 … (sampler in<i> reads unit i; a relayout over render targets
   * has one sampler per target). The uniforms are set once, by createOutputs/useOutputTextures.
   */
  bindInputs(textures) {
    const gl = this.gl;
    textures.forEach((texture, i) => {
      gl.activeTexture(gl.TEXTURE0 + i);
      gl.bindTexture(arrayTextures.has(texture) ? gl.TEXTURE_2D_ARRAY : gl.TEXTURE_2D, texture);
    });
  }

  // ---- outputs ----
  /** The kernel's own outputs (render targets or the feedback buffer), vertex array, uniforms. */
  createOutputs(samplerCount = this.artifact.inputs.length) {
    if (this.feedback) {
      this.prepareFeedback();
    } else {
      this.prepareRenderTargets(null);
    }
    this.prepareProgram(samplerCount);
  }

  /**
   * Renders into `textures` (one per render target, each output.width × output.height with the
   * output's channels; the caller owns them) instead of textures of its own (the model runtime's
   * slots). `samplerCount`: the textures bindInputs will bind.
   */
  useOutputTextures(textures, samplerCount) {
    if (this.feedback) this.instantiation('a vertex-stage kernel cannot write into textures');
    const expected = this.artifact.output.quad_layers ? 1 : this.artifact.output.rows_per_item;
    if (textures.length !== expected) {
      this.instantiation(`the kernel writes ${this.artifact.output.rows_per_item} render targets${this.artifact.output.quad_layers ? ' as the layers of one array texture' : ''}, ${textures.length} textures given`);
    }
    this.prepareRenderTargets(textures);
    this.prepareProgram(samplerCount);
  }

  prepareProgram(samplerCount) {
    const gl = this.gl;
    const vertexArray = gl.createVertexArray();
    this.objects.vertexArrays.push(vertexArray);
    this.vertexArray = vertexArray;
    gl.bindVertexArray(vertexArray);
    gl.useProgram(this.objects.program);
    for (let i = 0; i < samplerCount; ++i) {
      const location = gl.getUniformLocation(this.objects.program, `in${i}`);
      if (location !== null) gl.uniform1i(location, i);
    }
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

  prepareRenderTargets(given) {
    const gl = this.gl;
    const out = this.artifact.output;
    const framebuffer = gl.createFramebuffer();
    this.objects.framebuffers.push(framebuffer);
    this.framebuffer = framebuffer;
    gl.bindFramebuffer(gl.FRAMEBUFFER, framebuffer);
    const drawBuffers = [];
    // The first unit past the inputs for the targets, so that binding them never disturbs the
    // inputs in0 … on units 0 ….
    gl.activeTexture(gl.TEXTURE0 + this.artifact.inputs.length);
    if (out.quad_layers) {  // draw buffer j renders into layer j of one array texture
      let texture = given?.[0];
      if (!texture) {
        texture = createArrayTexture(gl, out.width, out.height, out.rows_per_item);
        this.objects.textures.push(texture);
      }
      this.outputTextures.push(texture);
      for (let j = 0; j < out.rows_per_item; ++j) {
        gl.framebufferTextureLayer(gl.FRAMEBUFFER, gl.COLOR_ATTACHMENT0 + j, texture, 0, j);
        drawBuffers.push(gl.COLOR_ATTACHMENT0 + j);
      }
      gl.bindTexture(gl.TEXTURE_2D_ARRAY, null);
    }
    for (let j = 0; j < out.rows_per_item && !out.quad_layers; ++j) {
      let texture = given?.[j];
      if (!texture) {
        texture = createTexture(gl, out.width, out.height, out.channels === 1 ? 1 : 4);
        this.objects.textures.push(texture);
      }
      this.outputTextures.push(texture);
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
    this.setDrawState();
  }

  /** Viewport, no blending, depth, stencil, scissor or dither, all channels written. */
  setDrawState() {
    const gl = this.gl;
    const out = this.artifact.output;
    gl.viewport(0, 0, out.width, out.height);
    for (const cap of [gl.BLEND, gl.DEPTH_TEST, gl.STENCIL_TEST, gl.SCISSOR_TEST, gl.DITHER]) gl.disable(cap);
    gl.colorMask(true, true, true, true);
  }

  /**
   * Makes this kernel's program, framebuffer, vertex array and viewport current (the model
   * runtime draws many kernels on one context; the agent's trial never needs it).
   */
  activate() {
    const gl = this.gl;
    gl.useProgram(this.objects.program);
    gl.bindFramebuffer(gl.FRAMEBUFFER, this.framebuffer);
    gl.bindVertexArray(this.vertexArray);
    this.setDrawState();
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

  /** One draw (and a flush). */
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
  /**
   * Returns once the draws of this kernel issued so far are done: a blocking read of one
   * output element (a texel of target 0, or the first captured vec4), as the browser agent's
   * default wait in Chromium (browser-agent/webgl2.mjs defaultSync says why a polled fence is
   * not used there).
   */
  waitForDraws() {
    const texel = this.waitTexel || (this.waitTexel = new Float32Array(4));
    if (this.feedback) {
      this.readFeedback(texel);
      return;
    }
    const gl = this.gl;
    gl.bindFramebuffer(gl.FRAMEBUFFER, this.framebuffer);
    gl.bindBuffer(gl.PIXEL_PACK_BUFFER, null);
    gl.readBuffer(gl.COLOR_ATTACHMENT0);
    gl.readPixels(0, 0, 1, 1, gl.RGBA, gl.FLOAT, texel);
  }

  /** Reads `floats.length` floats from the start of the feedback buffer (waits for the draws). */
  readFeedback(floats) {
    const gl = this.gl;
    gl.bindBuffer(gl.COPY_READ_BUFFER, this.feedbackBuffer);
    gl.getBufferSubData(gl.COPY_READ_BUFFER, 0, floats);
    gl.bindBuffer(gl.COPY_READ_BUFFER, null);
    return floats;
  }

  /** The row-major output (OutputLayout unpack of the render targets or feedback buffer). */
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
    gl.bindFramebuffer(gl.FRAMEBUFFER, this.framebuffer);
    const targets = [];
    for (let j = 0; j < out.rows_per_item; ++j) {
      targets.push(readAttachment(gl, j, out.width, out.height, out.channels === 4 ? 4 : 1));
    }
    gl.readBuffer(gl.COLOR_ATTACHMENT0);
    this.checkGl('reading the render targets back');
    try {
      return unpack(out, targets);
    } catch (e) {
      this.instantiation(e.message);
    }
  }

  /**
   * Queues the read of every render target into one pixel-pack buffer, behind the draws issued
   * so far, and returns at once; after a fence (or any wait for those draws)
   * finishReadOutput() returns what readOutput() would. One buffer and one getBufferSubData
   * for all targets: a synchronous readPixels per target is one round trip to the GPU process
   * each, and each waits. TensorFlow.js's data() reads through a pixel-pack buffer likewise.
   * Transform-feedback kernels already write a buffer: nothing to queue, only the flush and the
   * result array below.
   *
   * Where readsRowMajor() holds, the reads interleave the targets' rows (PACK_ROW_LENGTH) so
   * that the buffer holds the row-major output itself, and finishReadOutput downloads it with
   * no unpacking. The array that finishReadOutput returns (downloaded or unpacked into) is
   * made here, after a flush that sends the draws and reads to the GPU process, and its pages
   * written once (host_array.mjs says why): that cost then overlaps the draws instead of
   * following them.
   */
  startReadOutput() {
    const gl = this.gl;
    const out = this.artifact.output;
    if (this.feedback) {
      // The feedback buffer is the kernel's output already; only the result array to make.
      this.makeReadResult();
      return;
    }
    const texels = out.width * out.height;
    if (!this.packBuffer) {
      this.packBuffer = gl.createBuffer();
      this.objects.buffers.push(this.packBuffer);
      gl.bindBuffer(gl.PIXEL_PACK_BUFFER, this.packBuffer);
      gl.bufferData(gl.PIXEL_PACK_BUFFER, texels * 16 * out.rows_per_item, gl.STREAM_READ);
    }
    this.packedRowMajor = this.readsRowMajor();
    gl.bindFramebuffer(gl.FRAMEBUFFER, this.framebuffer);
    gl.bindBuffer(gl.PIXEL_PACK_BUFFER, this.packBuffer);
    gl.pixelStorei(gl.PACK_ALIGNMENT, 4);
    // Texture row y of target j is output row y·rows_per_item + j: with rows of
    // width·rows_per_item texels in the buffer, target j starts at texel j·width.
    if (this.packedRowMajor) gl.pixelStorei(gl.PACK_ROW_LENGTH, out.width * out.rows_per_item);
    for (let j = 0; j < out.rows_per_item; ++j) {
      // RGBA/FLOAT: the read format EXT_color_buffer_float always allows (as readAttachment).
      gl.readBuffer(gl.COLOR_ATTACHMENT0 + j);
      gl.readPixels(0, 0, out.width, out.height, gl.RGBA, gl.FLOAT,
                    (this.packedRowMajor ? j * out.width : j * texels) * 16);
    }
    if (this.packedRowMajor) gl.pixelStorei(gl.PACK_ROW_LENGTH, 0);
    gl.bindBuffer(gl.PIXEL_PACK_BUFFER, null);
    gl.readBuffer(gl.COLOR_ATTACHMENT0);
    this.makeReadResult();
  }

  /**
   * Sends the work queued so far to the GPU process (gl.flush) and makes the array the next
   * finishReadOutput() returns, its pages written once while that work runs (host_array.mjs).
   */
  makeReadResult() {
    this.gl.flush();
    this.readResult = touchedFloat32Array(this.artifact.output.rows * this.artifact.output.cols);
  }

  /** The array makeReadResult() made, or null; each read takes it once: a new array a read. */
  takeReadResult() {
    const result = this.readResult || null;
    this.readResult = null;
    return result;
  }

  /**
   * Whether texture row y of render target j holds exactly output row y·rows_per_item + j:
   * RGBA targets one block row wide (width = cols / 4, as a 2d output layout is, or a flat one of
   * that width), no padded columns (cols a multiple of 4), no quad layers, no feedback. The read
   * then skips the unpacking, one copy of the whole output and a staging buffer of its size.
   * Measured (bench/web_vs_tfjs/probe_readback_phases.mjs, Chromium 156 on SwiftShader, AMD EPYC
   * Zen 5, 2026-11-29): about 1 ms of MobileNet-v2's 4.8 MB 16→96 layer's 22 ms read-back,
   * within the spread of its rounds; most of those 22 ms is allocating and first writing the
   * Float32Array returned. A method, so that a probe can compare both reads.
   */
  readsRowMajor() {
    const out = this.artifact.output;
    return !this.feedback && !out.quad_layers && out.channels === 4 && out.cols % 4 === 0 &&
           out.width === out.cols / 4 && out.height * out.rows_per_item >= out.rows;
  }

  /**
   * The row-major output of the reads startReadOutput() queued (for feedback, of the feedback
   * buffer), in the array startReadOutput() made. getBufferSubData blocks until those reads
   * (or draws) are done, so no other wait is needed before it.
   * `checkErrors: false` skips the getError after the read, a synchronous round trip to the
   * GPU process (0.1–0.3 ms on Chromium), for a caller that checks errors itself afterwards.
   */
  finishReadOutput({ checkErrors = true } = {}) {
    const gl = this.gl;
    const out = this.artifact.output;
    if (this.feedback) {
      // The captured floats go to a staging array kept between reads (unpack copies out of it),
      // the output into the array startReadOutput made.
      const floats = this.feedbackFloats();
      if (this.feedbackStaging?.length !== floats) this.feedbackStaging = new Float32Array(floats);
      this.readFeedback(this.feedbackStaging);
      if (checkErrors) this.checkGl('reading the feedback buffer back');
      try {
        return unpack(out, [this.feedbackStaging], this.takeReadResult());
      } catch (e) {
        this.instantiation(e.message);
      }
    }
    if (!this.packBuffer) throw new Error('finishReadOutput() without startReadOutput()');
    if (this.packedRowMajor) {
      // The buffer's first rows·cols floats are the output (rows of a last, partial block come
      // after them).
      const result = this.takeReadResult() || new Float32Array(out.rows * out.cols);
      gl.bindBuffer(gl.PIXEL_PACK_BUFFER, this.packBuffer);
      gl.getBufferSubData(gl.PIXEL_PACK_BUFFER, 0, result);
      gl.bindBuffer(gl.PIXEL_PACK_BUFFER, null);
      if (checkErrors) this.checkGl('reading the render targets back');
      return result;
    }
    const texels = out.width * out.height;
    // The staging array is kept between reads (unpack copies out of it): allocating and
    // zeroing hundreds of KiB each time was a quarter of the JavaScript side of a read-back.
    const floats = texels * 4 * out.rows_per_item;
    if (this.packStaging?.length !== floats) this.packStaging = new Float32Array(floats);
    const rgba = this.packStaging;
    gl.bindBuffer(gl.PIXEL_PACK_BUFFER, this.packBuffer);
    gl.getBufferSubData(gl.PIXEL_PACK_BUFFER, 0, rgba);
    gl.bindBuffer(gl.PIXEL_PACK_BUFFER, null);
    if (checkErrors) this.checkGl('reading the render targets back');
    const targets = [];
    for (let j = 0; j < out.rows_per_item; ++j) {
      targets.push(keepChannels(rgba.subarray(j * texels * 4, (j + 1) * texels * 4), texels,
                                out.channels === 4 ? 4 : 1));
    }
    try {
      return unpack(out, targets, this.takeReadResult());
    } catch (e) {
      this.instantiation(e.message);
    }
  }

  /** Deletes every object this kernel made (not textures given to useOutputTextures). */
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
    this.objects = { shaders: [], textures: [], framebuffers: [], vertexArrays: [], program: null,
                     buffers: [], feedback: null };
    this.packBuffer = null;
    this.packStaging = null;
    drainErrors(gl);
  }
}
