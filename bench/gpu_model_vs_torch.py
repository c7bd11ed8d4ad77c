#!/usr/bin/env python3
"""\\file gpu_model_vs_torch.py
Whole models on one NVIDIA GPU: a webtune gles-compute package run through headless EGL
(`webtune run`) beside PyTorch fp32 (TF32 off) on the same GPU, in one command (issue 16's GPU
benchmark).

For each model it prints and writes (JSON) per-inference latency in ms:
- webtune: `webtune run --model PKG --input F --runs N --warmup W`, whose every run is the input
  upload, every step of the package and the output read-back, timed on the host clock (median);
- PyTorch, the torchvision architecture of the same name in eval mode, batch 1, NCHW, fp32 with
  TF32 off, cuDNN benchmark mode on, in four ways:
  * `eager`: the forward alone, back-to-back calls timed with CUDA events (as
    bench/gpu_baselines.py's time_ms);
  * `graph`: the forward captured in a CUDA graph and replayed back to back (time_graph_ms);
  * `eager_e2e` / `graph_e2e`: one inference at a time, as webtune's runs are: a pageable host
    tensor copied to the GPU, the forward (eager, or a graph replay), the output copied back to
    the host, timed on the host clock, median of N;
  and each once more with every BatchNorm folded into its convolution (`torch.fx` fusion), which
  is what the ONNX export (and so webtune's package) holds: the faster of the two is the anchor.
The ratios printed are PyTorch's time / webtune's time (> 1: webtune is faster).

Weights do not change the timing but they do change the check: the package's output (read with
`--output`) is compared with `--expect` (raw float32 logits computed off the GPU, e.g. by
`webtune run` on llvmpipe or onnxruntime) and the max abs error is reported.

The device's carry limit is 64 MiB, less than ResNet-18's weights beside the binary and the
repository: a package folder may hold `weights.f16` (the float32 weights rounded to float16,
written by `--shrink PKG`) or `weights.q8` (`--shrink PKG --shrink-bits 8`: blocks of 256 floats,
each a float32 scale max|x| / 127 and 256 int8 values, a quarter of the size) instead of
`weights.bin`; it is expanded back to float32 before the run (the expected logits must then come
from the same rounded weights).

Usage on the device:
  gpu_model_vs_torch.py --webtune .devpkg/webtune --input in.f32 --out res.json [--profile] \\
      --model resnet18=PKG1[:EXPECT1] --model mobilenet_v2=PKG2[:EXPECT2]
and here, before carrying: gpu_model_vs_torch.py --shrink PKG [--shrink-bits 8] (writes
PKG/weights.f16 or PKG/weights.q8 and rewrites weights.bin with the rounded values, for the local
reference; delete weights.bin before carrying).
"""
import argparse
import json
import os
import re
import statistics
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


Q8_BLOCK = 256  # floats per scale of weights.q8


def q8_encode(values):
    """float32 values -> bytes of weights.q8: per block of Q8_BLOCK, a float32 scale
    (max|x| / 127, 0 for an all-zero block) then the int8 round(x / scale)."""
    out = bytearray()
    for start in range(0, len(values), Q8_BLOCK):
        block = values[start:start + Q8_BLOCK]
        peak = max(abs(v) for v in block)
        scale = peak / 127.0 if peak > 0 else 0.0
        scale = struct.unpack("<f", struct.pack("<f", scale))[0]  # what the decoder will read
        out += struct.pack("<f", scale)
        q = [0 if scale == 0 else max(-127, min(127, round(v / scale))) for v in block]
        out += struct.pack(f"<{len(q)}b", *q)
    return bytes(out)


def q8_decode(data, n):
    """bytes of weights.q8 -> n float32 values (see q8_encode)."""
    values = []
    pos = 0
    while len(values) < n:
        count = min(Q8_BLOCK, n - len(values))
        (scale,) = struct.unpack_from("<f", data, pos)
        q = struct.unpack_from(f"<{count}b", data, pos + 4)
        values.extend(v * scale for v in q)
        pos += 4 + count
    return values


def shrink(package, bits):
    # struct's "e" is IEEE binary16 with round-to-nearest-even; no NumPy needed here.
    path = os.path.join(package, "weights.bin")
    with open(path, "rb") as f:
        data = f.read()
    n = len(data) // 4
    values = struct.unpack(f"<{n}f", data)
    if bits == 16:
        small_name = "weights.f16"
        small = struct.pack(f"<{n}e", *values)
        rounded = struct.unpack(f"<{n}e", small)
    else:
        small_name = "weights.q8"
        small = struct.pack("<Q", n) + q8_encode(values)
        rounded = q8_decode(small[8:], n)
    with open(os.path.join(package, small_name), "wb") as f:
        f.write(small)
    with open(path, "wb") as f:  # the rounded weights, for the local reference
        f.write(struct.pack(f"<{n}f", *rounded))
    print(f"{package}: {small_name} written ({n} floats, {len(small)} bytes); weights.bin now "
          "holds the rounded values (run the local reference on it, then delete it before "
          "carrying)")


def expand(package):
    f32 = os.path.join(package, "weights.bin")
    if os.path.exists(f32):
        return
    f16 = os.path.join(package, "weights.f16")
    q8 = os.path.join(package, "weights.q8")
    if os.path.exists(f16):
        with open(f16, "rb") as f:
            data = f.read()
        n = len(data) // 2
        values = struct.unpack(f"<{n}e", data)
    elif os.path.exists(q8):
        with open(q8, "rb") as f:
            data = f.read()
        (n,) = struct.unpack_from("<Q", data, 0)
        values = q8_decode(data[8:], n)
    else:
        return
    with open(f32, "wb") as f:
        f.write(struct.pack(f"<{n}f", *values))


def run_webtune(webtune, package, input_path, runs, warmup, profile=False):
    out_path = os.path.join(package, "output.f32")
    cmd = [webtune, "run", "--model", package, "--input", input_path, "--runs", str(runs),
           "--warmup", str(warmup), "--output", out_path] + (["--profile"] if profile else [])
    p = subprocess.run(cmd, capture_output=True, text=True)
    sys.stderr.write(p.stderr[-4000:])
    print(p.stdout, flush=True)
    if p.returncode != 0:
        raise RuntimeError(f"webtune run failed ({p.returncode})")
    m = re.search(r"latency\s+median ([0-9.]+) ms\s+min ([0-9.]+) ms\s+max ([0-9.]+) ms", p.stdout)
    return {"median_ms": float(m.group(1)), "min_ms": float(m.group(2)),
            "max_ms": float(m.group(3)), "runs": runs, "warmup": warmup}, out_path


def torch_model(name):
    """torchvision's architecture (random weights: the timing does not depend on them); the same
    layers written out here where torchvision is not installed."""
    try:
        import torchvision

        # Any torchvision classifier by its name (the corpus's models: efficientnet_b0, ...).
        return getattr(torchvision.models, name)(weights=None).eval()
    except ImportError:
        return {"resnet18": resnet18_layers, "mobilenet_v2": mobilenet_v2_layers}[name]().eval()


def resnet18_layers():
    from torch import nn

    def cbr(cin, cout, k, s, relu=True):
        layers = [nn.Conv2d(cin, cout, k, s, k // 2, bias=False), nn.BatchNorm2d(cout)]
        return nn.Sequential(*layers, nn.ReLU(inplace=True)) if relu else nn.Sequential(*layers)

    class Block(nn.Module):
        def __init__(self, cin, cout, s):
            super().__init__()
            self.a, self.b = cbr(cin, cout, 3, s), cbr(cout, cout, 3, 1, relu=False)
            self.down = cbr(cin, cout, 1, s, relu=False) if s != 1 or cin != cout else None

        def forward(self, x):
            y = self.b(self.a(x))
            return (y + (self.down(x) if self.down is not None else x)).relu_()

    chans = [(64, 64, 1), (64, 64, 1), (64, 128, 2), (128, 128, 1), (128, 256, 2),
             (256, 256, 1), (256, 512, 2), (512, 512, 1)]
    return nn.Sequential(cbr(3, 64, 7, 2), nn.MaxPool2d(3, 2, 1),
                         *[Block(i, o, s) for i, o, s in chans], nn.AdaptiveAvgPool2d(1),
                         nn.Flatten(), nn.Linear(512, 1000))


def mobilenet_v2_layers():
    from torch import nn

    def cbr(cin, cout, k, s, groups=1, relu6=True):
        layers = [nn.Conv2d(cin, cout, k, s, k // 2, groups=groups, bias=False),
                  nn.BatchNorm2d(cout)]
        return nn.Sequential(*layers, nn.ReLU6(inplace=True)) if relu6 else nn.Sequential(*layers)

    class Inverted(nn.Module):
        def __init__(self, cin, cout, s, t):
            super().__init__()
            hidden = cin * t
            layers = [cbr(cin, hidden, 1, 1)] if t != 1 else []
            layers += [cbr(hidden, hidden, 3, s, groups=hidden), cbr(hidden, cout, 1, 1, relu6=False)]
            self.body, self.res = nn.Sequential(*layers), s == 1 and cin == cout

        def forward(self, x):
            return x + self.body(x) if self.res else self.body(x)

    layers, cin = [cbr(3, 32, 3, 2)], 32
    for t, c, n, s in [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                       (6, 160, 3, 2), (6, 320, 1, 1)]:
        for i in range(n):
            layers.append(Inverted(cin, c, s if i == 0 else 1, t))
            cin = c
    layers += [cbr(cin, 1280, 1, 1), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(0.2),
               nn.Linear(1280, 1000)]
    return nn.Sequential(*layers)


def host_e2e_ms(step, runs):
    import torch

    for _ in range(5):
        step()
    torch.cuda.synchronize()
    ms = []
    for _ in range(runs):
        t = time.perf_counter()
        step()  # ends with a device-to-host copy, which waits for the GPU
        ms.append((time.perf_counter() - t) * 1e3)
    return statistics.median(ms)


def time_torch(model, runs):
    import torch
    from gpu_baselines import time_graph_ms, time_ms

    x_host = torch.randn(1, 3, 224, 224)
    x = x_host.cuda()
    out = {}
    with torch.inference_mode():
        out["eager"] = time_ms(lambda: model(x))
        out["graph"] = time_graph_ms(lambda: model(x), calls=8)
        out["eager_e2e"] = host_e2e_ms(lambda: model(x_host.cuda()).cpu(), runs)
        # One inference per replay, with the copies around it.
        static_x = x.clone()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                model(static_x)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_y = model(static_x)

        def replay():
            static_x.copy_(x_host)
            graph.replay()
            return static_y.cpu()

        out["graph_e2e"] = host_e2e_ms(replay, runs)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--shrink", help="write PKG/weights.f16 (or .q8) for carrying (see above) and exit")
    ap.add_argument("--shrink-bits", type=int, choices=(16, 8), default=16,
                    help="with --shrink: 16 (float16) or 8 (int8 blocks with a scale each)")
    ap.add_argument("--webtune")
    ap.add_argument("--input", help="raw float32 1x3x224x224 input")
    ap.add_argument("--model", action="append", default=[], help="NAME=PKG[:EXPECT]")
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--out")
    ap.add_argument("--profile", action="store_true",
                    help="webtune run --profile on the first run: every step's GPU time")
    args = ap.parse_args()
    if args.shrink:
        shrink(args.shrink, args.shrink_bits)
        return

    import numpy as np
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    print(f"GPU {torch.cuda.get_device_name()}  torch {torch.__version__}  "
          f"cuDNN {torch.backends.cudnn.version()}", flush=True)
    results = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
               "cudnn": torch.backends.cudnn.version(), "date": time.strftime("%Y-%m-%d %H:%M UTC",
                                                                           time.gmtime()),
               "models": {}}
    for spec in args.model:
        name, rest = spec.split("=", 1)
        package, _, expect = rest.partition(":")
        expand(package)
        r = {}
        r["webtune"], out_path = run_webtune(args.webtune, package, args.input, args.runs,
                                             args.warmup, args.profile)
        if expect:
            got = np.fromfile(out_path, dtype="<f4")
            want = np.fromfile(expect, dtype="<f4")
            err = float(np.max(np.abs(got - want)))
            r["check"] = {"max_abs_error": err, "max_abs_logit": float(np.max(np.abs(want))),
                          "top1_webtune": int(got.argmax()), "top1_expected": int(want.argmax())}
            print(f"{name}: check max abs error {err:.3g} (max |logit| "
                  f"{r['check']['max_abs_logit']:.3g}), top-1 {r['check']['top1_webtune']} vs "
                  f"{r['check']['top1_expected']}", flush=True)
        model = torch_model(name).cuda()
        r["torch"] = time_torch(model, args.runs)
        try:
            from torch.fx.experimental.optimization import fuse

            r["torch_bn_folded"] = time_torch(fuse(model), args.runs)
        except Exception as e:  # noqa: BLE001 - report, do not lose the other figures
            r["torch_bn_folded_error"] = repr(e)
        # The webtune run again, after PyTorch: the two must agree for the figures to stand.
        r["webtune_again"], _ = run_webtune(args.webtune, package, args.input, args.runs,
                                            args.warmup)
        w = min(r["webtune"]["median_ms"], r["webtune_again"]["median_ms"])
        for way in ("eager", "graph", "eager_e2e", "graph_e2e"):
            best = min(v[way] for k, v in r.items() if k.startswith("torch") and isinstance(v, dict))
            r.setdefault("ratio", {})[way] = best / w
        print(f"{name}: webtune {r['webtune']['median_ms']:.3f} / {r['webtune_again']['median_ms']:.3f}"
              f" ms; torch {json.dumps(r['torch'])}; bn-folded "
              f"{json.dumps(r.get('torch_bn_folded'))}; torch/webtune {json.dumps(r['ratio'])}",
              flush=True)
        results["models"][name] = r
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
