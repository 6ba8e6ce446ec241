#!/usr/bin/env bash
# Continue infill-body training on a lent GPU from the bundled weights, then test the server on that device.
#
# Here, once (a machine with the mocap):   .venv/bin/motioncore train infill-body --pack runs/gpu-pack.npz
# On the lent machine (device tool):       run(command="scripts/gpu_infill_body.sh 8", carry=["runs/gpu-pack.npz"])
# A one-minute dry run on this CPU:        DEVICE=cpu TOKENS=2560 OUT=out/gpu-dry scripts/gpu_infill_body.sh 0.5
#
# Writes under $OUT (default out/gpu): infill-body-gpu.safetensors + .json (fp16, its device in the metadata),
# curve.png, train.log, device.txt and server_device.log. The run's full state stays in runs/gpu-run (too big to
# come back). Exit 2 with one line when a package or the pack is missing.
set -euo pipefail
MINUTES=${1:-8}
DEVICE=${DEVICE:-cuda}
TOKENS=${TOKENS:-40960}
PACK=${PACK:-runs/gpu-pack.npz}
OUT=${OUT:-out/gpu}
RUN=${RUN:-runs/gpu-run}
cd "$(dirname "$0")/.."
PY=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
export PYTHONPATH="$PWD/src:$PWD/server${PYTHONPATH:+:$PYTHONPATH}"
mkdir -p "$OUT"
"$PY" -c "import torch, numpy, safetensors, scipy, matplotlib, zmq, tqdm, pytest" 2>/dev/null || {
  echo "gpu_infill_body: $PY lacks one of torch numpy safetensors scipy matplotlib pyzmq tqdm pytest" >&2; exit 2; }
[ -f "$PACK" ] || { echo "gpu_infill_body: no data pack $PACK (write it where the mocap is: motioncore train infill-body --pack $PACK)" >&2; exit 2; }
"$PY" -c "import torch; print('torch', torch.__version__, '| cuda', torch.cuda.is_available(), '|', torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'no GPU')" | tee "$OUT/device.txt"
command -v nvidia-smi >/dev/null && nvidia-smi >> "$OUT/device.txt" 2>&1 || true
rm -rf "$RUN"
"$PY" -m motioncore.cli train infill-body --data-pack "$PACK" --warm-start infill-body --device "$DEVICE" \
  --tokens "$TOKENS" --lr 3e-4 --minutes "$MINUTES" --max-minutes "$MINUTES" --threads 8 --out "$RUN" --quiet 2>&1 | tee "$OUT/train.log"
"$PY" -m motioncore.cli train infill-body --data-pack "$PACK" --out "$RUN" --export "$OUT/infill-body-gpu" | tee -a "$OUT/train.log"
cp "$RUN/curve.png" "$OUT/curve.png"
MOTIONCORE_TEST_DEVICE="$DEVICE" MOTIONCORE_TEST_CHECKPOINT="$OUT/infill-body-gpu" "$PY" -m pytest -q -p no:cacheprovider \
  tests/server/test_server_device.py 2>&1 | tee "$OUT/server_device.log"
