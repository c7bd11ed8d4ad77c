#!/usr/bin/env python3
"""\file gpu_baselines.py
cuBLAS and cuDNN fp32 baselines (TF32 off) for the tasks bench/gpu_tune_vs_cublas tunes.

Times, through PyTorch on the CUDA device, dense M×N×K (torch.mm, cuBLAS) and each conv2d task
of a webtune workload file (torch.nn.functional.conv2d, cuDNN with benchmark mode so that it
picks its fastest algorithm), NCHW, batch as in the file. FLOPs count a multiply-add as 2, as
webtune's Workload::flops() does, so GFLOP/s figures compare one to one.

Timing: a CUDA graph of 32 back-to-back calls, captured after warm-up (so cuDNN's benchmark
mode has picked its algorithm) and replayed in batches timed by CUDA events until a batch lasts
50 ms; the median of 7 batches, per call. A graph replay launches the kernels without PyTorch's
Python and dispatcher overhead (about 20 us a call), which otherwise swamps layers that run for
less than about 30 us, as webtune's GL runtime has no such overhead between dispatches. The
eager figure (the same batches as plain calls) is kept beside it as "eager_ms". Inputs are
random normal, never zeros.

Usage: gpu_baselines.py --dense 4096,4096,4096 --workload resnet18.json --out baselines.json
Writes {"device":..., "torch":..., "cuda":..., "tasks": {name: {"gflops":..., "ms":...}}}.

       gpu_baselines.py --report DB --out baselines.json
reads that file back (no GPU needed) with a webtune SQLite records file and prints, for each
tuning job, its best GFLOP/s, the baseline's and their ratio, then the geometric mean of the
conv2d ratios per target.
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


def report(db_path, baselines_path):
    """Prints best-of-job GFLOP/s against the baselines; returns nothing."""
    import math
    import sqlite3

    with open(baselines_path) as f:
        base = json.load(f)["tasks"]
    con = sqlite3.connect(db_path)
    rows = con.execute(
        "SELECT j.task_name, w.op, w.json, t.name, MAX(r.gflops), COUNT(r.id), "
        "SUM(r.error_no = 0) FROM tuning_jobs j JOIN workloads w ON w.id = j.workload_id "
        "JOIN targets t ON t.id = j.target_id JOIN trials r ON r.job_id = j.id "
        "GROUP BY j.id ORDER BY t.name, j.id").fetchall()
    ratios = {}
    print(f"{'task':>22} {'target':>12} {'trials':>7} {'ok':>5} {'best GFLOP/s':>13} "
          f"{'baseline':>10} {'ratio':>7}")
    for task, op, wjson, target, best, trials, ok in rows:
        w = json.loads(wjson)
        name = task
        if op == "dense":
            name = f"dense:{w['M']},{w['N']},{w['K']}"
        b = base.get(name)
        ratio = best / b["gflops"] if b else float("nan")
        if b and op == "conv2d":
            ratios.setdefault(target, []).append(ratio)
        print(f"{name:>22} {target:>12} {trials:7d} {ok:5d} {best:13.1f} "
              f"{(b['gflops'] if b else float('nan')):10.1f} {ratio:7.3f}")
    for target, rs in ratios.items():
        geo = math.exp(sum(math.log(max(r, 1e-9)) for r in rs) / len(rs))
        print(f"conv2d geometric mean ratio on {target} over {len(rs)} tasks: {geo:.3f}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--report", metavar="DB", help="compare DB's best trials with --out")
    parser.add_argument("--dense", action="append", default=[], help="M,N,K (repeatable)")
    parser.add_argument("--workload", help="webtune workload JSON; its conv2d tasks are timed")
    parser.add_argument("--tasks", help="comma-separated task names to keep (default: conv2d)")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    if args.report:
        report(args.report, args.out)
        return
    import torch  # only here: --report runs where PyTorch is not installed


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
        eager = time_ms(fn)
        ms = time_graph_ms(fn)
        tasks[f"dense:{m},{n},{k}"] = {"lib": "cublas", "ms": ms, "eager_ms": eager,
                                       "gflops": 2.0 * m * n * k / ms / 1e6}

    if args.workload:
        with open(args.workload) as f:
            workload = json.load(f)
        keep = set(args.tasks.split(",")) if args.tasks else None
        for t in workload["tasks"]:
            if t["op"] != "conv2d" or (keep is not None and t["name"] not in keep):
                continue
            x = torch.randn(t["N"], t["C"], t["H"], t["W"], device=dev, generator=gen)
            w = torch.randn(t["K"], t["C"], t["R"], t["S"], device=dev, generator=gen)
            fn = lambda: torch.nn.functional.conv2d(x, w, stride=t["stride"], padding=t["pad"])
            y = fn()
            flops = 2.0 * y.numel() * t["C"] * t["R"] * t["S"]
            eager = time_ms(fn)
            ms = time_graph_ms(fn)
            tasks[t["name"]] = {"lib": "cudnn", "ms": ms, "eager_ms": eager,
                                "gflops": flops / ms / 1e6}

    result = {
        "device": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
        "tasks": tasks,
    }
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    for name, r in tasks.items():
        print(f"baseline {name:>22} {r['lib']:>6} {r['ms']:9.4f} ms (graph; eager "
              f"{r['eager_ms']:.4f} ms, {r['eager_ms'] / r['ms']:.2f}x) {r['gflops']:10.1f} GFLOP/s")


if __name__ == "__main__":
    main()
