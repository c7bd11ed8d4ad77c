#!/usr/bin/env bash
# \file glue_reductions_on_device.sh
# Issue 48's untuned glue, side by side on the `device` GPU: the squeeze-excite models' global
# pools as one workgroup per output element (deploy/glue_reduction.cpp, the default) against
# one invocation per output element (`webtune build --no-workgroup-reductions`, the frame every
# glue kernel had before). For each model: export it (bench/corpus/export_corpus.py, TorchScript,
# opset 17, 224 × 224, seeded torchvision weights), build both packages for gles-compute with
# default configs, run them interleaved A B A B (`webtune run --runs N --warmup W`, each run the
# input upload, every step and the read-back on the host clock, median) and once each with
# `--profile` (GPU time per step); print per model the medians, the GPU time of the pool /
# reduction steps and of every non-task kernel, and the ratios B / A. Each package's output is
# checked against PyTorch's (relative error) so a faster wrong answer cannot pass.
#
# Usage (on the device, repository root; WEBTUNE_DIR from bench/pack_for_device, GL loaders
# unpacked as docs/benchmarks.md says):
#   bench/glue_reductions_on_device.sh WEBTUNE_DIR OUT_DIR [MODELS] [RUNS]
set -uo pipefail
wt=${1:?usage: glue_reductions_on_device.sh WEBTUNE_DIR OUT_DIR [MODELS] [RUNS]}
out=${2:?usage: glue_reductions_on_device.sh WEBTUNE_DIR OUT_DIR [MODELS] [RUNS]}
models=${3:-efficientnet_b0,mobilenet_v3_large}
runs=${4:-200}
export LD_LIBRARY_PATH=$wt/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
work=/tmp/glue-reductions
mkdir -p "$work" "$out"
here=$(dirname "$0")
python3 "$here/corpus/export_corpus.py" --out "$work" --models "$models" --keep-full \
  --exporters torchscript --opsets 17 >"$out/export.log" 2>&1 || { echo "export failed"; tail "$out/export.log"; }

median_of() { grep -o 'median [0-9.]* ms' "$1" | head -1 | awk '{print $2}'; }
pools_of() {  # GPU ms of the pool / reduction steps, and of every non-task kernel
  awk '/^  sums/ {for (i = 1; i <= NF; ++i) if ($i == "other" && $(i+1) == "kernels") other = $(i+2)}
       $2 == "kernel" && $3 == "op" && ($NF ~ /GlobalAveragePool|GlobalMaxPool|Reduce|avgpool|pool/) {p += $5}
       END {printf "%.4f %.4f", p, other}' "$1"
}
rel_error() {
  python3 - "$1" "$2" <<'PY'
import sys
import numpy as np
a = np.fromfile(sys.argv[1], dtype="<f4"); b = np.fromfile(sys.argv[2], dtype="<f4")
print("%.3g" % (np.abs(a - b).max() / np.abs(b).max()) if a.size == b.size and a.size else "size-mismatch")
PY
}

printf '%-20s %12s %12s %8s %14s %14s %8s %14s %14s %10s %10s\n' model workgroup_ms element_ms ratio \
  pools_wg_ms pools_el_ms ratio other_wg_ms other_el_ms err_wg err_el | tee "$out/summary.txt"
for m in ${models//,/ }; do
  onnx=$work/full/$m.torchscript.opset17.onnx
  [[ -f $onnx ]] || onnx=$(ls "$work"/full/$m*.onnx 2>/dev/null | head -1)
  input=$work/full/$m.input.f32
  [[ -f $input ]] || input=$(ls "$work"/full/$m*.input.f32 | head -1)
  torch=${input%.input.f32}.torch.f32
  for v in wg el; do
    flag=""; [[ $v == el ]] && flag=--no-workgroup-reductions
    "$wt/bin/webtune" build --model "$onnx" --target gles-compute $flag -o "$work/$m.$v" \
      >"$out/$m.$v.build" 2>&1 || echo "$m $v build failed: $(tail -1 "$out/$m.$v.build")"
  done
  for round in 1 2; do
    for v in wg el; do
      "$wt/bin/webtune" run --model "$work/$m.$v" --input "$input" --runs "$runs" --warmup 20 \
        --output "$out/$m.$v.f32" >"$out/$m.$v.run$round" 2>&1
    done
  done
  for v in wg el; do
    "$wt/bin/webtune" run --model "$work/$m.$v" --input "$input" --runs 3 --warmup 3 --profile \
      >"$out/$m.$v.profile" 2>&1
  done
  a=$(printf '%s\n' "$(median_of "$out/$m.wg.run1")" "$(median_of "$out/$m.wg.run2")" | sort -g | head -1)
  b=$(printf '%s\n' "$(median_of "$out/$m.el.run1")" "$(median_of "$out/$m.el.run2")" | sort -g | head -1)
  read -r pa oa <<<"$(pools_of "$out/$m.wg.profile")"
  read -r pb ob <<<"$(pools_of "$out/$m.el.profile")"
  printf '%-20s %12s %12s %8s %14s %14s %8s %14s %14s %10s %10s\n' "$m" "$a" "$b" \
    "$(awk -v a="$a" -v b="$b" 'BEGIN {if (a > 0) printf "%.2f", b / a}')" "$pa" "$pb" \
    "$(awk -v a="$pa" -v b="$pb" 'BEGIN {if (a > 0) printf "%.2f", b / a}')" "$oa" "$ob" \
    "$(rel_error "$out/$m.wg.f32" "$torch")" "$(rel_error "$out/$m.el.f32" "$torch")" | tee -a "$out/summary.txt"
done
