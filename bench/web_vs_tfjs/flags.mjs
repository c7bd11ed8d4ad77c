// flags.mjs — the Chromium flags of the local browser farm (browser-agent/farm.mjs
// chromiumArgs()), so that the benchmark runs kernels under the flags they were tuned under.
// A copy, not an import: farm.mjs parses its command line and launches a farm when it is
// loaded, so it cannot be imported. Keep the two lists alike (bench.mjs records the flags it
// used in its JSON output).

/**
 * Flags for `gl` ("swiftshader", the farm's default, or "llvmpipe": ANGLE on Mesa's EGL), plus
 * --enable-unsafe-webgpu when `webgpu` (headless Chromium exposes navigator.gpu only with it).
 */
export function chromiumArgs({ gl = 'swiftshader', webgpu = true } = {}) {
  const args = [
    '--no-sandbox', '--disable-quic', '--no-first-run', '--disable-background-networking',
    '--disable-component-update', '--disable-sync',
    '--disable-background-timer-throttling', '--disable-renderer-backgrounding',
    '--disable-backgrounding-occluded-windows',
  ];
  if (gl === 'llvmpipe') {
    args.push('--use-gl=angle', '--use-angle=gl-egl', '--ignore-gpu-blocklist');
  } else if (gl === 'swiftshader') {
    args.push('--enable-unsafe-swiftshader');
  } else {
    throw new Error(`gl takes llvmpipe or swiftshader, not '${gl}'`);
  }
  if (webgpu) args.push('--enable-unsafe-webgpu');
  return args;
}
