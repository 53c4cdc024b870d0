# Shared by the scripts/bench-*.sh benchmarks (sourced): messages, waiting for a process to be
# ready, stopping one by PID, cleaning up on exit, one benchmark at a time on the machine, and
# reading a process's CPU time. Set BENCH_NAME before sourcing; the caller sets WORK, PIDS and
# KEEP_WORK.

log() { printf '[%s] %s\n' "$BENCH_NAME" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# release_sluice: builds the release binary in $ROOT (the caller's repository root) and prints
# its path, wherever cargo puts it (CARGO_TARGET_DIR, absolute or relative, or target/): a fixed
# target/release path would run a stale binary when CARGO_TARGET_DIR is set.
release_sluice() {
    (cd "$ROOT" && cargo build --release --locked -p sluice >&2) || die "building sluice failed"
    local target
    target=$(cd "$ROOT" && cargo metadata --format-version 1 --no-deps |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])') ||
        die "cargo metadata failed"
    printf '%s/release/sluice\n' "$target"
}

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

# stop_everything_on_exit: on exit (or INT/TERM) every PID in PIDS is stopped and WORK removed
# (kept when KEEP_WORK=1). Also takes the machine's benchmark lock first (one_at_a_time).
stop_everything_on_exit() {
    trap bench_cleanup EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    one_at_a_time
}

# one_at_a_time: waits (up to BENCH_LOCK_WAIT seconds, default 1800) while another benchmark
# of these scripts runs on this machine, and holds the lock until this one exits. They listen
# on fixed ports: two at once would fail at start-up or, worse, measure each other's processes
# (and their CPU figures would skew each other anyway). BENCH_LOCK=/path overrides the lock.
one_at_a_time() {
    local lock=${BENCH_LOCK:-/tmp/sluice-bench.lock} wait=${BENCH_LOCK_WAIT:-1800}
    exec 8>>"$lock"
    if ! flock -n 8; then
        log "another benchmark holds $lock; waiting up to ${wait} s"
        flock -w "$wait" 8 || die "another benchmark still holds $lock after ${wait} s"
    fi
}

bench_cleanup() {
    local pid
    for pid in "${PIDS[@]}"; do
        stop_pid "$pid"
    done
    if [[ -n $WORK && -d $WORK ]]; then
        if [[ ${KEEP_WORK:-0} == 1 ]]; then log "kept $WORK"; else rm -rf -- "$WORK"; fi
    fi
}

# cpu_ticks PID...: "utime stime" summed over the given processes, in clock ticks.
cpu_ticks() {
    local pid stat rest fields user=0 system=0
    for pid in "$@"; do
        { read -r stat <"/proc/$pid/stat"; } 2>/dev/null || die "process $pid is gone"
        rest=${stat##*) }
        read -r -a fields <<<"$rest"
        # After the name: state ppid ... utime is field 14 of stat(5), stime 15.
        user=$((user + fields[11]))
        system=$((system + fields[12]))
    done
    echo "$user $system"
}
