#!/usr/bin/env node
// probe_readback.mjs — what a WebGL2 read-back of a multi-target output costs in the bench's
// headless Chromium (session.mjs), per way of reading, on synthetic outputs shaped as tuned
// kernels' are (PW9: 8 targets of 49×8; PW1: 4 of 3136×4; DW10: 8 of 13×120, RGBA32F). Each
// sample is one MRT draw, then:
//   fence           a blocking 1-texel read (the executor's "readpixels" wait), no read-back;
//   mrt_pbo         every target read into one pixel-pack buffer, the 1-texel wait, then
//                   getBufferSubData (the executor's read-back before 2026-11-28 13:00 UTC);
//   mrt_pbo_nowait  the same without the 1-texel wait: getBufferSubData blocks until the
//                   reads are done (the executor's read-back since);
//   gather_pbo/sync a second draw gathers the targets into one flat texture, then one read
//                   (TensorFlow.js's decode pass does the like); tried, slower: the draw costs
//                   more than the reads it saves.
// Prints JSON, median ms of 20 samples per row (last of three rounds); gather_bad counts texels
// the gather got wrong (it should be 0).
//
//   node bench/web_vs_tfjs/probe_readback.mjs
import { openSession } from './session.mjs';
const s = await openSession();
try {
  const r = await s.page.evaluate(async () => {
    const { gl, program: mk, median: med } = window.bench.glProbe();
    const out = {};
    for (const [W, H, T] of [[49, 8, 8], [3136, 4, 4], [13, 120, 8]]) {
      // T targets of W x H, written by one MRT draw
      let outs = ''; let body = '';
      for (let j = 0; j < T; ++j) { outs += `layout(location=${j}) out vec4 o${j};\n`; body += `o${j}=vec4(gl_FragCoord.xy,${j}.0,1.0);\n`; }
      const pw = mk(`#version 300 es\nprecision highp float;\n${outs}void main(){${body}}`);
      const texs = []; const fb = gl.createFramebuffer(); gl.bindFramebuffer(gl.FRAMEBUFFER, fb);
      for (let j = 0; j < T; ++j) { const t = gl.createTexture(); gl.bindTexture(gl.TEXTURE_2D, t); gl.texStorage2D(gl.TEXTURE_2D, 1, gl.RGBA32F, W, H); gl.texParameteri(gl.TEXTURE_2D, gl.TEXTURE_MIN_FILTER, gl.NEAREST); gl.texParameteri(gl.TEXTURE_2D, gl.TEXTURE_MAG_FILTER, gl.NEAREST); gl.framebufferTexture2D(gl.FRAMEBUFFER, gl.COLOR_ATTACHMENT0 + j, gl.TEXTURE_2D, t, 0); texs.push(t); }
      gl.drawBuffers(texs.map((_, j) => gl.COLOR_ATTACHMENT0 + j));
      const texels = W * H;
      const pbo = gl.createBuffer(); gl.bindBuffer(gl.PIXEL_PACK_BUFFER, pbo); gl.bufferData(gl.PIXEL_PACK_BUFFER, texels * 16 * T, gl.STREAM_READ); gl.bindBuffer(gl.PIXEL_PACK_BUFFER, null);
      const staging = new Float32Array(texels * 4 * T);
      const one = new Float32Array(4);
      // packed: one texture of Wp x Hp holding all T*texels texels, written by a gather draw
      const Wp = Math.min(1024, texels * T); const Hp = Math.ceil(texels * T / Wp);
      const pt = gl.createTexture(); gl.bindTexture(gl.TEXTURE_2D, pt); gl.texStorage2D(gl.TEXTURE_2D, 1, gl.RGBA32F, Wp, Hp);
      const pfb = gl.createFramebuffer(); gl.bindFramebuffer(gl.FRAMEBUFFER, pfb); gl.framebufferTexture2D(gl.FRAMEBUFFER, gl.COLOR_ATTACHMENT0, gl.TEXTURE_2D, pt, 0);
      let samplers = ''; let chain = '';
      for (let j = 0; j < T; ++j) { samplers += `uniform highp sampler2D s${j};\n`; chain += `${j ? 'else ' : ''}if (j == ${j}) v = texelFetch(s${j}, p, 0);\n`; }
      const pg = mk(`#version 300 es\nprecision highp float;precision highp int;\n${samplers}out vec4 o;\nvoid main(){ int i = int(gl_FragCoord.y) * ${Wp} + int(gl_FragCoord.x); int j = i / ${texels}; int t = i - j * ${texels}; ivec2 p = ivec2(t % ${W}, t / ${W}); vec4 v = vec4(0); ${chain} o = v; }`);
      gl.useProgram(pg); for (let j = 0; j < T; ++j) { gl.uniform1i(gl.getUniformLocation(pg, `s${j}`), j); }
      const ppbo = gl.createBuffer(); gl.bindBuffer(gl.PIXEL_PACK_BUFFER, ppbo); gl.bufferData(gl.PIXEL_PACK_BUFFER, Wp * Hp * 16, gl.STREAM_READ); gl.bindBuffer(gl.PIXEL_PACK_BUFFER, null);
      const dst = new Float32Array(texels * 4 * T);
      const draw = () => { gl.bindFramebuffer(gl.FRAMEBUFFER, fb); gl.useProgram(pw); gl.viewport(0, 0, W, H); gl.drawArrays(gl.TRIANGLES, 0, 3); };
      const modes = {
        fence: () => { draw(); gl.readBuffer(gl.COLOR_ATTACHMENT0); gl.readPixels(0, 0, 1, 1, gl.RGBA, gl.FLOAT, one); },
        mrt_pbo: () => { draw(); gl.bindBuffer(gl.PIXEL_PACK_BUFFER, pbo); for (let j = 0; j < T; ++j) { gl.readBuffer(gl.COLOR_ATTACHMENT0 + j); gl.readPixels(0, 0, W, H, gl.RGBA, gl.FLOAT, j * texels * 16); } gl.bindBuffer(gl.PIXEL_PACK_BUFFER, null); gl.readBuffer(gl.COLOR_ATTACHMENT0); gl.readPixels(0, 0, 1, 1, gl.RGBA, gl.FLOAT, one); gl.bindBuffer(gl.PIXEL_PACK_BUFFER, pbo); gl.getBufferSubData(gl.PIXEL_PACK_BUFFER, 0, staging); gl.bindBuffer(gl.PIXEL_PACK_BUFFER, null); },
        mrt_pbo_nowait: () => { draw(); gl.bindBuffer(gl.PIXEL_PACK_BUFFER, pbo); for (let j = 0; j < T; ++j) { gl.readBuffer(gl.COLOR_ATTACHMENT0 + j); gl.readPixels(0, 0, W, H, gl.RGBA, gl.FLOAT, j * texels * 16); } gl.readBuffer(gl.COLOR_ATTACHMENT0); gl.getBufferSubData(gl.PIXEL_PACK_BUFFER, 0, staging); gl.bindBuffer(gl.PIXEL_PACK_BUFFER, null); },
        gather_pbo: () => { draw(); gl.bindFramebuffer(gl.FRAMEBUFFER, pfb); gl.useProgram(pg); for (let j = 0; j < T; ++j) { gl.activeTexture(gl.TEXTURE0 + j); gl.bindTexture(gl.TEXTURE_2D, texs[j]); } gl.viewport(0, 0, Wp, Hp); gl.drawArrays(gl.TRIANGLES, 0, 3); gl.bindBuffer(gl.PIXEL_PACK_BUFFER, ppbo); gl.readPixels(0, 0, Wp, Hp, gl.RGBA, gl.FLOAT, 0); gl.bindBuffer(gl.PIXEL_PACK_BUFFER, null); gl.readPixels(0, 0, 1, 1, gl.RGBA, gl.FLOAT, one); gl.bindBuffer(gl.PIXEL_PACK_BUFFER, ppbo); gl.getBufferSubData(gl.PIXEL_PACK_BUFFER, 0, dst, 0, dst.length); gl.bindBuffer(gl.PIXEL_PACK_BUFFER, null); },
        gather_sync: () => { draw(); gl.bindFramebuffer(gl.FRAMEBUFFER, pfb); gl.useProgram(pg); for (let j = 0; j < T; ++j) { gl.activeTexture(gl.TEXTURE0 + j); gl.bindTexture(gl.TEXTURE_2D, texs[j]); } gl.viewport(0, 0, Wp, Hp); gl.drawArrays(gl.TRIANGLES, 0, 3); if (Wp * Hp * 4 === dst.length) gl.readPixels(0, 0, Wp, Hp, gl.RGBA, gl.FLOAT, dst); else { const tmp = new Float32Array(Wp * Hp * 4); gl.readPixels(0, 0, Wp, Hp, gl.RGBA, gl.FLOAT, tmp); } },
      };
      for (let round = 0; round < 3; ++round) for (const [m, f] of Object.entries(modes)) {
        const t = [];
        for (let i = 0; i < 20; ++i) { const b = performance.now(); f(); t.push(performance.now() - b); }
        const e = gl.getError();
        out[`${W}x${H}x${T} ${m}`] = med(t).toFixed(3) + (e ? ` err${e}` : '');
      }
      // check gather correctness
      modes.gather_pbo();
      let bad = 0; for (let i = 0; i < T * texels; ++i) { const j = Math.floor(i / texels), t = i % texels; if (dst[4 * i] !== (t % W) + 0.5 || dst[4 * i + 2] !== j) ++bad; }
      out[`${W}x${H}x${T} gather_bad`] = bad;
    }
    return out;
  });
  console.log(JSON.stringify(r, null, 1));
} finally { await s.close(); }
