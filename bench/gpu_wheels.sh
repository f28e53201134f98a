#!/usr/bin/env bash
# Wheels for the lent GPU machine (no network; /opt/torch/.venv Python 3.12.3 with torch 2.11.0+cu130 and the
# packages listed in /work/.library/device/KINDS.md, "Python packages already there") so that it can run the whole
# workflow (bench/gpu_run.sh: snakemake + transformers/diffusers/peft/bitsandbytes/rfdetr/editscore/OmniGen2 ...).
# Run here, where pip reaches PyPI (re-runnable: it empties .wheels/*.whl first and refills it):
#   bench/gpu_wheels.sh                      # PY=... to pick another Python 3.12 (only its pip is used)
# It resolves the project's pins for CPython 3.12 / manylinux x86_64 (pip --dry-run --report, binaries only, with
# stub torch/torchvision/triton so the resolver never touches the CUDA wheels), drops what the machine already
# has (DEVICE below), downloads the rest with --no-deps, slims bitsandbytes to its CPU and CUDA 13 libraries, and
# checks there is one wheel per name. Then there (see bench/gpu_run.sh):
#   python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .wheels/*.whl
#   export PYTHONPATH=/tmp/site:$REPO/src:$REPO/.carry/omnigen2
# .wheels/ and .carry/ are not committed (.git/info/exclude); the whole carried tree must stay under 64 MiB.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-$HOME/.pyenv/versions/3.12.1/bin/python3.12}
WORK=$(mktemp -d /tmp/gpu_wheels.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

# what the workflow needs there (pyproject.toml's pins, and what bench/gpu_run.sh's WHEELS and imports name)
REQS=(snakemake==9.27.1 transformers==5.24.0 huggingface_hub==2.4.0 tokenizers==0.23.3 diffusers==0.42.1
      rfdetr==1.11.2 supervision peft==0.21.2 accelerate==1.15.0 editscore==0.2 bitsandbytes==0.50.2
      onnxoptimizer==0.4.2 jsonschema==4.26.0 nvidia-ml-py psutil pyyaml safetensors==0.8.0 qwen_vl_utils json_repair
      omegaconf pydantic pulp)
# the machine's versions where a session read them (KINDS.md's pip list row): the resolver must agree with these
DEVICE_PINS=(torch==2.11.0 torchvision==0.26.0 triton==3.6.0 numpy==2.5.2 onnx==1.23.1 onnxruntime==1.30.0)
# Names the machine already has (KINDS.md, "Python packages already there", read 2026-11-17): not carried, unless
# named in CARRY below. Versions unknown for most; the known ones are checked against every resolved requirement.
DEVICE="absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio attrs botorch build
  certifi charset-normalizer chex click cloudpickle cmake colorama contourpy coverage cuda-bindings cuda-core
  cuda-pathfinder cuda-toolkit cupy-cuda13x cycler cython diffrax e3nn einops equinox etils execnet filelock
  flatbuffers flax fonttools formulaic frozenlist fsspec gpytorch grpcio h11 h5py hf-xet httpcore httpx
  huggingface-hub humanize hypothesis idna imageio iniconfig interface-meta jax jax-cuda13-pjrt jax-cuda13-plugin
  jaxlib jaxtyping jinja2 joblib kiwisolver lazy-loader lightning lightning-utilities linear-operator lineax
  llvmlite lxml markdown markdown-it-py markupsafe matplotlib mdurl meson ml-dtypes mpi4py mpmath msgpack multidict
  multipledispatch mypy-extensions nanobind narwhals networkx ninja numba numba-cuda numpy numpyro nvidia-cublas
  nvidia-cuda-cupti nvidia-cuda-nvrtc nvidia-cuda-runtime nvidia-cudnn-cu13 nvidia-cufft nvidia-cufile
  nvidia-curand nvidia-cusolver nvidia-cusparse nvidia-cusparselt-cu13 nvidia-ml-py nvidia-nccl-cu13
  nvidia-nvjitlink nvidia-nvshmem-cu13 nvidia-nvtx onnx onnx-ir onnxruntime onnxscript opencv-python-headless optax
  opt-einsum opt-einsum-fx optimistix orbax-checkpoint packaging pandas pathspec patsy peft pillow pip pluggy
  portalocker prometheus-client propcache protobuf psutil pyarrow pybind11 py-cpuinfo pygments pyparsing
  pyproject-hooks pyre-extensions pytest pytest-benchmark pytest-cov pytest-mock pytest-timeout pytest-xdist
  python-dateutil pytorch-lightning pyyaml regex requests rich sacrebleu safetensors scikit-build-core scikit-image
  scikit-learn scipy seaborn sentencepiece sentence-transformers setuptools shellingham simplejson six
  sortedcontainers statsmodels sympy tabulate tensorboard tensorboard-data-server tensorstore threadpoolctl tifffile
  tiktoken timm tokenizers toolz torch torchaudio torchdiffeq torch-geometric torchmetrics torchvision tqdm
  transformers treescope triton typer typing-extensions typing-inspect urllib3 uvloop wadler-lindig werkzeug wheel
  wrapt xarray xxhash yarl zipp"
DEVICE_KNOWN="accelerate==1.15.0 huggingface-hub==1.33.0 numpy==2.5.2 onnx==1.23.1 onnxruntime==1.30.0
  safetensors==0.8.0 tokenizers==0.23.2 torch==2.11.0 torchvision==0.26.0 transformers==5.17.0 triton==3.6.0
  sentencepiece==0.2.2 tiktoken==0.14.0"
# carried although the machine has a version: our pins (transformers, huggingface_hub, tokenizers, peft: gpu_run.sh
# checks one wheel each), and small ones whose version there is unknown while a carried package bounds it
# (packaging<26 for snakemake, click>=8.4.2 for huggingface_hub 2.x, typing-extensions for pydantic 2.14)
CARRY="transformers huggingface-hub tokenizers peft packaging click typing-extensions"
# not carried although resolved: av (~40 MB, ffmpeg inside; supervision imports it lazily for video only,
# qwen_vl_utils for video input only); neither path is used by the workflow
SKIP="av"
# pure-python sdist-only dependencies: built into wheels here (py3-none-any)
SDIST_ONLY=(connection_pool==0.0.3)

plat=(--python-version 3.12 --implementation cp --only-binary=:all:)
for v in 39 38 37 36 35 34 33 32 31 30 29 28 27 26 25 24 17; do plat+=(--platform "manylinux_2_${v}_x86_64"); done
plat+=(--platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform linux_x86_64)

mkdir -p "$WORK/local" .wheels
"$PY" -m pip wheel -q --no-deps -w "$WORK/local" "${SDIST_ONLY[@]}" 2> >(grep -v "^WARNING: Location" >&2)
# stubs of the CUDA stack at the machine's versions (build tag 1 and manylinux_2_39: preferred over PyPI's)
"$PY" - "$WORK/local" <<'PY'
import sys, zipfile
for name, ver in [("torch", "2.11.0"), ("torchvision", "0.26.0"), ("triton", "3.6.0")]:
    tag = "cp312-cp312-manylinux_2_39_x86_64"
    with zipfile.ZipFile(f"{sys.argv[1]}/{name}-{ver}-1-{tag}.whl", "w") as z:
        di = f"{name}-{ver}.dist-info"
        z.writestr(f"{di}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {ver}\n")
        z.writestr(f"{di}/WHEEL", f"Wheel-Version: 1.0\nGenerator: stub\nRoot-Is-Purelib: false\nBuild: 1\nTag: {tag}\n")
        z.writestr(f"{di}/RECORD", "")
PY
printf '%s\n' "${DEVICE_PINS[@]}" > "$WORK/constraints.txt"
echo "== resolving ${#REQS[@]} requirements for cp312 manylinux x86_64"
"$PY" -m pip install -q --dry-run --ignore-installed --target "$WORK/dry" --report "$WORK/report.json" \
    --find-links "$WORK/local" "${plat[@]}" -c "$WORK/constraints.txt" "${REQS[@]}" "${DEVICE_PINS[@]}" \
    2> >(grep -v "^WARNING: Location" >&2)

# pick what to carry; check the machine's known versions against every requirement of the resolved set
"$PY" - "$WORK/report.json" "$WORK/carry.txt" "$DEVICE" "$DEVICE_KNOWN" "$CARRY" "$SKIP" <<'PY'
import json, re, sys
from pip._vendor.packaging.requirements import Requirement
from pip._vendor.packaging.version import Version
report, out, device, known, carry, skip = sys.argv[1:]
norm = lambda n: re.sub(r"[-_.]+", "-", n).lower()
device = {norm(n) for n in device.split()}
known = {norm(k): Version(v) for k, v in (x.split("==") for x in known.split())}
carry, skip = {norm(n) for n in carry.split()}, {norm(n) for n in skip.split()}
env = {"python_version": "3.12", "python_full_version": "3.12.3", "sys_platform": "linux", "platform_system": "Linux",
       "platform_machine": "x86_64", "implementation_name": "cpython", "os_name": "posix",
       "platform_python_implementation": "CPython", "extra": ""}
items = json.load(open(report))["install"]
picked, bad = [], []
for it in items:
    m = it["metadata"]
    for q in m.get("requires_dist", []):
        r = Requirement(q)
        if r.marker and not r.marker.evaluate(env):
            continue
        n = norm(r.name)
        if n in known and n not in carry and known[n] not in r.specifier:
            bad.append(f"{m['name']} needs {q}; the machine has {known[n]}")
for it in items:
    n, v = norm(it["metadata"]["name"]), it["metadata"]["version"]
    if n in skip or (n in device and n not in carry):
        continue
    picked.append(f"{n}=={v}")
if bad:
    sys.exit("the machine's versions fall short (add them to CARRY):\n  " + "\n  ".join(bad))
open(out, "w").write("\n".join(picked) + "\n")
print(f"== carrying {len(picked)} of {len(items)} resolved packages")
PY

rm -f .wheels/*.whl
"$PY" -m pip download -q --no-deps -d .wheels --find-links "$WORK/local" "${plat[@]}" -r "$WORK/carry.txt" \
    2> >(grep -v "^WARNING: Location" >&2)

# slim two wheels to what a linux x86_64 CUDA 13 machine loads: bitsandbytes ships a library per CUDA/ROCm version
# (~190 MB; keep the CPU one and CUDA 13's, torch is cu130); pulp ships CBC for six platforms (~16 MB; keep
# linux/i64, which snakemake's ILP scheduler runs)
"$PY" - .wheels/bitsandbytes-*.whl .wheels/pulp-*.whl <<'PY'
import sys, zipfile, shutil
keeps = {
    "bitsandbytes": lambda n: not (n.endswith(".so") and "libbitsandbytes_" in n) or n.endswith(("_cpu.so", "_cuda130.so")),
    "pulp": lambda n: not n.startswith("pulp/solverdir/cbc/") or n.startswith("pulp/solverdir/cbc/linux/i64/"),
}
for src in sys.argv[1:]:
    keep = keeps[src.split("/")[-1].split("-")[0]]
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(src + ".slim", "w", zipfile.ZIP_DEFLATED) as zout:
        for item in zin.infolist():
            if keep(item.filename):
                zout.writestr(item, zin.read(item.filename))
    shutil.move(src + ".slim", src)
PY

# one version per name (two break the --target install)
dups=$(ls .wheels/*.whl | xargs -n1 basename | cut -d- -f1 | tr 'A-Z.' 'a-z_' | sort | uniq -d)
[ -z "$dups" ] || { echo "more than one wheel for: $dups" >&2; exit 1; }
ls .wheels/*.whl | xargs -n1 basename
echo "== $(ls .wheels/*.whl | wc -l) wheels, total $(du -ch .wheels/*.whl | tail -1 | cut -f1)"
