#!/usr/bin/python3
"""What the gateway adds to a request as a function of how long the upstream takes,
with no tensor at all: does the hop cost more after a long wait?

The client-shm pass-through's added latency grows from 1 to 64 MiB although the gateway
executes the same instructions at every size (bench/README.md, "Shared-memory handoff").
At 64 MiB the upstream spends 12-30 ms copying, during which the gateway's worker sleeps.
This separates the two candidates: if the added latency grows with the upstream's time
alone (the builtin `sleep` model: OUTPUT0 = INPUT0 after INPUT0 ms, touching no memory),
the cost is the gateway waking after a long idle wait, not the tensor's size or the
caches it evicts.

  U       infergate serving the builtin models (2 workers)
  G_grpc  infergate routing every model to U's gRPC listener (2 workers)
  G_http  the same to U's HTTP listener

One Python client (http.client, a kept-alive connection to each) sends each request to
U, G_grpc and G_http in turn, in a rotating order (so the machine's drifts cancel), HTTP
JSON `sleep` with INPUT0 = each delay in turn, `--requests` per delay and round; and the
same request as a ModelInferRequest straight to U's gRPC listener (Debian's grpcio, stubs
from codecs/proto), which splits what G_grpc adds into U's gRPC frontend and the rest.
Reports, per delay, the p50 of the per-request differences (via G - direct, U's gRPC -
U's HTTP), medians over the rounds.

  bench/upstream_wait_cost.py [--build-dir build/release] [--delays 0,1,4,12,30]
      [--requests 200] [--rounds 3] [--out DIR]
"""
import argparse
import http.client
import json
import os
import statistics
import sys
import tempfile
import struct
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests", "e2e"))
from harness import LOOPBACK_HEAD  # noqa: E402
from infergate_process import start_with_config as start  # noqa: E402

# Every process on loopback ports 0 with two workers (the end-to-end tests' head); U serves
# the builtin `sleep`, a gateway routes every model to one upstream.
U_CONFIG = LOOPBACK_HEAD + """upstreams:
  - { name: demo, protocol: builtin, models: [sleep] }
routes:
  - match: { model: "*" }
    upstream: demo
"""

G_CONFIG = LOOPBACK_HEAD + """upstreams:
  - { name: u, protocol: %s, endpoints: ["%s"], colocated: true, timeout_ms: 120000 }
routes:
  - match: { model: "*" }
    upstream: u
"""


def body(delay_ms):
    return json.dumps({"inputs": [{"name": "INPUT0", "shape": [1], "datatype": "INT32",
                                   "data": [delay_ms]}]})


def timed(conn, payload):
    start = time.perf_counter()
    conn.request("POST", "/v2/models/sleep/infer", body=payload,
                 headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    data = response.read()
    elapsed = time.perf_counter() - start
    if response.status != 200:
        raise RuntimeError("HTTP %d: %r" % (response.status, data[:200]))
    return elapsed * 1e6


class GrpcDirect:
    """ModelInfer of `sleep` straight to U's gRPC listener; timed() as for HTTP."""

    def __init__(self, address):
        import grpc  # pylint: disable=import-outside-toplevel
        import grpc_stubs  # pylint: disable=import-outside-toplevel
        self.pb, stubs = grpc_stubs.load()[:2]
        self.channel = grpc.insecure_channel(address)
        self.stub = stubs.GRPCInferenceServiceStub(self.channel)

    def timed(self, delay_ms):
        request = self.pb.ModelInferRequest(model_name="sleep")
        request.inputs.add(name="INPUT0", datatype="INT32", shape=[1])
        request.raw_input_contents.append(struct.pack("<i", delay_ms))
        start = time.perf_counter()
        self.stub.ModelInfer(request, timeout=120)
        return (time.perf_counter() - start) * 1e6


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build-dir", default=os.path.join(HERE, "..", "build", "release"))
    parser.add_argument("--delays", default="0,1,4,12,30")
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", help="directory for upstream_wait_cost.{csv,md}")
    args = parser.parse_args()
    delays = [int(d) for d in args.delays.split(",")]
    binary = os.path.join(args.build_dir, "gateway", "infergate")
    scratch = tempfile.mkdtemp(prefix="infergate-wait-cost.")
    u = start(binary, "U", U_CONFIG, scratch)
    gateways = {"grpc": start(binary, "G_grpc", G_CONFIG % ("grpc", u.address("grpc")), scratch),
                "http": start(binary, "G_http", G_CONFIG % ("http", u.address("http")), scratch)}
    rows = []
    try:
        conns = {"direct": http.client.HTTPConnection("127.0.0.1", u.port("http"), timeout=120)}
        for via, g in gateways.items():
            conns[via] = http.client.HTTPConnection("127.0.0.1", g.port("http"), timeout=120)
        grpc_direct = GrpcDirect(u.address("grpc"))
        order = list(conns) + ["direct_grpc"]
        for r in range(args.rounds):
            for d in delays:
                payload = body(d)
                def one(via):
                    return grpc_direct.timed(d) if via == "direct_grpc" else timed(conns[via], payload)

                for _ in range(3):  # warm every connection for this delay
                    for via in order:
                        one(via)
                times = {via: [] for via in order}
                for i in range(args.requests):
                    k = i % len(order)
                    for via in order[k:] + order[:k]:  # rotate who goes first
                        times[via].append(one(via))
                for via in list(gateways) + ["direct_grpc"]:
                    added = [t - a for t, a in zip(times[via], times["direct"])]
                    rows.append({"round": r + 1, "delay_ms": d, "upstream": via,
                                 "requests": args.requests,
                                 "direct_p50_us": statistics.median(times["direct"]),
                                 "gateway_p50_us": statistics.median(times[via]),
                                 "added_p50_us": statistics.median(added),
                                 "added_min_us": min(added)})
                    print("round %d delay %3d ms via %s: direct %8.0f us, via G %8.0f us, added "
                          "%6.0f us" % (r + 1, d, via, rows[-1]["direct_p50_us"],
                                        rows[-1]["gateway_p50_us"], rows[-1]["added_p50_us"]),
                          file=sys.stderr)
    finally:
        for g in gateways.values():
            g.stop()
        u.stop()
    lines = ["| upstream's time | arm | direct p50 | arm's p50 | added p50 (per round) | vs 0 ms |",
             "|---:|---|---:|---:|---:|---:|"]
    for via in list(gateways) + ["direct_grpc"]:
        base = None
        for d in delays:
            mine = [x for x in rows if x["delay_ms"] == d and x["upstream"] == via]
            added = statistics.median(x["added_p50_us"] for x in mine)
            base = added if base is None else base
            lines.append("| %d ms | %s | %.0f us | %.0f us | %.0f us (%s) | %s |" % (
                d, {"grpc": "via G_grpc", "http": "via G_http", "direct_grpc": "U's gRPC"}[via], statistics.median(x["direct_p50_us"] for x in mine),
                statistics.median(x["gateway_p50_us"] for x in mine), added,
                ", ".join("%.0f" % x["added_p50_us"] for x in mine),
                "" if d == delays[0] else "%+.0f us" % (added - base)))
    report = "\n".join(lines)
    print(report)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "upstream_wait_cost.csv"), "w") as f:
            f.write(",".join(rows[0]) + "\n")
            for x in rows:
                f.write(",".join(str(v) for v in x.values()) + "\n")
        with open(os.path.join(args.out, "upstream_wait_cost.md"), "w") as f:
            f.write("`bench/upstream_wait_cost.py %s`\n\n%s\n" % (" ".join(sys.argv[1:]), report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
