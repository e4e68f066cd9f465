#!/usr/bin/env bash
# Run the inspector in tmux, step it to the end with the space bar, and record what the screen showed.
# Usage: bash scripts/tmux-demo.sh [OUTDIR] [extra vmmtui args...]
set -u
out=${1:-.}; shift || true
tmux kill-session -t vmmtui-demo 2>/dev/null
tmux new-session -d -s vmmtui-demo -x 160 -y 48 "python3 -m vmmtui $*; echo APP-EXIT=\$?; sleep 5"
sleep 6
for i in $(seq 1 14); do tmux send-keys -t vmmtui-demo space; sleep 0.5; done
sleep 1; tmux capture-pane -t vmmtui-demo -p > "$out/tmux-after-receive.txt"
for i in $(seq 1 12); do tmux send-keys -t vmmtui-demo space; sleep 0.5; done
sleep 1; tmux capture-pane -t vmmtui-demo -p > "$out/tmux-verified.txt"
tmux send-keys -t vmmtui-demo q; sleep 3
tmux capture-pane -t vmmtui-demo -p | grep APP-EXIT
cat "$out/tmux-after-receive.txt" "$out/tmux-verified.txt"
echo "left behind: workers=$(pgrep -fc 'vmmtui.worker') dirs=$(ls /tmp | grep -c '^vmmtui-')"
tmux kill-session -t vmmtui-demo 2>/dev/null
