#!/usr/bin/env bash
# vmmtui on real programs nobody here wrote (issue 48, "Real peers"; docs/peers.md): a healthy
# program is 0 to look at, a leak the world follows is still named while it grows.
# Usage: bash scripts/peers-check.sh PART   (PART: mp chromium nginx torch leaks all)
#   mp        CPython's own multiprocessing tests (test._test_multiprocessing, the WithProcesses*
#             classes, fork, spawn and forkserver) under `pytest --vmmtui`, in one process and
#             under -n 2 (MP_XDIST, default "0 2"; "2" alone in `all`, to keep it near 10
#             minutes): 0 failures caused by the plugin
#   chromium  headless Chromium --dump-dom, traced 5 times (CHROMIUM_RUNS): 0 to look at each
#   nginx     nginx with 4 workers, started and stopped (SIGQUIT): 0 to look at
#   torch     a torch DataLoader (scripts/peers-dataloader.py), both sharing strategies, with the
#             torch of TORCH_PYTHON (default .peers/torch-venv/bin/python: a venv holding
#             `pip install torch==2.13.0`): 0 to look at
#   leaks     the leaks the world follows (tests/fixtures/memfd_pins.py): every bucket kept as a
#             dup, as a mapping, an exporter killed under a mapping: each named while it runs
# Root (eBPF) is needed. Outputs go to $OUT (default .peers/out): each run's --json stream or
# pytest output, and summary-PART.txt (scripts/peers-findings.py); exit 1 when a part's
# expectation fails. `all` takes about 8 minutes on 2 busy cores (mp alone 13: 7.5 in one process).
set -u
part=${1:-all}
cd "$(dirname "$0")/.."
root=$PWD
out=${OUT:-$root/.peers/out}
py=${PYTHON:-$root/.venv/bin/python}
[ -x "$py" ] || py=python3
mkdir -p "$out"
status=0
export NO_COLOR=1 PYTHONUNBUFFERED=1
trace() { "$py" -m vmmtui trace --json --no-cuda -- "$@"; }
summary() {  # summary PART ARGS...: the findings by kind, kept beside the runs
  local name=$1
  shift
  echo "--- $name ($(date -u +%FT%TZ), $(git -C "$root" log --oneline -1 | cut -c1-60))" | tee "$out/summary-$name.txt"
  "$py" scripts/peers-findings.py --detail "$@" | tee -a "$out/summary-$name.txt"
  local rc=${PIPESTATUS[0]}
  [ "$rc" = 0 ] || status=1
  return 0
}
want() { [ "$part" = "$1" ] || [ "$part" = all ]; }

if want mp; then
  # the stdlib's own tests; CPython's wrappers (Lib/test/test_multiprocessing_*.py) are three lines
  # each: made here, never committed. Without the test package (Debian's python3 leaves it out),
  # fetch Lib/test/_test_multiprocessing.py of this Python's version from github:python/cpython
  # into .peers/cpython/test/ (ignored) with test/support from the same tag.
  mp=$root/.peers/mp
  mkdir -p "$mp"
  [ -d "$root/.peers/cpython" ] && export PYTHONPATH="$root/.peers/cpython${PYTHONPATH:+:$PYTHONPATH}"
  if ! "$py" -c "import test._test_multiprocessing" 2>/dev/null; then
    echo "mp: no test._test_multiprocessing in $("$py" -c 'import sys; print(sys.version.split()[0])') (install the python3 test package, or fetch Lib/test/ of this version into .peers/cpython/test/)"
    status=1
  else
    for m in fork spawn forkserver; do
      printf 'import test._test_multiprocessing\n\ntest._test_multiprocessing.install_tests_in_module_dict(globals(), "%s")\n' "$m" >"$mp/test_multiprocessing_$m.py"
    done
    printf '[pytest]\n' >"$mp/pytest.ini"  # its own rootdir: none of vmmtui's options
    runs=()
    [ "$part" = all ] && default_xdist=2 || default_xdist="0 2"
    for n in ${MP_XDIST:-$default_xdist}; do
      rm -rf "$out/mp-rec-n$n"
      (cd "$mp" && timeout 1200 "$py" -m pytest -q -p no:cacheprovider -n "$n" -k WithProcesses \
        --vmmtui --vmmtui-dir "$out/mp-rec-n$n" \
        test_multiprocessing_fork.py test_multiprocessing_spawn.py test_multiprocessing_forkserver.py \
        >"$out/mp-n$n.txt" 2>&1)
      runs+=("$out/mp-n$n.txt")
    done
    summary mp --expect zero --plugin "${runs[@]}"
  fi
fi

if want chromium; then
  exe=$(command -v chromium || command -v chromium-browser || true)
  if [ -z "$exe" ]; then
    echo "chromium: not installed (apt-get install -y chromium)"
    status=1
  else
    runs=()
    for i in $(seq 1 "${CHROMIUM_RUNS:-5}"); do
      # its DOM to a file (the stream is stdout): exit 0 and the page, or the run is no peer's
      trace sh -c "exec $exe --headless --no-sandbox --disable-gpu --dump-dom about:blank >$out/chromium-$i.html" \
        >"$out/chromium-$i.jsonl" 2>"$out/chromium-$i.err"
      grep -q "<html" "$out/chromium-$i.html" || { echo "chromium run $i: no DOM"; status=1; }
      runs+=("$out/chromium-$i.jsonl")
    done
    summary chromium --expect zero --json "${runs[@]}"
  fi
fi

if want nginx; then
  if ! command -v nginx >/dev/null; then
    echo "nginx: not installed (apt-get install -y nginx)"
    status=1
  else
    rm -rf "$out/nginx-run" && mkdir -p "$out/nginx-run"
    trace "$py" tests/fixtures/real_run.py "$out/nginx-run" "" nginx 4 >"$out/nginx.jsonl" 2>"$out/nginx.err"
    summary nginx --expect zero --json "$out/nginx.jsonl"
  fi
fi

if want torch; then
  tpy=${TORCH_PYTHON:-$root/.peers/torch-venv/bin/python}
  if ! "$tpy" -c "import torch" 2>/dev/null; then
    echo "torch: no torch at $tpy (python3 -m venv .peers/torch-venv && .peers/torch-venv/bin/pip install torch==2.13.0)"
    status=1
  else
    for s in file_descriptor file_system; do
      trace "$tpy" scripts/peers-dataloader.py "$s" >"$out/torch-$s.jsonl" 2>"$out/torch-$s.err"
    done
    summary torch --expect zero --json "$out/torch-file_descriptor.jsonl" "$out/torch-file_system.jsonl"
  fi
fi

if want leaks; then
  # rounds 0.2 s apart; a killed exporter's importer keeps the mapping 3 s (past any teardown window)
  runs=()
  for mode in dups maps killed-maps; do
    FIXTURE_GAP=0.2 FIXTURE_HOLD=3 trace "$py" tests/fixtures/memfd_pins.py "$mode" 6 \
      >"$out/leak-$mode.jsonl" 2>"$out/leak-$mode.err"
    runs+=("$out/leak-$mode.jsonl")
  done
  summary leaks --expect named --json "${runs[@]}"
fi

exit $status
