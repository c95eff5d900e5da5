#!/usr/bin/env bash
# make demo: the crash-and-recover story, end to end, on the default root.
#
# A worker starts the e2e server under `ownerjournal run`; the server creates
# private tmux sessions (tmux double-forks its server away); the worker is
# SIGKILLed; `status` shows the orphans and why; `recover --all` ends them;
# the demo then checks /proc and the filesystem: nothing is left.
set -euo pipefail
BIN=${BIN:?BIN must name the directory with ownerjournal and e2e-server}
export PATH="$BIN:$PATH"

bold() { if [ -t 1 ]; then printf '\n\033[1m%s\033[0m\n' "$*"; else printf '\n%s\n' "$*"; fi; }
step() { bold "── $*"; }
run() { printf '$ %s\n' "$*"; "$@"; }

scratch=$(mktemp -d /tmp/oj-demo.XXXXXX)
worker=
cleanup() {
  [ -n "$worker" ] && kill -KILL "$worker" 2>/dev/null || true
  rm -rf "$scratch"
}
trap cleanup EXIT

step "1. The runner creates its private root (0700, ours, validated)"
root=$(ownerjournal root "demo-$$" --owner-pid $$)
export OWNERJOURNAL_ROOT="$root"
ls -ld "$root"

step "2. A worker starts the e2e server under 'ownerjournal run'"
ownerjournal run --label e2e-server --grace 2s -- \
  e2e-server --ready-file "$scratch/ready" 2>"$scratch/worker.log" &
worker=$!
for _ in $(seq 1 200); do [ -s "$scratch/ready" ] && break; sleep 0.05; done
[ -s "$scratch/ready" ] || { echo "e2e-server did not become ready:"; cat "$scratch/worker.log"; exit 1; }
addr=$(jq -r .addr "$scratch/ready")
server=$(jq -r .pid "$scratch/ready")
echo "worker (ownerjournal run) pid $worker, e2e-server pid $server on $addr"

step "3. The server creates two private tmux sessions; tmux daemonizes away from it"
tmux_pids=()
sockets=()
for i in 1 2; do
  out=$(curl -fsS -X POST "http://$addr/sessions")
  echo "POST /sessions -> $out"
  tmux_pids+=("$(jq -r .pid <<<"$out")")
  sockets+=("$(jq -r .socket <<<"$out")")
done
run ps -o pid,ppid,pgid,args -p "$worker,$server,$(IFS=,; echo "${tmux_pids[*]}")"

step "4. The worker is SIGKILLed (no defer, no exit handler runs)"
run kill -KILL "$worker"
wait "$worker" 2>/dev/null || true
worker=
# The e2e-server dies with its supervisor (parent-death signal); the tmux
# servers it started do not: they belong to nobody now.
for _ in $(seq 1 100); do kill -0 "$server" 2>/dev/null || break; sleep 0.05; done
for p in "${tmux_pids[@]}"; do
  kill -0 "$p" 2>/dev/null && echo "tmux server $p is still running, re-parented to pid $(ps -o ppid= -p "$p" | tr -d ' '): an orphan"
done

step "5. Anyone can replay the journal: status shows the orphans and why"
run ownerjournal status || true

step "6. The runner ends the run: recover --all"
run ownerjournal recover --all --grace 2s 2>&1

step "7. Checking /proc and the filesystem"
left=0
for p in "$server" "${tmux_pids[@]}"; do
  # PID 1 of a container may never reap orphans: a zombie is dead.
  state=$(ps -o stat= -p "$p" 2>/dev/null || true)
  if [ -n "$state" ] && [ "${state:0:1}" != Z ]; then
    echo "LEFT: process $p ($state)"; left=1
  fi
done
for s in "${sockets[@]}"; do [ -e "$s" ] && { echo "LEFT: socket $s"; left=1; }; done
[ -e "$root" ] && { echo "LEFT: root $root"; left=1; }
if pgrep -f "tmux -S $root" >/dev/null; then echo "LEFT: tmux client or server on $root"; left=1; fi
if [ "$left" = 0 ]; then
  echo "nothing left: no process, no socket, no root directory ($root is gone)"
else
  exit 1
fi
