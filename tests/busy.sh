#!/usr/bin/env bash
# tests/busy.sh [--loops N] [--max SECONDS] -- CMD [ARGS...]
#
# Runs CMD while N busy loops (default: two per core, as a machine with compilers and a small
# cluster beside the tests) keep every core busy; the loops end with CMD, and after --max seconds
# (default 7200) whatever happens. The exit code is CMD's. For proving the suite's bounds follow the
# machine: `tests/busy.sh -- bash .ci/run`.
set -euo pipefail

loops=$((2 * $(nproc 2>/dev/null || echo 1)))
max=7200
while [ $# -gt 0 ]; do
  case "$1" in
  --loops) loops=$2; shift 2 ;;
  --max) max=$2; shift 2 ;;
  --) shift; break ;;
  *) echo "usage: $0 [--loops N] [--max SECONDS] -- CMD [ARGS...]" >&2; exit 2 ;;
  esac
done
[ $# -gt 0 ] || { echo "usage: $0 [--loops N] [--max SECONDS] -- CMD [ARGS...]" >&2; exit 2; }

pids=()
stop() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap stop EXIT
for _ in $(seq "$loops"); do
  timeout "$max" sh -c 'while :; do :; done' &
  pids+=($!)
done
echo "busy: $loops loops on $(nproc) cores" >&2
set +e
"$@"
rc=$?
set -e
exit "$rc"
