#!/usr/bin/env bash
# What TLS toward an upstream costs the gateway, and what its own clients save over
# grpc++'s and libcurl's (bench/README.md, "TLS toward upstreams"), in one command.
#
# Makes a self-signed certificate (openssl) and starts, on loopback: U_plain and U_tls,
# infergate serving the builtin `simple` model (2 workers), U_tls with TLS on both
# listeners; G, infergate (2 workers) with six upstreams chosen by a request header:
#   plain         gRPC, 127.0.0.1:<U_plain>, plaintext: the gateway's own client (h2c)
#   native        gRPC, 127.0.0.1:<U_tls>, tls: { ca }: the gateway's own client over TLS
#   grpcpp        gRPC, localhost:<U_tls>, tls: { ca }: a host name, which grpc++ carries
#   http_plain    HTTP, 127.0.0.1:<U_plain>: the gateway's own HTTP/1.1 client
#   http_native   HTTP, 127.0.0.1:<U_tls>, tls: { ca }: the same over TLS
#   http_libcurl  HTTP, localhost:<U_tls>, tls: { ca }: a host name, which libcurl carries
# One client (bench/loadgen) sends the `simple` JSON request over HTTP to G at 64 and 1
# requests in flight, the three cases interleaved in rounds (the order rotating). Each run
# records throughput, p50 and G's CPU time per request (/proc/PID/stat).
# Writes bench/results/<date>/upstream_tls.csv and upstream_tls.md: per case the medians
# over rounds, and TLS / plaintext and own client / library client computed pair by pair
# within a round. No target: the security issue's TLS target is the listeners'
# (tls_cost.sh). Exit status 2 on a setup error.
#
#   bench/upstream_tls.sh [--no-build] [--build-dir DIR] [--rounds N] [--duration S]
#       [--warmup S] [--out DIR]     (--out: default bench/results/<date>/)
set -eEuo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$ROOT/build/release"
ROUNDS=3 DURATION=4 WARMUP=1 BUILD_FIRST=1
OUT="$ROOT/bench/results/$(date +%Y-%m-%d)"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --no-build) BUILD_FIRST=0 ;;
    --rounds) ROUNDS="$2"; shift ;;
    --duration) DURATION="$2"; shift ;;
    --warmup) WARMUP="$2"; shift ;;
    --build-dir) BUILD="$(cd "$2" && pwd)"; shift ;;
    --out) OUT="$2"; shift ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "upstream_tls.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done

for tool in openssl python3 curl; do
  command -v "$tool" >/dev/null || { echo "upstream_tls.sh: $tool not found" >&2; exit 2; }
done
if [[ $BUILD_FIRST == 1 ]]; then
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DINFERGATE_TESTS=OFF \
    -DINFERGATE_BENCH=ON >/dev/null
  cmake --build "$BUILD" --target loadgen infergate
fi
LOADGEN="$BUILD/bench/loadgen"
INFERGATE="$BUILD/gateway/infergate"
for bin in "$LOADGEN" "$INFERGATE"; do
  [[ -x $bin ]] || { echo "upstream_tls.sh: $bin not built" >&2; exit 2; }
done

SCRATCH="$(mktemp -d /tmp/infergate-upstream-tls.XXXXXX)"
PIDS=()
# shellcheck disable=SC2317  # called by the trap
cleanup() {
  local status=$?
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  if [[ $status -ne 0 ]]; then
    echo "upstream_tls.sh: failed ($status); logs kept in $SCRATCH" >&2
  else
    [[ -n ${KEEP_SCRATCH:-} ]] || rm -rf "$SCRATCH"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
trap 'echo "upstream_tls.sh: line $LINENO failed" >&2; exit 2' ERR

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
  -subj "/CN=localhost" -addext "subjectAltName=IP:127.0.0.1,DNS:localhost" \
  -keyout "$SCRATCH/server.key" -out "$SCRATCH/server.pem" 2>/dev/null

# $1 name, $2 the gRPC listener's extra keys, $3 upstreams and routes, $4 the HTTP
# listener's extra keys. Sets STARTED_PID.
start() {
  cat >"$SCRATCH/$1.yaml" <<EOF
listeners:
  http:    { address: "127.0.0.1:0" ${4:-} }
  grpc:    { address: "127.0.0.1:0" $2 }
  metrics: { address: "127.0.0.1:0" }
workers: 2
$3
EOF
  "$INFERGATE" --config "$SCRATCH/$1.yaml" >"$SCRATCH/$1.out" 2>"$SCRATCH/$1.err" &
  STARTED_PID=$!
  PIDS+=("$STARTED_PID")
  for _ in $(seq 200); do
    grep -q '"event":"ready"' "$SCRATCH/$1.out" 2>/dev/null && return 0
    sleep 0.1
  done
  echo "upstream_tls.sh: $1 did not start" >&2
  cat "$SCRATCH/$1.err" >&2
  exit 2
}
port_of() {  # $1 name, $2 listener
  grep -o "\"$2\":\"[^\"]*\"" "$SCRATCH/$1.out" | sed 's/.*:\([0-9]*\)"$/\1/'
}
BUILTIN='upstreams: [{ name: demo, protocol: builtin }]
routes: [{ match: { model: "*" }, upstream: demo }]'
start U_plain "" "$BUILTIN"
TLS_KEYS=", tls: { cert: \"$SCRATCH/server.pem\", key: \"$SCRATCH/server.key\" }"
start U_tls "$TLS_KEYS" "$BUILTIN" "$TLS_KEYS"
CA="ca: \"$SCRATCH/server.pem\""
start G "" "upstreams:
  - { name: plain, protocol: grpc, endpoints: [\"127.0.0.1:$(port_of U_plain grpc)\"] }
  - { name: native, protocol: grpc, endpoints: [\"127.0.0.1:$(port_of U_tls grpc)\"], tls: { $CA } }
  - { name: grpcpp, protocol: grpc, endpoints: [\"localhost:$(port_of U_tls grpc)\"], tls: { $CA } }
  - { name: http_plain, protocol: http, endpoints: [\"127.0.0.1:$(port_of U_plain http)\"] }
  - { name: http_native, protocol: http, endpoints: [\"127.0.0.1:$(port_of U_tls http)\"], tls: { $CA } }
  - { name: http_libcurl, protocol: http, endpoints: [\"localhost:$(port_of U_tls http)\"], tls: { $CA } }
routes:
  - { match: { model: \"*\", headers: { x-bench-path: plain } }, upstream: plain }
  - { match: { model: \"*\", headers: { x-bench-path: native } }, upstream: native }
  - { match: { model: \"*\", headers: { x-bench-path: grpcpp } }, upstream: grpcpp }
  - { match: { model: \"*\", headers: { x-bench-path: http_plain } }, upstream: http_plain }
  - { match: { model: \"*\", headers: { x-bench-path: http_native } }, upstream: http_native }
  - { match: { model: \"*\", headers: { x-bench-path: http_libcurl } }, upstream: http_libcurl }"
G_PID=$STARTED_PID
G_URL="http://127.0.0.1:$(port_of G http)"

"$LOADGEN" "$G_URL" --model simple --dump-request "$SCRATCH/simple.json"
# Every path answers, and the same bytes.
PATHS=(plain native grpcpp http_plain http_native http_libcurl)
for path in "${PATHS[@]}"; do
  curl -sf -X POST -H "x-bench-path: $path" --data-binary "@$SCRATCH/simple.json" \
    "$G_URL/v2/models/simple/infer" >"$SCRATCH/answer_$path.json" ||
    { echo "upstream_tls.sh: the $path path does not answer" >&2; cat "$SCRATCH/G.err" >&2; exit 2; }
done
for path in "${PATHS[@]}"; do
  cmp -s "$SCRATCH/answer_plain.json" "$SCRATCH/answer_$path.json" ||
    { echo "upstream_tls.sh: the $path path answers differently" >&2; exit 2; }
done

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

mkdir -p "$OUT"
CSV="$OUT/upstream_tls.csv"
echo "round,concurrency,path,rps,p50_us,p99_us,errors,gateway_cpu_us" >"$CSV"
run_one() {  # $1 round, $2 concurrency, $3 path
  local before json
  before=$(cpu_ticks "$G_PID")
  json=$("$LOADGEN" "$G_URL/v2/models/simple/infer" --body "$SCRATCH/simple.json" \
    --header 'Content-Type: application/json' --header "x-bench-path: $3" \
    --concurrency "$2" --duration "$DURATION" --warmup "$WARMUP")
  local ticks=$(( $(cpu_ticks "$G_PID") - before ))
  python3 -c 'import json,os,sys; r=json.loads(sys.argv[1]);
n = r["requests"] + r["rps"] * r.get("warmup_s", 0)  # the CPU was spent on warm-up too
cpu_us = int(sys.argv[5]) * 1e6 / os.sysconf("SC_CLK_TCK") / n if n else 0
print(",".join(str(x) for x in [sys.argv[2], sys.argv[3], sys.argv[4], r["rps"], r["p50_us"],
      r["p99_us"], r["errors"], round(cpu_us, 2)]))' "$json" "$1" "$2" "$3" "$ticks" >>"$CSV"
}

echo "$ROUNDS rounds x 2 concurrencies x ${#PATHS[@]} paths, ${WARMUP}+${DURATION} s each" >&2
for round in $(seq "$ROUNDS"); do
  for conc in 64 1; do
    for i in "${!PATHS[@]}"; do  # rotated by round: no path always runs first
      run_one "$round" "$conc" "${PATHS[(i + round) % ${#PATHS[@]}]}"
    done
  done
done

python3 - "$CSV" "$OUT/upstream_tls.md" "$ROUNDS" "$DURATION" <<'EOF'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
med = statistics.median
lines = ["# TLS toward an upstream: the gateway's own clients and the libraries'", "",
         "`bench/upstream_tls.sh`: %s rounds of %s s runs, HTTP JSON `simple` requests to G, "
         "transcoded to gRPC or passed through to HTTP; medians over rounds, ratios pair by pair "
         "within a round (min-max). CPU: G's user+sys time per request." % (sys.argv[3], sys.argv[4]), "",
         "| c | path | req/s | p50 us | p99 us | G CPU us/req | errors |", "|---|---|---|---|---|---|---|"]
by = {}
for r in rows:
    by.setdefault((int(r["concurrency"]), r["path"]), []).append(r)
names = {"plain": "gRPC, plaintext (own client)", "native": "gRPC, TLS, own client",
         "grpcpp": "gRPC, TLS, grpc++", "http_plain": "HTTP, plaintext (own client)",
         "http_native": "HTTP, TLS, own client", "http_libcurl": "HTTP, TLS, libcurl"}
for c in (64, 1):
    for p in names:
        sel = by.get((c, p), [])
        if not sel:
            continue
        lines.append("| %d | %s | %.0f | %.0f | %.0f | %.1f | %d |" % (
            c, names[p], med(float(r["rps"]) for r in sel), med(float(r["p50_us"]) for r in sel),
            med(float(r["p99_us"]) for r in sel), med(float(r["gateway_cpu_us"]) for r in sel),
            sum(int(r["errors"]) for r in sel)))
lines += ["", "| c | ratio | req/s | p50 | G CPU per request |", "|---|---|---|---|---|"]
def ratio(c, a, b, key):
    rounds = sorted({r["round"] for r in rows})
    vals = []
    for rd in rounds:
        x = [r for r in by.get((c, a), []) if r["round"] == rd]
        y = [r for r in by.get((c, b), []) if r["round"] == rd]
        if x and y and float(y[0][key]) > 0:
            vals.append(float(x[0][key]) / float(y[0][key]))
    return "%.2f (%.2f-%.2f)" % (med(vals), min(vals), max(vals)) if vals else "-"
for c in (64, 1):
    for a, b in (("native", "plain"), ("grpcpp", "plain"), ("native", "grpcpp"),
                 ("http_native", "http_plain"), ("http_libcurl", "http_plain"),
                 ("http_native", "http_libcurl")):
        lines.append("| %d | %s / %s | %s | %s | %s |" % (c, a, b, ratio(c, a, b, "rps"),
                     ratio(c, a, b, "p50_us"), ratio(c, a, b, "gateway_cpu_us")))
errors = sum(int(r["errors"]) for r in rows)
open(sys.argv[2], "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
sys.exit(2 if errors else 0)
EOF
