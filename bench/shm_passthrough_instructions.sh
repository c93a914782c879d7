#!/usr/bin/env bash
# Instructions the gateway executes per client-shm pass-through request, by tensor size
# (bench/README.md, "Shared-memory handoff"): whether the gateway's own work depends on the
# size, a figure machine noise cannot move (latency on this 2-vCPU VM can: the upstream's
# copy of 2 x S bytes evicts the caches the gateway's next request runs on).
#
# U: infergate serving identity_fp32 with client shm on; G: infergate (1 worker) under
# valgrind --tool=callgrind, U as a colocated gRPC upstream with `handoff: {passthrough:
# true}`. Per size: a client region of 2 x S (input at 0, output at S) registered at G,
# 5 warm-up requests (the first goes inline while G registers the region with U), the
# counters zeroed (callgrind_control --zero), N requests, a dump. Prints one line per size:
# instructions per request (the dump's total / N) and G's handoff counters, which show the
# measured requests went by reference.
#
#   bench/shm_passthrough_instructions.sh [--sizes 1,64] [--requests 40] [--build-dir DIR]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$ROOT/build/release" SIZES=(1 64) N=40
while [[ $# -gt 0 ]]; do
  case "$1" in
    --sizes) IFS=, read -r -a SIZES <<<"$2"; shift ;;
    --requests) N="$2"; shift ;;
    --build-dir) BUILD="$(cd "$2" && pwd)"; shift ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "shm_passthrough_instructions.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
INFERGATE="$BUILD/gateway/infergate"
for tool in valgrind callgrind_control /usr/bin/python3; do
  command -v "$tool" >/dev/null || { echo "shm_passthrough_instructions.sh: $tool not found" >&2; exit 2; }
done
[[ -x $INFERGATE ]] || { echo "shm_passthrough_instructions.sh: build $INFERGATE first" >&2; exit 2; }
BENCH_NAME=shm_passthrough_instructions.sh
# shellcheck source=bench/instructions_lib.sh
source "$ROOT/bench/instructions_lib.sh"

listeners='listeners:
  http:    { address: "127.0.0.1:0" }
  grpc:    { address: "127.0.0.1:0" }
  metrics: { address: "127.0.0.1:0" }
shm: { enabled: true, allowed_key_prefixes: ["/infergate_"] }'
cat >"$SCRATCH/U.yaml" <<EOF
$listeners
workers: 2
upstreams:
  - { name: demo, protocol: builtin, models: [identity_fp32] }
routes:
  - { match: { model: "*" }, upstream: demo }
EOF
start U "$INFERGATE"
U_GRPC=$GRPC

echo "size_mib,requests,instructions_per_request,passthrough_bytes,inline_bytes"
for m in "${SIZES[@]}"; do
  cat >"$SCRATCH/G.yaml" <<EOF
$listeners
workers: 1
upstreams:
  - name: u
    protocol: grpc
    endpoints: ["127.0.0.1:$U_GRPC"]
    colocated: true
    handoff: { passthrough: true, pool_bytes: 0 }
routes:
  - { match: { model: "*" }, upstream: u }
EOF
  start G valgrind --tool=callgrind --callgrind-out-file="$SCRATCH/cg.%p" "$INFERGATE"
  G_PID=$STARTED_PID
  /usr/bin/python3 - "$m" "$N" "$G_PID" "$HTTP" "$METRICS" "$SCRATCH" <<'PY'
import http.client, json, os, subprocess, sys, time
from multiprocessing import shared_memory
mib, n, gpid, port, metrics, scratch = (int(sys.argv[1]), int(sys.argv[2]), sys.argv[3],
                                        int(sys.argv[4]), int(sys.argv[5]), sys.argv[6])
S = mib << 20
name = "infergate_cg_%d_%d" % (os.getpid(), mib)
shm = shared_memory.SharedMemory(name=name, create=True, size=2 * S)
try:
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)

    def req(method, path, body=None):
        c.request(method, path, body=body)
        r = c.getresponse()
        return r.status, r.read()

    def counters():
        m = http.client.HTTPConnection("127.0.0.1", metrics, timeout=600)
        m.request("GET", "/admin/upstreams")
        return json.loads(m.getresponse().read())["upstreams"][0]["endpoints"][0]["handoff"]

    status, body = req("POST", "/v2/systemsharedmemory/region/r/register",
                       json.dumps({"key": "/" + name, "byte_size": 2 * S}))
    assert status == 200, body
    infer = json.dumps({
        "inputs": [{"name": "INPUT0", "shape": [1, S // 4], "datatype": "FP32",
                    "parameters": {"shared_memory_region": "r", "shared_memory_byte_size": S}}],
        "outputs": [{"name": "OUTPUT0",
                     "parameters": {"shared_memory_region": "r", "shared_memory_byte_size": S,
                                    "shared_memory_offset": S}}]})
    for _ in range(5):
        status, body = req("POST", "/v2/models/identity_fp32/infer", infer)
        assert status == 200, body
        time.sleep(0.2)
    before = counters()
    subprocess.run(["callgrind_control", "--zero", gpid], check=True, capture_output=True)
    for _ in range(n):
        status, body = req("POST", "/v2/models/identity_fp32/infer", infer)
        assert status == 200, body
    subprocess.run(["callgrind_control", "--dump=measured", gpid], check=True, capture_output=True)
    after = counters()
    total = None
    for f in os.listdir(scratch):
        if f.startswith("cg."):
            text = open(os.path.join(scratch, f)).read()
            if "Trigger: dump measured" in text:
                total = int(text.split("\nsummary: ")[1].split()[0])
    assert total is not None, "no measured dump"
    print("%d,%d,%.0f,%d,%d" % (mib, n, total / n,
                                after["passthrough_bytes"] - before["passthrough_bytes"],
                                after["inline_bytes"] - before["inline_bytes"]))
    req("POST", "/v2/systemsharedmemory/region/r/unregister")
finally:
    shm.close()
    shm.unlink()
PY
  kill -TERM "$G_PID"
  wait "$G_PID" 2>/dev/null || true
  rm -f "$SCRATCH"/cg.*
done
