#!/usr/bin/env python3
"""\file gpu_dense_probe.py
Measures hand-picked gles-compute dense configs on the local GL device and cuBLAS on the same
GPU in one command, printing each config's GFLOP/s and its ratio to cuBLAS (issue 14's dense
targets: 4096³ >= 0.75, 1000³ >= 0.6).

Why: the XGBoost search over the dense spaces (10^5 to 10^6 valid configs) needs more trials
than a 10-minute device call allows to find the few fast tilings again; this probe measures a
structured family around the tilings that were fastest on 4096³ (64×64 and 128×64 workgroup
tiles, 8×8 / 8×4 register tiles, k_depth 8-16, vec4, double buffering), with the guarded
(non-divisible) splits that give 1000³ the same tile menu, and with more workgroups for 1000³
(32-row tiles, sliced-K, and k_groups: cross-workgroup split-K in one dispatch, which multiplies
the 64-256 workgroups of 1000³'s fast tilings by 2-8 for the GPU's 132 SMs).

Usage: gpu_dense_probe.py --webtune BIN --out results.json [--shapes 1000,4096] [--limit N]
       [--family base|big|big2|big3]
cuBLAS is timed as CUDA-graph replays by bench/gpu_baselines.py (same GPU, same command).
"""
import argparse
import itertools
import json
import os
import subprocess
import sys
import time

here = os.path.dirname(os.path.abspath(__file__))


def split(extent, threads, regs):
    inner = threads * regs
    return [(extent + inner - 1) // inner, threads, regs]


def configs(n, family="base"):
    """The probe's configs for dense n³. family "base": the structured family of the first
    probe; "big", "big2", "big3" (1000³ only): 128-row/column workgroup tiles with k_groups, the
    three rounds of 2026-11-25 (bench/results/h100-2026-11-25-kgroups-big/)."""
    out = []
    if family == "big3":
        # Round 3: the best tilings of round 2 with deeper k tiles (24, 32: no double buffer
        # fits 32) and unroll 2.
        tiles = [(32, 4, 16, 8), (16, 8, 16, 8), (16, 8, 32, 4), (32, 4, 32, 4)]
        kdepths = [16, 24, 32]
        extras = [(u, d, 1, g) for u in (1, 2) for d in (1, 0) for g in (2, 4)]
    elif family == "big2":
        # Round 2: 128-row/column tiles with more threads or registers, k_depth 16 (guarded on
        # 1000), k_groups 1-8, with and without double buffering.
        tiles = [(16, 8, 16, 8), (16, 8, 32, 4), (32, 4, 16, 8), (16, 8, 32, 8), (32, 8, 16, 8),
                 (32, 4, 32, 4)]
        kdepths = [16]
        extras = [(1, d, 1, g) for d in (1, 0) for g in (1, 2, 4, 8)]
    elif family == "big":
        # Large workgroup tiles (the fast 4096³ tilings) with split-K across workgroups.
        tiles = [(16, 8, 16, 8), (16, 8, 8, 8), (8, 8, 16, 8), (8, 8, 8, 8), (16, 4, 16, 8)]
        kdepths = [8, 16, 20]
        extras = [(u, 1, 1, g) for u in (1, 2) for g in (1, 2, 4)]
    elif n == 4096:
        tiles = [(8, 8, 16, 4), (8, 8, 8, 8), (16, 8, 16, 4), (8, 8, 16, 8), (16, 4, 16, 4),
                 (16, 8, 16, 8), (16, 8, 8, 8), (8, 4, 16, 8), (32, 4, 16, 4)]
        kdepths = [8, 16]
        extras = [(1, 1, 1, 1), (2, 1, 1, 1), (1, 1, 2, 1)]  # unroll, double_buffer, k_split, k_groups
    else:
        tiles = [(8, 8, 16, 4), (8, 4, 16, 4), (4, 8, 16, 4), (8, 8, 8, 4), (8, 4, 8, 8),
                 (16, 4, 16, 4), (8, 4, 16, 8), (16, 2, 16, 4), (8, 8, 8, 8), (4, 8, 8, 8),
                 (16, 4, 8, 4), (8, 2, 16, 4)]
        kdepths = [8]
        extras = [(1, 1, 1, 1), (1, 1, 2, 1), (2, 1, 1, 1), (1, 1, 4, 1),
                  (1, 1, 1, 2), (1, 1, 1, 4), (1, 1, 1, 8), (1, 1, 2, 2), (1, 1, 2, 4)]
    for (ty, ry, tx, rx), kd, (un, db, ks, kg) in itertools.product(tiles, kdepths, extras):
        if ty * tx * ks > 1024:
            continue
        entity = [["tile_y", "sp", split(n, ty, ry)], ["tile_x", "sp", split(n, tx, rx)],
                  ["tile_k", "sp", [(n + kd - 1) // kd, kd]], ["use_shared", "ot", 1],
                  ["vec4", "ot", 1], ["unroll", "ot", un], ["double_buffer", "ot", db],
                  ["k_split", "ot", ks]]
        if kg > 1:  # absent means 1: the entities of k_groups 1 stay those of older binaries
            entity.append(["k_groups", "ot", kg])
        out.append({"entity": entity})
    return out


def measure(webtune, n, config):
    cmd = [webtune, "measure", "--workload", f"dense:{n},{n},{n}", "--target", "gles-compute",
           "--config", json.dumps(config), "--repeat", "5", "--min-repeat-ms", "50", "--timeout",
           "10", "--samples", "16", "--json"]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        return None, "timeout"
    try:
        r = json.loads(p.stdout.strip().splitlines()[-1])
    except Exception:
        return None, (p.stderr.strip().splitlines() or ["no output"])[-1]
    if r["result"]["error_no"] != 0:
        return None, r["result"]["message"][:160]
    costs = sorted(r["result"]["costs"])
    median = costs[len(costs) // 2]
    return 2.0 * n ** 3 / median / 1e9, ""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--webtune", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--shapes", default="1000,4096")
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--family", default="base", choices=["base", "big", "big2", "big3"],
                    help="which config family (see configs())")
    ap.add_argument("--python", default=sys.executable)
    args = ap.parse_args()
    shapes = [int(s) for s in args.shapes.split(",")]
    base_json = args.out + ".baselines.json"
    cmd = [args.python, os.path.join(here, "gpu_baselines.py"), "--out", base_json]
    for n in shapes:
        cmd += ["--dense", f"{n},{n},{n}"]
    subprocess.run(cmd, check=True)
    baselines = json.load(open(base_json))["tasks"]
    results = {"baselines": baselines, "configs": {}}
    for n in shapes:
        base = baselines[f"dense:{n},{n},{n}"]
        rows = []
        todo = configs(n, args.family)[: args.limit or None]
        t0 = time.time()
        for c in todo:
            g, err = measure(args.webtune, n, c)
            rows.append({"config": c, "gflops": g, "error": err})
            if g:
                print(f"dense {n}^3  {g:9.1f} GFLOP/s  ratio {g / base['gflops']:.3f}  "
                      f"{json.dumps(c['entity'])}", flush=True)
            else:
                print(f"dense {n}^3  error {err}", flush=True)
        ok = [r for r in rows if r["gflops"]]
        best = max(ok, key=lambda r: r["gflops"]) if ok else None
        results["configs"][str(n)] = rows
        if best:
            print(f"BEST dense {n}^3: {best['gflops']:.1f} GFLOP/s vs cuBLAS {base['gflops']:.1f}"
                  f" -> ratio {best['gflops'] / base['gflops']:.3f} ({len(ok)}/{len(rows)} ran, "
                  f"{time.time() - t0:.0f} s)\n  {json.dumps(best['config'])}", flush=True)
    json.dump(results, open(args.out, "w"), indent=1)


if __name__ == "__main__":
    main()
