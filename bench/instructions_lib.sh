# Shared by the callgrind scripts (shm_passthrough_instructions.sh, metrics_cost.sh):
# a scratch directory cleaned up on exit with every process started, and start().
# Source it after setting the caller's name in BENCH_NAME.

SCRATCH=$(mktemp -d /tmp/infergate-cg.XXXXXX)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$SCRATCH"
}
trap cleanup EXIT

# $1 name, $2 command...: starts it with its config in $SCRATCH/$1.yaml, waits for the ready
# line, sets STARTED_PID and the ports HTTP / GRPC / METRICS.
start() {
  local name=$1; shift
  "$@" --config "$SCRATCH/$name.yaml" >"$SCRATCH/$name.out" 2>"$SCRATCH/$name.err" &
  STARTED_PID=$!
  PIDS+=("$STARTED_PID")
  for _ in $(seq 600); do
    grep -q '"event":"ready"' "$SCRATCH/$name.out" 2>/dev/null && break
    kill -0 "$STARTED_PID" 2>/dev/null || { cat "$SCRATCH/$name.err" >&2; exit 2; }
    sleep 0.1
  done
  port() { grep -o "\"$1\":\"[^\"]*\"" "$SCRATCH/$name.out" | head -1 | sed 's/.*:\([0-9]*\)"$/\1/'; }
  HTTP=$(port http) GRPC=$(port grpc) METRICS=$(port metrics)
  [[ -n $HTTP ]] || { echo "$BENCH_NAME: $name did not start" >&2; exit 2; }
}
