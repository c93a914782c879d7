#!/usr/bin/env bash
# Fleet failover: one of three upstream processes killed and restarted under load, in one
# command (bench/README.md, "Fleet failover").
#
# For each upstream protocol (the gateway's endpoints are the upstreams' gRPC or their HTTP
# addresses), 3 times with fresh processes: three builtin upstreams (infergate, 2 workers)
# and a gateway in front of them (2 workers) whose upstream gives only the endpoints, every
# fleet setting (load balancing, health checks, outlier ejection, retries, overload) at its
# default. 64 concurrent gRPC clients send `simple` ModelInfer to the gateway for 12 s,
# every answer checked; at 3 s one upstream gets SIGKILL, at 7 s it is started again on the
# same ports; the gateway's GET /admin/upstreams is read every 10 ms. Each request is
# correct, a clear error (a gRPC status naming the upstream), wrong, or unanswered; the
# admin samples give the time to eject and to re-admit (bench/fleet_failover.py says how
# each figure is taken).
# Writes bench/results/<date>/fleet.csv (one row per run), fleet_timeline.csv (the killed
# endpoint's state changes, ms from the kill) and fleet.md. About 2 minutes.
# Exit status: 0 every target met, 1 a target missed, 2 setup error.
#
#   bench/fleet.sh [--no-build] [--build-dir DIR] [--repeats N] [--duration S]
#       [--kill-at S] [--restart-at S] [--concurrency N] [--protocols grpc,http]
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$ROOT/build/release"
BUILD_FIRST=1
DRIVER_ARGS=()
ARGS="$*"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --no-build) BUILD_FIRST=0 ;;
    --build-dir) BUILD="$(cd "$2" && pwd)"; shift ;;
    --repeats|--duration|--kill-at|--restart-at|--concurrency|--protocols)
      [[ $# -ge 2 ]] || { echo "fleet.sh: $1 needs a value" >&2; exit 2; }
      DRIVER_ARGS+=("$1" "$2"); shift ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "fleet.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done

PY=/usr/bin/python3  # Debian's: python3-grpcio and python3-protobuf for the clients
for tool in protoc /usr/bin/grpc_python_plugin "$PY"; do
  command -v "$tool" >/dev/null || { echo "fleet.sh: $tool not found" >&2; exit 2; }
done
"$PY" -c 'import grpc, grpc.aio, google.protobuf' 2>/dev/null ||
  { echo "fleet.sh: $PY lacks grpc or protobuf (python3-grpcio, python3-protobuf)" >&2; exit 2; }

if [[ $BUILD_FIRST == 1 ]]; then
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DINFERGATE_TESTS=OFF \
    -DINFERGATE_BENCH=ON >/dev/null
  cmake --build "$BUILD" --target infergate
fi
INFERGATE="$BUILD/gateway/infergate"
[[ -x $INFERGATE ]] || { echo "fleet.sh: $INFERGATE not built" >&2; exit 2; }

OUT="$ROOT/bench/results/$(date +%Y-%m-%d)"
mkdir -p "$OUT"
exec "$PY" "$ROOT/bench/fleet_failover.py" run --infergate "$INFERGATE" --out "$OUT" \
  --command "bench/fleet.sh${ARGS:+ $ARGS}" "${DRIVER_ARGS[@]}"
