// tfjs_model.mjs — an ONNX CNN (the graph and the weights of the file, parsed by onnx.mjs) as
// TensorFlow.js 4.22 ops in NHWC, the way a tfjs user writes such a model by hand:
//
//   Conv (group 1)            → tf.fused.conv2d, filter HWIO, bias fused, and the activation
//                               fused when the Conv's only consumer is a Relu ('relu') or a
//                               Clip(0, 6) ('relu6')
//   Conv (group = C = M)      → tf.fused.depthwiseConv2d, filter [kH, kW, C, 1], same fusion
//   Relu / Clip               → tf.relu / tf.relu6 (clip(0, 6)) / tf.clipByValue, when not fused
//   Add                       → tf.add (tfjs's fused ops take no residual input)
//   MaxPool                   → tf.maxPool (symmetric pads; asymmetric ones pad with −∞ first)
//   AveragePool               → tf.avgPool (no padding, or pads counted out as ONNX's default)
//   GlobalAveragePool         → tf.mean over H, W (keepDims)
//   Flatten / Reshape         → tf.reshape (a 4-D NHWC value goes back to NCHW order first
//                               unless H = W = 1, where both orders agree)
//   Gemm                      → tf.fused.matMul, B as [K, N] (transB: transposed at build time),
//                               bias fused (alpha = beta = 1)
//   MatMul                    → tf.matMul
//   Constant, Identity, Dropout → no op
//
// Weights are re-laid out once at build time (OIHW → HWIO / HW C 1) as Float32Arrays; each tfjs
// backend gets its own weight tensors (instantiate() with that backend current), so that running
// on one backend never moves data from another. The graph input is the user's Float32Array in
// ONNX's NCHW: tf.tensor4d + tf.transpose to NHWC on the device, inside the timed run (as a
// tfjs user given NCHW data does). The output is read back with `await y.data()`.
//
// Errors: an op, attribute or shape this builder does not handle throws an Error naming the node.

import { parseModel, tensorValues } from './onnx.mjs';

const product = (dims) => dims.reduce((a, b) => a * b, 1);

/** OIHW [M, C, kH, kW] → HWIO [kH, kW, C, M]. */
function oihwToHwio(w, [M, C, kH, kW]) {
  const out = new Float32Array(w.length);
  for (let m = 0; m < M; ++m)
    for (let c = 0; c < C; ++c)
      for (let h = 0; h < kH; ++h)
        for (let x = 0; x < kW; ++x) out[((h * kW + x) * C + c) * M + m] = w[((m * C + c) * kH + h) * kW + x];
  return out;
}

/** Depthwise OIHW [C, 1, kH, kW] → [kH, kW, C, 1]. */
function depthwiseToHwc1(w, [C, , kH, kW]) {
  const out = new Float32Array(w.length);
  for (let c = 0; c < C; ++c)
    for (let h = 0; h < kH; ++h)
      for (let x = 0; x < kW; ++x) out[(h * kW + x) * C + c] = w[(c * kH + h) * kW + x];
  return out;
}

function attr(node, name, fallback) {
  return node.attributes[name] ?? fallback;
}

function nodeError(node, message) {
  return new Error(`tfjs model: node '${node.name}' (${node.opType}): ${message}`);
}

/** ONNX pads [top, left, bottom, right] → tfjs explicit NHWC padding. */
function explicitPad(pads) {
  const [t, l, b, r] = pads.length === 4 ? pads : [0, 0, 0, 0];
  return [[0, 0], [t, b], [l, r], [0, 0]];
}

/**
 * Plans `bytes` (an ONNX file) as tfjs ops. Returns {name, input: {name, shape}, output: {name,
 * shape}, ops: {tfjs op name: count}, instantiate(tf)}; instantiate(tf) creates the weight
 * tensors on tfjs's current backend and returns {run(Float32Array) → Promise<Float32Array>,
 * dispose()}. One graph input and one graph output.
 */
export function planTfjsModel(bytes, name = 'model') {
  const model = parseModel(bytes);
  const g = model.graph;
  if (g.inputs.length !== 1 || g.outputs.length !== 1) {
    throw new Error(`tfjs model: ${name} has ${g.inputs.length} inputs and ${g.outputs.length} outputs; this builder takes one of each`);
  }
  const input = { name: g.inputs[0].name, shape: g.inputs[0].shape };
  if (input.shape?.length !== 4 || input.shape.some((d) => typeof d !== 'number')) {
    throw new Error(`tfjs model: ${name}'s input '${input.name}' is not a fixed 4-D NCHW shape`);
  }
  const output = { name: g.outputs[0].name, shape: g.outputs[0].shape };

  // Constants: initializers and Constant nodes, by value name.
  const constants = new Map();
  for (const [k, t] of g.initializers) constants.set(k, { dims: t.dims, values: tensorValues(t) });
  const consumers = new Map();
  for (const n of g.nodes) {
    if (n.opType === 'Constant') {
      const t = attr(n, 'value', null);
      if (!t || typeof t !== 'object') throw nodeError(n, 'only the tensor `value` attribute is read');
      constants.set(n.outputs[0], { dims: t.dims, values: tensorValues(t) });
    }
    for (const i of n.inputs) if (i) consumers.set(i, (consumers.get(i) || 0) + 1);
  }
  consumers.set(output.name, (consumers.get(output.name) || 0) + 1);
  const scalar = (n, i, fallback) => {
    const v = n.inputs[i];
    if (!v) return fallback;
    const c = constants.get(v);
    if (!c || c.values.length !== 1) throw nodeError(n, `input ${i} ('${v}') is not a constant scalar`);
    return c.values[0];
  };
  const clipRange = (n) => (model.opsets[''] ?? 13) >= 11
    ? [scalar(n, 1, -Infinity), scalar(n, 2, Infinity)]
    : [attr(n, 'min', -3.4028234663852886e38), attr(n, 'max', 3.4028234663852886e38)];

  // Each step: a function of (tf, weights, env) run inside tf.tidy; `weights`: Float32Arrays +
  // shapes that instantiate() turns into tensors.
  const weights = [];
  const addWeight = (values, shape) => {
    weights.push({ values, shape });
    return weights.length - 1;
  };
  const steps = [];
  const ops = {};
  const count = (op) => { ops[op] = (ops[op] || 0) + 1; };
  const rank = new Map([[input.name, 4]]);  // value → rank (4: NHWC on the tfjs side)
  const fused = new Set();  // activation nodes folded into their producer

  const nodes = g.nodes;
  for (let ni = 0; ni < nodes.length; ++ni) {
    const n = nodes[ni];
    if (fused.has(n)) continue;
    const out = n.outputs[0];
    const x = n.inputs[0];
    switch (n.opType) {
      case 'Constant':
        break;
      case 'Identity':
      case 'Dropout':
        rank.set(out, rank.get(x));
        steps.push((tf, w, env) => { env.set(out, env.get(x)); });
        break;
      case 'Conv': {
        const W = constants.get(n.inputs[1]);
        if (!W || W.dims.length !== 4) throw nodeError(n, 'the weight is not a constant 4-D tensor');
        const [M, Cg, kH, kW] = W.dims;
        const group = attr(n, 'group', 1);
        const strides = attr(n, 'strides', [1, 1]);
        const dil = attr(n, 'dilations', [1, 1]);
        if (attr(n, 'auto_pad', 'NOTSET') !== 'NOTSET') throw nodeError(n, 'auto_pad is not handled');
        const pad = explicitPad(attr(n, 'pads', [0, 0, 0, 0]));
        const C = Cg * group;
        const depthwise = group > 1;
        if (depthwise && !(group === C && M === C)) throw nodeError(n, `group ${group} with C ${C}, M ${M}: only group 1 or depthwise (group = C = M)`);
        const filter = addWeight(depthwise ? depthwiseToHwc1(W.values, W.dims) : oihwToHwio(W.values, W.dims),
          depthwise ? [kH, kW, C, 1] : [kH, kW, C, M]);
        let bias = null;
        if (n.inputs[2]) {
          const B = constants.get(n.inputs[2]);
          if (!B) throw nodeError(n, 'the bias is not a constant');
          bias = addWeight(B.values, [M]);
        }
        // The activation to fuse: the Conv's only consumer, when it is the next Relu / Clip(0,6).
        let activation = 'linear';
        let result = out;
        const next = nodes.slice(ni + 1).find((m) => m.inputs.includes(out));
        if (next && consumers.get(out) === 1 && next.inputs[0] === out) {
          if (next.opType === 'Relu') activation = 'relu';
          else if (next.opType === 'Clip') {
            const [lo, hi] = clipRange(next);
            if (lo === 0 && hi === 6) activation = 'relu6';
          }
          if (activation !== 'linear') {
            fused.add(next);
            result = next.outputs[0];
          }
        }
        const opName = depthwise ? 'tf.fused.depthwiseConv2d' : 'tf.fused.conv2d';
        count(`${opName}(${bias !== null ? 'bias' : 'no bias'}, ${activation})`);
        rank.set(result, 4);
        steps.push((tf, w, env) => {
          const args = {
            x: env.get(x), filter: w[filter], strides, pad, dataFormat: 'NHWC', dilations: dil,
            bias: bias === null ? undefined : w[bias], activation,
          };
          env.set(result, depthwise ? tf.fused.depthwiseConv2d(args) : tf.fused.conv2d(args));
        });
        break;
      }
      case 'Relu':
        count('tf.relu');
        rank.set(out, rank.get(x));
        steps.push((tf, w, env) => env.set(out, tf.relu(env.get(x))));
        break;
      case 'Clip': {
        const [lo, hi] = clipRange(n);
        rank.set(out, rank.get(x));
        if (lo === 0 && hi === 6) {
          count('tf.relu6');
          steps.push((tf, w, env) => env.set(out, tf.relu6(env.get(x))));
        } else {
          count('tf.clipByValue');
          steps.push((tf, w, env) => env.set(out, tf.clipByValue(env.get(x), lo, hi)));
        }
        break;
      }
      case 'Add': {
        const [a, b] = n.inputs;
        if (constants.has(a) || constants.has(b)) throw nodeError(n, 'an Add with a constant operand is not handled');
        if (rank.get(a) !== rank.get(b)) throw nodeError(n, 'operands of different ranks');
        count('tf.add');
        rank.set(out, rank.get(a));
        steps.push((tf, w, env) => env.set(out, tf.add(env.get(a), env.get(b))));
        break;
      }
      case 'MaxPool':
      case 'AveragePool': {
        if (attr(n, 'ceil_mode', 0) !== 0) throw nodeError(n, 'ceil_mode 1 is not handled');
        if (attr(n, 'auto_pad', 'NOTSET') !== 'NOTSET') throw nodeError(n, 'auto_pad is not handled');
        if ((attr(n, 'dilations', [1, 1])).some((d) => d !== 1)) throw nodeError(n, 'dilations are not handled');
        const k = attr(n, 'kernel_shape', null);
        const s = attr(n, 'strides', [1, 1]);
        const [t, l, b, r] = attr(n, 'pads', [0, 0, 0, 0]);
        const symmetric = t === b && l === r && t === l;
        rank.set(out, 4);
        if (n.opType === 'MaxPool') {
          count('tf.maxPool');
          steps.push((tf, w, env) => {
            if (symmetric) {
              env.set(out, tf.maxPool(env.get(x), k, s, t));
            } else {
              const padded = tf.pad(env.get(x), [[0, 0], [t, b], [l, r], [0, 0]], -Infinity);
              env.set(out, tf.maxPool(padded, k, s, 'valid'));
            }
          });
        } else {
          if (t || l || b || r) throw nodeError(n, 'a padded AveragePool is not handled');
          count('tf.avgPool');
          steps.push((tf, w, env) => env.set(out, tf.avgPool(env.get(x), k, s, 'valid')));
        }
        break;
      }
      case 'GlobalAveragePool':
        count('tf.mean');
        rank.set(out, 4);
        steps.push((tf, w, env) => env.set(out, tf.mean(env.get(x), [1, 2], true)));
        break;
      case 'Flatten': {
        const axis = attr(n, 'axis', 1);
        if (axis !== 1) throw nodeError(n, `axis ${axis}: only 1`);
        count('tf.reshape');
        rank.set(out, 2);
        steps.push((tf, w, env) => {
          let v = env.get(x);
          // NHWC → NCHW order unless the spatial dims are 1 (then both orders agree).
          if (v.rank === 4 && v.shape[1] * v.shape[2] !== 1) v = tf.transpose(v, [0, 3, 1, 2]);
          env.set(out, tf.reshape(v, [v.shape[0], -1]));
        });
        break;
      }
      case 'Gemm': {
        if (attr(n, 'alpha', 1) !== 1 || attr(n, 'beta', 1) !== 1) throw nodeError(n, 'alpha and beta other than 1 are not handled');
        const transA = attr(n, 'transA', 0) === 1;
        const transB = attr(n, 'transB', 0) === 1;
        const B = constants.get(n.inputs[1]);
        if (!B || B.dims.length !== 2) throw nodeError(n, 'B is not a constant matrix');
        // B stored [N, K] (transB) is transposed once here to [K, N]: tfjs wasm's
        // tf.fused.matMul with transposeB and a bias gave wrong logits on ResNet-18's fc
        // (512 → 1000; max error 0.44 against 1.41) while webgl's were right.
        const N = transB ? B.dims[0] : B.dims[1];
        const K = transB ? B.dims[1] : B.dims[0];
        let bValues = B.values;
        if (transB) {
          bValues = new Float32Array(B.values.length);
          for (let r = 0; r < N; ++r) for (let c = 0; c < K; ++c) bValues[c * N + r] = B.values[r * K + c];
        }
        const b = addWeight(bValues, [K, N]);
        let bias = null;
        if (n.inputs[2]) {
          const Cb = constants.get(n.inputs[2]);
          if (!Cb || Cb.values.length !== N) throw nodeError(n, `C is not a constant of ${N} values`);
          bias = addWeight(Cb.values, [N]);
        }
        count(`tf.fused.matMul(${bias !== null ? 'bias' : 'no bias'})`);
        rank.set(out, 2);
        steps.push((tf, w, env) => env.set(out, tf.fused.matMul({
          a: env.get(x), b: w[b], transposeA: transA, transposeB: false,
          bias: bias === null ? undefined : w[bias],
        })));
        break;
      }
      case 'MatMul': {
        const B = constants.get(n.inputs[1]);
        if (!B || B.dims.length !== 2) throw nodeError(n, 'B is not a constant matrix');
        const b = addWeight(B.values, B.dims);
        count('tf.matMul');
        rank.set(out, 2);
        steps.push((tf, w, env) => env.set(out, tf.matMul(env.get(x), w[b])));
        break;
      }
      default:
        throw nodeError(n, 'no TensorFlow.js mapping in bench/model_vs_web/tfjs_model.mjs');
    }
  }

  const inputShape = input.shape;
  return {
    name, input, output, ops,
    weightFloats: weights.reduce((s, w) => s + w.values.length, 0),
    /** Weight tensors on tfjs's current backend; {run, dispose, backend}. */
    instantiate(tf) {
      const w = weights.map(({ values, shape }) => tf.tensor(values, shape, 'float32'));
      const forward = (x) => tf.tidy(() => {
        const env = new Map([[input.name, tf.transpose(x, [0, 2, 3, 1])]]);
        for (const step of steps) step(tf, w, env);
        const y = env.get(output.name);
        if (!y) throw new Error(`tfjs model: ${name}'s output '${output.name}' was not computed`);
        return y;
      });
      return {
        backend: tf.getBackend(),
        /** One inference: upload, run, read back. */
        async run(data) {
          if (data.length !== product(inputShape)) {
            throw new Error(`tfjs model: ${name} takes ${product(inputShape)} floats, not ${data.length}`);
          }
          const x = tf.tensor(data, inputShape, 'float32');
          let y;
          try {
            y = forward(x);
            return await y.data();
          } finally {
            x.dispose();
            y?.dispose();
          }
        },
        /**
         * Diagnosis: every value of the graph for input `data`, as {name: Float32Array} (NHWC
         * for 4-D values), in the order computed.
         */
        async trace(data) {
          const env = new Map([[input.name, tf.transpose(tf.tensor(data, inputShape, 'float32'), [0, 2, 3, 1])]]);
          for (const step of steps) step(tf, w, env);
          const out = {};
          for (const [k, v] of env) {
            out[k] = await v.data();
            v.dispose();
          }
          return out;
        },
        dispose() {
          for (const t of w) t.dispose();
        },
      };
    },
  };
}
