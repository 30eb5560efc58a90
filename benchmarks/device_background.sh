# Sourced by gpu_quick.sh and gpu_kick.sh: a run in a process session of its own
# (setsid), so it outlives the device call while the machine is held, and each call's
# wait for it (the machine goes back after 30 s idle: chain the calls at once).

# background_start LOG CMD...: CMD started, its output in LOG, its pid in LOG.pid
background_start() {
  local log=$1
  shift
  mkdir -p "$(dirname "$log")"
  setsid nohup "$@" > "$log" 2>&1 &
  echo $! > "$log.pid"
  echo "started pid $(cat "$log.pid") at $(date -u +%T)"
}

# background_wait LOG SECONDS START: waits while it runs, until SECONDS - 30 after START
# (the epoch second the call began); false, saying so, where it still runs then
background_wait() {
  local log=$1 seconds=$2 start=$3 pid
  pid=$(cat "$log.pid")
  while kill -0 "$pid" 2> /dev/null && [ $(( $(date +%s) - start )) -lt $(( seconds - 30 )) ]; do
    sleep 5
  done
  if kill -0 "$pid" 2> /dev/null; then
    echo "still running after $(( $(date +%s) - start )) s of this call"
    return 1
  fi
}
