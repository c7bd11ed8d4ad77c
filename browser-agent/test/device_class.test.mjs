// device_class.test.mjs — node --test checks of the device-class keys (device_class.mjs): two
// browsers on one machine never share a key, the CPU's thread count is part of a CPU device's
// key, and every key is made of the characters the tracker accepts.
import assert from 'node:assert/strict';
import test from 'node:test';

import { deviceClassKey, platformInfo } from '../device_class.mjs';

const FIREFOX = {
  navigator: {
    userAgent: 'Mozilla/5.0 (X11; Linux x86_64; rv:153.0) Gecko/20100101 Firefox/153.0',
    hardwareConcurrency: 8,
  },
};
const CHROMIUM = {
  navigator: {
    userAgent: 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) ' +
      'Chrome/156.0.0.0 Safari/537.36',
    hardwareConcurrency: 8,
    userAgentData: { brands: [{ brand: 'Chromium', version: '156' }], platform: 'Linux' },
  },
};
const CHROME_WINDOWS = {
  navigator: {
    userAgent: 'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) ' +
      'Chrome/156.0.0.0 Safari/537.36',
    hardwareConcurrency: 16,
    userAgentData: { brands: [{ brand: 'Google Chrome', version: '156' }], platform: 'Windows' },
  },
};

test('a Firefox and a Chromium tab on one machine get different wasm keys', () => {
  const firefox = deviceClassKey('wasm', 'threads', { cpu: true, env: FIREFOX });
  const chromium = deviceClassKey('wasm', 'threads', { cpu: true, env: CHROMIUM });
  assert.equal(firefox, 'wasm:threads:firefox-153:linux-x86_64:8t');
  assert.equal(chromium, 'wasm:threads:chromium-156:linux-x86_64:8t');
  assert.notEqual(firefox, chromium);
  // The old two-part key is still a prefix of both: key patterns keep matching.
  for (const key of [firefox, chromium]) assert.ok(key.startsWith('wasm:threads:'));
});

test('a CPU rasterizer carries the thread count, a GPU does not', () => {
  assert.equal(deviceClassKey('webgl2', 'swiftshader', { env: CHROMIUM }),
               'webgl2:swiftshader:chromium-156:linux-x86_64:8t');
  assert.equal(deviceClassKey('webgl2', 'nvidia-geforce-rtx-4090', { env: CHROME_WINDOWS }),
               'webgl2:nvidia-geforce-rtx-4090:chrome-156:windows-x86_64');
});

test('keys use only the characters the tracker accepts', () => {
  const odd = { navigator: { userAgent: 'Weird/1 (Plan 9; "quotes")', hardwareConcurrency: 3 } };
  const key = deviceClassKey('webgpu', 'llvmpipe', { env: odd });
  assert.match(key, /^[A-Za-z0-9._:+-]+$/);
  assert.equal(platformInfo(odd).browser, 'unknown');
});
