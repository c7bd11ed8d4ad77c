#!/usr/bin/env python3
"""\file gpu_baselines.py
cuBLAS and cuDNN fp32 baselines (TF32 off) for the tasks bench/gpu_tune_vs_cublas tunes.

Times, through PyTorch on the CUDA device, dense M×N×K (torch.mm, cuBLAS) and each conv2d and
depthwise_conv2d task of webtune workload files (torch.nn.functional.conv2d, groups = C for
depthwise; cuDNN with benchmark mode so that it picks its fastest algorithm), NCHW, batch as in
the file. FLOPs count a multiply-add as 2 and leave the epilogue out, as webtune's
Workload::flops() does, so GFLOP/s figures compare one to one.

Epilogues (a task's "epilogue", codegen/include/codegen/epilogue.hpp): the vendor side runs the
same ops as webtune's fused kernel, on the conv's output in place: bias (conv2d's bias
argument), residual add before or after the activation (Tensor.add_), relu (relu_), clip
(clamp_, ReLU6 = clip(0, 6)) or hard-swish (F.hardswish with inplace). PyTorch runs these as
separate kernels after the convolution ("separate"). Where the epilogue is bias + relu with or
without a residual before it, cuDNN also has a fused convolution (aten::cudnn_convolution_relu
and aten::cudnn_convolution_add_relu, cudnnConvolutionBiasActivationForward): it is timed too
("fused", checked against the separate result), and the baseline is the faster of the two, so
webtune's fused kernel is compared with the vendor's best.

Timing: a CUDA graph of 32 back-to-back calls, captured after warm-up (so cuDNN's benchmark
mode has picked its algorithm) and replayed in batches timed by CUDA events until a batch lasts
50 ms; the median of 7 batches, per call. A graph replay launches the kernels without PyTorch's
Python and dispatcher overhead (about 20 us a call), which otherwise swamps layers that run for
less than about 30 us, as webtune's GL runtime has no such overhead between dispatches. The
eager figure (the same batches as plain calls) is kept beside it as "eager_ms". Inputs are
random normal, never zeros.

Usage: gpu_baselines.py --dense 4096,4096,4096 --workload resnet18_fused.json
           [--workload mobilenet_v2.json ...] [--tasks C1,C2R] --out baselines.json
Writes {"device":..., "torch":..., "cuda":..., "tasks": {name: {"lib", "op", "key", "gflops",
"ms", "eager_ms", "separate_ms", "fused_ms"}}} (ms: the graph-replayed baseline per call;
eager_ms the same ops called eagerly). Task names must be unique across the workload files.

       gpu_baselines.py --report DB --out baselines.json [--remeasured FILE]
reads that file back (no GPU needed) with a webtune SQLite records file and prints, for each
tuning job, its best GFLOP/s, the baseline's and their ratio, then the geometric mean of the
convolution ratios per target. With --remeasured (bench/gpu_tune_vs_cublas's remeasure phase:
{"tasks": {name: {"gflops":...}}}), the re-measured best is compared instead of the recorded
one; bench/gpu_tune_vs_cublas's report phase prints the issue's summary.
"""
import argparse
import json
import statistics


def time_ms(fn, min_batch_ms=50.0, repeats=7):
    """Median milliseconds per call of fn, batching calls until a batch lasts min_batch_ms."""
    import torch

    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    number = 1
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    while True:
        start.record()
        for _ in range(number):
            fn()
        end.record()
        end.synchronize()
        if start.elapsed_time(end) >= min_batch_ms or number >= 1 << 16:
            break
        number *= 2
    costs = []
    for _ in range(repeats):
        start.record()
        for _ in range(number):
            fn()
        end.record()
        end.synchronize()
        costs.append(start.elapsed_time(end) / number)
    return statistics.median(costs)


def time_graph_ms(fn, calls=32, min_batch_ms=50.0, repeats=7):
    """Median milliseconds per call of fn, replayed from a CUDA graph of `calls` calls."""
    import torch

    # Warm up on a side stream, as graph capture requires; cuDNN picks its algorithm here.
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    graph.replay()
    torch.cuda.synchronize()
    replays = 1
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    while True:
        start.record()
        for _ in range(replays):
            graph.replay()
        end.record()
        end.synchronize()
        if start.elapsed_time(end) >= min_batch_ms or replays >= 1 << 14:
            break
        replays *= 2
    costs = []
    for _ in range(repeats):
        start.record()
        for _ in range(replays):
            graph.replay()
        end.record()
        end.synchronize()
        costs.append(start.elapsed_time(end) / (replays * calls))
    return statistics.median(costs)


SHAPE_FIELDS = {
    "dense": (("M", None), ("N", None), ("K", None)),
    "conv2d": (("N", 1), ("C", None), ("H", None), ("W", None), ("K", None), ("R", None),
               ("S", "R"), ("stride", 1), ("pad", 0)),
    "depthwise_conv2d": (("N", 1), ("C", None), ("H", None), ("W", None), ("K", "C"),
                         ("R", None), ("S", "R"), ("stride", 1), ("pad", 0)),
}


def normal_epilogue(e):
    """The epilogue JSON in one form (None when empty), as Epilogue::from_json reads it."""
    e = e or {}
    out = {"bias": bool(e.get("bias", False)), "activation": e.get("activation", "none"),
           "residual": e.get("residual", "none")}
    if out["activation"] == "clip":
        out["clip_min"] = float(e.get("clip_min", 0.0))
        out["clip_max"] = float(e.get("clip_max", 6.0))
    if not out["bias"] and out["activation"] == "none" and out["residual"] == "none":
        return None
    return out


def canonical(w):
    """A workload's identity (op, shapes, epilogue; not its name) as a string, so that a
    record's workload JSON (Workload::to_json) and a workload file's task match."""
    op = w["op"]
    if op not in SHAPE_FIELDS:
        raise ValueError(f"unknown op '{op}'")
    shape = {}
    for field, default in SHAPE_FIELDS[op]:
        if field in w:
            shape[field] = int(w[field])
        elif isinstance(default, str):
            shape[field] = shape[default]
        elif default is not None:
            shape[field] = default
        else:
            raise ValueError(f"workload {w}: no '{field}'")
    return json.dumps({"op": op, "shape": shape, "epilogue": normal_epilogue(w.get("epilogue"))},
                      sort_keys=True)


def epilogue_fn(epilogue, residual):
    """fn(y) applying the epilogue after the bias (which conv2d adds) to the conv output y in
    place with PyTorch ops; returns y. residual: a tensor of y's shape, or None."""
    import torch.nn.functional as F

    e = normal_epilogue(epilogue) or {"bias": False, "activation": "none", "residual": "none"}
    act = e["activation"]
    res = e["residual"]

    def apply(y):
        if res == "before_activation":
            y.add_(residual)
        if act == "relu":
            y.relu_()
        elif act == "clip":
            y.clamp_(e["clip_min"], e["clip_max"])
        elif act == "hard_swish":
            F.hardswish(y, inplace=True)
        elif act != "none":
            raise ValueError(f"unknown activation '{act}'")
        if res == "after_activation":
            y.add_(residual)
        return y

    return apply


def conv_baseline(t, dev, gen, eager=True):
    """Times task t (conv2d or depthwise_conv2d with its epilogue); returns its baseline entry."""
    import torch
    import torch.nn.functional as F

    depthwise = t["op"] == "depthwise_conv2d"
    n, c, h, w_ = t.get("N", 1), t["C"], t["H"], t["W"]
    k = c if depthwise else t["K"]
    r = t["R"]
    s = t.get("S", r)
    stride, pad = t.get("stride", 1), t.get("pad", 0)
    groups = c if depthwise else 1
    e = normal_epilogue(t.get("epilogue")) or {"bias": False, "activation": "none",
                                               "residual": "none"}
    x = torch.randn(n, c, h, w_, device=dev, generator=gen)
    wt = torch.randn(k, c // groups, r, s, device=dev, generator=gen)
    b = torch.randn(k, device=dev, generator=gen) if e["bias"] else None
    oh = (h + 2 * pad - r) // stride + 1
    ow = (w_ + 2 * pad - s) // stride + 1
    res = (torch.randn(n, k, oh, ow, device=dev, generator=gen)
           if e["residual"] != "none" else None)
    tail = epilogue_fn(e, res)
    separate = lambda: tail(F.conv2d(x, wt, b, stride=stride, padding=pad, groups=groups))
    y = separate()
    assert list(y.shape) == [n, k, oh, ow], (t, list(y.shape))
    flops = 2.0 * y.numel() * (c // groups) * r * s
    entry = {"lib": "cudnn", "op": t["op"], "key": canonical(t)}
    entry["eager_ms"] = time_ms(separate) if eager else None
    entry["separate_ms"] = time_graph_ms(separate)
    entry["ms"] = entry["separate_ms"]
    # cuDNN's own fused conv + bias (+ add) + relu, where the epilogue is that.
    fused = None
    if e["activation"] == "relu" and e["residual"] in ("none", "before_activation"):
        bias = b if b is not None else torch.zeros(k, device=dev)
        args = ([stride, stride], [pad, pad], [1, 1], groups)
        if e["residual"] == "none":
            fused = lambda: torch.ops.aten.cudnn_convolution_relu(x, wt, bias, *args)
        else:
            fused = lambda: torch.ops.aten.cudnn_convolution_add_relu(x, wt, res, 1.0, bias,
                                                                       *args)
    if fused is not None:
        try:
            want = separate().clone()
            got = fused()
            scale = want.abs().max().item() + 1e-6
            if (got - want).abs().max().item() > 1e-3 * scale:
                raise RuntimeError("its result differs from the separate ops'")
            entry["fused_ms"] = time_graph_ms(fused)
            entry["ms"] = min(entry["ms"], entry["fused_ms"])
        except Exception as err:  # noqa: BLE001: any failure leaves the separate ops' figure
            entry["fused_error"] = str(err).splitlines()[0][:200]
    entry["gflops"] = flops / entry["ms"] / 1e6
    return entry


# Issue 14's targets: fused convolutions' geometric mean and floor, dense per shape.
CONV_GEOMEAN_TARGET = 0.75
CONV_FLOOR = 0.4
DENSE_TARGETS = {(4096, 4096, 4096): 0.75, (1000, 1000, 1000): 0.6}

BEST_SQL = (
    "SELECT j.id, j.task_name, w.op, w.json, t.name, MAX(r.gflops), COUNT(r.id), "
    "SUM(r.error_no = 0) FROM tuning_jobs j JOIN workloads w ON w.id = j.workload_id "
    "JOIN targets t ON t.id = j.target_id JOIN trials r ON r.job_id = j.id "
    "GROUP BY j.id ORDER BY t.name, j.id")


def geomean(values):
    import math

    return math.exp(sum(math.log(max(v, 1e-9)) for v in values) / len(values))


def load_baselines(path):
    """{canonical key: (name, entry)} of a baselines file. Files written before tasks had a
    "key" (plain conv2d, matched by task name) are read too."""
    with open(path) as f:
        base = json.load(f)["tasks"]
    by_key, by_name = {}, {}
    for name, b in base.items():
        key = b.get("key")
        if key is None and name.startswith("dense:"):
            m, n, k = (int(v) for v in name[len("dense:"):].split(","))
            key = canonical({"op": "dense", "M": m, "N": n, "K": k})
        if key is not None:
            by_key[key] = (name, b)
        else:
            by_name[name] = (name, b)
    return by_key, by_name


def report(db_path, baselines_path, remeasured_path=None):
    """Prints each tuning job's best GFLOP/s (re-measured where --remeasured has it) against
    its baseline, then per target the geometric mean of the convolution ratios (all, and per
    model), the tasks below CONV_FLOOR and the dense ratios against DENSE_TARGETS."""
    import sqlite3

    by_key, by_name = load_baselines(baselines_path)
    again = {}
    if remeasured_path:
        with open(remeasured_path) as f:
            for r in json.load(f)["tasks"]:
                again[(r["target"], r["key"])] = r
    con = sqlite3.connect(db_path)
    rows = con.execute(BEST_SQL).fetchall()
    conv, dense = {}, {}
    print(f"{'task':>22} {'target':>12} {'trials':>6} {'ok':>5} {'recorded':>9} "
          f"{'re-meas.':>9} {'baseline':>9} {'base us':>8} {'via':>8} {'ratio':>6}")
    for _, task, op, wjson, target, best, trials, ok in rows:
        w = json.loads(wjson)
        try:
            key = canonical(w)
        except ValueError:
            continue
        name, b = by_key.get(key, (None, None))
        if b is None and op == "conv2d" and normal_epilogue(w.get("epilogue")) is None:
            name, b = by_name.get(task, (None, None))  # an old baselines file
        label = name or task or key
        if op == "dense":
            label = f"dense:{w['M']},{w['N']},{w['K']}"
        r = again.get((target, key))
        now = r["gflops"] if r and r.get("gflops") else None
        used = now if now is not None else best
        ratio = used / b["gflops"] if b else float("nan")
        via = ""
        if b:
            via = "fused" if b.get("fused_ms") is not None and b["ms"] == b["fused_ms"] else \
                ("graph" if "separate_ms" not in b else "separate")
            if op in ("conv2d", "depthwise_conv2d"):
                conv.setdefault(target, []).append((label, b.get("model", ""), ratio))
            elif op == "dense":
                dense.setdefault(target, []).append(((w["M"], w["N"], w["K"]), ratio))
        fmt = lambda v, spec: format(v, spec) if v is not None else "-".rjust(int(spec.split(".")[0]))
        print(f"{label:>22} {target:>12} {trials:6d} {ok:5d} {best:9.1f} {fmt(now, '9.1f')} "
              f"{fmt(b['gflops'] if b else None, '9.1f')} "
              f"{fmt(b['ms'] * 1e3 if b else None, '8.1f')} {via:>8} {ratio:6.3f}")
    source = "re-measured bests" if again else "recorded bests"
    for target, items in conv.items():
        ratios = [r for _, _, r in items]
        geo = geomean(ratios)
        print(f"\n{target}: {source} against the baselines")
        print(f"  convolutions (conv2d and depthwise): geometric mean "
              f"{geo:.3f} over {len(ratios)} tasks (target >= {CONV_GEOMEAN_TARGET}: "
              f"{'met' if geo >= CONV_GEOMEAN_TARGET else 'missed'})")
        for model in sorted({m for _, m, _ in items}):
            rs = [r for _, m, r in items if m == model]
            print(f"    {model or '(no model)'}: {geomean(rs):.3f} over {len(rs)} tasks")
        low = [(n, r) for n, _, r in items if r < CONV_FLOOR]
        print(f"  below {CONV_FLOOR}: {len(low)} of {len(ratios)}"
              + (": " + ", ".join(f"{n} {r:.3f}" for n, r in low) if low else " (target: none)"))
    for target, items in dense.items():
        for (m, n, k), ratio in items:
            want = DENSE_TARGETS.get((m, n, k))
            verdict = f" (target >= {want}: {'met' if ratio >= want else 'missed'})" if want else ""
            print(f"{target}: dense {m}x{n}x{k} ratio {ratio:.3f}{verdict}")


def remeasure(db_path, webtune, target, out_path, measure_args, tasks_filter=None):
    """Re-measures each job's best config on `target` with `webtune measure` (one isolated
    worker per config, the local GL device) and writes {"tasks": [{"target", "key", "name",
    "recorded_gflops", "gflops", "ms", "error"}]}. Jobs whose best config fails now keep the
    error and no gflops."""
    import os
    import sqlite3
    import subprocess
    import tempfile

    con = sqlite3.connect(db_path)
    jobs = con.execute(
        "SELECT j.id, j.task_name, w.json, t.name FROM tuning_jobs j "
        "JOIN workloads w ON w.id = j.workload_id JOIN targets t ON t.id = j.target_id "
        "WHERE t.name = ? ORDER BY j.id", (target,)).fetchall()
    results = []
    for job_id, task, wjson, tname in jobs:
        if tasks_filter is not None and task not in tasks_filter:
            continue
        best = con.execute(
            "SELECT entity_json, gflops FROM trials WHERE job_id = ? AND error_no = 0 "
            "ORDER BY gflops DESC LIMIT 1", (job_id,)).fetchone()
        if best is None:
            continue
        entity, recorded = best
        w = json.loads(wjson)
        entry = {"target": tname, "key": canonical(w), "name": task,
                 "recorded_gflops": recorded}
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(w, f)
            wfile = f.name
        try:
            cmd = [webtune, "measure", "--workload", wfile, "--target", tname, "--config",
                   entity, "--json"] + measure_args
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
            line = [l for l in p.stdout.splitlines() if l.startswith("{")]
            if not line:
                entry["error"] = (p.stderr.strip().splitlines() or ["no output"])[-1][:300]
            else:
                m = json.loads(line[-1])
                res = m["result"]
                if m.get("gflops", 0) > 0:
                    entry["gflops"] = m["gflops"]
                    entry["ms"] = w_flops(w) / m["gflops"] / 1e6
                else:
                    entry["error"] = json.dumps(res)[:300]
        except subprocess.TimeoutExpired:
            entry["error"] = "webtune measure ran past 120 s"
        finally:
            os.unlink(wfile)
        results.append(entry)
        shown = f"{entry['gflops']:.1f}" if "gflops" in entry else "ERROR " + entry["error"]
        print(f"remeasure {task:>22} {tname}: recorded {recorded:.1f}, now {shown} GFLOP/s",
              flush=True)
    with open(out_path, "w") as f:
        json.dump({"tasks": results}, f, indent=1)


def w_flops(w):
    """FLOPs of the main op (a multiply-add counts 2; the epilogue none), as Workload::flops."""
    if w["op"] == "dense":
        return 2.0 * w["M"] * w["N"] * w["K"]
    n, c, h, wd = w.get("N", 1), w["C"], w["H"], w["W"]
    r = w["R"]
    s = w.get("S", r)
    stride, pad = w.get("stride", 1), w.get("pad", 0)
    oh = (h + 2 * pad - r) // stride + 1
    ow = (wd + 2 * pad - s) // stride + 1
    if w["op"] == "depthwise_conv2d":
        return 2.0 * n * c * oh * ow * r * s
    return 2.0 * n * w["K"] * oh * ow * c * r * s


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--report", metavar="DB", help="compare DB's best trials with --out")
    parser.add_argument("--remeasured", help="with --report: re-measured bests (--remeasure)")
    parser.add_argument("--remeasure", metavar="DB",
                        help="re-measure DB's best configs with --webtune into --out")
    parser.add_argument("--webtune", default="build/cli/webtune", help="with --remeasure")
    parser.add_argument("--target", default="gles-compute", help="with --remeasure")
    parser.add_argument("--measure-args", default="--repeat 3 --min-repeat-ms 20 --timeout 4",
                        help="with --remeasure: options passed to webtune measure")
    parser.add_argument("--dense", action="append", default=[], help="M,N,K (repeatable)")
    parser.add_argument("--workload", action="append", default=[],
                        help="webtune workload JSON (repeatable); its conv2d and "
                             "depthwise_conv2d tasks are timed with their epilogues")
    parser.add_argument("--tasks", help="comma-separated task names to keep (default: all)")
    parser.add_argument("--no-eager", action="store_true", help="skip the eager timings")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    keep = set(args.tasks.split(",")) if args.tasks else None
    if args.report:
        report(args.report, args.out, args.remeasured)
        return
    if args.remeasure:
        remeasure(args.remeasure, args.webtune, args.target, args.out, args.measure_args.split(),
                  keep)
        return
    # Read the workload files first: a bad file fails before the GPU work.
    conv_tasks = []
    for path in args.workload:
        with open(path) as f:
            workload = json.load(f)
        model = workload.get("name", path)
        for t in workload["tasks"]:
            if t["op"] not in ("conv2d", "depthwise_conv2d"):
                continue
            if keep is not None and t["name"] not in keep:
                continue
            if any(t["name"] == u["name"] for u, _ in conv_tasks):
                raise SystemExit(f"gpu_baselines: task name '{t['name']}' appears twice "
                                 f"(in {path} and an earlier workload file); names must be "
                                 "unique")
            conv_tasks.append((t, model))

    import torch  # only here: --report and --remeasure run where PyTorch is not installed

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    dev = torch.device("cuda")
    gen = torch.Generator(device=dev).manual_seed(1)
    tasks = {}

    for spec in args.dense:
        m, n, k = (int(v) for v in spec.split(","))
        a = torch.randn(m, k, device=dev, generator=gen)
        b = torch.randn(k, n, device=dev, generator=gen)
        fn = lambda: torch.mm(a, b)
        eager = None if args.no_eager else time_ms(fn)
        ms = time_graph_ms(fn)
        tasks[f"dense:{m},{n},{k}"] = {
            "lib": "cublas", "op": "dense", "key": canonical({"op": "dense", "M": m, "N": n,
                                                               "K": k}),
            "ms": ms, "eager_ms": eager, "gflops": 2.0 * m * n * k / ms / 1e6}
        print_entry(f"dense:{m},{n},{k}", tasks[f"dense:{m},{n},{k}"])

    for t, model in conv_tasks:
        entry = conv_baseline(t, dev, gen, not args.no_eager)
        entry["model"] = model
        tasks[t["name"]] = entry
        print_entry(t["name"], entry)

    result = {
        "device": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
        "tasks": tasks,
    }
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)


def print_entry(name, r):
    eager = "" if r.get("eager_ms") is None else \
        f"; eager {r['eager_ms']:.4f} ms, {r['eager_ms'] / r['ms']:.2f}x"
    fused = ""
    if r.get("fused_ms") is not None:
        fused = f"; fused {r['fused_ms']:.4f}, separate {r['separate_ms']:.4f}"
    elif r.get("fused_error"):
        fused = f"; fused failed: {r['fused_error']}"
    print(f"baseline {name:>22} {r['lib']:>6} {r['ms']:9.4f} ms (graph{fused}{eager}) "
          f"{r['gflops']:10.1f} GFLOP/s", flush=True)


if __name__ == "__main__":
    main()
