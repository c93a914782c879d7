#!/usr/bin/env bash
# Shared-memory handoff: inline forwarding vs the handoff pool vs client-shm pass-through to
# a colocated upstream, against a memcpy and a loopback transfer of the same payload, in one
# command (bench/README.md, "Shared-memory handoff").
#
# Starts, on loopback: U, infergate serving `identity_fp32` (builtin, 2 workers, client shm
# on for keys "/infergate_*"); G_inline and G_handoff, infergate (2 workers) routing every
# model to U's gRPC address as a `colocated: true` upstream, G_handoff with `handoff:
# {min_bytes: 65536, pool_bytes: 402653184, kind: system, passthrough: true}`, both with
# client shm on. For each size (FP32 [1,N] of 1, 16, 64 MiB), one client (bench/loadgen,
# HTTP, closed loop, concurrency 1) sends, in interleaved rounds:
#   inline      binary-tensor body via G_inline (the tensor forwarded inline over gRPC)
#   handoff     the same body via G_handoff (input and output through pool slots)
#   shm_g       a JSON body naming a client shm region, via G_handoff (passed through)
#   shm_direct  the same, straight to U
#   shm_direct_grpc  the same as a ModelInferRequest, straight to U's gRPC listener (no
#               target: it splits the pass-through's added latency into U's gRPC
#               frontend, which the gateway calls, and the gateway itself)
#   paired      (no target) shm_g and shm_direct again, alternating request by request
#               from one Python client: the added latency with the machine's drifts
#               between two runs cancelled
#   shm_inline  the shm request via G_inline (the gateway reads the region and forwards
#               the tensor inline)
#   direct      the binary body straight to U
# then bench/copy_costs for the size (memcpy, loopback transfer). The client regions are
# POSIX objects "/infergate_bench_<pid>_<M>" (2 x S bytes: input at 0, output at S),
# registered at U and at both gateways. Before timing, the correctness guard warms
# G_handoff up until each of its cases goes by reference (checked with the handoff counters
# of GET /admin/upstreams) and compares one answer of every case with the input. Each run
# of a G_handoff case starts with one checked request of it (G_handoff learns an output's
# size from the last answer: the first request after a smaller size is retried inline),
# then the counters' deltas over the run are recorded.
# Writes bench/results/<date>/shm_handoff.csv and shm_handoff.md (medians over rounds,
# ratios, PASS/MISS). Targets: handoff p50 <= 0.6x inline p50 at 16 and 64 MiB; the p50
# G_handoff adds to a client-shm request (shm_g - shm_direct) within 20% of its value at
# the smallest size, at every size. Exit status: 0 every target met, 1 a target missed,
# 2 setup error, 3 the correctness guard failed (a gateway answered wrong).
#
#   bench/shm_handoff.sh [--no-build] [--build-dir DIR] [--rounds N] [--duration S]
#       [--warmup S] [--sizes 1,16,64] [--quick] [--upstream grpc|http] [--out DIR]
#   --rounds: default 3; --duration: measured seconds per run (default 3; a run that
#     completes fewer than 10 requests is repeated once, long enough for ~15); --warmup:
#     seconds of load before each run's window (default 1); --sizes: MiB, comma-separated;
#   --quick: 1 round, 1.5 s runs after 0.5 s of warm-up (a look, not a measurement)
#   --upstream: how the gateways reach U (default grpc: the HTTP client's request is
#     transcoded; http: the same protocol end to end, so the pass-through's "straight to
#     U" is the very request the gateway sends on). Results of http: shm_handoff_http.*
#   --out: where the CSV and the report go (default bench/results/<date>/)
#   PYTHON (environment): the interpreter with numpy and grpcio (default /usr/bin/python3)
# About 6 minutes with the defaults once built (--quick: about 1).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$ROOT/build/release"
ROUNDS=3 DURATION=3 WARMUP=1 BUILD_FIRST=1 UPSTREAM=grpc
OUT="$ROOT/bench/results/$(date +%Y-%m-%d)"
MIN_REQUESTS=10  # per run; fewer: the run is repeated once, longer
SIZES=(1 16 64)
CASES=(inline handoff shm_g shm_direct shm_direct_grpc shm_inline direct)
ARGS="$*"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --no-build) BUILD_FIRST=0 ;;
    --build-dir) BUILD="$(cd "$2" && pwd)"; shift ;;
    --rounds) ROUNDS="$2"; shift ;;
    --duration) DURATION="$2"; shift ;;
    --warmup) WARMUP="$2"; shift ;;
    --sizes) IFS=, read -r -a SIZES <<<"$2"; shift ;;
    --quick) ROUNDS=1 DURATION=1.5 WARMUP=0.5 ;;
    --upstream) UPSTREAM="$2"; shift ;;
    --out) OUT="$2"; shift ;;
    -h|--help) sed -n '2,49p' "$0"; exit 0 ;;
    *) echo "shm_handoff.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
(( ${#SIZES[@]} > 0 )) || { echo "shm_handoff.sh: --sizes: none given" >&2; exit 2; }
[[ $UPSTREAM == grpc || $UPSTREAM == http ]] ||
  { echo "shm_handoff.sh: --upstream: grpc or http, not '$UPSTREAM'" >&2; exit 2; }
for m in "${SIZES[@]}"; do
  [[ $m =~ ^[1-9][0-9]*$ && $m -le 512 ]] ||
    { echo "shm_handoff.sh: --sizes: '$m' is not a size in MiB (1-512)" >&2; exit 2; }
done
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || { echo "shm_handoff.sh: --rounds: '$ROUNDS'" >&2; exit 2; }
if ! [[ $DURATION =~ ^[0-9]+(\.[0-9]+)?$ && $WARMUP =~ ^[0-9]+(\.[0-9]+)?$ ]] ||
    ! awk -v d="$DURATION" 'BEGIN {exit !(d > 0)}'; then
  echo "shm_handoff.sh: --duration '$DURATION' / --warmup '$WARMUP': seconds (duration > 0)" >&2
  exit 2
fi
# Every size's input and output fit the pool at once (pool_bytes below).
POOL_BYTES=402653184
MAX_SIZE=$(printf '%s\n' "${SIZES[@]}" | sort -n | tail -1)
(( 2 * MAX_SIZE * 1048576 <= POOL_BYTES )) ||
  { echo "shm_handoff.sh: ${MAX_SIZE} MiB in and out does not fit the 384 MiB pool" >&2; exit 2; }

PY="${PYTHON:-/usr/bin/python3}"  # Debian's: python3-numpy, python3-grpcio (the guard's gRPC request)
HELPER="$ROOT/bench/shm_handoff.py"
for tool in curl "$PY"; do
  command -v "$tool" >/dev/null || { echo "shm_handoff.sh: $tool not found" >&2; exit 2; }
done
"$PY" -c 'import numpy, grpc' 2>/dev/null ||
  { echo "shm_handoff.sh: $PY lacks numpy or grpc (python3-numpy, python3-grpcio)" >&2; exit 2; }

if [[ $BUILD_FIRST == 1 ]]; then
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DINFERGATE_TESTS=OFF \
    -DINFERGATE_BENCH=ON >/dev/null
  cmake --build "$BUILD" --target loadgen infergate copy_costs
fi
LOADGEN="$BUILD/bench/loadgen"
INFERGATE="$BUILD/gateway/infergate"
COPY_COSTS="$BUILD/bench/copy_costs"
for bin in "$LOADGEN" "$INFERGATE" "$COPY_COSTS"; do
  [[ -x $bin ]] || { echo "shm_handoff.sh: $bin not built" >&2; exit 2; }
done

# ---- scratch dir, processes, cleanup ------------------------------------------------------
SCRATCH="$(mktemp -d /tmp/infergate-shm-handoff.XXXXXX)"
PREFIX="infergate_bench_$$_"   # the client objects: /dev/shm/${PREFIX}<MiB>
PIDS=()                         # in start order; stopped in reverse (gateways before U)
CLIENT=""                       # the loadgen of the run in progress
# shellcheck disable=SC2317  # called by the trap
cleanup() {
  local status=$? pid i rc left
  trap - EXIT INT TERM
  [[ -z $CLIENT ]] || kill -TERM "$CLIENT" 2>/dev/null || true
  # While the processes live: unregister the regions (G_handoff unregisters its copies at
  # U), then unlink the objects.
  "$PY" "$HELPER" cleanup "$SCRATCH" 2>>"$SCRATCH/cleanup.err" || true
  for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
    pid=${PIDS[i]} rc=0
    if kill -TERM "$pid" 2>/dev/null; then
      wait "$pid" 2>/dev/null || rc=$?
      [[ $rc == 0 ]] || echo "shm_handoff.sh: process $pid exited $rc on SIGTERM" >&2
    else
      wait "$pid" 2>/dev/null || rc=$?
      echo "shm_handoff.sh: process $pid had exited already ($rc; see its .err in $SCRATCH)" >&2
      (( status > 1 )) || status=2
    fi
  done
  rm -f /dev/shm/"$PREFIX"* 2>/dev/null || true
  # The gateways' pools are theirs to unlink on exit: report any left behind, remove it.
  for pid in "${PIDS[@]}"; do
    for left in /dev/shm/infergate_pool_"${pid}"_*; do
      [[ -e $left ]] || continue
      echo "shm_handoff.sh: $left left behind by process $pid (removed)" >&2
      rm -f "$left"
    done
  done
  if [[ $status -ne 0 && $status -ne 1 ]]; then
    echo "shm_handoff.sh: failed ($status); logs kept in $SCRATCH" >&2
  else
    rm -rf "$SCRATCH"
  fi
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Waits until FILE has a line matching PATTERN (20 s at most) while PID lives.
wait_for_line() {
  local file=$1 pattern=$2 pid=$3
  for _ in $(seq 200); do
    grep -q "$pattern" "$file" 2>/dev/null && return 0
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  echo "shm_handoff.sh: no '$pattern' in $file" >&2
  cat "$file" "${file%.out}.err" >&2 2>/dev/null || true
  return 1
}

# $1 name, $2 the upstreams + routes part of the YAML. Sets STARTED_PID and the ports
# STARTED_HTTP, STARTED_GRPC, STARTED_METRICS. Returns 1 when it does not come up.
SHM_SECTION='shm: { enabled: true, allowed_key_prefixes: ["/infergate_"] }'
start_infergate() {
  local name=$1
  cat >"$SCRATCH/$name.yaml" <<EOF
listeners:
  http:    { address: "127.0.0.1:0" }
  grpc:    { address: "127.0.0.1:0" }
  metrics: { address: "127.0.0.1:0" }
workers: 2
$2
$SHM_SECTION
EOF
  "$INFERGATE" --config "$SCRATCH/$name.yaml" >"$SCRATCH/$name.out" 2>"$SCRATCH/$name.err" &
  STARTED_PID=$!
  PIDS+=("$STARTED_PID")
  wait_for_line "$SCRATCH/$name.out" '"event":"ready"' "$STARTED_PID" || return 1
  port_of() { grep -o "\"$1\":\"[^\"]*\"" "$SCRATCH/$name.out" | head -1 | sed 's/.*:\([0-9]*\)"$/\1/'; }
  STARTED_HTTP=$(port_of http) STARTED_GRPC=$(port_of grpc) STARTED_METRICS=$(port_of metrics)
}

start_infergate U "upstreams:
  - name: demo
    protocol: builtin
    models: [identity_fp32]
routes:
  - match: { model: \"*\" }
    upstream: demo" || { echo "shm_handoff.sh: U did not start" >&2; exit 2; }
U_PID=$STARTED_PID U_HTTP=$STARTED_HTTP U_GRPC=$STARTED_GRPC

# $1 name, $2 extra keys of the upstream (indented).
start_gateway() {
  local port=$U_GRPC
  [[ $UPSTREAM == http ]] && port=$U_HTTP
  start_infergate "$1" "upstreams:
  - name: u
    protocol: $UPSTREAM
    endpoints: [\"127.0.0.1:$port\"]
    colocated: true$2
routes:
  - match: { model: \"*\" }
    upstream: u" || { echo "shm_handoff.sh: $1 did not start" >&2; exit 2; }
  local status
  for _ in $(seq 100); do
    status=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$STARTED_HTTP/v2/health/ready" || true)
    [[ $status == 200 ]] && return 0
    sleep 0.1
  done
  echo "shm_handoff.sh: $1: /v2/health/ready still answers '$status' after 10 s" >&2
  exit 2
}
start_gateway G_inline ""
GI_PID=$STARTED_PID GI_HTTP=$STARTED_HTTP
start_gateway G_handoff "
    handoff: { min_bytes: 65536, pool_bytes: $POOL_BYTES, kind: system, passthrough: true }"
GH_PID=$STARTED_PID GH_HTTP=$STARTED_HTTP GH_METRICS=$STARTED_METRICS

SIZES_CSV=$(IFS=,; echo "${SIZES[*]}")
cat >"$SCRATCH/state.json" <<EOF
{"sizes": [$SIZES_CSV],
 "http": {"u": $U_HTTP, "g_inline": $GI_HTTP, "g_handoff": $GH_HTTP}, "grpc": {"u": $U_GRPC},
 "metrics": {"g_handoff": $GH_METRICS}}
EOF

"$PY" "$HELPER" wait-pool "$SCRATCH" >/dev/null ||
  { echo "shm_handoff.sh: G_handoff's pool never became ready (see $SCRATCH/G_handoff.err)" >&2; exit 2; }

# ---- requests, client regions, the correctness guard --------------------------------------
echo "requests and client regions: ${SIZES[*]} MiB" >&2
"$PY" "$HELPER" prepare "$SCRATCH" --sizes "$SIZES_CSV" --prefix "$PREFIX" --infergate "$INFERGATE" ||
  { echo "shm_handoff.sh: request files or shm objects" >&2; exit 2; }
"$PY" "$HELPER" register "$SCRATCH" || { echo "shm_handoff.sh: region registration" >&2; exit 2; }
declare -A HLEN
for m in "${SIZES[@]}"; do HLEN[$m]=$(cat "$SCRATCH/bin_$m.hlen"); done

echo "correctness guard (and G_handoff's warm-up): ${CASES[*]} x ${SIZES[*]} MiB" >&2
GUARD_STATUS=0
"$PY" "$HELPER" guard "$SCRATCH" >"$SCRATCH/guard.jsonl" || GUARD_STATUS=$?
"$PY" -c 'import json, sys
for line in sys.stdin:
    r = json.loads(line)
    ref = {None: "", True: ", by reference after %d" % r["tries"],
           False: ", never by reference (%d tries)" % r["tries"]}[r["by_reference"]]
    print("  %3d MiB %-10s %s%s" % (r["size_mib"], r["case"],
          "ok" if r["ok"] else "WRONG: " + r["why"], ref))' <"$SCRATCH/guard.jsonl" >&2
case $GUARD_STATUS in
  0) ;;
  4) echo "shm_handoff.sh: a case of G_handoff never went by reference: timed anyway, reported as a miss" >&2 ;;
  3) echo "shm_handoff.sh: correctness guard failed (a gateway answered wrong)" >&2; exit 3 ;;
  *) echo "shm_handoff.sh: correctness guard: the upstream itself failed (setup)" >&2; exit 2 ;;
esac

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

# Waits (5 s at most) until U and the gateways are idle: a request left in flight by the
# end of a run (64 MiB takes ~0.1 s) must not run into the next one.
settle() {
  local before after
  for _ in $(seq 50); do
    before=$(cpu_seconds "$U_PID" "$GI_PID" "$GH_PID")
    sleep 0.1
    after=$(cpu_seconds "$U_PID" "$GI_PID" "$GH_PID")
    awk -v a="$before" -v b="$after" 'BEGIN {exit !(b - a < 0.015)}' && return 0
  done
}

# Rows go to the scratch directory; results/<date>/ gets the CSV and the report only from a
# run that got to the end (a failed one leaves the last good pair there).
CSV="$SCRATCH/shm_handoff.csv"
"$PY" -c 'import csv, sys; sys.path.insert(0, sys.argv[1]); import shm_handoff
csv.writer(sys.stdout, lineterminator="\n").writerow(shm_handoff.COLUMNS)' "$ROOT/bench" >"$CSV"
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
STARTED=$(date +%s)

# One run: appends a CSV row. $1 round, $2 size (MiB), $3 case.
run_one() {
  local round=$1 m=$2 case=$3 port gw_pid="" before=- primed=- window duration=$DURATION
  local gw_before gw_after u_before u_after t0 t1 n attempt rc
  case "$case" in
    inline|shm_inline) port=$GI_HTTP gw_pid=$GI_PID ;;
    handoff|shm_g) port=$GH_HTTP gw_pid=$GH_PID ;;
    direct|shm_direct|shm_direct_grpc) port=$U_HTTP ;;
  esac
  local args=("http://127.0.0.1:$port/v2/models/identity_fp32/infer")
  case "$case" in
    inline|handoff|direct)
      args+=(--body "$SCRATCH/bin_$m.body" --header 'Content-Type: application/octet-stream'
             --header "Inference-Header-Content-Length: ${HLEN[$m]}") ;;
    shm_direct_grpc) args=("grpc://127.0.0.1:$U_GRPC" --grpc-request "$SCRATCH/shm_$m.pb") ;;
    *) args+=(--body "$SCRATCH/shm_$m.json" --header 'Content-Type: application/json') ;;
  esac
  # A run that completed fewer than MIN_REQUESTS is run again, once, long enough for them.
  for attempt in 1 2; do
    if [[ $gw_pid == "$GH_PID" ]]; then
      before="$SCRATCH/before.json" primed="$SCRATCH/primed.json" rc=0
      "$PY" "$HELPER" prime "$SCRATCH" "$case" "$m" "$before" >"$primed" || rc=$?
      if [[ $rc == 3 ]]; then
        echo "shm_handoff.sh: $case $m MiB failed or answered wrong before round $round's run" >&2
        exit 3
      fi
      [[ $rc == 0 ]] || { echo "shm_handoff.sh: priming $case $m MiB" >&2; exit 2; }
    fi
    window=$(awk -v d="$duration" 'BEGIN {print (d > 1 ? d - 0.3 : d * 0.7)}')
    "$LOADGEN" "${args[@]}" --concurrency 1 --duration "$duration" --warmup "$WARMUP" \
      >"$SCRATCH/run.json" 2>"$SCRATCH/run.err" &
    CLIENT=$!
    sleep "$WARMUP"
    gw_before=$([[ -z $gw_pid ]] || cpu_seconds "$gw_pid")
    u_before=$(cpu_seconds "$U_PID")
    t0=$(date +%s.%N)
    sleep "$window"
    gw_after=$([[ -z $gw_pid ]] || cpu_seconds "$gw_pid")
    u_after=$(cpu_seconds "$U_PID")
    t1=$(date +%s.%N)
    wait "$CLIENT" || true
    CLIENT=""
    settle
    n=$("$PY" -c 'import json, sys; print(int(json.load(sys.stdin).get("requests", 0)))' \
          <"$SCRATCH/run.json" 2>/dev/null || echo 0)
    (( attempt == 1 && n > 0 && n < MIN_REQUESTS )) || break
    duration=$(awk -v d="$duration" -v n="$n" -v min="$MIN_REQUESTS" \
                 'BEGIN {x = d * 1.5 * min / n; printf "%.1f", (x > 60 ? 60 : x)}')
    echo "  round $round ${m} MiB $case: $n requests in ${DURATION} s; again for $duration s" >&2
  done
  "$PY" "$HELPER" row "$SCRATCH" "$round" "$m" "$case" "$before" "$primed" \
    "$([[ -z $gw_pid ]] || awk -v a="$gw_before" -v b="$gw_after" -v t0="$t0" -v t1="$t1" 'BEGIN {printf "%.1f", 100 * (b - a) / (t1 - t0)}')" \
    "$(awk -v a="$u_before" -v b="$u_after" -v t0="$t0" -v t1="$t1" 'BEGIN {printf "%.1f", 100 * (b - a) / (t1 - t0)}')" \
    <"$SCRATCH/run.json" >>"$CSV" || { echo "shm_handoff.sh: row ($case $m MiB)" >&2; exit 2; }
  echo "  round $round ${m} MiB $case: $(tail -1 "$CSV" | cut -d, -f4-8) (requests,errors,rps,p50_us,p90_us)" >&2
}

echo "load before: $LOAD_START; $ROUNDS rounds x ${#SIZES[@]} sizes x ${#CASES[@]} cases, ${WARMUP}+${DURATION} s each" >&2
for round in $(seq "$ROUNDS"); do
  for m in "${SIZES[@]}"; do
    for case in "${CASES[@]}"; do
      run_one "$round" "$m" "$case"
      if [[ $case == shm_direct_grpc ]]; then
        # The pass-through's added latency once more, G_handoff and U alternating request
        # by request (no target: a cross-check against the machine's drifts).
        "$PY" "$HELPER" paired "$SCRATCH" "$round" "$m" --seconds "$DURATION" >>"$CSV" ||
          { echo "shm_handoff.sh: paired shm requests ($m MiB)" >&2; exit 2; }
        echo "  round $round ${m} MiB paired: $(tail -2 "$CSV" | cut -d, -f3-8 | paste -sd ' ')" >&2
        settle
      fi
    done
    # The limits: 101 iterations (31 from 64 MiB: ~30 ms of loopback each).
    "$COPY_COSTS" $((m * 1048576)) $((m >= 64 ? 31 : 101)) >"$SCRATCH/costs.json" ||
      { echo "shm_handoff.sh: copy_costs failed" >&2; exit 2; }
    "$PY" "$HELPER" costs "$round" "$m" <"$SCRATCH/costs.json" >>"$CSV" ||
      { echo "shm_handoff.sh: copy_costs' output" >&2; exit 2; }
    settle
  done
done
LOAD_END=$(cut -d' ' -f1-3 /proc/loadavg)

# ---- report -------------------------------------------------------------------------------
BUILT="${INFERGATE#"$ROOT"/} of $(date -r "$INFERGATE" '+%Y-%m-%d %H:%M'), tree at $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')"
SOURCES=("$ROOT"/{gateway,shm,codecs,config,routing})
git -C "$ROOT" diff --quiet HEAD -- "${SOURCES[@]}" 2>/dev/null ||
  BUILT+=" with uncommitted changes to the sources"
NEWER=$(find "${SOURCES[@]}" -type f \( -name '*.cc' -o -name '*.h' \) -newer "$INFERGATE" \
          2>/dev/null | head -1)
[[ -z $NEWER ]] || BUILT+=" (**sources changed after this build**, e.g. ${NEWER#"$ROOT"/})"
set +e
"$PY" "$HELPER" table "$CSV" --guard "$SCRATCH/guard.json" \
  --command "bench/shm_handoff.sh${ARGS:+ $ARGS}" \
  --machine "$(nproc) vCPU $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)" \
  --load "$LOAD_START at start, $LOAD_END at end; $(($(date +%s) - STARTED)) s of runs" \
  --build "$BUILT" --upstream "$UPSTREAM" >"$SCRATCH/shm_handoff.md"
REPORT_STATUS=$?
set -e
[[ $REPORT_STATUS -le 1 ]] || { echo "shm_handoff.sh: the report failed" >&2; exit 2; }
mkdir -p "$OUT"
# The gRPC upstream (the default) keeps the plain names; the HTTP one is suffixed.
NAME=shm_handoff
[[ $UPSTREAM == http ]] && NAME=shm_handoff_http
cp "$CSV" "$OUT/$NAME.csv"
cp "$SCRATCH/shm_handoff.md" "$OUT/$NAME.md"
cat "$OUT/$NAME.md"
echo "written: $OUT/$NAME.csv $OUT/$NAME.md" >&2
exit "$REPORT_STATUS"
