// layout.mjs — device layouts of a KernelArtifact (codegen/include/codegen/kernel_artifact.hpp):
// packing row-major inputs into texels and rebuilding the row-major output from render targets.
// A line-by-line port of TensorLayout::pack and OutputLayout::unpack; the C++ comments there
// define the layouts. unpackTensor (the inverse of pack) reads a model's value back from a
// texture (model.mjs). Shared by the browser agent's executors and the model runtime.

/** Product of a shape's dims. */
export function shapeSize(shape) {
  return shape.reduce((a, b) => a * b, 1);
}

/** The shape with the packed axis divided (rounded up) by 4. */
export function packedShape(layout) {
  const packed = layout.shape.slice();
  if (layout.pack_axis >= 0) {
    if (layout.pack_axis >= packed.length) throw new Error('pack_axis outside the tensor\'s rank');
    packed[layout.pack_axis] = Math.ceil(packed[layout.pack_axis] / 4);
  }
  return packed;
}

/** 4 for RGBA-packed layouts, 1 for R layouts. */
export function channels(layout) {
  return layout.pack_axis >= 0 ? 4 : 1;
}

/**
 * Rearranges a row-major tensor (Float32Array) into max(width·height, packed elements)·channels
 * floats in texel order, zero-filled. Throws when the element count does not match the shape.
 */
export function pack(layout, logical) {
  const packed = packedShape(layout);
  const count = shapeSize(packed);
  const logicalSize = shapeSize(layout.shape);
  if (logical.length !== logicalSize) {
    throw new Error(`pack: tensor has ${logical.length} elements, its layout expects ${logicalSize}`);
  }
  const capacity = Math.max(layout.width, 1) * Math.max(layout.height, 1);
  const ch = channels(layout);
  const out = new Float32Array(Math.max(capacity, count) * ch);
  const axis = layout.pack_axis;
  if (axis < 0) {
    out.set(logical);
    return out;
  }
  const shape = layout.shape;
  const rank = shape.length;
  const stride = new Array(rank).fill(1);
  for (let d = rank - 2; d >= 0; --d) stride[d] = stride[d + 1] * shape[d + 1];
  const coord = new Array(rank).fill(0);
  for (let t = 0; t < count; ++t) {
    let base = 0;
    for (let d = 0; d < rank; ++d) base += (d === axis ? coord[d] * 4 : coord[d]) * stride[d];
    for (let c = 0; c < 4; ++c) {
      if (coord[axis] * 4 + c < shape[axis]) out[t * 4 + c] = logical[base + c * stride[axis]];
    }
    for (let d = rank - 1; d >= 0; --d) {  // next packed coordinate, row-major
      if (++coord[d] < packed[d]) break;
      coord[d] = 0;
    }
  }
  return out;
}

/**
 * The inverse of pack: rebuilds the row-major tensor (Float32Array of the layout's shape) from
 * `texels`, width·height·channels floats in texel order (a texture read back). Throws when there
 * are fewer texels than the layout's packed elements.
 */
export function unpackTensor(layout, texels) {
  const packed = packedShape(layout);
  const count = shapeSize(packed);
  const ch = channels(layout);
  if (texels.length < count * ch) {
    throw new Error(`unpackTensor: ${texels.length} floats read back, the layout needs ${count * ch}`);
  }
  const shape = layout.shape;
  const out = new Float32Array(shapeSize(shape));
  const axis = layout.pack_axis;
  if (axis < 0) {
    out.set(texels.subarray(0, out.length));
    return out;
  }
  const rank = shape.length;
  const stride = new Array(rank).fill(1);
  for (let d = rank - 2; d >= 0; --d) stride[d] = stride[d + 1] * shape[d + 1];
  const coord = new Array(rank).fill(0);
  for (let t = 0; t < count; ++t) {
    let base = 0;
    for (let d = 0; d < rank; ++d) base += (d === axis ? coord[d] * 4 : coord[d]) * stride[d];
    for (let c = 0; c < 4; ++c) {
      if (coord[axis] * 4 + c < shape[axis]) out[base + c * stride[axis]] = texels[t * 4 + c];
    }
    for (let d = rank - 1; d >= 0; --d) {
      if (++coord[d] < packed[d]) break;
      coord[d] = 0;
    }
  }
  return out;
}

/** Captured outputs o0, o1, … of a feedback kernel (OutputLayout::varyings in C++). */
export function feedbackVaryings(output) {
  return output.rows_per_item * (output.channels > 4 ? output.channels / 4 : 1);
}

/**
 * Rebuilds the row-major output (Float32Array of rows·cols, NaN where no target covers it) from
 * `targets[j]`, the width·height·channels floats read back from draw buffer j, or, when
 * output.feedback is set, from `targets[0]`, the one transform feedback buffer. Writes it into
 * `into` when given (a Float32Array of exactly rows·cols floats; every one is overwritten), else
 * into a new array.
 */
export function unpack(output, targets, into = null) {
  const feedback = Boolean(output.feedback);
  const expected = feedback ? 1 : output.rows_per_item;
  if (targets.length !== expected) {
    throw new Error(`unpack: expected ${expected} ${feedback ? 'feedback buffer' : 'render targets'}, got ${targets.length}`);
  }
  const { rows, cols, channels: ch, rows_per_item: rpi } = output;
  if (into && into.length !== rows * cols) {
    throw new Error(`unpack: the destination holds ${into.length} floats, the output ${rows * cols}`);
  }
  const result = () => into || new Float32Array(rows * cols);
  const colBlocks = Math.ceil(cols / ch);
  if (output.quad_layers) {
    // Layer 4·g + p holds, at item t, rows (t div colBlocks)·rpi + 4·g + i of column
    // (t mod colBlocks)·4 + p as component i (OutputLayout::quad_layers in C++).
    const out = result().fill(NaN);
    for (let row = 0; row < rows; ++row) {
      const block = Math.floor(row / rpi), inBlock = row % rpi;
      for (let col = 0; col < cols; ++col) {
        const layer = targets[4 * Math.floor(inBlock / 4) + (col % 4)];
        const at = (block * colBlocks + Math.floor(col / 4)) * 4 + (inBlock % 4);
        if (at < layer.length) out[row * cols + col] = layer[at];
      }
    }
    return out;
  }
  const rowBlocks = Math.ceil(rows / rpi);
  const items = colBlocks * rowBlocks;
  // Float index of (item t, row j of its block) in its target (OutputLayout in C++).
  const itemStride = feedback ? rpi * ch : ch;
  if (!feedback && targets.every((pixels) => pixels.length >= items * ch)) {
    // Render targets hold the items of a block row one after another, ch floats each, so
    // output row (block·rpi + j) is one contiguous run of target j: a copy per row, not per
    // float (PW1's 16 × 12544 output: 1.3 ms of the read-back in a loop per float). Every
    // output element is covered, so no NaN fill.
    const out = result();
    for (let row = 0; row < rows; ++row) {
      const from = Math.floor(row / rpi) * colBlocks * ch;
      out.set(targets[row % rpi].subarray(from, from + cols), row * cols);
    }
    return out;
  }
  if (feedback && targets[0].length >= items * itemStride) {
    // Every item was captured, so every output element is covered: no NaN fill, and the index
    // arithmetic is hoisted out of the per-float loop (the general loop below divides twice per
    // float). In Node 20, on a 192 × 784 output: about 0.3 ms here, 0.6 ms in the general loop.
    const out = result();
    const pixels = targets[0];
    for (let rb = 0; rb < rowBlocks; ++rb) {
      for (let j = 0; j < rpi; ++j) {
        const row = rb * rpi + j;
        if (row >= rows) break;
        const dst = row * cols;
        let src = rb * colBlocks * itemStride + j * ch;
        // Whole blocks of 4 with the copy unrolled, then any other block float by float.
        let col0 = 0;
        if (ch === 4) {
          for (; col0 + 4 <= cols; col0 += 4, src += itemStride) {
            out[dst + col0] = pixels[src];
            out[dst + col0 + 1] = pixels[src + 1];
            out[dst + col0 + 2] = pixels[src + 2];
            out[dst + col0 + 3] = pixels[src + 3];
          }
        }
        for (; col0 < cols; col0 += ch, src += itemStride) {
          const n = Math.min(ch, cols - col0);
          for (let c = 0; c < n; ++c) out[dst + col0 + c] = pixels[src + c];
        }
      }
    }
    return out;
  }
  const out = result().fill(NaN);
  for (let j = 0; j < rpi; ++j) {
    const pixels = targets[feedback ? 0 : j];
    const first = feedback ? j * ch : 0;
    const available = Math.floor(pixels.length / itemStride);
    for (let t = 0; t < items && t < available; ++t) {
      const row = Math.floor(t / colBlocks) * rpi + j;
      if (row >= rows) continue;
      const col0 = (t % colBlocks) * ch;
      for (let c = 0; c < ch && col0 + c < cols; ++c) out[row * cols + col0 + c] = pixels[t * itemStride + first + c];
    }
  }
  return out;
}
