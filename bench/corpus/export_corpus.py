#!/usr/bin/env python3
"""\\file export_corpus.py
Exports the corpus of real PyTorch vision models (issue 48, "A corpus of real exports") on a
machine with PyTorch, torchvision, onnx and onnxruntime (the `device` machine), and writes what
CI keeps: each export's graph with its large float initializers replaced by a seeded recipe
(tests/data/corpus/, restored by `webtune corpus restore`, graph/corpus_recipe.hpp).

    python3 bench/corpus/export_corpus.py --out DIR [--models a,b] [--keep-full]
    python3 bench/corpus/export_corpus.py --out DIR --merge   (after parallel runs, one per
                                                               model, into the same DIR)

Per model x exporter (TorchScript `dynamo=False`, dynamo `dynamo=True`) x opset (13, 17):
  - the model is built by torchvision with weights=None after torch.manual_seed(0) (its own
    initialisers: seeded, realistic scales), in eval mode; the input is torch.rand(1,3,S,S)
    after torch.manual_seed(1), S = --size (224; files of another size end in .<S>px.onnx);
  - exported; onnxruntime (CPU) runs the export and its output is compared with PyTorch's
    (relative error = max |ort - torch| / max |torch|): the export itself is checked;
  - the skeleton: every float initializer of more than 16 elements keeps its name, dims and
    type and loses its data; its doc_string holds the recipe
    `webtune-recipe uniform lo=<lo> hi=<hi> seed=<seed>`, lo / hi from the real tensor's mean
    and standard deviation (mean -+ sqrt(3) std, clamped to [min, max], so a tensor that was
    non-negative, e.g. BatchNormalization's variance, stays so) and seed the FNV-1a 64 hash of
    the name. Small initializers and int64 tensors stay as they are.
Writes DIR/skeletons/<model>.<exporter>.opset<N>.onnx and DIR/rows/<model>.json (per export:
status, error, ops, max error against PyTorch, seconds); --merge packs them into
DIR/corpus.tar.xz and DIR/corpus.json. With --keep-full the full
exports, inputs and PyTorch outputs stay in DIR/full/ (for the GPU bench, never committed).
"""
import argparse
import json
import math
import os
import sys
import tarfile
import time
import traceback

import numpy as np
import onnx
import onnxruntime as ort
import torch
import torchvision
from onnx import numpy_helper

SMALL = 16


class SegmentationOut(torch.nn.Module):
    """torchvision's segmentation models return a dict; the export takes its 'out'."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        return self.model(x)["out"]


def build(name):
    m = torchvision.models
    if name == "googlenet":
        return m.googlenet(weights=None, aux_logits=False, init_weights=True)
    if name == "lraspp_mobilenet_v3_large":
        return SegmentationOut(
            m.segmentation.lraspp_mobilenet_v3_large(weights=None, weights_backbone=None))
    return getattr(m, name)(weights=None)


MODELS = [
    "resnet50", "mobilenet_v3_large", "efficientnet_b0", "mnasnet1_0", "regnet_y_400mf",
    "googlenet", "densenet121", "convnext_tiny", "lraspp_mobilenet_v3_large",
    "shufflenet_v2_x1_0", "squeezenet1_1", "resnet18", "mobilenet_v2",
]


def fnv1a64(text):
    h = 0xCBF29CE484222325
    for b in text.encode():
        h ^= b
        h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def skeleton(model):
    """The model with its large float initializers replaced by recipes (in place)."""
    for init in model.graph.initializer:
        if init.data_type != onnx.TensorProto.FLOAT:
            continue
        a = numpy_helper.to_array(init).astype(np.float64)
        if a.size <= SMALL:
            continue
        mean, std = float(a.mean()), float(a.std())
        lo = max(float(a.min()), mean - math.sqrt(3) * std)
        hi = min(float(a.max()), mean + math.sqrt(3) * std)
        dims = list(init.dims)
        name = init.name
        init.Clear()
        init.name = name
        init.data_type = onnx.TensorProto.FLOAT
        init.dims.extend(dims)
        init.doc_string = "webtune-recipe uniform lo=%.9g hi=%.9g seed=%d" % (lo, hi, fnv1a64(name))
    return model


def export(model, x, exporter, opset, path):
    if exporter == "torchscript":
        torch.onnx.export(model, (x,), path, opset_version=opset, dynamo=False,
                          input_names=["input"], output_names=["output"])
    else:
        program = torch.onnx.export(model, (x,), dynamo=True, opset_version=opset,
                                    input_names=["input"], output_names=["output"])
        program.save(path)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--exporters", default="torchscript,dynamo")
    p.add_argument("--opsets", default="13,17")
    p.add_argument("--keep-full", action="store_true")
    p.add_argument("--merge", action="store_true")
    p.add_argument("--size", type=int, default=224,
                   help="input height and width (224; CI's per-target runs use 64: every "
                        "operator, a twelfth of the pixels)")
    args = p.parse_args()
    if args.merge:
        return merge(args.out)
    full = os.path.join(args.out, "full")
    skeletons = os.path.join(args.out, "skeletons")
    rows = os.path.join(args.out, "rows" if args.size == 224 else "rows%d" % args.size)
    for d in (full, skeletons, rows):
        os.makedirs(d, exist_ok=True)
    torch.set_num_threads(2)
    for name in args.models.split(","):
        results = []
        torch.manual_seed(0)
        model = build(name).eval()
        torch.manual_seed(1)
        x = torch.rand(1, 3, args.size, args.size)
        with torch.no_grad():
            ref = model(x).numpy()
        if args.keep_full:
            tag = name + ("" if args.size == 224 else ".%dpx" % args.size)
            x.numpy().astype("<f4").tofile(os.path.join(full, tag + ".input.f32"))
            ref.astype("<f4").tofile(os.path.join(full, tag + ".torch.f32"))
        for exporter in args.exporters.split(","):
            for opset in [int(o) for o in args.opsets.split(",")]:
                stem = "%s.%s.opset%d" % (name, exporter, opset)
                if args.size != 224:
                    stem += ".%dpx" % args.size
                path = os.path.join(full, stem + ".onnx")
                row = {"model": name, "exporter": exporter, "opset": opset, "file": stem + ".onnx"}
                start = time.time()
                try:
                    with torch.no_grad():
                        export(model, x, exporter, opset, path)
                    m = onnx.load(path)
                    row["opset_written"] = [o.version for o in m.opset_import if o.domain in ("", "ai.onnx")]
                    ops = {}
                    for n in m.graph.node:
                        ops[n.op_type] = ops.get(n.op_type, 0) + 1
                    row["ops"] = ops
                    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
                    out = sess.run(None, {sess.get_inputs()[0].name: x.numpy()})[0]
                    row["ort_rel_error"] = float(np.abs(out - ref).max() / max(np.abs(ref).max(), 1e-30))
                    data = skeleton(m).SerializeToString()
                    with open(os.path.join(skeletons, stem + ".onnx"), "wb") as f:
                        f.write(data)
                    row["skeleton_bytes"] = len(data)
                    row["status"] = "ok"
                except Exception as e:  # an exporter that fails is reported, not fatal
                    row["status"] = "failed"
                    row["error"] = (type(e).__name__ + ": " + str(e))[:2000]
                    row["trace"] = traceback.format_exc()[-3000:]
                row["seconds"] = round(time.time() - start, 2)
                if not args.keep_full and os.path.exists(path):
                    os.remove(path)
                    if os.path.exists(path + ".data"):
                        os.remove(path + ".data")
                results.append(row)
                print(json.dumps({k: v for k, v in row.items() if k not in ("trace", "ops")}),
                      flush=True)
        with open(os.path.join(rows, name + ".json"), "w") as f:
            json.dump(results, f)
    return 0


def merge(out):
    results = []
    for rows in sorted(d for d in os.listdir(out) if d.startswith("rows")):
        for name in sorted(os.listdir(os.path.join(out, rows))):
            with open(os.path.join(out, rows, name)) as f:
                results += json.load(f)
    with tarfile.open(os.path.join(out, "corpus.tar.xz"), "w:xz") as tar:
        for name in sorted(os.listdir(os.path.join(out, "skeletons"))):
            tar.add(os.path.join(out, "skeletons", name), arcname=name)
    meta = {"torch": torch.__version__, "torchvision": torchvision.__version__,
            "onnx": onnx.__version__, "onnxruntime": ort.__version__,
            "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "exports": results}
    with open(os.path.join(out, "corpus.json"), "w") as f:
        json.dump(meta, f, indent=1)
    ok = sum(r["status"] == "ok" for r in results)
    print("%d of %d exports ok" % (ok, len(results)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
