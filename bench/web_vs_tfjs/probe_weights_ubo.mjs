#!/usr/bin/env node
// probe_weights_ubo.mjs — would a webgl2 fragment kernel run faster on SwiftShader if it read its
// weights from a uniform buffer instead of a texture? For each tuned gles-frag artifact given
// (`webtune artifact` JSON, fragment stage), in the bench's headless Chromium (session.mjs), on
// the probe context (page.mjs glProbe), two programs are built:
//   texture  the artifact's shader as the tuner built it;
//   ubo      the same shader with in1 (the weights) replaced by a std140 uniform block of vec4s
//            holding the weight texture's texels in row-major order, and ld1 reading
//            w1[its texel index]: nothing else changes.
// Both draw into the artifact's render targets from the same seeded inputs. The outputs are
// compared (max_abs_diff, which should be 0: the arithmetic is the same), then each program is
// timed as bench.mjs times a row: fence (one draw, a blocking 1-texel read) and batched (16
// draws, each flushed, then that read; ms per draw). Median ms of 15 samples per round, 5
// rounds, the two programs alternating. Prints JSON.
//
// A weight texture of more texels than MAX_UNIFORM_BLOCK_SIZE / 16 is skipped, as are
// vertex-stage artifacts. This is a probe: no template has a uniform-buffer knob.
//
//   node bench/web_vs_tfjs/probe_weights_ubo.mjs ARTIFACT.json [...]
import { probeArtifacts } from './session.mjs';

await probeArtifacts('probe_weights_ubo.mjs ARTIFACT.json [...]', async (record) => {
  const { artifact } = record;
  const { gl, program, median } = window.bench.glProbe();
  const maxBlock = gl.getParameter(gl.MAX_UNIFORM_BLOCK_SIZE);
  const o = artifact.output;
  const res = { targets: `${o.rows_per_item} of ${o.width}x${o.height}`, max_uniform_block_bytes: maxBlock };
  if (artifact.output.quad_layers || !/layout\(location = 0\) out vec4/.test(artifact.source)) {
    res.skipped = 'not a fragment-stage kernel with vec4 render targets';
    return res;
  }
  const w = artifact.inputs[1];
  const weightTexels = w.width * w.height;
  if (weightTexels * 16 > maxBlock) {
    res.skipped = `${weightTexels} weight texels are more than one uniform block holds`;
    return res;
  }
  // A linear congruential generator: the same inputs for both programs.
  let seed = 12345;
  const rand = () => ((seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32) * 2 - 1;
  const textures = artifact.inputs.map((inp, i) => {
    const ch = inp.pack_axis < 0 ? 1 : 4;
    const data = new Float32Array(inp.width * inp.height * ch).map(rand);
    const t = gl.createTexture();
    gl.activeTexture(gl.TEXTURE0 + i);
    gl.bindTexture(gl.TEXTURE_2D, t);
    gl.texImage2D(gl.TEXTURE_2D, 0, ch === 1 ? gl.R32F : gl.RGBA32F, inp.width, inp.height, 0,
      ch === 1 ? gl.RED : gl.RGBA, gl.FLOAT, data);
    for (const p of [gl.TEXTURE_MIN_FILTER, gl.TEXTURE_MAG_FILTER]) gl.texParameteri(gl.TEXTURE_2D, p, gl.NEAREST);
    for (const p of [gl.TEXTURE_WRAP_S, gl.TEXTURE_WRAP_T]) gl.texParameteri(gl.TEXTURE_2D, p, gl.CLAMP_TO_EDGE);
    return { t, data };
  });
  const ubo = gl.createBuffer();
  gl.bindBuffer(gl.UNIFORM_BUFFER, ubo);
  gl.bufferData(gl.UNIFORM_BUFFER, textures[1].data, gl.STATIC_DRAW);
  gl.bindBufferBase(gl.UNIFORM_BUFFER, 0, ubo);

  const ld1 = /vec4 ld1\(int row, int col\) \{\n([\s\S]*?)\n\}/;
  const body = artifact.source.match(ld1)?.[1];
  if (!body) {
    res.skipped = 'no ld1(row, col) in the shader';
    return res;
  }
  // ld1's texel: `int i = …` (flat layout) or ivec2(col, row) (2d layout, width w.width).
  const index = /int i = /.test(body) ? `${body.match(/int i = [^;]*;/)[0]} return w1[i];`
    : `return w1[row * ${w.width} + col];`;
  const uboSource = artifact.source
    .replace(/uniform highp sampler2D in1;[^\n]*/, `layout(std140) uniform W1 { vec4 w1[${weightTexels}]; };`)
    .replace(ld1, `vec4 ld1(int row, int col) {\n  ${index}\n}`);
  const programs = { texture: program(artifact.source), ubo: program(uboSource) };
  for (const [name, p] of Object.entries(programs)) {
    if (!gl.getProgramParameter(p, gl.LINK_STATUS)) throw new Error(`${name}: ${gl.getProgramInfoLog(p)}`);
    gl.useProgram(p);
    artifact.inputs.forEach((_, i) => {
      const loc = gl.getUniformLocation(p, `in${i}`);
      if (loc) gl.uniform1i(loc, i);
    });
    const block = gl.getUniformBlockIndex(p, 'W1');
    if (block !== gl.INVALID_INDEX) gl.uniformBlockBinding(p, block, 0);
  }
  const fb = gl.createFramebuffer();
  gl.bindFramebuffer(gl.FRAMEBUFFER, fb);
  gl.activeTexture(gl.TEXTURE0 + artifact.inputs.length);
  for (let j = 0; j < o.rows_per_item; ++j) {
    const t = gl.createTexture();
    gl.bindTexture(gl.TEXTURE_2D, t);
    gl.texStorage2D(gl.TEXTURE_2D, 1, gl.RGBA32F, o.width, o.height);
    gl.framebufferTexture2D(gl.FRAMEBUFFER, gl.COLOR_ATTACHMENT0 + j, gl.TEXTURE_2D, t, 0);
  }
  gl.drawBuffers([...Array(o.rows_per_item).keys()].map((j) => gl.COLOR_ATTACHMENT0 + j));
  gl.viewport(0, 0, o.width, o.height);
  const texel = new Float32Array(4);
  const wait = () => { gl.readBuffer(gl.COLOR_ATTACHMENT0); gl.readPixels(0, 0, 1, 1, gl.RGBA, gl.FLOAT, texel); };
  const draw = () => { gl.drawArrays(gl.TRIANGLES, 0, 3); gl.flush(); };
  const readAll = () => [...Array(o.rows_per_item).keys()].map((j) => {
    const a = new Float32Array(o.width * o.height * 4);
    gl.readBuffer(gl.COLOR_ATTACHMENT0 + j);
    gl.readPixels(0, 0, o.width, o.height, gl.RGBA, gl.FLOAT, a);
    return a;
  });
  const outputs = {};
  for (const [name, p] of Object.entries(programs)) {
    gl.useProgram(p);
    draw();
    outputs[name] = readAll();
  }
  let diff = 0;
  let finite = 0;
  outputs.texture.forEach((a, j) => a.forEach((v, i) => {
    if (Number.isFinite(v)) ++finite;
    diff = Math.max(diff, Math.abs(v - outputs.ubo[j][i]));
  }));
  res.max_abs_diff = diff;
  res.finite_outputs = finite;
  if (gl.getError()) throw new Error(`GL error 0x${gl.getError().toString(16)}`);
  const times = { texture: { fence: [], batched: [] }, ubo: { fence: [], batched: [] } };
  for (let round = 0; round < 5; ++round) {
    for (const [name, p] of Object.entries(programs)) {
      gl.useProgram(p);
      for (let i = 0; i < 5; ++i) { draw(); wait(); }  // warm-up
      const fence = [];
      const batched = [];
      for (let i = 0; i < 15; ++i) {
        let b = performance.now();
        draw();
        wait();
        fence.push(performance.now() - b);
        b = performance.now();
        for (let k = 0; k < 16; ++k) draw();
        wait();
        batched.push((performance.now() - b) / 16);
      }
      times[name].fence.push(median(fence));
      times[name].batched.push(median(batched));
    }
  }
  for (const [name, t] of Object.entries(times)) {
    res[name] = {
      fence_ms: t.fence.map((v) => +v.toFixed(3)), batched_ms: t.batched.map((v) => +v.toFixed(3)),
      fence_median_ms: +median(t.fence).toFixed(3), batched_median_ms: +median(t.batched).toFixed(3),
    };
  }
  return res;
});
