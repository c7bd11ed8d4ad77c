// firefox.test.mjs — node --test checks of what the agent does differently in Firefox: its
// WebGL2 key (renderer "llvmpipe, or similar" under Xvfb), the default timing sync, and the
// context creation reasons the page shows. The browser itself is tested by
// tests/firefox_agent_test.cpp.
import assert from 'node:assert/strict';
import test from 'node:test';

import { creationReason } from '../../runtime/webgl2.mjs';
import { deviceClassKey } from '../device_class.mjs';
import { defaultSync, shortRendererName } from '../webgl2.mjs';

const FIREFOX = {
  navigator: {
    userAgent: 'Mozilla/5.0 (X11; Linux x86_64; rv:153.0) Gecko/20100101 Firefox/153.0',
    hardwareConcurrency: 2,
  },
};
const CHROMIUM = {
  navigator: {
    userAgent: 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) ' +
      'Chrome/156.0.0.0 Safari/537.36',
    hardwareConcurrency: 2,
    userAgentData: { brands: [{ brand: 'Chromium', version: '156' }], platform: 'Linux' },
  },
};

test("Firefox's sanitized llvmpipe renderer gives a key of its own", () => {
  // Firefox reports WEBGL_debug_renderer_info's renderer as "llvmpipe, or similar".
  const device = shortRendererName('llvmpipe, or similar');
  assert.equal(device, 'llvmpipe');
  const firefox = deviceClassKey('webgl2', device, { env: FIREFOX });
  assert.equal(firefox, 'webgl2:llvmpipe:firefox-153:linux-x86_64:2t');
  // Chromium on the same llvmpipe (--gl llvmpipe) is another device class.
  assert.notEqual(firefox, deviceClassKey('webgl2', device, { env: CHROMIUM }));
});

test('timed WebGL2 batches wait with finish in Firefox, with a blocking 1-texel read elsewhere', () => {
  assert.equal(defaultSync(FIREFOX), 'finish');
  assert.equal(defaultSync(CHROMIUM), 'readpixels');
  assert.equal(defaultSync({}), 'readpixels');
});

test("a context creation error's message is put on one line", () => {
  assert.equal(creationReason('WebGL creation failed: \n* AllowWebgl2:false restricts context creation on this system. ()'),
               'AllowWebgl2:false restricts context creation on this system.');
  assert.equal(creationReason('WebGL creation failed: \n* tryNativeGL ()\n* Exhausted GL driver options. (FEATURE_FAILURE_WEBGL_EXHAUSTED_DRIVERS)'),
               'tryNativeGL; Exhausted GL driver options. (FEATURE_FAILURE_WEBGL_EXHAUSTED_DRIVERS)');
  assert.equal(creationReason('Could not create a WebGL2 context.'), 'Could not create a WebGL2 context.');
  assert.equal(creationReason(''), '');
  assert.equal(creationReason(undefined), '');
});
