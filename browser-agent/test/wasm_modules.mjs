// wasm_modules.mjs — hand-made wasm kernels for the wasm executor's node tests, written in WAT
// and assembled at test time by wabt's `wat2wasm` (installed with the project's packages). They
// follow docs/wasm_abi.md: one import env.memory (initial = maximum = P, shared iff T > 1) and an
// export run(tid).

import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/** True when `wat2wasm` can be run. */
export function haveWat2wasm() {
  try {
    execFileSync('wat2wasm', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/** Assembles WAT text (threads enabled, for shared memories) into module bytes. */
export function wat2wasm(text) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'webtune-wat-'));
  try {
    const source = path.join(dir, 'm.wat');
    const binary = path.join(dir, 'm.wasm');
    fs.writeFileSync(source, text);
    execFileSync('wat2wasm', ['--enable-threads', source, '-o', binary]);
    return new Uint8Array(fs.readFileSync(binary));
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

function memoryImport(pages, threads, shared = threads > 1) {
  return `(import "env" "memory" (memory ${pages} ${pages}${shared ? ' shared' : ''}))`;
}

/**
 * dense C[M,N] = A[M,K]·B[K,N] at byte offsets [a, b, c]; thread `tid` of T writes rows
 * tid, tid + T, …. A plain triple loop (no SIMD): the executor, not the kernel, is under test.
 */
export function denseWat({ M, N, K, threads, pages, offsets: [a, b, c], shared = threads > 1 }) {
  return `(module
  ${memoryImport(pages, threads, shared)}
  (func (export "run") (param $tid i32)
    (local $i i32) (local $j i32) (local $k i32) (local $acc f32)
    (local.set $i (local.get $tid))
    (block $rows_done (loop $rows
      (br_if $rows_done (i32.ge_u (local.get $i) (i32.const ${M})))
      (local.set $j (i32.const 0))
      (block $cols_done (loop $cols
        (br_if $cols_done (i32.ge_u (local.get $j) (i32.const ${N})))
        (local.set $acc (f32.const 0))
        (local.set $k (i32.const 0))
        (block $k_done (loop $ks
          (br_if $k_done (i32.ge_u (local.get $k) (i32.const ${K})))
          (local.set $acc (f32.add (local.get $acc) (f32.mul
            (f32.load (i32.add (i32.const ${a})
              (i32.shl (i32.add (i32.mul (local.get $i) (i32.const ${K})) (local.get $k)) (i32.const 2))))
            (f32.load (i32.add (i32.const ${b})
              (i32.shl (i32.add (i32.mul (local.get $k) (i32.const ${N})) (local.get $j)) (i32.const 2)))))))
          (local.set $k (i32.add (local.get $k) (i32.const 1)))
          (br $ks)))
        (f32.store (i32.add (i32.const ${c})
            (i32.shl (i32.add (i32.mul (local.get $i) (i32.const ${N})) (local.get $j)) (i32.const 2)))
          (local.get $acc))
        (local.set $j (i32.add (local.get $j) (i32.const 1)))
        (br $cols)))
      (local.set $i (i32.add (local.get $i) (i32.const ${threads})))
      (br $rows))))
)`;
}

/** run(tid) traps with `unreachable` on thread `trapTid` (others return at once). */
export function trapWat({ threads, pages, trapTid = 0 }) {
  return `(module
  ${memoryImport(pages, threads)}
  (func (export "run") (param $tid i32)
    (if (i32.eq (local.get $tid) (i32.const ${trapTid})) (then unreachable))))`;
}

/** run(tid) never returns on thread `loopTid` (-1: on every thread). */
export function loopWat({ threads, pages, loopTid = -1 }) {
  const cond = loopTid < 0 ? '(i32.const 1)' : `(i32.eq (local.get $tid) (i32.const ${loopTid}))`;
  return `(module
  ${memoryImport(pages, threads)}
  (func (export "run") (param $tid i32)
    (if ${cond} (then (loop $forever (br $forever))))))`;
}
