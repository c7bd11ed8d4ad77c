#!/usr/bin/env bash
# \file tuned_models_on_device.sh
# Issue 48's deliverable 5 on the `device` GPU, one model at a time: a torchvision model tuned by
# `webtune tune --model` on gles-compute with a user's budget (TRIALS_PER_TASK on average over
# the model's tasks, spread by the gradient task scheduler), built from those records and timed
# beside PyTorch's CUDA-graph replay on the same GPU in the same command.
#
# For each model: export it (bench/corpus/export_corpus.py: TorchScript, opset 17, 224 × 224,
# seeded torchvision weights, PyTorch's own output kept); count its tasks (`webtune import -o`);
# tune with --total-trials = tasks × TRIALS_PER_TASK (one native agent on the GPU, XGBoost,
# batches of 16; the wall time is printed); build; run bench/gpu_model_vs_torch.py --profile
# (webtune's end-to-end median with upload and read-back, PyTorch's eager and graph replays, as
# is and with BatchNorm folded, and webtune's output checked against PyTorch's). Prints one line
# per model: tasks, trials, tune seconds, webtune ms, the faster replay's ms (as exported or
# BN folded), the ratio replay ÷ webtune (≥ 1: webtune is faster), the non-task kernels' share
# of the profiled steps, the error relative to max |logit|, and the ratio against the replay
# with its upload and read-back (ratio_e2e, like for like with webtune's runs).
#
# Usage (on the device, repository root; WEBTUNE_DIR from bench/pack_for_device, GL loaders
# unpacked as docs/benchmarks.md says):
#   bench/tuned_models_on_device.sh WEBTUNE_DIR OUT_DIR MODELS [TRIALS_PER_TASK] [TUNE_TIMEOUT_S]
set -uo pipefail
wt=${1:?usage: tuned_models_on_device.sh WEBTUNE_DIR OUT_DIR MODELS [TRIALS_PER_TASK] [TUNE_TIMEOUT_S]}
out=${2:?usage: tuned_models_on_device.sh WEBTUNE_DIR OUT_DIR MODELS [TRIALS_PER_TASK] [TUNE_TIMEOUT_S]}
models=${3:?usage: tuned_models_on_device.sh WEBTUNE_DIR OUT_DIR MODELS [TRIALS_PER_TASK] [TUNE_TIMEOUT_S]}
per_task=${4:-48}
tune_timeout=${5:-0}
export LD_LIBRARY_PATH=$wt/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
work=/tmp/tuned-models
mkdir -p "$work" "$out"
here=$(dirname "$0")
python3 "$here/corpus/export_corpus.py" --out "$work" --models "$models" --keep-full \
  --exporters torchscript --opsets 17 >"$out/export.log" 2>&1 || { echo "export failed"; tail "$out/export.log"; }

printf '%-20s %6s %7s %7s %10s %10s %7s %8s %10s %7s\n' model tasks trials tune_s webtune_ms replay_ms \
  ratio non_task rel_error ratio_e2e | tee "$out/summary.txt"
for m in ${models//,/ }; do
  onnx=$work/full/$m.torchscript.opset17.onnx
  input=$work/full/$m.torchscript.opset17.input.f32
  [[ -f $input ]] || input=$(ls "$work"/full/$m*.input.f32 | head -1)
  torch=${input%.input.f32}.torch.f32
  "$wt/bin/webtune" import "$onnx" -o "$work/$m.tasks.json" >"$out/$m.import" 2>&1
  tasks=$(python3 -c 'import json, sys; print(len(json.load(open(sys.argv[1]))["tasks"]))' "$work/$m.tasks.json")
  trials=$((tasks * per_task))
  start=$(date +%s.%N)
  "$wt/bin/webtune" tune --model "$onnx" --target gles-compute --total-trials "$trials" \
    --schedule gradient --batch 16 --timeout "$tune_timeout" --db "$work/$m.db" \
    >"$out/$m.tune" 2>&1 || echo "$m: tune exited $?: $(tail -1 "$out/$m.tune")"
  tune_s=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN {printf "%.0f", e - s}')
  "$wt/bin/webtune" build --model "$onnx" --target gles-compute --db "$work/$m.db" -o "$work/$m.pkg" \
    >"$out/$m.build" 2>&1 || echo "$m: build failed: $(tail -1 "$out/$m.build")"
  python3 "$here/gpu_model_vs_torch.py" --webtune "$wt" --input "$input" --runs 200 --warmup 20 \
    --profile --out "$out/$m.json" --model "$m=$work/$m.pkg:$torch" >"$out/$m.torch" 2>&1 ||
    echo "$m: gpu_model_vs_torch failed: $(tail -1 "$out/$m.torch")"
  cp "$work/$m.db" "$out/$m.db" 2>/dev/null
  python3 - "$out/$m.json" "$out/$m.torch" "$m" "$tasks" "$trials" "$tune_s" <<'PY' | tee -a "$out/summary.txt"
import json, re, sys
path, log, m, tasks, trials, tune_s = sys.argv[1:]
try:
    r = json.load(open(path))["models"][m]
except Exception as e:  # the run failed: say so on the model's line
    print("%-20s %6s %7s %7s %s" % (m, tasks, trials, tune_s, "no result (%s)" % e)); sys.exit(0)
w = min(v["median_ms"] for k, v in r.items() if k.startswith("webtune") and "median_ms" in v)
replay = min(r["torch"]["graph"], r.get("torch_bn_folded", {}).get("graph", 1e9))
text = open(log).read()
share = "-"
m_other = re.search(r"other kernels ([0-9.]+)", text)
m_total = re.search(r"sums.*?steps ([0-9.]+)", text)
if m_other and m_total and float(m_total.group(1)) > 0:
    share = "%.0f%%" % (100 * float(m_other.group(1)) / float(m_total.group(1)))
c = r.get("check", {})
err = "%.2g" % (c["max_abs_error"] / c["max_abs_logit"]) if c.get("max_abs_logit") else "-"
replay_e2e = min(r["torch"]["graph_e2e"], r.get("torch_bn_folded", {}).get("graph_e2e", 1e9))
print("%-20s %6s %7s %7s %10.3f %10.3f %7.2f %8s %10s %7.2f" % (m, tasks, trials, tune_s, w, replay,
      replay / w, share, err, replay_e2e / w))
PY
done
