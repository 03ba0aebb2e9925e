#!/usr/bin/env bash
# Stop the single-machine CI Slurm that slurm_up.sh started: every slurmd, then slurmctld, then munged, by PID file.
# Signals a whole tier at once, then waits for it (gone or zombie: a minimal init may reap late).
DIR=${SLURM_CI_DIR:-/tmp/dsctl-slurm}
stop_tier() {
  local pids=() f pid
  for f in "$@"; do
    [ -s "$f" ] || continue
    pid=$(cat "$f"); kill "$pid" 2>/dev/null && pids+=("$pid")
    rm -f "$f"
  done
  [ "${#pids[@]}" -gt 0 ] || return 0
  local list; list=$(IFS=,; echo "${pids[*]}")
  for _ in $(seq 100); do   # until every one is gone or a zombie (10 s at most)
    ps -o stat= -p "$list" 2>/dev/null | grep -qv '^Z' || break
    sleep 0.1
  done
}
stop_tier "$DIR"/slurmd-*.pid
stop_tier "$DIR"/slurmctld.pid
stop_tier /run/munge/munged.pid
