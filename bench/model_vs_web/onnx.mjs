// onnx.mjs — a minimal reader of ONNX model files (protobuf wire format), enough for the
// TensorFlow.js side of bench/model_vs_web to rebuild a CNN from the file's own graph and
// weights. Runs in node and in a page (no dependency; input is a Uint8Array of the .onnx file).
//
// What it reads (field numbers from onnx/onnx.proto, IR version ≥ 3):
//   ModelProto:     1 ir_version, 7 graph, 8 opset_import (OperatorSetIdProto: 1 domain, 2 version)
//   GraphProto:     1 node, 2 name, 5 initializer, 11 input, 12 output
//   NodeProto:      1 input, 2 output, 3 name, 4 op_type, 5 attribute, 7 domain
//   AttributeProto: 1 name, 2 f, 3 i, 4 s, 5 t, 7 floats, 8 ints, 20 type
//   TensorProto:    1 dims, 2 data_type, 4 float_data, 7 int64_data, 8 name, 9 raw_data,
//                   14 data_location (external data is refused: the shared models hold their
//                   weights inline)
//   ValueInfoProto: 1 name, 2 type (TypeProto 1 tensor_type: 1 elem_type, 2 shape
//                   (TensorShapeProto 1 dim: 1 dim_value, 2 dim_param))
// Everything else is skipped by wire type. Tensors of FLOAT (1) come out as Float32Array, INT64
// (7) as arrays of Numbers (exact below 2^53: shapes, axes), INT32 (6) as Int32Array; other data
// types keep their raw bytes and are refused when a tensor's values are asked for.
//
// Errors: a truncated or malformed buffer throws an Error naming the message being parsed and
// the byte offset.

const WIRE_VARINT = 0;
const WIRE_64 = 1;
const WIRE_LEN = 2;
const WIRE_32 = 5;

/** ONNX TensorProto.DataType values this reader decodes. */
export const DataType = { FLOAT: 1, INT32: 6, INT64: 7 };

class Reader {
  constructor(bytes, start, end, what) {
    this.bytes = bytes;
    this.pos = start;
    this.end = end;
    this.what = what;
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }

  fail(message) {
    throw new Error(`onnx: ${this.what} at byte ${this.pos}: ${message}`);
  }

  /** A varint as a Number (exact below 2^53; int64 fields here are shapes, counts, enums). */
  varint() {
    let result = 0;
    let scale = 1;
    const start = this.pos;
    for (let i = 0; i < 10; ++i) {
      if (this.pos >= this.end) this.fail('truncated varint');
      const b = this.bytes[this.pos++];
      if (i === 7 && b >= 0x80) return this.bigVarint(start);
      result += (b & 0x7f) * scale;
      if (b < 0x80) return result;
      scale *= 128;
    }
    this.fail('varint longer than 10 bytes');
  }

  /** A varint of 9 or 10 bytes, through BigInt: a negative int64 is its two's complement. */
  bigVarint(start) {
    this.pos = start;
    let v = 0n;
    for (let i = 0; i < 10; ++i) {
      if (this.pos >= this.end) this.fail('truncated varint');
      const b = this.bytes[this.pos++];
      v |= BigInt(b & 0x7f) << BigInt(7 * i);
      if (b < 0x80) return Number(BigInt.asIntN(64, v));
    }
    this.fail('varint longer than 10 bytes');
  }

  /** The next field's [number, wire type], or null at the end. */
  tag() {
    if (this.pos >= this.end) return null;
    const t = this.varint();
    return [Math.floor(t / 8), t % 8];
  }

  /** A length-delimited field: [start, end) of its bytes. */
  span() {
    const n = this.varint();
    const start = this.pos;
    if (start + n > this.end) this.fail(`field of ${n} bytes runs past the end (${this.end})`);
    this.pos += n;
    return [start, start + n];
  }

  sub(what) {
    const [s, e] = this.span();
    return new Reader(this.bytes, s, e, what);
  }

  string() {
    const [s, e] = this.span();
    return new TextDecoder().decode(this.bytes.subarray(s, e));
  }

  float32() {
    if (this.pos + 4 > this.end) this.fail('truncated float');
    const v = this.view.getFloat32(this.pos, true);
    this.pos += 4;
    return v;
  }

  skip(wire) {
    switch (wire) {
      case WIRE_VARINT: this.varint(); break;
      case WIRE_64: this.pos += 8; break;
      case WIRE_LEN: this.span(); break;
      case WIRE_32: this.pos += 4; break;
      default: this.fail(`unsupported wire type ${wire}`);
    }
    if (this.pos > this.end) this.fail('truncated field');
  }

  /** A repeated varint field, packed (wire 2) or not (wire 0): appends to `out`. */
  varints(wire, out) {
    if (wire === WIRE_LEN) {
      const r = this.sub(this.what);
      while (r.pos < r.end) out.push(r.varint());
    } else {
      out.push(this.varint());
    }
  }

  /** A repeated float field, packed (wire 2) or not (wire 5): appends to `out`. */
  floats(wire, out) {
    if (wire === WIRE_LEN) {
      const r = this.sub(this.what);
      while (r.pos < r.end) out.push(r.float32());
    } else {
      out.push(this.float32());
    }
  }
}

function readTensor(r) {
  const t = { name: '', dims: [], dataType: 0, floatData: [], int64Data: [], raw: null, external: false };
  for (let f; (f = r.tag());) {
    const [field, wire] = f;
    if (field === 1) r.varints(wire, t.dims);
    else if (field === 2) t.dataType = r.varint();
    else if (field === 4) r.floats(wire, t.floatData);
    else if (field === 7) r.varints(wire, t.int64Data);
    else if (field === 8) t.name = r.string();
    else if (field === 9) {
      const [s, e] = r.span();
      t.raw = r.bytes.subarray(s, e);
    } else if (field === 14) t.external = r.varint() === 1;
    else r.skip(wire);
  }
  return t;
}

function readAttribute(r) {
  const a = { name: '', type: 0, f: null, i: null, s: null, t: null, floats: [], ints: [] };
  for (let f; (f = r.tag());) {
    const [field, wire] = f;
    if (field === 1) a.name = r.string();
    else if (field === 2) a.f = r.float32();
    else if (field === 3) a.i = r.varint();
    else if (field === 4) a.s = r.string();
    else if (field === 5) a.t = readTensor(r.sub(`attribute ${a.name || '?'} tensor`));
    else if (field === 7) r.floats(wire, a.floats);
    else if (field === 8) r.varints(wire, a.ints);
    else if (field === 20) a.type = r.varint();
    else r.skip(wire);
  }
  return a;
}

/** An attribute's value by its AttributeType (1 FLOAT, 2 INT, 3 STRING, 4 TENSOR, 6 FLOATS, 7 INTS). */
function attributeValue(a) {
  switch (a.type) {
    case 1: return a.f;
    case 2: return a.i;
    case 3: return a.s;
    case 4: return a.t;
    case 6: return a.floats;
    case 7: return a.ints;
    default:
      // Files written without `type` (IR < 3): whichever field is set.
      if (a.ints.length) return a.ints;
      if (a.floats.length) return a.floats;
      return a.i ?? a.f ?? a.s ?? a.t;
  }
}

function readNode(r) {
  const n = { name: '', opType: '', domain: '', inputs: [], outputs: [], attributes: {} };
  for (let f; (f = r.tag());) {
    const [field, wire] = f;
    if (field === 1) n.inputs.push(r.string());
    else if (field === 2) n.outputs.push(r.string());
    else if (field === 3) n.name = r.string();
    else if (field === 4) n.opType = r.string();
    else if (field === 5) {
      const a = readAttribute(r.sub(`node ${n.name || n.opType || '?'} attribute`));
      n.attributes[a.name] = attributeValue(a);
    } else if (field === 7) n.domain = r.string();
    else r.skip(wire);
  }
  return n;
}

function readValueInfo(r) {
  const v = { name: '', elemType: 0, shape: null };
  for (let f; (f = r.tag());) {
    const [field, wire] = f;
    if (field === 1) v.name = r.string();
    else if (field === 2) {
      const type = r.sub(`value ${v.name} type`);
      for (let g; (g = type.tag());) {
        if (g[0] !== 1) {
          type.skip(g[1]);
          continue;
        }
        const tensor = type.sub(`value ${v.name} tensor type`);
        for (let h; (h = tensor.tag());) {
          if (h[0] === 1) v.elemType = tensor.varint();
          else if (h[0] === 2) {
            v.shape = [];
            const shape = tensor.sub(`value ${v.name} shape`);
            for (let d; (d = shape.tag());) {
              if (d[0] !== 1) {
                shape.skip(d[1]);
                continue;
              }
              const dim = shape.sub(`value ${v.name} dim`);
              let value = null;
              for (let e; (e = dim.tag());) {
                if (e[0] === 1) value = dim.varint();
                else if (e[0] === 2) value = dim.string();
                else dim.skip(e[1]);
              }
              v.shape.push(value);
            }
          } else tensor.skip(h[1]);
        }
      }
    } else r.skip(wire);
  }
  return v;
}

function readGraph(r) {
  const g = { name: '', nodes: [], initializers: [], inputs: [], outputs: [] };
  for (let f; (f = r.tag());) {
    const [field, wire] = f;
    if (field === 1) g.nodes.push(readNode(r.sub(`node ${g.nodes.length}`)));
    else if (field === 2) g.name = r.string();
    else if (field === 5) g.initializers.push(readTensor(r.sub(`initializer ${g.initializers.length}`)));
    else if (field === 11) g.inputs.push(readValueInfo(r.sub('graph input')));
    else if (field === 12) g.outputs.push(readValueInfo(r.sub('graph output')));
    else r.skip(wire);
  }
  return g;
}

/**
 * Parses an ONNX file. Returns {irVersion, opsets: {domain: version}, graph: {name, nodes:
 * [{name, opType, domain, inputs, outputs, attributes: {name: value}}], initializers: Map(name →
 * tensor), inputs, outputs: [{name, elemType, shape}]}}; a tensor is {name, dims, dataType, ...}
 * whose values tensorValues() gives. Graph inputs that are also initializers (IR < 4 files) are
 * left out of `inputs`.
 */
export function parseModel(bytes) {
  if (!(bytes instanceof Uint8Array)) bytes = new Uint8Array(bytes);
  const r = new Reader(bytes, 0, bytes.length, 'ModelProto');
  const model = { irVersion: 0, opsets: {}, graph: null };
  for (let f; (f = r.tag());) {
    const [field, wire] = f;
    if (field === 1) model.irVersion = r.varint();
    else if (field === 7) model.graph = readGraph(r.sub('GraphProto'));
    else if (field === 8) {
      const o = r.sub('opset_import');
      let domain = '';
      let version = 0;
      for (let g; (g = o.tag());) {
        if (g[0] === 1) domain = o.string();
        else if (g[0] === 2) version = o.varint();
        else o.skip(g[1]);
      }
      model.opsets[domain] = version;
    } else r.skip(wire);
  }
  if (!model.graph) throw new Error('onnx: the file has no graph (ModelProto field 7)');
  const inits = new Map(model.graph.initializers.map((t) => [t.name, t]));
  model.graph.initializers = inits;
  model.graph.inputs = model.graph.inputs.filter((v) => !inits.has(v.name));
  return model;
}

/**
 * The values of a tensor: Float32Array for FLOAT, Int32Array for INT32, an array of Numbers for
 * INT64 (raw_data or the typed field, whichever the file used). Throws, naming the tensor, for
 * external data, other data types, or a value count that is not the product of the dims.
 */
export function tensorValues(t) {
  const count = t.dims.reduce((a, b) => a * b, 1);
  if (t.external) throw new Error(`onnx: tensor '${t.name}' keeps its data in an external file`);
  let values;
  if (t.dataType === DataType.FLOAT) {
    if (t.raw) {
      // raw_data is little-endian; copy so that the result is aligned and owns its memory.
      values = new Float32Array(t.raw.length / 4);
      const view = new DataView(t.raw.buffer, t.raw.byteOffset, t.raw.byteLength);
      for (let i = 0; i < values.length; ++i) values[i] = view.getFloat32(4 * i, true);
    } else {
      values = Float32Array.from(t.floatData);
    }
  } else if (t.dataType === DataType.INT64) {
    if (t.raw) {
      const view = new DataView(t.raw.buffer, t.raw.byteOffset, t.raw.byteLength);
      values = Array.from({ length: t.raw.length / 8 }, (_, i) => Number(view.getBigInt64(8 * i, true)));
    } else {
      values = [...t.int64Data];
    }
  } else if (t.dataType === DataType.INT32) {
    if (t.raw) {
      const view = new DataView(t.raw.buffer, t.raw.byteOffset, t.raw.byteLength);
      values = Int32Array.from({ length: t.raw.length / 4 }, (_, i) => view.getInt32(4 * i, true));
    } else {
      throw new Error(`onnx: tensor '${t.name}' of INT32 without raw_data is not read here`);
    }
  } else {
    throw new Error(`onnx: tensor '${t.name}' has data type ${t.dataType}; this reader decodes FLOAT, INT32 and INT64`);
  }
  if (values.length !== count) {
    throw new Error(`onnx: tensor '${t.name}' has ${values.length} values for dims [${t.dims}] (${count})`);
  }
  return values;
}

// ---- writing: only for tests, which build small models without files --------------------------

function varintBytes(v) {
  const out = [];
  let n = BigInt.asUintN(64, BigInt(v));
  do {
    let b = Number(n & 0x7fn);
    n >>= 7n;
    if (n) b |= 0x80;
    out.push(b);
  } while (n);
  return out;
}

function key(field, wire) {
  return varintBytes(field * 8 + wire);
}

function lenField(field, bytes) {
  return [...key(field, WIRE_LEN), ...varintBytes(bytes.length), ...bytes];
}

function str(field, s) {
  return lenField(field, [...new TextEncoder().encode(s)]);
}

function packedVarints(field, values) {
  return lenField(field, values.flatMap(varintBytes));
}

function floatBytes(values) {
  const b = new Uint8Array(4 * values.length);
  const view = new DataView(b.buffer);
  values.forEach((v, i) => view.setFloat32(4 * i, v, true));
  return [...b];
}

/** TensorProto bytes: FLOAT data as raw_data (or float_data when `asFloatData`), INT64 as raw. */
function tensorBytes({ name, dims, values, dataType = DataType.FLOAT, asFloatData = false }) {
  let data;
  if (dataType === DataType.FLOAT) {
    data = asFloatData ? lenField(4, floatBytes(values)) : lenField(9, floatBytes(values));
  } else if (dataType === DataType.INT64) {
    const b = new Uint8Array(8 * values.length);
    const view = new DataView(b.buffer);
    values.forEach((v, i) => view.setBigInt64(8 * i, BigInt(v), true));
    data = lenField(9, [...b]);
  } else {
    throw new Error(`onnx writer: data type ${dataType} not supported`);
  }
  return [...packedVarints(1, dims), ...key(2, WIRE_VARINT), ...varintBytes(dataType), ...str(8, name), ...data];
}

function attributeBytes(name, value) {
  const out = [...str(1, name)];
  if (typeof value === 'string') return [...out, ...str(4, value), ...key(20, WIRE_VARINT), 3];
  if (Array.isArray(value)) {
    if (value.every(Number.isInteger)) return [...out, ...packedVarints(8, value), ...key(20, WIRE_VARINT), 7];
    return [...out, ...lenField(7, floatBytes(value)), ...key(20, WIRE_VARINT), 6];
  }
  if (typeof value === 'object') return [...out, ...lenField(5, tensorBytes(value)), ...key(20, WIRE_VARINT), 4];
  if (Number.isInteger(value)) return [...out, ...key(3, WIRE_VARINT), ...varintBytes(value), ...key(20, WIRE_VARINT), 2];
  return [...out, ...key(2, WIRE_32), ...floatBytes([value]), ...key(20, WIRE_VARINT), 1];
}

function valueInfoBytes({ name, shape }) {
  const dims = shape.flatMap((d) => lenField(1, typeof d === 'string' ? str(2, d) : [...key(1, WIRE_VARINT), ...varintBytes(d)]));
  const tensorType = [...key(1, WIRE_VARINT), 1, ...lenField(2, dims)];
  return [...str(1, name), ...lenField(2, lenField(1, tensorType))];
}

/**
 * Serialises a small model to ONNX bytes (tests only): {nodes: [{opType, inputs, outputs, name,
 * attributes}], initializers: [{name, dims, values, dataType?, asFloatData?}], inputs / outputs:
 * [{name, shape}], opset}. Attribute values: integer → INT, other number → FLOAT, string →
 * STRING, integer array → INTS, other array → FLOATS, object → TENSOR (as an initializer).
 */
export function serializeModel({ nodes, initializers = [], inputs, outputs, opset = 13, name = 'g' }) {
  const graph = [
    ...nodes.flatMap((n) => lenField(1, [
      ...n.inputs.flatMap((s) => str(1, s)), ...n.outputs.flatMap((s) => str(2, s)),
      ...str(3, n.name ?? n.outputs[0]), ...str(4, n.opType),
      ...Object.entries(n.attributes ?? {}).flatMap(([k, v]) => lenField(5, attributeBytes(k, v))),
    ])),
    ...str(2, name),
    ...initializers.flatMap((t) => lenField(5, tensorBytes(t))),
    ...inputs.flatMap((v) => lenField(11, valueInfoBytes(v))),
    ...outputs.flatMap((v) => lenField(12, valueInfoBytes(v))),
  ];
  const opsetImport = [...str(1, ''), ...key(2, WIRE_VARINT), ...varintBytes(opset)];
  return new Uint8Array([
    ...key(1, WIRE_VARINT), 7, ...str(2, 'model_vs_web test'), ...lenField(7, graph), ...lenField(8, opsetImport),
  ]);
}
