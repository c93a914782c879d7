#!/usr/bin/env bash
# Frontends against their ceilings, in one command (bench/README.md, "Frontends").
#
# Builds the release targets, starts infergate (builtin models, 2 HTTP workers), Debian's
# nginx answering infergate's `simple` JSON response as a fixed body (2 workers; and a
# 1-worker instance), and the bare grpc++ server; then, for the `simple` model, at
# concurrency 1 and 64, in interleaved rounds:
#   http_json     loadgen -> infergate, JSON tensors
#   http_binary   loadgen -> infergate, binary tensors in and out
#   http_fixed    loadgen -> nginx `return 200`, 2 workers (same request, same body size)
#   http_fixed_1w loadgen -> nginx `return 200`, 1 worker (c=64 only; no target)
#   grpc          loadgen -> infergate gRPC ModelInfer
#   grpc_bare     loadgen -> bare_grpc_server (fixed ModelInferResponse, protobuf classes)
#   grpc_bare_raw loadgen -> bare_grpc_server raw (ByteBuffer in and out; no target)
# and wrk (1 thread, 64 connections, Lua POST) against infergate JSON and nginx (2 workers).
# Writes bench/results/<date>/frontends.csv and frontends.md (medians, ratios, targets).
# Exit status 1 when a target is missed.
#
#   bench/frontends.sh [--no-build] [--rounds N] [--duration S] [--warmup S]
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$ROOT/build/release"
ROUNDS=3 DURATION=5 WARMUP=1 BUILD_FIRST=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --no-build) BUILD_FIRST=0 ;;
    --rounds) ROUNDS="$2"; shift ;;
    --duration) DURATION="$2"; shift ;;
    --warmup) WARMUP="$2"; shift ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    *) echo "frontends.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
CONCURRENCIES=(1 64)
CASES=(http_json http_binary http_fixed http_fixed_1w grpc grpc_bare grpc_bare_raw)

for tool in nginx wrk python3 curl; do
  command -v "$tool" >/dev/null || { echo "frontends.sh: $tool not found" >&2; exit 2; }
done

if [[ $BUILD_FIRST == 1 ]]; then
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DINFERGATE_TESTS=OFF \
    -DINFERGATE_BENCH=ON >/dev/null
  cmake --build "$BUILD" --target loadgen bare_grpc_server infergate
fi
LOADGEN="$BUILD/bench/loadgen"
INFERGATE="$BUILD/gateway/infergate"
BARE="$BUILD/bench/bare_grpc_server"

# ---- scratch dir, processes, cleanup ------------------------------------------------------
SCRATCH="$(mktemp -d /tmp/infergate-frontends.XXXXXX)"
PIDS=()
# shellcheck disable=SC2317  # called by the trap
cleanup() {
  local status=$?
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  if [[ $status -ne 0 && $status -ne 1 ]]; then
    echo "frontends.sh: failed ($status); logs kept in $SCRATCH" >&2
  else
    rm -rf "$SCRATCH"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# Waits until FILE has a line matching PATTERN (20 s at most).
wait_for_line() {
  local file=$1 pattern=$2
  for _ in $(seq 200); do
    grep -q "$pattern" "$file" 2>/dev/null && return 0
    sleep 0.1
  done
  echo "frontends.sh: no '$pattern' in $file" >&2
  cat "$file" "${file%.out}.err" >&2 2>/dev/null || true
  return 3
}

# ---- infergate ----------------------------------------------------------------------------
cat >"$SCRATCH/infergate.yaml" <<'EOF'
listeners:
  http:    { address: "127.0.0.1:0" }
  grpc:    { address: "127.0.0.1:0" }
  metrics: { address: "127.0.0.1:0" }
workers: 2
upstreams:
  - name: demo
    protocol: builtin
    models: []
routes:
  - match: { model: "*" }
    upstream: demo
EOF
"$INFERGATE" --config "$SCRATCH/infergate.yaml" >"$SCRATCH/infergate.out" 2>"$SCRATCH/infergate.err" &
IG_PID=$!
PIDS+=("$IG_PID")
wait_for_line "$SCRATCH/infergate.out" '"event":"ready"'
IG_HTTP=$(grep -o '"http":"[^"]*"' "$SCRATCH/infergate.out" | sed 's/.*:\([0-9]*\)"$/\1/')
IG_GRPC=$(grep -o '"grpc":"[^"]*"' "$SCRATCH/infergate.out" | sed 's/.*:\([0-9]*\)"$/\1/')

# The request loadgen sends, and infergate's response to it: nginx answers the same bytes.
"$LOADGEN" "http://127.0.0.1:$IG_HTTP" --model simple --dump-request "$SCRATCH/simple.json"
curl -sf -X POST -H 'Content-Type: application/json' --data-binary "@$SCRATCH/simple.json" \
  "http://127.0.0.1:$IG_HTTP/v2/models/simple/infer" >"$SCRATCH/simple_response.json"
RESPONSE_BYTES=$(stat -c %s "$SCRATCH/simple_response.json")
if grep -q "['\\\$]" "$SCRATCH/simple_response.json"; then
  echo "frontends.sh: the response has characters nginx's return would interpret" >&2
  exit 2
fi

# ---- nginx --------------------------------------------------------------------------------
# Two instances answering the same fixed body. The ceiling: 2 workers, each with its own
# listening socket (`reuseport`), so the kernel splits the connections between them by
# hash, as it does between infergate's 2 HTTP loops (SO_REUSEPORT). Without `reuseport`
# the workers race for one socket and the split is luck: when one worker happens to take
# nearly all 64 connections nginx serves ~40% more (one worker + the client fit the 2 cores
# better than 3 busy threads), so the ceiling would flip between two values from round to
# round. The second instance, 1 worker, is that best case on purpose (no target).
mkdir -p "$SCRATCH/nginx_tmp"
# $1 name, $2 worker_processes, $3 port, $4 listen options. Sets NGINX_STARTED (the master).
start_nginx() {
  cat >"$SCRATCH/$1.conf" <<EOF
worker_processes $2;
pid $SCRATCH/$1.pid;
error_log $SCRATCH/$1_error.log warn;
events { worker_connections 1024; }
http {
    access_log off;
    client_body_temp_path $SCRATCH/nginx_tmp/body;
    proxy_temp_path       $SCRATCH/nginx_tmp/proxy;
    fastcgi_temp_path     $SCRATCH/nginx_tmp/fastcgi;
    uwsgi_temp_path       $SCRATCH/nginx_tmp/uwsgi;
    scgi_temp_path        $SCRATCH/nginx_tmp/scgi;
    keepalive_requests 1000000;
    keepalive_timeout 300s;
    tcp_nodelay on;
    server {
        listen 127.0.0.1:$3 $4;
        location / {
            default_type application/json;
            return 200 '$(cat "$SCRATCH/simple_response.json")';
        }
    }
}
EOF
  # In the foreground (daemon off), as this script's child: stopped and reaped by cleanup.
  nginx -p "$SCRATCH" -e "$SCRATCH/$1_error.log" -c "$SCRATCH/$1.conf" -g 'daemon off;' &
  NGINX_STARTED=$!
  PIDS+=("$NGINX_STARTED")
  for _ in $(seq 50); do
    curl -sf -o /dev/null "http://127.0.0.1:$3/" && break
    sleep 0.1
  done
  local bytes
  bytes=$(curl -sf -X POST --data-binary "@$SCRATCH/simple.json" "http://127.0.0.1:$3/" | wc -c)
  [[ $bytes == "$RESPONSE_BYTES" ]] || { echo "$1: body $bytes != $RESPONSE_BYTES" >&2; exit 2; }
}
NGINX_PORT=$(free_port)
start_nginx nginx 2 "$NGINX_PORT" reuseport
NGINX_MASTER=$NGINX_STARTED
NGINX1_PORT=$(free_port)
start_nginx nginx1 1 "$NGINX1_PORT" ""
NGINX1_MASTER=$NGINX_STARTED

# ---- bare gRPC server ---------------------------------------------------------------------
"$BARE" 0 >"$SCRATCH/bare.out" 2>"$SCRATCH/bare.err" &
BARE_PID=$!
PIDS+=("$BARE_PID")
wait_for_line "$SCRATCH/bare.out" '^listening'
BARE_PORT=$(awk '/^listening/ {print $2}' "$SCRATCH/bare.out")
"$BARE" 0 raw >"$SCRATCH/bare_raw.out" 2>"$SCRATCH/bare_raw.err" &
BARE_RAW_PID=$!
PIDS+=("$BARE_RAW_PID")
wait_for_line "$SCRATCH/bare_raw.out" '^listening'
BARE_RAW_PORT=$(awk '/^listening/ {print $2}' "$SCRATCH/bare_raw.out")

# ---- runs ---------------------------------------------------------------------------------
# CPU seconds (user+sys) of the given processes so far.
cpu_seconds() {
  local ticks=0 pid
  for pid in "$@"; do
    [[ -r /proc/$pid/stat ]] || continue
    ticks=$((ticks + $(awk '{print $14 + $15}' "/proc/$pid/stat")))
  done
  echo "$ticks $(getconf CLK_TCK)" | awk '{printf "%.3f", $1 / $2}'
}

# "busy idle" jiffies of the whole machine so far (all CPUs; idle includes iowait).
machine_jiffies() {
  awk '/^cpu / {idle = $5 + $6; total = 0; for (i = 2; i <= NF; i++) total += $i;
                print total - idle, idle}' /proc/stat
}

server_pids() {
  case "$1" in
    http_fixed) echo "$NGINX_MASTER $(pgrep -P "$NGINX_MASTER" | tr '\n' ' ')" ;;
    http_fixed_1w) echo "$NGINX1_MASTER $(pgrep -P "$NGINX1_MASTER" | tr '\n' ' ')" ;;
    grpc_bare) echo "$BARE_PID" ;;
    grpc_bare_raw) echo "$BARE_RAW_PID" ;;
    *) echo "$IG_PID" ;;
  esac
}

loadgen_args() {
  case "$1" in
    http_json) echo "http://127.0.0.1:$IG_HTTP --model simple" ;;
    http_binary) echo "http://127.0.0.1:$IG_HTTP --model simple --binary" ;;
    http_fixed) echo "http://127.0.0.1:$NGINX_PORT --model simple" ;;
    http_fixed_1w) echo "http://127.0.0.1:$NGINX1_PORT --model simple" ;;
    grpc) echo "grpc://127.0.0.1:$IG_GRPC --model simple" ;;
    grpc_bare) echo "grpc://127.0.0.1:$BARE_PORT --model simple" ;;
    grpc_bare_raw) echo "grpc://127.0.0.1:$BARE_RAW_PORT --model simple" ;;
  esac
}

cat >"$SCRATCH/post.lua" <<EOF
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local f = io.open("$SCRATCH/simple.json", "rb")
wrk.body = f:read("*a")
f:close()
EOF

DATE=$(date +%Y-%m-%d)
OUT="$ROOT/bench/results/$DATE"
mkdir -p "$OUT"
CSV="$OUT/frontends.csv"
echo "round,concurrency,case,tool,requests,errors,rps,p50_us,p90_us,p99_us,p999_us,max_us,client_cpu_pct,server_cpu_pct,machine_busy_pct,error_kinds" >"$CSV"
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
STARTED=$(date +%s)

# One run: appends a CSV row. $1 round, $2 concurrency, $3 case, $4 tool. CPU times are
# sampled from /proc over WINDOW, inside the measured time (after the warm-up; wrk has
# none), ending before the client exits.
WINDOW=$(awk -v d="$DURATION" 'BEGIN {print (d > 1 ? d - 0.3 : d * 0.7)}')
run_one() {
  local round=$1 conc=$2 case=$3 tool=$4 pids before after t0 t1 result lead=$WARMUP
  local client_before client_after machine_before machine_after
  pids=$(server_pids "$case")
  if [[ $tool == loadgen ]]; then
    # shellcheck disable=SC2046
    "$LOADGEN" $(loadgen_args "$case") --concurrency "$conc" --duration "$DURATION" \
      --warmup "$WARMUP" >"$SCRATCH/run.json" &
  else
    local port=$IG_HTTP
    [[ $case == http_fixed ]] && port=$NGINX_PORT
    lead=0.05
    wrk -t1 -c"$conc" -d"${DURATION}s" --latency -s "$SCRATCH/post.lua" \
      "http://127.0.0.1:$port/v2/models/simple/infer" >"$SCRATCH/run.txt" &
  fi
  local client=$!
  sleep "$lead"
  # shellcheck disable=SC2086
  before=$(cpu_seconds $pids)
  client_before=$(cpu_seconds "$client")
  machine_before=$(machine_jiffies)
  t0=$(date +%s.%N)
  sleep "$WINDOW"
  # shellcheck disable=SC2086
  after=$(cpu_seconds $pids)
  client_after=$(cpu_seconds "$client")
  machine_after=$(machine_jiffies)
  t1=$(date +%s.%N)
  wait "$client" || true
  if [[ $tool == loadgen ]]; then
    result=$(cat "$SCRATCH/run.json")
  else
    result=$(python3 "$ROOT/bench/frontends_report.py" wrk <"$SCRATCH/run.txt")
  fi
  echo "$result" | python3 "$ROOT/bench/frontends_report.py" row "$round" "$conc" "$case" "$tool" \
    "$(awk -v a="$before" -v b="$after" -v t0="$t0" -v t1="$t1" 'BEGIN {printf "%.1f", 100 * (b - a) / (t1 - t0)}')" \
    "$(awk -v a="$client_before" -v b="$client_after" -v t0="$t0" -v t1="$t1" 'BEGIN {printf "%.1f", 100 * (b - a) / (t1 - t0)}')" \
    "$(echo "$machine_before $machine_after" | awk '{printf "%.1f", 100 * ($3 - $1) / ($3 - $1 + $4 - $2)}')" \
    | tee -a "$CSV"
}

echo "load before: $LOAD_START; $ROUNDS rounds x ${#CONCURRENCIES[@]} concurrencies x ${#CASES[@]} cases + wrk, ${WARMUP}+${DURATION} s each" >&2
for round in $(seq "$ROUNDS"); do
  for conc in "${CONCURRENCIES[@]}"; do
    for case in "${CASES[@]}"; do
      [[ $case == http_fixed_1w && $conc == 1 ]] && continue  # one connection: one worker anyway
      run_one "$round" "$conc" "$case" loadgen
    done
  done
  for case in http_json http_fixed; do run_one "$round" 64 "$case" wrk; done
done
LOAD_END=$(cut -d' ' -f1-3 /proc/loadavg)

# ---- report -------------------------------------------------------------------------------
set +e
python3 "$ROOT/bench/frontends_report.py" table "$CSV" \
  --command "bench/frontends.sh --rounds $ROUNDS --duration $DURATION --warmup $WARMUP" \
  --machine "$(nproc) vCPU $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)" \
  --load "$LOAD_START at start, $LOAD_END at end" \
  --response-bytes "$RESPONSE_BYTES" --elapsed "$(($(date +%s) - STARTED))" >"$OUT/frontends.md"
REPORT_STATUS=$?
set -e
cat "$OUT/frontends.md"
echo "written: $CSV $OUT/frontends.md" >&2
exit "$REPORT_STATUS"
