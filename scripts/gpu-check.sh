#!/usr/bin/env bash
# All GPU checks of the project in one run, for the lent H100/H200 (device tool) or any CUDA machine.
# Usage: bash scripts/gpu-check.sh [core|app|failures|speed|bench|seeds|multi|gallery|all]
#        (writes a log to $OUT or ./gpu-check.log; bench results go to $OUT/bench)
set -u
part=${1:-all}
out=${OUT:-.}
log="$out/gpu-check-$part.log"
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
# carried wheels (textual and friends), if any
if [ -d .whl ] && ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH="$PYTHONPATH:/tmp/site"
fi
step() { echo; echo "\$ $*"; "$@"; echo "[exit $?]"; }
{
  echo "=== vmmtui gpu-check ($part) $(date -u +%FT%TZ) on $(hostname)"
  nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv
  python3 -c 'import cuda.bindings, numpy, sys; print("python", sys.version.split()[0], "cuda.bindings", cuda.bindings.__version__, "numpy", numpy.__version__)'
  uname -r
  if [ "$part" = core ] || [ "$part" = all ]; then
    step python3 -m vmmtui doctor
    step python3 -m vmmtui run --backend cuda --size 1MiB --verbose
    step python3 -m vmmtui run --backend cuda --size 1GiB
    step python3 -m vmmtui run --size 1MiB --json
    step python3 scripts/proc-crosscheck.py
    step python3 -m pytest -q -m gpu tests -p no:cacheprovider
    step python3 -m pytest -q tests -p no:cacheprovider -x --ignore=tests/tui
    nvidia-smi --query-gpu=memory.used --format=csv
  fi
  if [ "$part" = failures ] || [ "$part" = all ]; then
    nvidia-smi --query-gpu=memory.used,memory.free --format=csv
    step python3 -m vmmtui run --list-scenarios
    for s in $(python3 -m vmmtui run --list-scenarios | awk '{print $1}'); do
      step python3 -m vmmtui run --backend cuda --scenario "$s"
    done
    step python3 -m vmmtui run --backend memfd --scenario unaligned-size
    step python3 -m pytest -q -s -m gpu tests/test_gpu.py -p no:cacheprovider
    step python3 -m vmmtui soak --backend cuda --count "${SOAK_COUNT:-200}"
    nvidia-smi --query-gpu=memory.used,memory.free --format=csv
    nvidia-smi --query-compute-apps=pid,used_memory --format=csv
  fi
  if [ "$part" = speed ] || [ "$part" = all ]; then
    step python3 -m pytest -q -s -m gpu tests/backends/test_kernels.py tests/test_gpu.py -p no:cacheprovider
    step python3 -m vmmtui run --backend cuda --size 1GiB --verify both --verbose
    step python3 -m vmmtui run --backend cuda --size 8GiB
    nvidia-smi --query-gpu=memory.used --format=csv
  fi
  if [ "$part" = seeds ] || [ "$part" = all ]; then
    step python3 -m vmmtui run --backend cuda --mechanism legacy --verbose
    step python3 -m vmmtui run --backend cuda --consumers 4 --size 1GiB
    step python3 -m vmmtui run --backend cuda --direction consumer-writes --consumers 4 --size 1GiB
    step python3 -m vmmtui run --backend cuda --mechanism legacy --direction consumer-writes --consumers 2
    step python3 -m vmmtui run --backend memfd --mechanism legacy
    step python3 -m vmmtui run --backend cuda --scenario legacy-second-context --verbose
    step python3 -m pytest -q -s -m gpu tests/test_gpu.py -k "legacy or scenario" -p no:cacheprovider
    nvidia-smi --query-gpu=memory.used --format=csv
  fi
  if [ "$part" = multi ]; then
    nvidia-smi topo -m
    step python3 scripts/verify-warmth.py 64 256 1024
    step python3 -m vmmtui doctor --device 1
    step python3 -m vmmtui run --backend cuda --consumers 2 --devices 1 --size 1GiB
    step python3 -m vmmtui run --backend cuda --consumers 4 --devices 0,1 --size 1GiB --verbose
    step python3 -m vmmtui run --backend cuda --mechanism legacy --consumers 2 --devices 0,1 --size 1GiB
    step python3 -m vmmtui run --backend cuda --direction consumer-writes --consumers 4 --devices 0,1 --size 1GiB
    step python3 -m pytest -q -s -m gpu tests/test_gpu.py -k "another_gpu or four_consumers or slices" -p no:cacheprovider
    nvidia-smi --query-gpu=index,memory.used --format=csv
  fi
  if [ "$part" = bench ]; then
    step python3 -m pytest -q -s -m gpu tests/backends/test_kernels.py tests/test_gpu.py -k "bench or kernels or verify_modes" -p no:cacheprovider
    step python3 scripts/screenshots.py --backend cuda --mechanism legacy --moments kcmp,verified --prefix cuda-legacy --out "$out"
    step python3 scripts/screenshots.py --backend cuda --consumers 4 --direction consumer-writes --moments verified --prefix cuda-consumers4 --out "$out"
    step python3 -m vmmtui bench --backend cuda --out "$out/bench" --name "bench-$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tr ' ' '-')-$(date -u +%F)"
    nvidia-smi --query-gpu=memory.used --format=csv
  fi
  if [ "$part" = gallery ]; then  # GALLERY=multi on the 2-GPU kind; the files land in $OUT/gallery
    step bash scripts/make-gallery.sh "${GALLERY:-single}"
    step python3 scripts/replay-bench.py --backend cuda --out "$out/replay-bench-cuda.json"
    nvidia-smi --query-gpu=memory.used --format=csv
  fi
  if [ "$part" = app ] || [ "$part" = all ]; then
    step python3 -m pytest -q tests -p no:cacheprovider
    step bash scripts/tmux-demo.sh "$out"
    step python3 scripts/screenshots.py --backend cuda --out "$out"
  fi
} 2>&1 | tee "$log"
