#pragma once
/// \file wasm_memory.hpp
/// The linear memory of a wasm package (WasmMemory in package.hpp; docs/package.md "wasm
/// linear memory"): one WebAssembly memory that every kernel of the package imports, holding the
/// activation slots, the weights the kernels read and one scratch area, each kernel built with
/// its tensors at their offsets. Why: with a memory per kernel (the measuring agent's ABI) a
/// step copied its inputs in and its output out — MobileNet-v2 moved about 52 MiB per inference
/// that way, 11 ms of 45 ms in headless Chromium on a 2-core x86-64 (2026-11-27) — and every
/// kernel kept its own copies of activations warm in the caches.

#include "codegen/config_space.hpp"
#include "deploy/planner.hpp"

namespace webtune::deploy {

/// Lays out `package`'s linear memory and rebuilds the kernel of every task step there
/// (emit_wasm_placed): from byte 64 KiB on, the slots in id order, then each weight that a
/// kernel step reads, each 64-byte aligned with 256 bytes of slack after it, then the scratch
/// (the largest any kernel needs, all its threads). The memory is shared when some kernel
/// runs more than one thread. A task used by several steps with other slots gets one kernel
/// per distinct placement; package.kernels is replaced by the placed kernels. A MaxPool op
/// step that the wasm max-pool kernel runs (square 2-D window, one stride, even pads, no
/// dilation, floor rounding: ResNet's stem pool) gets a kernel file too
/// (emit_wasm_max_pool_placed; its `op` stays in the step), on the task kernels' threads; other
/// op steps stay JavaScript. ResNet-18's stem pool took 7.4 ms as JavaScript in headless Chromium
/// and 0.8 ms as the kernel (2026-11-27).
/// `limits` are the device's (the tasks' spaces are rebuilt with them). Throws
/// std::invalid_argument when the memory would pass 1 GiB (naming its size), or for a task
/// step whose config the space refuses; MeasureError when a kernel fails to build.
void place_wasm_memory(PlannedPackage& package, const DeviceLimits& limits);

}  // namespace webtune::deploy
