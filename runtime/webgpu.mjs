// webgpu.mjs — the WebGPU kernel runner: runs the WGSL compute kernels of the webgpu templates
// (codegen/wgsl_emitter.cpp; KernelArtifact JSON, codegen/include/codegen/kernel_artifact.hpp)
// over storage buffers: inputs at bindings 0 and 1 (the epilogue's bias and residual at 3 and 4;
// row-major floats, which the kernel may view as vec4s), the output at binding 2, one dispatch of
// artifact.dispatch workgroups. Shared by the browser agent's executor (browser-agent/webgpu.mjs:
// measure) and the model runtime (model.mjs: one kernel step over the package's slot buffers).
//
// Errors are MeasureErrors (errors.mjs): WGSL the browser refuses (getCompilationInfo, or a
// validation error while building the pipeline) is COMPILE_DEVICE with its message; a lost
// device or a validation / out-of-memory error while running is RUNTIME_DEVICE; an artifact over
// this device's limits INSTANTIATION.

import { ErrorNo, MeasureError, refuseScratch } from './errors.mjs';

/**
 * An adapter and a device with the adapter's own compute limits (not the spec defaults, so that
 * configs up to what the device reports, e.g. SwiftShader's 32 KiB of workgroup storage, run):
 * {adapter, device, adapterInfo, features, limits (DeviceLimits' JSON shape)}.
 * `requestAdapter()` may be replaced (the agent's test hook). Rejects when the browser offers no
 * WebGPU or no adapter.
 */
export async function requestDevice(requestAdapter = () => navigator.gpu.requestAdapter({ powerPreference: 'high-performance' })) {
  if (typeof navigator === 'undefined' || !navigator.gpu) {
    // Chromium exposes it only in a secure context (headless: with --enable-unsafe-webgpu),
    // Firefox ESR on Linux not at all (dom.webgpu.enabled).
    throw new Error('navigator.gpu is undefined');
  }
  const adapter = await requestAdapter();
  if (!adapter) throw new Error('navigator.gpu.requestAdapter() returned null');
  const a = adapter.limits;
  const requiredLimits = {};
  for (const name of ['maxComputeInvocationsPerWorkgroup', 'maxComputeWorkgroupSizeX',
    'maxComputeWorkgroupSizeY', 'maxComputeWorkgroupSizeZ', 'maxComputeWorkgroupStorageSize',
    'maxComputeWorkgroupsPerDimension', 'maxStorageBufferBindingSize', 'maxBufferSize']) {
    if (typeof a[name] === 'number') requiredLimits[name] = a[name];
  }
  const device = await adapter.requestDevice({ requiredLimits });
  const adapterInfo = adapter.info || (adapter.requestAdapterInfo ? await adapter.requestAdapterInfo() : {});
  return { adapter, device, adapterInfo, features: [...adapter.features].sort(), limits: deviceLimits(device) };
}

/** DeviceLimits' JSON shape (codegen/config_space.hpp) of a GPUDevice. */
export function deviceLimits(device) {
  const d = device.limits;
  return {
    // Textures are unused by WGSL kernels.
    max_texture_size: d.maxTextureDimension2D,
    max_draw_buffers: d.maxColorAttachments,
    max_workgroup_invocations: d.maxComputeInvocationsPerWorkgroup,
    max_workgroup_size: [d.maxComputeWorkgroupSizeX, d.maxComputeWorkgroupSizeY, d.maxComputeWorkgroupSizeZ],
    max_shared_memory_bytes: d.maxComputeWorkgroupStorageSize,
  };
}

/** A storage buffer of at least `bytes` bytes, rounded up to 16 (an array<vec4<f32>> view needs whole vec4s). */
export function createBuffer(device, bytes, usage) {
  return device.createBuffer({ size: Math.max(16, Math.ceil(bytes / 16) * 16), usage });
}

/**
 * Runs `fn` inside validation and out-of-memory error scopes of `device`; a captured error, or
 * an exception of fn, becomes a MeasureError `errorNo` saying `what` (a MeasureError thrown by
 * fn passes unchanged). `checkLost(what)` runs after the scopes (throws when the device is gone).
 */
export async function scoped(device, what, errorNo, fn, checkLost = () => {}) {
  device.pushErrorScope('out-of-memory');
  device.pushErrorScope('validation');
  let value;
  let thrown = null;
  try {
    value = await fn();
  } catch (e) {
    thrown = e;
  }
  const validation = await device.popErrorScope();
  const memory = await device.popErrorScope();
  if (thrown instanceof MeasureError) throw thrown;
  checkLost(what);
  const error = validation || memory;
  if (error) throw new MeasureError(errorNo, `${error.constructor?.name || 'GPUError'} while ${what}: ${error.message}`);
  if (thrown) throw new MeasureError(errorNo, `${thrown.name || 'Error'} while ${what}: ${thrown.message}`);
  return value;
}

/**
 * One WGSL kernel on `device`; `checkLost(what)` throws when the owner saw the device go. Use:
 * validate(limits) → await compile() → bind(inputBuffers, outputBuffer) → encode(pass) per run.
 */
export class GPUKernel {
  constructor(device, artifact, checkLost = () => {}) {
    this.device = device;
    this.artifact = artifact;
    this.checkLost = checkLost;
  }

  instantiation(message) {
    throw new MeasureError(ErrorNo.INSTANTIATION, message);
  }

  /** Checks dispatch, workgroup and workgroup memory against `limits` (deviceLimits()). */
  validate(limits) {
    const { artifact } = this;
    const d = this.device.limits;
    if (!artifact || typeof artifact.source !== 'string') this.instantiation('the artifact has no source');
    if (artifact.target !== 'webgpu') this.instantiation(`WebGPU runs webgpu (WGSL) kernels, not '${artifact.target}'`);
    refuseScratch(artifact, 'WebGPU');
    const [gx, gy, gz] = artifact.dispatch || [1, 1, 1];
    for (const g of [gx, gy, gz]) {
      if (!(g >= 1) || g > d.maxComputeWorkgroupsPerDimension) {
        this.instantiation(`dispatch [${artifact.dispatch}] is outside 1..${d.maxComputeWorkgroupsPerDimension} workgroups per dimension`);
      }
    }
    const [wx, wy, wz] = artifact.workgroup || [1, 1, 1];
    if (wx * wy * wz > limits.max_workgroup_invocations || wx > limits.max_workgroup_size[0] ||
        wy > limits.max_workgroup_size[1] || wz > limits.max_workgroup_size[2]) {
      this.instantiation(`workgroup [${artifact.workgroup}] exceeds this device's limits (${limits.max_workgroup_invocations} invocations, size [${limits.max_workgroup_size}])`);
    }
    if ((artifact.shared_memory_bytes || 0) > limits.max_shared_memory_bytes) {
      this.instantiation(`the kernel declares ${artifact.shared_memory_bytes} bytes of workgroup memory, this device allows ${limits.max_shared_memory_bytes}`);
    }
  }

  /** Compiles the module and builds the pipeline; COMPILE_DEVICE with the browser's message. */
  async compile() {
    const device = this.device;
    device.pushErrorScope('validation');
    const module = device.createShaderModule({ code: this.artifact.source });
    const info = await module.getCompilationInfo();
    const scopeError = await device.popErrorScope();
    this.checkLost('compiling the kernel');
    const errors = info.messages.filter((m) => m.type === 'error');
    if (errors.length || scopeError) {
      const text = errors.map((m) => `${m.lineNum}:${m.linePos}: ${m.message}`).join('; ');
      throw new MeasureError(ErrorNo.COMPILE_DEVICE,
        `WGSL shader failed to compile: ${text || scopeError.message}`);
    }
    // Pipeline creation validates the entry point, bindings and workgroup limits.
    device.pushErrorScope('validation');
    let pipelineError = null;
    try {
      this.pipeline = await device.createComputePipelineAsync({
        layout: 'auto', compute: { module, entryPoint: 'main' },
      });
    } catch (e) {
      pipelineError = e;
    }
    const scoped = await device.popErrorScope();
    this.checkLost('building the compute pipeline');
    if (pipelineError || scoped) {
      throw new MeasureError(ErrorNo.COMPILE_DEVICE,
        `the compute pipeline failed to build: ${(pipelineError || scoped).message}`);
    }
  }

  /**
   * The bind group: `inputs[i]` (GPUBuffers, binding order) at binding i < 2 ? i : i + 1, the
   * output at binding 2 (codegen/include/codegen/kernel_artifact.hpp). Call inside an error scope.
   */
  bind(inputs, output) {
    this.bindGroup = this.device.createBindGroup({
      layout: this.pipeline.getBindGroupLayout(0),
      entries: [
        ...inputs.map((buffer, i) => ({ binding: i < 2 ? i : i + 1, resource: { buffer } })),
        { binding: 2, resource: { buffer: output } },
      ],
    });
    return this.bindGroup;
  }

  /** Records `count` dispatches into `pass` (a compute pass encoder). */
  encode(pass, count = 1) {
    const [gx, gy, gz] = this.artifact.dispatch;
    pass.setPipeline(this.pipeline);
    pass.setBindGroup(0, this.bindGroup);
    for (let i = 0; i < count; ++i) pass.dispatchWorkgroups(gx, gy, gz);
  }
}

/**
 * Copies `floats` floats of `source` (a buffer with COPY_SRC) into `staging` (MAP_READ |
 * COPY_DST, at least as large), submits, maps it and returns a copy. `encoder` may carry work
 * recorded before the copy (it is finished and submitted here).
 */
export async function readBuffer(device, source, staging, floats, encoder = device.createCommandEncoder()) {
  encoder.copyBufferToBuffer(source, 0, staging, 0, floats * 4);
  device.queue.submit([encoder.finish()]);
  await staging.mapAsync(GPUMapMode.READ);
  const all = new Float32Array(staging.getMappedRange().slice(0));
  staging.unmap();
  return all.subarray(0, floats);
}
