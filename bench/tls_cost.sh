#!/usr/bin/env bash
# What TLS costs on the small-model path (bench/README.md, "TLS"), in one command.
#
# Builds the release targets, makes a self-signed certificate (openssl), starts two
# infergate processes serving the builtin `simple` model with 2 workers each, one in
# plaintext and one with TLS on both listeners, and runs them in interleaved rounds, one
# process under load at a time, keep-alive everywhere:
#   http   wrk (1 thread, Lua POST of the JSON request) at 64 and 1 connections
#   grpc   loadgen ModelInfer at 64 and 1 calls in flight (one HTTP/2 connection)
#   nginx  the same-run baseline: Debian's nginx (2 workers) answering `return 200` with
#          the model's JSON answer, in plaintext and over TLS with the same certificate,
#          driven by the same wrk command: what TLS costs a mature HTTP server here
# Besides throughput and p50, each run records the server's CPU time per request (from
# /proc/PID/stat): on this 2-core machine the client's own TLS work shares the cores,
# so throughput alone charges the client's TLS to the server.
# Writes bench/results/<date>/tls_cost.csv and tls_cost.md: per case the median
# throughput, p50 and server CPU per request of each side, and TLS / plaintext computed
# pair by pair within a round. Target (security issue): TLS keeps at least 85% of the
# plaintext throughput at 64 connections. Exit status 1 when it is missed, 2 on a setup
# error (a command failing before the report: wrk takes whole seconds only, say).
#
#   bench/tls_cost.sh [--no-build] [--build-dir DIR] [--rounds N] [--duration S] [--warmup S]
#       [--out DIR]     (--out: default bench/results/<date>/)
set -eEuo pipefail  # -E: the ERR trap below holds inside functions too

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$ROOT/build/release"
ROUNDS=3 DURATION=5 WARMUP=1 BUILD_FIRST=1
OUT="$ROOT/bench/results/$(date +%Y-%m-%d)"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --no-build) BUILD_FIRST=0 ;;
    --rounds) ROUNDS="$2"; shift ;;
    --duration) DURATION="$2"; shift ;;
    --warmup) WARMUP="$2"; shift ;;
    --build-dir) BUILD="$(cd "$2" && pwd)"; shift ;;
    --out) OUT="$2"; shift ;;
    -h|--help) sed -n '2,23p' "$0"; exit 0 ;;
    *) echo "tls_cost.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done

for tool in wrk openssl python3 curl nginx; do
  command -v "$tool" >/dev/null || { echo "tls_cost.sh: $tool not found" >&2; exit 2; }
done
if [[ $BUILD_FIRST == 1 ]]; then
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DINFERGATE_TESTS=OFF \
    -DINFERGATE_BENCH=ON >/dev/null
  cmake --build "$BUILD" --target loadgen infergate
fi
LOADGEN="$BUILD/bench/loadgen"
INFERGATE="$BUILD/gateway/infergate"

SCRATCH="$(mktemp -d /tmp/infergate-tls-cost.XXXXXX)"
PIDS=()
# shellcheck disable=SC2317  # called by the trap
cleanup() {
  local status=$?
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  if [[ $status -ne 0 && $status -ne 1 ]]; then
    echo "tls_cost.sh: failed ($status); logs kept in $SCRATCH" >&2
  else
    rm -rf "$SCRATCH"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
# A command that fails before the report (wrk refusing its arguments, a server gone) is a
# setup error, not a missed target.
trap 'echo "tls_cost.sh: line $LINENO failed" >&2; exit 2' ERR

# ---- certificate (self-signed: its own CA) ---------------------------------------------
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
  -subj "/CN=localhost" -addext "subjectAltName=IP:127.0.0.1,DNS:localhost" \
  -keyout "$SCRATCH/server.key" -out "$SCRATCH/server.pem" 2>/dev/null

# ---- the two gateways -----------------------------------------------------------------
# $1 name, $2 the listeners' extra flow-mapping keys ("" or a tls: entry).
start_gateway() {
  cat >"$SCRATCH/$1.yaml" <<EOF
listeners:
  http:    { address: "127.0.0.1:0" $2 }
  grpc:    { address: "127.0.0.1:0" $2 }
  metrics: { address: "127.0.0.1:0" }
workers: 2
upstreams:
  - name: demo
    protocol: builtin
routes:
  - match: { model: "*" }
    upstream: demo
EOF
  "$INFERGATE" --config "$SCRATCH/$1.yaml" >"$SCRATCH/$1.out" 2>"$SCRATCH/$1.err" &
  PIDS+=("$!")
  for _ in $(seq 200); do
    grep -q '"event":"ready"' "$SCRATCH/$1.out" 2>/dev/null && return 0
    sleep 0.1
  done
  echo "tls_cost.sh: $1 did not start" >&2
  cat "$SCRATCH/$1.err" >&2
  exit 3
}
port_of() {  # $1 name, $2 listener
  grep -o "\"$2\":\"[^\"]*\"" "$SCRATCH/$1.out" | sed 's/.*:\([0-9]*\)"$/\1/'
}
declare -A SERVER_PID
start_gateway plain ""
SERVER_PID[plain]=${PIDS[-1]}
start_gateway tls ", tls: { cert: \"$SCRATCH/server.pem\", key: \"$SCRATCH/server.key\" }"

SERVER_PID[tls]=${PIDS[-1]}

"$LOADGEN" "http://127.0.0.1:$(port_of plain http)" --model simple \
  --dump-request "$SCRATCH/simple.json"
"$LOADGEN" "grpc://127.0.0.1:$(port_of plain grpc)" --model simple \
  --dump-request "$SCRATCH/simple.pb"
# Both sides answer the same bytes.
for side in "http://127.0.0.1:$(port_of plain http)" "https://127.0.0.1:$(port_of tls http)"; do
  curl -sf --cacert "$SCRATCH/server.pem" -X POST --data-binary "@$SCRATCH/simple.json" \
    "$side/v2/models/simple/infer" >"$SCRATCH/answer_${side%%:*}.json"
done
cmp -s "$SCRATCH/answer_http.json" "$SCRATCH/answer_https.json" ||
  { echo "tls_cost.sh: the TLS side answers differently" >&2; exit 2; }
# ---- nginx: the baseline, answering the same bytes from memory ---------------------------
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
NG_PLAIN=$(free_port)
NG_TLS=$(free_port)
mkdir -p "$SCRATCH/nginx_tmp"
ANSWER=$(cat "$SCRATCH/answer_http.json")
[[ $ANSWER != *"'"* && $ANSWER != *\\* ]] ||
  { echo "tls_cost.sh: the answer does not fit an nginx quoted string" >&2; exit 2; }
cat >"$SCRATCH/nginx.conf" <<EOF
worker_processes 2;
pid $SCRATCH/nginx.pid;
error_log $SCRATCH/nginx_error.log warn;
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
    ssl_certificate     $SCRATCH/server.pem;
    ssl_certificate_key $SCRATCH/server.key;
    ssl_protocols TLSv1.2 TLSv1.3;
    server {
        listen 127.0.0.1:$NG_PLAIN;
        listen 127.0.0.1:$NG_TLS ssl;
        client_body_buffer_size 1m;
        location / { default_type application/json; return 200 '$ANSWER'; }
    }
}
EOF
nginx -p "$SCRATCH" -e "$SCRATCH/nginx_error.log" -c "$SCRATCH/nginx.conf" -g 'daemon off;' &
PIDS+=("$!")
NGINX_MASTER=$!
for _ in $(seq 50); do
  curl -sf -o /dev/null -X POST --data-binary "@$SCRATCH/simple.json" "http://127.0.0.1:$NG_PLAIN/" &&
    break
  sleep 0.1
done
curl -sf --cacert "$SCRATCH/server.pem" -X POST --data-binary "@$SCRATCH/simple.json" \
  "https://127.0.0.1:$NG_TLS/" >"$SCRATCH/answer_nginx.json" ||
  { echo "tls_cost.sh: nginx does not answer" >&2; cat "$SCRATCH/nginx_error.log" >&2; exit 2; }
cmp -s <(tr -d '\n' <"$SCRATCH/answer_http.json") <(tr -d '\n' <"$SCRATCH/answer_nginx.json") ||
  { echo "tls_cost.sh: nginx answers other bytes than the gateway" >&2; exit 2; }

# CPU time (user + system, clock ticks) the processes $@ have used so far.
cpu_ticks() {
  local total=0 pid
  for pid in "$@"; do
    total=$((total + $(awk '{print $14 + $15}' "/proc/$pid/stat")))
  done
  echo "$total"
}

cat >"$SCRATCH/post.lua" <<EOF
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local f = io.open("$SCRATCH/simple.json", "rb")
wrk.body = f:read("*a")
f:close()
EOF

# ---- runs -----------------------------------------------------------------------------
mkdir -p "$OUT"
CSV="$OUT/tls_cost.csv"
echo "round,protocol,concurrency,side,rps,p50_us,p99_us,errors,server_cpu_us" >"$CSV"

run_one() {  # $1 round, $2 protocol, $3 concurrency, $4 side
  local json pids before
  if [[ $2 == nginx ]]; then
    mapfile -t pids < <(pgrep -P "$NGINX_MASTER")  # the workers
  else
    pids=("${SERVER_PID[$4]}")
  fi
  before=$(cpu_ticks "${pids[@]}")
  if [[ $2 == nginx ]]; then
    local url="http://127.0.0.1:$NG_PLAIN/"
    [[ $4 == tls ]] && url="https://127.0.0.1:$NG_TLS/"
    wrk -t1 -c"$3" -d"${DURATION}s" --latency -s "$SCRATCH/post.lua" "$url" >"$SCRATCH/run.txt"
    json=$(python3 "$ROOT/bench/frontends_report.py" wrk <"$SCRATCH/run.txt")
  elif [[ $2 == http ]]; then
    local scheme=http
    [[ $4 == tls ]] && scheme=https
    wrk -t1 -c"$3" -d"${DURATION}s" --latency -s "$SCRATCH/post.lua" \
      "$scheme://127.0.0.1:$(port_of "$4" http)/v2/models/simple/infer" >"$SCRATCH/run.txt"
    json=$(python3 "$ROOT/bench/frontends_report.py" wrk <"$SCRATCH/run.txt")
  else
    local tls_args=()
    [[ $4 == tls ]] && tls_args=(--grpc-tls-ca "$SCRATCH/server.pem")
    json=$("$LOADGEN" "grpc://127.0.0.1:$(port_of "$4" grpc)" --model simple \
      --concurrency "$3" --duration "$DURATION" --warmup "$WARMUP" "${tls_args[@]}")
  fi
  local ticks=$(( $(cpu_ticks "${pids[@]}") - before ))
  python3 -c 'import json,os,sys; r=json.loads(sys.argv[1]);
n = r["requests"] + r["rps"] * r.get("warmup_s", 0);  # the CPU was spent on warm-up too
cpu_us = int(sys.argv[6]) * 1e6 / os.sysconf("SC_CLK_TCK") / n if n else 0;
print(",".join(str(x) for x in [sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5],
      r["rps"], r["p50_us"], r["p99_us"], r["errors"], round(cpu_us, 2)]))' \
    "$json" "$1" "$2" "$3" "$4" "$ticks" "$DURATION" >>"$CSV"
}

echo "$ROUNDS rounds x 3 servers x 2 concurrencies x 2 sides, ${DURATION} s each" >&2
for round in $(seq "$ROUNDS"); do
  for protocol in http grpc nginx; do
    for conc in 64 1; do
      # The order within a pair alternates by round, so neither side always runs second.
      if (( round % 2 )); then sides=(plain tls); else sides=(tls plain); fi
      for side in "${sides[@]}"; do run_one "$round" "$protocol" "$conc" "$side"; done
    done
  done
done

trap - ERR  # from here, exit 1 is the report's verdict
python3 - "$CSV" "$OUT/tls_cost.md" <<'EOF'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
cases = sorted({(r["protocol"], int(r["concurrency"])) for r in rows}, key=lambda c: (c[0], -c[1]))
lines = ["| server | connections | plaintext req/s | TLS req/s | TLS/plain req/s (median, min-max) "
         "| plaintext p50 us | TLS p50 us | TLS/plain p50 | server CPU us/req plain / TLS "
         "| plain/TLS CPU per request |", "|---|---|---|---|---|---|---|---|---|---|"]
names = {"http": "infergate HTTP", "grpc": "infergate gRPC", "nginx": "nginx `return 200`"}
missed = False
for protocol, conc in cases:
    sel = [r for r in rows if r["protocol"] == protocol and int(r["concurrency"]) == conc]
    by_round = {}
    for r in sel:
        by_round.setdefault(r["round"], {})[r["side"]] = r
    pairs = [v for v in by_round.values() if "plain" in v and "tls" in v]
    rps_ratio = [float(p["tls"]["rps"]) / float(p["plain"]["rps"]) for p in pairs]
    p50_ratio = [float(p["tls"]["p50_us"]) / float(p["plain"]["p50_us"]) for p in pairs]
    med = lambda side, key: statistics.median(float(p[side][key]) for p in pairs)
    cpu_ratio = [float(p["plain"]["server_cpu_us"]) / float(p["tls"]["server_cpu_us"])
                 for p in pairs]
    lines.append("| %s | %d | %.0f | %.0f | %.3f (%.3f-%.3f) | %.0f | %.0f | %.2f | %.1f / %.1f | %.3f |" % (
        names[protocol], conc, med("plain", "rps"), med("tls", "rps"),
        statistics.median(rps_ratio), min(rps_ratio), max(rps_ratio), med("plain", "p50_us"),
        med("tls", "p50_us"), statistics.median(p50_ratio), med("plain", "server_cpu_us"),
        med("tls", "server_cpu_us"), statistics.median(cpu_ratio)))
    if protocol != "nginx" and conc == 64 and statistics.median(rps_ratio) < 0.85:
        missed = True
lines.append("")
lines.append("Target: TLS keeps at least 0.85 of the plaintext throughput at 64 connections: "
             + ("MISSED" if missed else "met") + ".")
open(sys.argv[2], "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
sys.exit(1 if missed else 0)
EOF
