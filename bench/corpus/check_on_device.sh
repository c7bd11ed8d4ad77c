#!/usr/bin/env bash
# \file check_on_device.sh
# The corpus check that needs the real weights (issue 48, deliverable 4): on the `device`
# machine, export every corpus model with its real (seeded torchvision) weights, build it for
# gles-compute with default configs, run the package on the GPU through headless EGL with
# `webtune run --reference` (package against webtune's CPU reference executor) and compare the
# package's output with PyTorch's own output for the same input (relative error = max |webtune -
# torch| / max |torch|). Prints one line per export and a JSON summary.
#
# Usage (on the device, repository root; WEBTUNE_DIR from bench/pack_for_device, GL loaders
# unpacked from .gl/ as docs/benchmarks.md says):
#   bench/corpus/check_on_device.sh WEBTUNE_DIR OUT_DIR [EXPORTERS] [OPSETS]
set -uo pipefail
wt=${1:?usage: check_on_device.sh WEBTUNE_DIR OUT_DIR [EXPORTERS] [OPSETS]}
out=${2:?usage: check_on_device.sh WEBTUNE_DIR OUT_DIR [EXPORTERS] [OPSETS]}
exporters=${3:-torchscript,dynamo}
opsets=${4:-17}
export LD_LIBRARY_PATH=$wt/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
work=/tmp/corpus-device
mkdir -p "$work/log" "$work/pkg" "$work/out" "$out"
here=$(dirname "$0")
models="resnet50 mobilenet_v3_large efficientnet_b0 mnasnet1_0 regnet_y_400mf googlenet densenet121
  convnext_tiny lraspp_mobilenet_v3_large shufflenet_v2_x1_0 squeezenet1_1 resnet18 mobilenet_v2"
for m in $models; do
  PYTHONUNBUFFERED=1 python3 "$here/export_corpus.py" --out "$work" --models "$m" --keep-full \
    --exporters "$exporters" --opsets "$opsets" >"$work/log/$m.export" 2>&1 &
done
wait

check() {  # one export: build, run with the reference check, compare with PyTorch
  local onnx=$1 stem model
  stem=$(basename "$onnx" .onnx)
  model=${stem%%.*}
  if ! "$wt/bin/webtune" build --model "$onnx" --target gles-compute -o "$work/pkg/$stem" \
    >"$work/log/$stem.build" 2>&1; then
    echo "$stem build-refused $(grep -o '(op [A-Za-z]*)[^.]*' "$work/log/$stem.build" | head -1 | cut -c1-120)"
    return
  fi
  "$wt/bin/webtune" run --model "$work/pkg/$stem" --input "$work/full/$model.input.f32" \
    --output "$work/out/$stem.f32" --reference "$onnx" --runs 10 --warmup 3 \
    >"$work/log/$stem.run" 2>&1
  local status=$?
  local latency reference torch
  latency=$(grep -o 'median [0-9.]* ms' "$work/log/$stem.run" | head -1)
  reference=$(grep '^reference' "$work/log/$stem.run" | head -1)
  torch=$(python3 - "$work/out/$stem.f32" "$work/full/$model.torch.f32" <<'EOF'
import sys
import numpy as np
try:
    a = np.fromfile(sys.argv[1], dtype="<f4")
    b = np.fromfile(sys.argv[2], dtype="<f4")
    print("torch rel error %.3g (max |torch| %.3g)" % (np.abs(a - b).max() / np.abs(b).max(), np.abs(b).max()))
except Exception as e:
    print("torch compare failed: %s" % e)
EOF
)
  echo "$stem run-status $status | $latency | $reference | $torch"
}

for onnx in "$work"/full/*.onnx; do
  check "$onnx" &
  while (($(jobs -r | wc -l) >= 4)); do sleep 0.2; done
done | sort | tee "$out/check.txt"
wait
cp "$work/corpus.json" "$out/" 2>/dev/null
python3 "$here/export_corpus.py" --out "$work" --merge >/dev/null 2>&1 && cp "$work/corpus.json" "$out/"
