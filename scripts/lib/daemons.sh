# Daemons started and stopped by pid file (sourced: scripts/kube-cluster.sh, scripts/kube-node.sh).
# Each runs in its own session, so its process group is its pid. Needs a `log` function.

# alive PIDFILE NAME: the process in PIDFILE is running and is NAME (guards against a reused pid;
# /proc/PID/comm holds a name's first 15 characters; a zombie counts as gone).
alive() {
  local pid state
  [[ -f $1 ]] || return 1
  pid=$(<"$1")
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  [[ $(cat "/proc/$pid/comm" 2>/dev/null) == "${2:0:15}" ]] || return 1
  state=$(sed 's/^.*) //' "/proc/$pid/stat" 2>/dev/null | cut -d' ' -f1) || return 1
  [[ $state != Z ]]
}

# stop_daemon PIDFILE NAME [SECONDS]: SIGTERM its process group, SIGKILL after SECONDS (10).
stop_daemon() {
  local pidfile=$1 name=$2 grace=${3:-10} pid i
  if alive "$pidfile" "$name"; then
    pid=$(<"$pidfile")
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < grace * 10; i++)); do
      alive "$pidfile" "$name" || break
      sleep 0.1
    done
    if alive "$pidfile" "$name"; then
      log "$name (pid $pid) did not stop in $grace s: SIGKILL"
      kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
      for ((i = 0; i < 50; i++)); do
        alive "$pidfile" "$name" || break
        sleep 0.1
      done
    fi
  fi
  rm -f "$pidfile"
}

# spawn NAME LOG PIDFILE CMD...: run CMD in its own session (so its own process group), detached
# from our stdin/stdout/stderr so that callers reading our output are not kept waiting. CMD may
# be a wrapper that execs NAME in place (nsenter ... -- NAME).
spawn() {
  local name=$1 logfile=$2 pidfile=$3
  shift 3
  # Started from a script (no job control) the child is not a group leader, so setsid(1) calls
  # setsid() and execs in place: $! is the daemon's pid and its process group id.
  setsid "$@" </dev/null >>"$logfile" 2>&1 &
  local pid=$! i
  echo "$pid" >"$pidfile"
  # Until it has exec'd, the child is still bash, setsid or the wrapper: wait for NAME so that
  # `alive` (which checks the name) never mistakes "not started yet" for "exited". Up to 5 s, or
  # until it dies.
  for ((i = 0; i < 100; i++)); do
    [[ $(cat "/proc/$pid/comm" 2>/dev/null) == "${name:0:15}" ]] && return 0
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.05
  done
}
