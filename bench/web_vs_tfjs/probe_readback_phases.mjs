#!/usr/bin/env node
// probe_readback_phases.mjs — what a webgl2 read-back sample of a real tuned kernel costs, read
// in other ways than the executor's. For each artifact given (`webtune artifact` JSON), in the
// bench's headless Chromium (session.mjs), through the browser agent's executor exactly as
// bench.mjs times it (bench.runWebtune, 15 samples of one draw each), the read swapped by
// wrapping GLKernel.startReadOutput / finishReadOutput (runtime/webgl2.mjs):
//   fence      fence-only: a blocking 1-texel read after the draw, nothing read back;
//   current    the executor's read-back: every render target's readPixels queued into one
//              pixel-pack buffer, then one getBufferSubData (which waits), then the unpacking;
//   unpacked   the executor's read-back as it was before 2026-11-29: every target at its own
//              offset, then unpacked to the logical layout (`current` reads a one-block-row-wide
//              output straight into row-major order: GLKernel.readsRowMajor);
//   readsN     every target queued and downloaded as `unpacked` does, but not unpacked (what the
//              unpacking costs);
//   readsN_fresh  readsN into a new Float32Array each time, as a read that returns its output
//              must allocate (what allocating, and collecting, that array costs);
//   reads1     the same with target 0 only queued and downloaded (what one target would cost);
//   sync1      target 0 only, one synchronous readPixels into client memory, no pixel-pack buffer;
//   blit       every target blitted into one texture N times as tall, then one queued read of it
//              and one getBufferSubData;
//   blit_sync  the same blits, then one synchronous readPixels of that texture.
//   late_alloc `current` as it was until 2026-11-29 13:40 UTC: the same reads queued, no
//              flush, and the Float32Array the read returns made after the wait (`current` now
//              flushes and makes it before the wait, its pages written once, and unpacks into
//              it where the output is not read row-major: runtime/host_array.mjs). For a
//              transform-feedback kernel the staging array of the captured floats stays the one
//              kept between reads, which it was not before.
// The ways that read less than the whole output return the output of the first full read (the
// executor checks its first batch against the reference samples); blit_bad_floats counts the
// floats where the blitted texture differs from the executor's own read (it should be 0).
// Prints JSON: per artifact and way, the median ms of each round, with the read's issue and
// download phases.
//
//   [PROBE_WAYS=fence,current,...] node bench/web_vs_tfjs/probe_readback_phases.mjs ARTIFACT.json [...]
import { probeArtifacts } from './session.mjs';

await probeArtifacts('[PROBE_WAYS=fence,current,...] probe_readback_phases.mjs ARTIFACT.json [...]', async (record, options) => {
  const { GLKernel } = await import('/runtime/webgl2.mjs');
  const med = (v) => { const a = [...v].sort((x, y) => x - y); return a.length ? a[a.length >> 1] : null; };
  const start = GLKernel.prototype.startReadOutput;
  const finish = GLKernel.prototype.finishReadOutput;
  const rowMajor = GLKernel.prototype.readsRowMajor;
  const o = record.artifact.output;
  const N = o.rows_per_item;
  const texels = o.width * o.height;
  let cached = null;  // the correct output, from the first full read
  let way = 'current';
  let reads = N;
  const phases = { issue: [], download: [] };
  const gather = new WeakMap();  // kernel -> {fb, pbo}
  let gatherBad = null;
  let lateChecked = null;  // floats where late_alloc's first read differs from `current`'s
  GLKernel.prototype.startReadOutput = function () {
    const gl = this.gl;
    const b = performance.now();
    if (way === 'current' || way === 'unpacked' || !cached) {
      start.call(this);
    } else if (way === 'late_alloc') {
      // startReadOutput as it was: the same reads queued, no flush, no array made; nothing for
      // a feedback kernel.
      if (!this.feedback) {
        if (!this.packBuffer) {
          this.packBuffer = gl.createBuffer();
          this.objects.buffers.push(this.packBuffer);
          gl.bindBuffer(gl.PIXEL_PACK_BUFFER, this.packBuffer);
          gl.bufferData(gl.PIXEL_PACK_BUFFER, texels * 16 * N, gl.STREAM_READ);
        }
        this.packedRowMajor = this.readsRowMajor();
        gl.bindFramebuffer(gl.FRAMEBUFFER, this.framebuffer);
        gl.bindBuffer(gl.PIXEL_PACK_BUFFER, this.packBuffer);
        gl.pixelStorei(gl.PACK_ALIGNMENT, 4);
        if (this.packedRowMajor) gl.pixelStorei(gl.PACK_ROW_LENGTH, o.width * N);
        for (let j = 0; j < N; ++j) {
          gl.readBuffer(gl.COLOR_ATTACHMENT0 + j);
          gl.readPixels(0, 0, o.width, o.height, gl.RGBA, gl.FLOAT, (this.packedRowMajor ? j * o.width : j * texels) * 16);
        }
        if (this.packedRowMajor) gl.pixelStorei(gl.PACK_ROW_LENGTH, 0);
        gl.bindBuffer(gl.PIXEL_PACK_BUFFER, null);
        gl.readBuffer(gl.COLOR_ATTACHMENT0);
      }
      this.readResult = null;
    } else if (way === 'reads' || way === 'reads_fresh') {
      // the first `reads` targets only, as the executor queues them
      if (!this.packBuffer) start.call(this);
      else {
        gl.bindFramebuffer(gl.FRAMEBUFFER, this.framebuffer);
        gl.bindBuffer(gl.PIXEL_PACK_BUFFER, this.packBuffer);
        for (let j = 0; j < reads; ++j) {
          gl.readBuffer(gl.COLOR_ATTACHMENT0 + j);
          gl.readPixels(0, 0, o.width, o.height, gl.RGBA, gl.FLOAT, j * texels * 16);
        }
        gl.bindBuffer(gl.PIXEL_PACK_BUFFER, null);
        gl.readBuffer(gl.COLOR_ATTACHMENT0);
      }
    } else if (way === 'sync1') {
      // nothing queued: finish reads target 0 synchronously into client memory
    } else if (way === 'blit' || way === 'blit_sync') {
      // every target blitted into one texture N times as tall, then one read of it
      let g = gather.get(this);
      if (!g) {
        const t = gl.createTexture();
        gl.bindTexture(gl.TEXTURE_2D, t);
        gl.texStorage2D(gl.TEXTURE_2D, 1, gl.RGBA32F, o.width, o.height * N);
        gl.bindTexture(gl.TEXTURE_2D, null);
        const fb = gl.createFramebuffer();
        gl.bindFramebuffer(gl.FRAMEBUFFER, fb);
        gl.framebufferTexture2D(gl.FRAMEBUFFER, gl.COLOR_ATTACHMENT0, gl.TEXTURE_2D, t, 0);
        const pbo = gl.createBuffer();
        gl.bindBuffer(gl.PIXEL_PACK_BUFFER, pbo);
        gl.bufferData(gl.PIXEL_PACK_BUFFER, texels * 16 * N, gl.STREAM_READ);
        gl.bindBuffer(gl.PIXEL_PACK_BUFFER, null);
        g = { fb, pbo, t };
        gather.set(this, g);
      }
      gl.bindFramebuffer(gl.READ_FRAMEBUFFER, this.framebuffer);
      gl.bindFramebuffer(gl.DRAW_FRAMEBUFFER, g.fb);
      for (let j = 0; j < N; ++j) {
        gl.readBuffer(gl.COLOR_ATTACHMENT0 + j);
        gl.blitFramebuffer(0, 0, o.width, o.height, 0, j * o.height, o.width, (j + 1) * o.height, gl.COLOR_BUFFER_BIT, gl.NEAREST);
      }
      gl.bindFramebuffer(gl.READ_FRAMEBUFFER, g.fb);
      gl.readBuffer(gl.COLOR_ATTACHMENT0);
      if (way === 'blit') {
        gl.bindBuffer(gl.PIXEL_PACK_BUFFER, g.pbo);
        gl.readPixels(0, 0, o.width, o.height * N, gl.RGBA, gl.FLOAT, 0);
        gl.bindBuffer(gl.PIXEL_PACK_BUFFER, null);
      }
      gl.bindFramebuffer(gl.FRAMEBUFFER, this.framebuffer);
      gl.readBuffer(gl.COLOR_ATTACHMENT0);
    }
    phases.issue.push(performance.now() - b);
  };
  GLKernel.prototype.finishReadOutput = function (opts) {
    const gl = this.gl;
    const b = performance.now();
    let r;
    if (way === 'current' || way === 'unpacked' || !cached) {
      r = finish.call(this, opts);
      if (!cached) cached = r;
    } else if (way === 'late_alloc') {
      r = finish.call(this, opts);
      if (lateChecked === null) {
        lateChecked = 0;
        for (let i = 0; i < r.length; ++i) if (r[i] !== cached[i]) ++lateChecked;
      }
    } else if (way === 'reads' || way === 'reads_fresh') {
      const a = way === 'reads_fresh' ? new Float32Array(texels * 4 * N)
        : this.packStaging || (this.packStaging = new Float32Array(texels * 4 * N));
      gl.bindBuffer(gl.PIXEL_PACK_BUFFER, this.packBuffer);
      gl.getBufferSubData(gl.PIXEL_PACK_BUFFER, 0, a, 0, reads * texels * 4);
      gl.bindBuffer(gl.PIXEL_PACK_BUFFER, null);
      r = cached;
    } else if (way === 'sync1') {
      const a = this.packStaging || (this.packStaging = new Float32Array(texels * 4 * N));
      gl.bindFramebuffer(gl.FRAMEBUFFER, this.framebuffer);
      gl.readBuffer(gl.COLOR_ATTACHMENT0);
      gl.readPixels(0, 0, o.width, o.height, gl.RGBA, gl.FLOAT, a.subarray(0, texels * 4));
      r = cached;
    } else {
      const g = gather.get(this);
      const a = g.staging || (g.staging = new Float32Array(texels * 4 * N));
      if (way === 'blit') {
        gl.bindBuffer(gl.PIXEL_PACK_BUFFER, g.pbo);
        gl.getBufferSubData(gl.PIXEL_PACK_BUFFER, 0, a);
        gl.bindBuffer(gl.PIXEL_PACK_BUFFER, null);
      } else {
        gl.bindFramebuffer(gl.FRAMEBUFFER, g.fb);
        gl.readBuffer(gl.COLOR_ATTACHMENT0);
        gl.readPixels(0, 0, o.width, o.height * N, gl.RGBA, gl.FLOAT, a);
        gl.bindFramebuffer(gl.FRAMEBUFFER, this.framebuffer);
      }
      if (gatherBad === null) {
        // the gathered texels against the executor's own read of the same targets
        start.call(this);
        finish.call(this, {});
        const ref = this.packStaging;
        gatherBad = 0;
        for (let i = 0; i < a.length; ++i) if (a[i] !== ref[i] && !(Number.isNaN(a[i]) && Number.isNaN(ref[i]))) ++gatherBad;
      }
      r = cached;
    }
    phases.download.push(performance.now() - b);
    return r;
  };
  try {
    const ROUNDS = 5;
    const res = { targets: `${N} of ${o.width}x${o.height}` };
    // PROBE_WAYS=fence,current,... picks some of these (all by default).
    const allWays = [['fence', 'current', N], ['current', 'current', N], ['unpacked', 'unpacked', N],
      ['readsN', 'reads', N], ['readsN_fresh', 'reads_fresh', N], ['reads1', 'reads', 1],
      ['sync1', 'sync1', 1], ['blit', 'blit', N], ['blit_sync', 'blit_sync', N],
      ['late_alloc', 'late_alloc', N]];
    const picked = options.ways;
    const ways = picked ? allWays.filter(([name]) => picked.includes(name)) : allWays;
    const acc = {};
    for (let round = 0; round < ROUNDS; ++round) {
      for (const [name, w, k] of ways) {
        way = w; reads = k;
        GLKernel.prototype.readsRowMajor = w === 'unpacked' ? () => false : rowMajor;
        phases.issue.length = 0; phases.download.length = 0;
        const m = await window.bench.runWebtune(record, { mode: name === 'fence' ? 'fence' : 'readback', repeat: 15 });
        (acc[name] ||= []).push([m.median_s * 1e3, med(phases.issue), med(phases.download)]);
      }
    }
    for (const [name, v] of Object.entries(acc)) {
      res[name] = v.map(([t, i, d]) => `${t.toFixed(3)}` + (i === null ? '' : ` (issue ${i.toFixed(3)}, download ${d.toFixed(3)})`)).join(' | ');
    }
    res.blit_bad_floats = gatherBad;
    res.late_alloc_bad_floats = lateChecked;

    return res;
  } finally {
    GLKernel.prototype.startReadOutput = start;
    GLKernel.prototype.finishReadOutput = finish;
    GLKernel.prototype.readsRowMajor = rowMajor;
  }
}, { ways: process.env.PROBE_WAYS ? process.env.PROBE_WAYS.split(',') : null });
