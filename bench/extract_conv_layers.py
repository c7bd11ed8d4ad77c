#!/usr/bin/python3
"""\file extract_conv_layers.py
Lists an ONNX model's convolutions, with the epilogue its graph fuses into each, as a webtune
workload file (the format of configs/workloads/resnet18.json, plus each task's "epilogue" as
codegen/include/codegen/epilogue.hpp reads it).

Usage: extract_conv_layers.py MODEL.onnx --out FILE.json [--name NAME] [--names-from FILE.json]
           [--batch N]
Runs with Debian's python3-onnx (1.12): /usr/bin/python3 bench/extract_conv_layers.py ...

Per Conv node (NCHW, as webtune's conv2d and depthwise_conv2d):
  - input shape [N, C, H, W]: graph input or value_info after onnx.shape_inference;
    weight shape [K, C/group, R, S]: its initializer (or Constant node);
  - stride, pad: the attributes; only equal strides, symmetric equal pads (or auto_pad NOTSET
    / VALID) and dilation 1 are accepted: anything else is refused with the node's name;
  - op: conv2d when group == 1; depthwise_conv2d when group == C == K (channel multiplier 1);
    other groupings are refused.
Epilogue, following the Conv's output while each value has exactly one consumer (a value read
twice must be written out, so nothing past it can be fused) and is not a graph output:
  - bias: the Conv's third input;
  - residual: an Add whose other operand is neither a constant nor computed from this Conv;
    before or after the activation in the order the graph applies them. When both operands of
    an Add could take it (two Conv chains meeting, as ResNet's downsample blocks), it goes to
    operand 0: PyTorch exports `out += identity` as Add(out, identity), so the main path's conv
    takes the residual and the 1x1 downsample stays conv + bias;
  - activation: Relu; Clip(min, max) (opset >= 11: min and max are inputs, read from an
    initializer or a Constant node; earlier opsets: attributes); HardSwish. Clip(0, +inf) is
    relu; a Clip with another infinite bound is refused (webtune's clip needs finite bounds).
At most one residual and one activation; the chain stops at any other node.
Layers with the same shapes and epilogue are merged and counted in "occurrences". Names: the
names of --names-from's tasks whose shapes match (their epilogue aside), listed first in that
file's order: a variant without a residual keeps the name, one with a residual gets an "R"
suffix (ResNet-18's block convs: C2 = conv + bias + relu, C2R = conv + bias + residual + relu),
any further variant "_2", "_3"...; unmatched layers follow in graph order, named by kind and
order: "CV1" (full conv), "PW1" (1x1 conv), "DW1" (depthwise).

Exit status 0 on success, 2 with a message on stderr for a model it refuses.
"""
import argparse
import collections
import json
import math
import sys

import onnx
from onnx import numpy_helper, shape_inference


class Refused(Exception):
    """A graph this script does not turn into webtune tasks (the message says why)."""


def label(node):
    """The node's name, or its first output's where it has none."""
    return node.name or f"<unnamed, output {node.output[0]}>"


def attrs(node):
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def opset_version(model):
    for o in model.opset_import:
        if o.domain in ("", "ai.onnx"):
            return o.version
    return 1


class Graph:
    def __init__(self, model):
        self.model = model
        g = model.graph
        self.nodes = list(g.node)
        self.order = {id(n): i for i, n in enumerate(self.nodes)}
        self.producer = {}
        self.consumers = collections.defaultdict(list)
        for n in self.nodes:
            for o in n.output:
                self.producer[o] = n
            for i in n.input:
                if i:
                    self.consumers[i].append(n)
        self.outputs = {o.name for o in g.output}
        self.constants = {t.name: numpy_helper.to_array(t) for t in g.initializer}
        for n in self.nodes:
            if n.op_type == "Constant":
                a = attrs(n)
                if "value" in a:
                    self.constants[n.output[0]] = numpy_helper.to_array(a["value"])
        self.shapes = {}
        for vi in list(g.input) + list(g.value_info) + list(g.output):
            dims = vi.type.tensor_type.shape.dim
            if dims and all(d.HasField("dim_value") for d in dims):
                self.shapes[vi.name] = [d.dim_value for d in dims]
        for name, value in self.constants.items():
            self.shapes.setdefault(name, list(value.shape))

    def shape(self, name, node, what):
        if name not in self.shapes:
            raise Refused(f"node '{label(node)}': the shape of its {what} '{name}' is unknown after "
                          "shape inference (a symbolic dimension? pass --batch)")
        return self.shapes[name]

    def scalar(self, name, node, what):
        if name not in self.constants:
            raise Refused(f"node '{label(node)}': its {what} '{name}' is not a constant "
                          "(initializer or Constant node)")
        value = self.constants[name]
        if value.size != 1:
            raise Refused(f"node '{label(node)}': its {what} has {value.size} elements, not 1")
        return float(value.reshape(-1)[0])

    def fusable(self, value):
        """Whether `value` feeds exactly one node and is not a graph output."""
        return len(self.consumers[value]) == 1 and value not in self.outputs

    def depends_on(self, value, node):
        """Whether `value` is computed (transitively) from `node`'s outputs."""
        seen, stack = set(), [value]
        targets = set(node.output)
        while stack:
            v = stack.pop()
            if v in targets:
                return True
            if v in seen or v not in self.producer:
                continue
            seen.add(v)
            stack.extend(i for i in self.producer[v].input if i)
        return False


def clip_bounds(graph, node, opset):
    if opset >= 11:
        lo = graph.scalar(node.input[1], node, "min") if len(node.input) > 1 and node.input[1] \
            else -math.inf
        hi = graph.scalar(node.input[2], node, "max") if len(node.input) > 2 and node.input[2] \
            else math.inf
    else:
        a = attrs(node)
        lo, hi = a.get("min", -3.402823e38), a.get("max", 3.402823e38)
    return lo, hi


def activation_of(graph, node, opset):
    """{"activation": ...} for an activation node, or None for any other node."""
    if node.op_type == "Relu":
        return {"activation": "relu"}
    if node.op_type == "HardSwish":
        return {"activation": "hard_swish"}
    if node.op_type == "Clip":
        lo, hi = clip_bounds(graph, node, opset)
        if lo == 0 and hi >= 3.4e38:
            return {"activation": "relu"}
        if not (math.isfinite(lo) and math.isfinite(hi) and abs(lo) < 3.4e38 and abs(hi) < 3.4e38):
            raise Refused(f"Clip node '{label(node)}': bounds ({lo}, {hi}) are not both finite; "
                          "webtune's clip needs finite bounds")
        return {"activation": "clip", "clip_min": lo, "clip_max": hi}
    return None


def epilogue_of(graph, conv, claims, opset, reached=None):
    """The epilogue fused into `conv`. claims maps an Add node's id to the operand index whose
    chain takes it; with claims None every Add may be taken, and each (Add id, operand index)
    the chain reaches is added to `reached`."""
    epi = {"bias": len(conv.input) > 2 and bool(conv.input[2])}
    activation = None
    residual = "none"
    value = conv.output[0]
    while graph.fusable(value):
        nxt = graph.consumers[value][0]
        act = activation_of(graph, nxt, opset) if activation is None else None
        if act is not None:
            activation = act
        elif nxt.op_type == "Add" and len(nxt.input) == 2 and residual == "none":
            index = 0 if nxt.input[0] == value else 1
            other = nxt.input[1 - index]
            if other in graph.constants or graph.depends_on(other, conv):
                break
            if claims is None:
                reached.add((id(nxt), index))
            elif claims.get(id(nxt)) != index:
                break
            if graph.shapes.get(other) is not None and graph.shapes.get(value) is not None \
                    and graph.shapes[other] != graph.shapes[value]:
                break  # a broadcasting Add is no residual of the output's shape
            residual = "before_activation" if activation is None else "after_activation"
        else:
            break
        value = nxt.output[0]
    epi.update(activation or {"activation": "none"})
    epi["residual"] = residual
    return epi


def conv_task(graph, conv):
    a = attrs(conv)
    x = graph.shape(conv.input[0], conv, "input")
    w = graph.shape(conv.input[1], conv, "weight")
    if len(x) != 4 or len(w) != 4:
        raise Refused(f"Conv '{label(conv)}': only 2-D convolutions (4-D NCHW tensors) are "
                      f"supported, got input {x}, weight {w}")
    n, c, h, wd = x
    k, cg, r, s = w
    group = a.get("group", 1)
    dil = list(a.get("dilations", [1, 1]))
    if dil != [1, 1]:
        raise Refused(f"Conv '{label(conv)}': dilations {dil}; only dilation 1 is supported")
    strides = list(a.get("strides", [1, 1]))
    if strides[0] != strides[1]:
        raise Refused(f"Conv '{label(conv)}': strides {strides} differ per axis; webtune's conv "
                      "takes one stride")
    auto_pad = a.get("auto_pad", b"NOTSET")
    auto_pad = auto_pad.decode() if isinstance(auto_pad, bytes) else auto_pad
    if auto_pad not in ("NOTSET", "VALID"):
        raise Refused(f"Conv '{label(conv)}': auto_pad {auto_pad}; only explicit pads are supported")
    pads = list(a.get("pads", [0, 0, 0, 0])) if auto_pad == "NOTSET" else [0, 0, 0, 0]
    if len(set(pads)) != 1:
        raise Refused(f"Conv '{label(conv)}': pads {pads} are not symmetric and equal on both "
                      "axes; webtune's conv takes one pad")
    if group == 1:
        op = "conv2d"
        if cg != c:
            raise Refused(f"Conv '{label(conv)}': weight has {cg} input channels, input has {c}")
    elif group == c and k == c and cg == 1:
        op = "depthwise_conv2d"
    else:
        raise Refused(f"Conv '{label(conv)}': group {group} with C = {c}, K = {k}; only group 1 "
                      "and depthwise (group == C == K) are supported")
    task = {"op": op, "N": n, "C": c, "H": h, "W": wd}
    if op == "conv2d":
        task["K"] = k
    task.update({"R": r, "S": s, "stride": strides[0], "pad": pads[0]})
    return task


def shape_key(task):
    return tuple((f, task.get(f)) for f in ("op", "N", "C", "H", "W", "K", "R", "S", "stride", "pad"))


def extract(model, names_from=None):
    """The workload file's task list: distinct (shapes, epilogue), in graph order."""
    opset = opset_version(model)
    graph = Graph(model)
    convs = [n for n in graph.nodes if n.op_type == "Conv"]
    # Which chain takes each Add: operand 0's when both reach it (see the file comment).
    reached = set()
    for conv in convs:
        epilogue_of(graph, conv, None, opset, reached)
    claims = {}
    for add_id, index in sorted(reached, key=lambda r: r[1], reverse=True):
        claims[add_id] = index  # operand 0 written last wins
    distinct = collections.OrderedDict()
    for conv in convs:
        task = conv_task(graph, conv)
        task["epilogue"] = epilogue_of(graph, conv, claims, opset)
        key = (shape_key(task), json.dumps(task["epilogue"], sort_keys=True))
        if key in distinct:
            distinct[key]["occurrences"] += 1
        else:
            task["occurrences"] = 1
            distinct[key] = task
    known = {}
    for i, t in enumerate(names_from or []):
        if t.get("op") in ("conv2d", "depthwise_conv2d"):
            t = dict(t)
            t.setdefault("N", 1)
            t.setdefault("S", t.get("R"))
            t.setdefault("stride", 1)
            t.setdefault("pad", 0)
            if t["op"] == "depthwise_conv2d":
                t.pop("K", None)
            known.setdefault(shape_key(t), (i, t["name"]))
    # Matched layers first, in --names-from's order, the variant without a residual before the
    # one with; then the others in graph order.
    tasks = list(distinct.values())
    rank = {id(t): (known[shape_key(t)][0] if shape_key(t) in known else len(known) + j,
                    t["epilogue"]["residual"] != "none") for j, t in enumerate(tasks)}
    tasks.sort(key=lambda t: rank[id(t)])
    counters = collections.Counter()
    used = set()
    out = []
    for task in tasks:
        base = known[shape_key(task)][1] if shape_key(task) in known else None
        if base is None:
            if task["op"] == "depthwise_conv2d":
                kind = "DW"
            elif task["R"] == 1 and task["S"] == 1:
                kind = "PW"
            else:
                kind = "CV"
            counters[kind] += 1
            name = f"{kind}{counters[kind]}"
        elif task["epilogue"]["residual"] != "none" and base + "R" not in used:
            name = base + "R"
        elif base not in used:
            name = base
        else:
            i = 2
            while f"{base}_{i}" in used:
                i += 1
            name = f"{base}_{i}"
        used.add(name)
        out.append(dict({"name": name}, **task))
    return out, len(convs)


def epilogue_text(e):
    s = "+bias" if e["bias"] else ""
    act = e["activation"]
    if act == "clip":
        act = f"clip({e['clip_min']:g},{e['clip_max']:g})"
    if e["residual"] == "before_activation":
        s += "+residual"
    if act != "none":
        s += "+" + act
    if e["residual"] == "after_activation":
        s += "+residual"
    return s


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    p.add_argument("model", help="ONNX model file")
    p.add_argument("--out", required=True, help="workload JSON to write")
    p.add_argument("--name", help="the workload's name (default: the model file's stem)")
    p.add_argument("--names-from", help="workload file whose task names are reused by shape")
    p.add_argument("--batch", type=int, default=None,
                   help="batch size for a model whose input batch dimension is symbolic")
    args = p.parse_args()
    try:
        model = onnx.load(args.model)
        if args.batch is not None:
            for inp in model.graph.input:
                dims = inp.type.tensor_type.shape.dim
                if dims and not dims[0].HasField("dim_value"):
                    dims[0].dim_value = args.batch
        model = shape_inference.infer_shapes(model)
        names_from = None
        if args.names_from:
            with open(args.names_from) as f:
                names_from = json.load(f)["tasks"]
        tasks, conv_count = extract(model, names_from)
    except Refused as e:
        print(f"extract_conv_layers: {args.model}: {e}", file=sys.stderr)
        sys.exit(2)
    stem = args.model.rsplit("/", 1)[-1].rsplit(".", 1)[0]
    name = args.name or stem
    by_op = collections.Counter(t["op"] for t in tasks)
    result = {
        "name": name,
        "description": (
            f"The distinct convolution layers of {stem}.onnx (batch {tasks[0]['N'] if tasks else 1}, "
            f"fp32, NCHW) with the epilogue the graph fuses into each (bias, activation, residual "
            f"add), from bench/extract_conv_layers.py: {conv_count} Conv nodes, "
            f"{len(tasks)} distinct ({', '.join(f'{v} {k}' for k, v in sorted(by_op.items()))}). "
            "occurrences = how often each appears in the network."),
        "tasks": tasks,
    }
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")
    print(f"{args.model}: {conv_count} Conv nodes, {len(tasks)} distinct layers -> {args.out}")
    for t in tasks:
        shape = ",".join(str(t[k]) for k in ("N", "C", "H", "W", "K", "R", "S", "stride", "pad")
                         if k in t)
        print(f"  {t['name']:>6} {t['op']}:{shape}{epilogue_text(t['epilogue'])}"
              f"  x{t['occurrences']}")


if __name__ == "__main__":
    main()
