#!/usr/bin/env bash
# Forwarding: what infergate adds in front of an upstream, against nginx as a plain proxy,
# in one command (bench/README.md, "Forwarding").
#
# Starts one upstream U (infergate, `protocol: builtin`, HTTP + gRPC, 2 workers), two
# gateways (2 workers each): G_grpc routes every model to U's gRPC address, G_http to its
# HTTP address; and Debian's nginx proxying to U (proxy_pass with upstream keep-alive,
# grpc_pass; /work/shared/BASELINES.md). Three requests, each in two sizes (small: `simple`,
# 2 x INT32 [1,16]; big: `identity_fp32`, 4 MiB FP32 [1,1048576]):
#   json  HTTP JSON      bin  HTTP binary extension      grpc  gRPC, raw_input_contents
# each sent, at concurrency 1 and 64, in interleaved rounds, to:
#   direct   U itself                  nginx    nginx -> U (json, bin: HTTP; grpc: gRPC)
#   ig_http  G_http -> U's HTTP        ig_grpc  G_grpc -> U's gRPC
# so the paths are gRPC->gRPC and HTTP->HTTP passthrough, HTTP JSON->gRPC, HTTP
# binary->gRPC and gRPC->HTTP binary (4 MiB JSON at c=1 only). Before timing, the
# correctness guard sends each request once to every target and compares the decoded
# outputs with direct's. Each round also runs bench/copy_costs (4 MiB memcpy and loopback
# send: the 4 MiB target's floor).
# Writes bench/results/<date>/forwarding.csv and forwarding.md (medians, added p50,
# ratios, PASS/MISS). Exit status: 0 all targets met, 1 a target missed, 2 setup error,
# 3 the correctness guard failed (a gateway answered differently from direct).
#
#   bench/forwarding.sh [--no-build] [--build-dir DIR] [--rounds N] [--duration S]
#       [--warmup S] [--big-duration S] [--sizes small,big] [--concurrency 1,64]
#       [--via direct,nginx,ig_http,ig_grpc] [--keep-going]
#   --big-duration: measured seconds of the 4 MiB runs at c > 1 (default 2; their warm-up
#     is at least 1 s)
#   --keep-going: a path that fails the guard is reported as broken (a miss), not fatal
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$ROOT/build/release"
ROUNDS=3 DURATION=3 WARMUP=1 BIG_DURATION=2 BUILD_FIRST=1 KEEP_GOING=0
SIZES=(small big) CONCURRENCIES=(1 64) VIAS=(direct nginx ig_http ig_grpc)
KINDS=(json bin grpc)
ARGS="$*"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --no-build) BUILD_FIRST=0 ;;
    --build-dir) BUILD="$(cd "$2" && pwd)"; shift ;;
    --rounds) ROUNDS="$2"; shift ;;
    --duration) DURATION="$2"; shift ;;
    --warmup) WARMUP="$2"; shift ;;
    --big-duration) BIG_DURATION="$2"; shift ;;
    --sizes) IFS=, read -r -a SIZES <<<"$2"; shift ;;
    --concurrency) IFS=, read -r -a CONCURRENCIES <<<"$2"; shift ;;
    --via) IFS=, read -r -a VIAS <<<"$2"; shift ;;
    --keep-going) KEEP_GOING=1 ;;
    -h|--help) sed -n '2,29p' "$0"; exit 0 ;;
    *) echo "forwarding.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
[[ " ${VIAS[*]} " == *" direct "* ]] || { echo "forwarding.sh: --via needs direct" >&2; exit 2; }
has_via() { [[ " ${VIAS[*]} " == *" $1 "* ]]; }

PY=/usr/bin/python3  # Debian's: python3-protobuf and python3-grpcio for the guard
REPORT="$ROOT/bench/forwarding_report.py"
for tool in nginx curl protoc "$PY"; do
  command -v "$tool" >/dev/null || { echo "forwarding.sh: $tool not found" >&2; exit 2; }
done
"$PY" -c 'import grpc, google.protobuf' 2>/dev/null ||
  { echo "forwarding.sh: $PY lacks grpc or protobuf (python3-grpcio, python3-protobuf)" >&2; exit 2; }

if [[ $BUILD_FIRST == 1 ]]; then
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DINFERGATE_TESTS=OFF \
    -DINFERGATE_BENCH=ON >/dev/null
  cmake --build "$BUILD" --target loadgen infergate copy_costs
fi
LOADGEN="$BUILD/bench/loadgen"
INFERGATE="$BUILD/gateway/infergate"
COPY_COSTS="$BUILD/bench/copy_costs"
for bin in "$LOADGEN" "$INFERGATE" "$COPY_COSTS"; do
  [[ -x $bin ]] || { echo "forwarding.sh: $bin not built" >&2; exit 2; }
done

# ---- scratch dir, processes, cleanup ------------------------------------------------------
SCRATCH="$(mktemp -d /tmp/infergate-forwarding.XXXXXX)"
PIDS=()
# shellcheck disable=SC2317  # called by the trap
cleanup() {
  local status=$?
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  if [[ $status -ne 0 && $status -ne 1 ]]; then
    echo "forwarding.sh: failed ($status); logs kept in $SCRATCH" >&2
  else
    rm -rf "$SCRATCH"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() {
  "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# Waits until FILE has a line matching PATTERN (20 s at most) while PID lives.
wait_for_line() {
  local file=$1 pattern=$2 pid=$3
  for _ in $(seq 200); do
    grep -q "$pattern" "$file" 2>/dev/null && return 0
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  echo "forwarding.sh: no '$pattern' in $file" >&2
  cat "$file" "${file%.out}.err" >&2 2>/dev/null || true
  return 1
}

BROKEN="$SCRATCH/broken.txt"
: >"$BROKEN"
is_broken() { grep -q "^$1 $2 " "$BROKEN"; }  # $1 case (kind.via), $2 size

# ---- request files ------------------------------------------------------------------------
"$PY" "$REPORT" requests "$SCRATCH" || { echo "forwarding.sh: request files" >&2; exit 2; }
declare -A HLEN=([small]=$(cat "$SCRATCH/small.bin.hlen") [big]=$(cat "$SCRATCH/big.bin.hlen"))
declare -A MODEL=([small]=simple [big]=identity_fp32)

# ---- infergate: U, G_grpc, G_http ---------------------------------------------------------
# $1 name, $2 the upstreams + routes part of the YAML. Sets STARTED_PID, STARTED_HTTP,
# STARTED_GRPC (ports). Returns 1 when it does not come up.
start_infergate() {
  local name=$1
  cat >"$SCRATCH/$name.yaml" <<EOF
listeners:
  http: { address: "127.0.0.1:0" }
  grpc: { address: "127.0.0.1:0" }
workers: 2
$2
EOF
  "$INFERGATE" --config "$SCRATCH/$name.yaml" >"$SCRATCH/$name.out" 2>"$SCRATCH/$name.err" &
  STARTED_PID=$!
  PIDS+=("$STARTED_PID")
  wait_for_line "$SCRATCH/$name.out" '"event":"ready"' "$STARTED_PID" || return 1
  STARTED_HTTP=$(grep -o '"http":"[^"]*"' "$SCRATCH/$name.out" | sed 's/.*:\([0-9]*\)"$/\1/')
  STARTED_GRPC=$(grep -o '"grpc":"[^"]*"' "$SCRATCH/$name.out" | sed 's/.*:\([0-9]*\)"$/\1/')
}

start_infergate upstream "upstreams:
  - name: demo
    protocol: builtin
    models: [simple, identity_fp32]
routes:
  - match: { model: \"*\" }
    upstream: demo" || { echo "forwarding.sh: the upstream did not start" >&2; exit 2; }
U_PID=$STARTED_PID U_HTTP=$STARTED_HTTP U_GRPC=$STARTED_GRPC
declare -A PROXY_PID HTTP_PORT GRPC_PORT
HTTP_PORT[direct]=$U_HTTP GRPC_PORT[direct]=$U_GRPC

# A gateway that does not start breaks all of its paths (exit 2, or with --keep-going
# reported broken); one that never answers ready is timed anyway.
# $1 via, $2 upstream protocol, $3 upstream port.
start_gateway() {
  local via=$1 protocol=$2 port=$3 status
  if start_infergate "$via" "upstreams:
  - name: u
    protocol: $protocol
    endpoints: [\"127.0.0.1:$port\"]
routes:
  - match: { model: \"*\" }
    upstream: u"; then
    PROXY_PID[$via]=$STARTED_PID HTTP_PORT[$via]=$STARTED_HTTP GRPC_PORT[$via]=$STARTED_GRPC
    for _ in $(seq 100); do
      status=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$STARTED_HTTP/v2/health/ready" || true)
      [[ $status == 200 ]] && return 0
      sleep 0.1
    done
    echo "forwarding.sh: $via: /v2/health/ready still answers '$status' after 10 s; going on" >&2
    return 0
  fi
  echo "forwarding.sh: the gateway $via (upstream protocol $protocol) did not start:" >&2
  sed 's/^/  /' "$SCRATCH/$via.err" >&2
  [[ $KEEP_GOING == 1 ]] || exit 2
  for kind in "${KINDS[@]}"; do
    for size in "${SIZES[@]}"; do echo "$kind.$via $size the gateway did not start" >>"$BROKEN"; done
  done
  VIAS=("${VIAS[@]/$via}")
}
has_via ig_grpc && start_gateway ig_grpc grpc "$U_GRPC"
has_via ig_http && start_gateway ig_http http "$U_HTTP"

# ---- nginx, BASELINES.md's configuration --------------------------------------------------
if has_via nginx; then
  NG_HTTP=$(free_port)
  NG_GRPC=$(free_port)
  mkdir -p "$SCRATCH/nginx_tmp"
  sed -e "s|@SCRATCH@|$SCRATCH|g" -e "s|@U_HTTP@|$U_HTTP|g" -e "s|@U_GRPC@|$U_GRPC|g" \
      -e "s|@HTTP@|$NG_HTTP|g" -e "s|@GRPC@|$NG_GRPC|g" "$ROOT/bench/nginx_proxy.conf.in" \
      >"$SCRATCH/nginx.conf"
  # In the foreground (daemon off), as this script's child: stopped and reaped by cleanup.
  nginx -p "$SCRATCH" -e "$SCRATCH/nginx_error.log" -c "$SCRATCH/nginx.conf" -g 'daemon off;' &
  PROXY_PID[nginx]=$!
  PIDS+=("${PROXY_PID[nginx]}")
  HTTP_PORT[nginx]=$NG_HTTP GRPC_PORT[nginx]=$NG_GRPC
  for _ in $(seq 50); do
    curl -sf -o /dev/null "http://127.0.0.1:$NG_HTTP/v2/health/ready" && break
    sleep 0.1
  done
  curl -sf -o /dev/null "http://127.0.0.1:$NG_HTTP/v2/health/ready" ||
    { echo "forwarding.sh: nginx does not answer" >&2; cat "$SCRATCH/nginx_error.log" >&2; exit 2; }
fi

# ---- correctness guard --------------------------------------------------------------------
# Each request once to every target; the outputs must equal direct's (and direct's must be
# the model's answer). direct or nginx wrong: setup error; a gateway wrong: exit 3, or with
# --keep-going the path is reported broken.
echo "correctness guard: ${KINDS[*]} x ${SIZES[*]} via ${VIAS[*]}" >&2
for size in "${SIZES[@]}"; do
  for kind in "${KINDS[@]}"; do
    targets=()
    for via in "${VIAS[@]}"; do
      [[ -n $via ]] || continue
      if [[ $kind == grpc ]]; then port=${GRPC_PORT[$via]}; else port=${HTTP_PORT[$via]}; fi
      targets+=("$via=$port")
    done
    set +e
    "$PY" "$REPORT" check "$kind" "$size" "$SCRATCH" "${targets[@]}" >"$SCRATCH/check.jsonl"
    set -e
    while IFS=$'\t' read -r label ok why; do
      [[ $ok == True ]] && continue
      echo "forwarding.sh: correctness guard: $kind $size via $label: $why" >&2
      case "$label" in
        direct|nginx) exit 2 ;;
        *) [[ $KEEP_GOING == 1 ]] || exit 3
           echo "$kind.$label $size $why" >>"$BROKEN" ;;
      esac
    done < <("$PY" -c 'import json, sys
for line in sys.stdin:
    r = json.loads(line)
    print(r["label"], r["ok"], (r["why"] or "").replace("\t", " ").replace("\n", " "), sep="\t")' \
      <"$SCRATCH/check.jsonl")
    if [[ $(wc -l <"$SCRATCH/check.jsonl") != "${#targets[@]}" ]]; then
      echo "forwarding.sh: correctness guard: $kind $size: no answer for every target" >&2
      exit 2
    fi
  done
done

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

proxy_pids() {
  case "$1" in
    direct) ;;
    nginx) echo "${PROXY_PID[nginx]} $(pgrep -P "${PROXY_PID[nginx]}" | tr '\n' ' ')" ;;
    *) echo "${PROXY_PID[$1]}" ;;
  esac
}

# Waits (3 s at most) until U and every proxy are idle: the requests a c=64 run of 4 MiB
# left in flight must not run into the next case.
settle() {
  local pids="$U_PID" via before after
  for via in "${!PROXY_PID[@]}"; do pids+=" $(proxy_pids "$via")"; done
  for _ in $(seq 30); do
    # shellcheck disable=SC2086
    before=$(cpu_seconds $pids)
    sleep 0.1
    # shellcheck disable=SC2086
    after=$(cpu_seconds $pids)
    awk -v a="$before" -v b="$after" 'BEGIN {exit !(b - a < 0.015)}' && return 0
  done
}

# loadgen's arguments for request $1 (json, bin, grpc) of size $2 sent to $3 (a via).
loadgen_args() {
  local kind=$1 size=$2 via=$3
  case "$kind" in
    json) LOADGEN_ARGS=("http://127.0.0.1:${HTTP_PORT[$via]}/v2/models/${MODEL[$size]}/infer"
            --body "$SCRATCH/$size.json" --header 'Content-Type: application/json') ;;
    bin) LOADGEN_ARGS=("http://127.0.0.1:${HTTP_PORT[$via]}/v2/models/${MODEL[$size]}/infer"
           --body "$SCRATCH/$size.bin" --header 'Content-Type: application/octet-stream'
           --header "Inference-Header-Content-Length: ${HLEN[$size]}") ;;
    grpc) LOADGEN_ARGS=("grpc://127.0.0.1:${GRPC_PORT[$via]}" --grpc-request "$SCRATCH/$size.pb") ;;
  esac
}

DATE=$(date +%Y-%m-%d)
OUT="$ROOT/bench/results/$DATE"
mkdir -p "$OUT"
CSV="$OUT/forwarding.csv"
echo "round,size,concurrency,case,requests,errors,rps,p50_us,p90_us,p99_us,p999_us,max_us,client_cpu_pct,proxy_cpu_pct,upstream_cpu_pct,machine_busy_pct,error_kinds" >"$CSV"
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
STARTED=$(date +%s)

# One run: appends a CSV row. $1 round, $2 size, $3 concurrency, $4 kind, $5 via. CPU
# times are sampled from /proc over the measured window (after the warm-up, ending before
# loadgen does).
run_one() {
  local round=$1 size=$2 conc=$3 kind=$4 via=$5 duration=$DURATION warmup=$WARMUP pids window
  local before after up_before up_after machine_before machine_after t0 t1
  if [[ $size == big && $conc -gt 1 ]]; then
    duration=$BIG_DURATION
    # A 4 MiB request waits ~0.1-1 s at c=64: the warm-up covers at least one of each.
    warmup=$(awk -v w="$WARMUP" 'BEGIN {print (w < 1 ? 1 : w)}')
  fi
  window=$(awk -v d="$duration" 'BEGIN {print (d > 1 ? d - 0.3 : d * 0.7)}')
  pids=$(proxy_pids "$via")
  loadgen_args "$kind" "$size" "$via"
  "$LOADGEN" "${LOADGEN_ARGS[@]}" --concurrency "$conc" --duration "$duration" \
    --warmup "$warmup" >"$SCRATCH/run.json" 2>"$SCRATCH/run.err" &
  local client=$!
  sleep "$warmup"
  # shellcheck disable=SC2086
  before=$(cpu_seconds $pids)
  up_before=$(cpu_seconds "$U_PID")
  machine_before=$(machine_jiffies)
  t0=$(date +%s.%N)
  sleep "$window"
  # shellcheck disable=SC2086
  after=$(cpu_seconds $pids)
  up_after=$(cpu_seconds "$U_PID")
  machine_after=$(machine_jiffies)
  t1=$(date +%s.%N)
  wait "$client" || true
  settle
  "$PY" "$REPORT" row "$round" "$size" "$conc" "$kind.$via" \
    "$([[ -z $pids ]] || awk -v a="$before" -v b="$after" -v t0="$t0" -v t1="$t1" 'BEGIN {printf "%.1f", 100 * (b - a) / (t1 - t0)}')" \
    "$(awk -v a="$up_before" -v b="$up_after" -v t0="$t0" -v t1="$t1" 'BEGIN {printf "%.1f", 100 * (b - a) / (t1 - t0)}')" \
    "$(echo "$machine_before $machine_after" | awk '{printf "%.1f", 100 * ($3 - $1) / ($3 - $1 + $4 - $2)}')" \
    <"$SCRATCH/run.json" | tee -a "$CSV"
}

RUNS_PER_ROUND=$(( ${#SIZES[@]} * ${#CONCURRENCIES[@]} * ${#KINDS[@]} * ${#VIAS[@]} ))
echo "load before: $LOAD_START; $ROUNDS rounds x up to $RUNS_PER_ROUND runs, ${WARMUP}+${DURATION} s each (4 MiB at c>1: ${WARMUP}+${BIG_DURATION} s)" >&2
for round in $(seq "$ROUNDS"); do
  "$COPY_COSTS" 4194304 101 | "$PY" "$REPORT" costs "$round" | tee -a "$CSV"
  for size in "${SIZES[@]}"; do
    for conc in "${CONCURRENCIES[@]}"; do
      for kind in "${KINDS[@]}"; do
        for via in "${VIAS[@]}"; do
          [[ -n $via ]] || continue
          is_broken "$kind.$via" "$size" && continue
          # 4 MiB as JSON is ~19 MB of text that takes U ~0.1 s to parse and answer: at c=64
          # a request waits seconds, and a run of this suite's length completes none.
          [[ $size == big && $kind == json && $conc -gt 1 ]] && continue
          run_one "$round" "$size" "$conc" "$kind" "$via"
        done
      done
    done
  done
done
LOAD_END=$(cut -d' ' -f1-3 /proc/loadavg)

# ---- report -------------------------------------------------------------------------------
set +e
"$PY" "$REPORT" table "$CSV" --broken "$BROKEN" \
  --command "bench/forwarding.sh${ARGS:+ $ARGS}" \
  --machine "$(nproc) vCPU $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)" \
  --load "$LOAD_START at start, $LOAD_END at end; $(($(date +%s) - STARTED)) s of runs" \
  >"$OUT/forwarding.md"
REPORT_STATUS=$?
set -e
cat "$OUT/forwarding.md"
echo "written: $CSV $OUT/forwarding.md" >&2
[[ $REPORT_STATUS -le 1 ]] || exit 2
exit "$REPORT_STATUS"
