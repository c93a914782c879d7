#!/usr/bin/env bash
# What the request metrics and the access log cost, in instructions per request of the
# gateway process (valgrind --tool=callgrind): a figure machine noise cannot move
# (bench/README.md, "Observability cost"). Target: request metrics on vs off at most 3%
# more instructions per request.
#
# U: infergate serving `simple` (builtin). G: infergate (1 worker) under callgrind in front
# of U, three times: observability.request_metrics false, true, and true with the access
# log (JSON, to a file). Per run and path (HTTP JSON passed through to an HTTP upstream;
# gRPC passed through to a gRPC upstream): W warm-up requests, the counters zeroed
# (callgrind_control --zero), N requests on one connection, a dump. Prints CSV: mode,
# path, requests, instructions per request, and the ratio to metrics-off on that path.
#
#   bench/metrics_cost.sh [--requests 200] [--build-dir DIR]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$ROOT/build/release" N=200 W=20
while [[ $# -gt 0 ]]; do
  case "$1" in
    --requests) N="$2"; shift ;;
    --build-dir) BUILD="$(cd "$2" && pwd)"; shift ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "metrics_cost.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
INFERGATE="$BUILD/gateway/infergate"
for tool in valgrind callgrind_control /usr/bin/python3; do
  command -v "$tool" >/dev/null || { echo "metrics_cost.sh: $tool not found" >&2; exit 2; }
done
[[ -x $INFERGATE ]] || { echo "metrics_cost.sh: build $INFERGATE first" >&2; exit 2; }
BENCH_NAME=metrics_cost.sh
# shellcheck source=bench/instructions_lib.sh
source "$ROOT/bench/instructions_lib.sh"

listeners='listeners:
  http:    { address: "127.0.0.1:0" }
  grpc:    { address: "127.0.0.1:0" }
  metrics: { address: "127.0.0.1:0" }'
cat >"$SCRATCH/U.yaml" <<EOF
$listeners
workers: 1
upstreams:
  - { name: demo, protocol: builtin, models: [simple] }
routes:
  - { match: { model: "*" }, upstream: demo }
EOF
start U "$INFERGATE"
U_HTTP=$HTTP U_GRPC=$GRPC

echo "mode,path,requests,instructions_per_request,ratio_to_off"
declare -A OFF
for mode in off on access_log; do
  observability="observability: { request_metrics: $([[ $mode == off ]] && echo false || echo true)"
  [[ $mode == access_log ]] && observability+=", access_log: { enabled: true, path: \"$SCRATCH/access.log\" }"
  observability+=" }"
  cat >"$SCRATCH/G.yaml" <<EOF
$listeners
workers: 1
upstreams:
  - { name: uh, protocol: http, endpoints: ["127.0.0.1:$U_HTTP"] }
  - { name: ug, protocol: grpc, endpoints: ["127.0.0.1:$U_GRPC"] }
routes:
  - { match: { model: "*", headers: { x-path: http } }, upstream: uh }
  - { match: { model: "*" }, upstream: ug }
$observability
EOF
  start G valgrind --tool=callgrind --callgrind-out-file="$SCRATCH/cg.%p" "$INFERGATE"
  G_PID=$STARTED_PID
  for path in http grpc; do
    rm -f "$SCRATCH"/cg."$G_PID".[0-9]*  # the previous path's dump
    /usr/bin/python3 "$ROOT/bench/metrics_cost_client.py" "$path" "$N" "$W" "$G_PID" "$HTTP" "$GRPC"
    total=0
    for f in "$SCRATCH"/cg."$G_PID".[0-9]*; do
      ir=$(grep -m1 '^summary:' "$f" | awk '{print $2}')
      total=$((total + ${ir:-0}))
    done
    per=$((total / N))
    if [[ $mode == off ]]; then OFF[$path]=$per; fi
    ratio=$(awk -v a="$per" -v b="${OFF[$path]}" 'BEGIN { printf "%.4f", a / b }')
    echo "$mode,$path,$N,$per,$ratio"
  done
  kill -TERM "$G_PID"
  wait "$G_PID" 2>/dev/null || true
done
