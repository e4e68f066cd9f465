#!/usr/bin/env bash
# Record the gallery's real GPU sessions (vmmtui run --record) into $OUT/gallery (or ./gallery).
# Usage: bash scripts/make-gallery.sh [single|roads|multi|all|cpu]  (multi needs 2 GPUs: the 2-GPU kind;
#        cpu: the memfd recording, cpu-memfd-1mib, on any machine)
# Then copy the .jsonl.gz files into vmmtui/record/gallery/ (the whole gallery stays under 2 MiB).
# Names: <gpu>-<what>.jsonl.gz, e.g. h100-vmm-1mib.jsonl.gz, h100-scenario-leaked-fd.jsonl.gz.
set -u
which=${1:-single}
dir="${OUT:-.}/gallery"
mkdir -p "$dir"
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
# "NVIDIA H100 80GB HBM3" -> h100; two GPUs -> h200x2
if [ "$which" = cpu ]; then
  gpu=cpu count=0
else
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | sed -E 's/^NVIDIA //; s/[ -].*//' | tr 'A-Z' 'a-z')
  count=$(nvidia-smi --query-gpu=name --format=csv,noheader | wc -l)
fi
failed=0
rec() {  # rec NAME [vmmtui run options...]: exit 0 means verified, or the scenario failed as it promised
  local name=$1; shift
  local file="$dir/$gpu-$name.jsonl.gz"
  echo "\$ vmmtui run $* --record $file"
  # a TMPDIR of its own: the recording starts with the session, not with a note that some other
  # run's stale session directory was swept
  local tmp; tmp=$(mktemp -d /tmp/vmmtui-gallery.XXXX)
  TMPDIR=$tmp python3 -m vmmtui run "$@" --record "$file" > "$dir/$gpu-$name.log" 2>&1
  local rc=$?
  rmdir "$tmp"
  tail -1 "$dir/$gpu-$name.log"
  echo "[exit $rc] $(stat -c %s "$file" 2>/dev/null || echo 0) bytes"
  [ $rc -eq 0 ] || failed=$((failed + 1))
}
if [ "$which" = single ] || [ "$which" = all ]; then
  rec vmm-1mib --backend cuda --size 1MiB
  rec vmm-1gib --backend cuda --size 1GiB
  rec legacy-1mib --backend cuda --mechanism legacy --size 1MiB
  rec consumers4-writes --backend cuda --consumers 4 --direction consumer-writes --size 1GiB
  rec pidfd-1mib --backend cuda --transport pidfd --size 1MiB
  rec pool-1mib --backend cuda --mechanism pool --size 1MiB
  for s in $(python3 -m vmmtui run --list-scenarios | grep -v 'memfd only' | grep -v 'not on this host' | awk '{print $1}'); do
    rec "scenario-$s" --backend cuda --scenario "$s"
  done
fi
if [ "$which" = roads ]; then  # issue 20's roads alone: pidfd_getfd, the memory pool, their scenarios
  rec pidfd-1mib --backend cuda --transport pidfd --size 1MiB
  rec pool-1mib --backend cuda --mechanism pool --size 1MiB
  for s in pidfd-seccomp pidfd-pidns importer-pins pool-no-handle-type; do
    rec "scenario-$s" --backend cuda --scenario "$s"
  done
fi
if [ "$which" = cpu ]; then
  rec memfd-1mib --backend memfd --size 1MiB
fi
if [ "$which" = multi ] || [ "$which" = all ]; then
  if [ "$count" -ge 2 ]; then
    gpu="${gpu}x2"
    rec vmm-2gpu-peer --backend cuda --consumers 2 --devices 0,1 --size 1GiB
  else
    echo "multi: needs 2 GPUs, this machine has $count"
  fi
fi
# every recording must read back, with one frame per step, and replay to its end (an SVG of the last
# frame beside it); the total must stay under 2 MiB
python3 - "$dir" <<'PY'
import asyncio
import sys
from pathlib import Path
from vmmtui.record import Timeline, read
from vmmtui.tui.replay import ReplayApp


async def last_frame(rec, svg: Path) -> None:
    app = ReplayApp(rec)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("end")
        await pilot.pause(0.2)
        app.save_screenshot(svg.name, str(svg.parent))


total = 0
for path in sorted(Path(sys.argv[1]).glob("*.jsonl.gz")):
    rec = read(path)
    frames = Timeline(rec.events).frames
    total += path.stat().st_size
    print(f"{path.name}: {path.stat().st_size} bytes, {len(rec.events)} events, {len(frames)} frames, "
          f"{rec.header.where}, {rec.header.driver}, last: {frames[-2].label if len(frames) > 1 else '-'}")
    asyncio.run(last_frame(rec, path.with_name(path.name.replace(".jsonl.gz", "-end.svg"))))
print(f"total {total} bytes ({'under' if total < 2 << 20 else 'OVER'} the 2 MiB budget)")
PY
echo "failed recordings: $failed"
[ $failed -eq 0 ]
