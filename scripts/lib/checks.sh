# Shared by the check scripts (sourced: scripts/check-deploy.sh, scripts/test-image.sh,
# scripts/test-kube-node.sh): one line per check, the output of a failed one indented below it, and
# a summary that sets the exit code.

failed=()

# check NAME CMD...: run CMD; on failure print its output and remember NAME.
check() {
  local name=$1 out
  shift
  if out=$("$@" 2>&1); then
    echo "ok    $name"
  else
    echo "FAIL  $name"
    printf '%s\n' "$out" | sed 's/^/      /'
    failed+=("$name")
  fi
}

# checks_summary PROGRAM: the failed checks' names and exit 1, or "all checks passed".
checks_summary() {
  echo
  if ((${#failed[@]})); then
    echo "$1: ${#failed[@]} check(s) failed:"
    printf '  %s\n' "${failed[@]}"
    exit 1
  fi
  echo "$1: all checks passed"
}

# until_ok SECONDS CMD...: CMD succeeds within SECONDS, tried every $UNTIL_OK_INTERVAL seconds
# (0.1); else CMD once more with its output, and failure.
until_ok() {
  local deadline=$((SECONDS + $1))
  shift
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || { "$@"; return 1; }
    sleep "${UNTIL_OK_INTERVAL:-0.1}"
  done
}
