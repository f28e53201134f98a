#!/usr/bin/env bash
# Wheels for bench/grades_gpu.py on a GPU machine without network whose torch venv lacks them (the lent H200's
# /opt/torch/.venv has torch but not transformers 5.24, peft or bitsandbytes). Run here, with PyPI reachable:
#   bench/grades_gpu_env.sh            -> .wheels/ (~21 MB; add /.wheels/ to .git/info/exclude and carry it)
# Then on the GPU machine:
#   /opt/torch/.venv/bin/python3 -m pip install -q --no-deps --target /tmp/site .wheels/*.whl
#   PYTHONPATH=/tmp/site:src /opt/torch/.venv/bin/python3 bench/grades_gpu.py --prompts .wheels/prompts.json \
#       --work /tmp/q3 --out $OUT/grades_gpu.json
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
mkdir -p .wheels
plat=(--no-deps --only-binary=:all: --python-version 3.12 --platform manylinux_2_28_x86_64
      --platform manylinux_2_24_x86_64 --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64)
"$PY" -m pip download -q -d .wheels "${plat[@]}" transformers==5.24.0 peft==0.21.2 accelerate==1.15.0 \
    huggingface_hub==2.4.0 safetensors==0.8.0 tokenizers==0.23.3 bitsandbytes==0.50.2
# bitsandbytes ships a library per CUDA/ROCm version (~190 MB): keep the CPU one and CUDA 13's (torch cu130)
bnb=$(ls .wheels/bitsandbytes-*.whl)
"$PY" - "$bnb" <<'PY'
import sys, zipfile, shutil
src = sys.argv[1]
keep = lambda n: not (n.endswith(".so") and "libbitsandbytes_" in n) or n.endswith(("_cpu.so", "_cuda130.so"))
with zipfile.ZipFile(src) as zin, zipfile.ZipFile(src + ".slim", "w", zipfile.ZIP_DEFLATED) as zout:
    for item in zin.infolist():
        if keep(item.filename):
            zout.writestr(item, zin.read(item.filename))
shutil.move(src + ".slim", src)
PY
PYTHONPATH=src "$PY" -c "
import json; from fourloops.grading import prompts
sc, pq = prompts(25)
json.dump({'sc': sc.replace('<instruction>', 'Redraw this image as a black ink drawing; keep the pose exactly.'),
           'pq': pq}, open('.wheels/prompts.json', 'w'))"
du -sh .wheels
