// The device class a browser executor measures on, and the tracker key that names it.
//
// Results of one tuning job must all come from one class of device (docs/protocol.md, "Device
// classes"): a Firefox tab and a Chromium tab on the same machine both run wasm with threads,
// but not at the same speed. So a key is
//
//   <family>:<device>:<browser>-<major>:<os>[-<arch>]          e.g. webgl2:nvidia-geforce-rtx-4090:chromium-156:windows
//   ... :<N>t  when the device is the CPU (wasm; SwiftShader, llvmpipe)
//                                                               e.g. wasm:threads:firefox-153:linux-x86_64:8t
//
// Every part is lower case from [a-z0-9._-]. The first two parts are what keys were before
// (`webgl2:swiftshader`, `wasm:threads`), so prefixes keep matching. Browsers do not tell pages
// the CPU model; the thread count (navigator.hardwareConcurrency) stands in for it.

/** Lower case; runs of anything outside [a-z0-9.] become one '-'; never empty. */
export function slug(text) {
  const s = String(text ?? '').toLowerCase().replace(/[^a-z0-9.]+/g, '-').replace(/^-+|-+$/g, '');
  return s || 'unknown';
}

/**
 * Browser, OS and threads of the environment `env` (defaults to the page's navigator; in node,
 * the node runtime stands in for the browser): {browser: 'firefox-153', os: 'linux-x86_64',
 * threads: 8}.
 */
export function platformInfo(env = globalThis) {
  const nav = env.navigator;
  const ua = (nav && nav.userAgent) || '';
  if (!ua && env.process && env.process.versions && env.process.versions.node) {
    const p = env.process;
    return {
      browser: `node-${p.versions.node.split('.')[0]}`,
      os: `${slug(p.platform)}-${slug(p.arch)}`,
      threads: (nav && nav.hardwareConcurrency) || 0,
    };
  }
  let browser = 'unknown';
  const brands = (nav && nav.userAgentData && nav.userAgentData.brands) || [];
  const brand = (name) => brands.find((b) => b.brand === name);
  let m;
  if ((m = /Firefox\/(\d+)/.exec(ua))) browser = `firefox-${m[1]}`;
  else if ((m = /Edg\/(\d+)/.exec(ua))) browser = `edge-${m[1]}`;
  else if (brand('Google Chrome')) browser = `chrome-${brand('Google Chrome').version}`;
  else if ((m = /Chrom(?:e|ium)\/(\d+)/.exec(ua))) browser = `chromium-${m[1]}`;
  else if ((m = /Version\/(\d+).*Safari/.exec(ua))) browser = `safari-${m[1]}`;
  let os = 'unknown';
  if (/Android/.test(ua)) os = 'android';
  else if (/iPhone|iPad/.test(ua)) os = 'ios';
  else if (/Windows/.test(ua)) os = 'windows';
  else if (/Mac OS X|Macintosh/.test(ua)) os = 'macos';
  else if (/CrOS/.test(ua)) os = 'chromeos';
  else if (/Linux/.test(ua)) os = 'linux';
  const arch = /x86_64|Win64|x64|amd64/i.test(ua) ? 'x86_64' : /aarch64|arm64/i.test(ua) ? 'arm64' : '';
  if (arch && os !== 'android' && os !== 'ios') os += `-${arch}`;
  return { browser, os, threads: (nav && nav.hardwareConcurrency) || 0 };
}

/** True when `device` (a renderer or adapter short name) is a CPU rasterizer. */
export function isSoftwareDevice(device) {
  return /swiftshader|llvmpipe|softpipe|lavapipe/.test(device);
}

/**
 * The key of `family`:`device` in this environment (see the file comment). `cpu` forces the
 * thread count into the key (wasm runs on the CPU whatever its "device" part says).
 */
export function deviceClassKey(family, device, { cpu = false, env = globalThis } = {}) {
  const p = platformInfo(env);
  let key = `${family}:${device}:${slug(p.browser)}:${slug(p.os).replace('x86-64', 'x86_64')}`;
  if (cpu || isSoftwareDevice(device)) key += `:${p.threads}t`;
  return key;
}

/** The platform fields of an executor's hello `device`: {browser, os, cpu_threads}. */
export function platformDevice(env = globalThis) {
  const p = platformInfo(env);
  return { browser: p.browser, os: p.os, cpu_threads: p.threads };
}
