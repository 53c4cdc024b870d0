# Shared by the scripts/bench-*.sh benchmarks (sourced): messages, waiting for a process to be
# ready, and stopping one by PID. Set BENCH_NAME before sourcing; the caller sets WORK.

log() { printf '[%s] %s\n' "$BENCH_NAME" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# wait_until DESCRIPTION PID COMMAND...: polls COMMAND for up to 20 s; fails early if PID died.
wait_until() {
    local what=$1 pid=$2 i
    shift 2
    for ((i = 0; i < 200; i++)); do
        "$@" >/dev/null 2>&1 && return 0
        kill -0 "$pid" 2>/dev/null || die "$what: process $pid exited (see logs in $WORK)"
        sleep 0.1
    done
    die "$what: not ready after 20 s (see logs in $WORK)"
}

# stop_pid PID: SIGTERM, up to 5 s for a graceful exit, then SIGKILL; reaped.
stop_pid() {
    local pid=$1 i
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 50; i++)); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
        log "pid $pid ignored SIGTERM, killing"
        kill -KILL "$pid" 2>/dev/null || true
    fi
    wait "$pid" 2>/dev/null || true
}
