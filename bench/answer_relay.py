#!/usr/bin/python3
"""What sending a large answer on as it arrives does, against holding it whole first.

The gateway under test (the --build-dir tree) starts its client's answer before the
upstream's is whole:

  --path http   HTTP passthrough (ig_http -> U's HTTP listener): the answer's body is
                relayed as it lands, every 256 KiB (gateway/README.md, "Large answers go on
                as they arrive")
  --path grpc-to-http
                gRPC -> HTTP binary (a ModelInferRequest to ig_http's gRPC listener -> U's
                HTTP listener): the ModelInferResponse goes to the client as U's binary body
                lands (gateway/README.md, "Large answers go on as they arrive (gRPC client,
                HTTP upstream)"). direct is U's gRPC listener and nginx its grpc_pass to it;
                there is no <ig>_stream arm (a gRPC message toward HTTP is transcoded whole)
  --path grpc-passthrough
                gRPC passthrough (a ModelInferRequest to ig_grpc's gRPC listener -> U's gRPC
                listener): the upstream's message goes to the client as it lands
                (gateway/README.md, "Large answers go on as they arrive (gRPC passthrough)").
                direct is U's gRPC listener and nginx its grpc_pass to it; <ig>_stream sends
                the client's message on as it arrives too
  --path grpc   HTTP binary -> gRPC (ig_grpc -> U's gRPC listener, the suite's T3 path):
                the ModelInferResponse is transcoded as it lands, the JSON header once its
                head is in, then the tensor (gateway/README.md, "Large binary outputs go on
                as they arrive")

A second gateway runs another build (--base-binary, e.g. one of the commit before), which
holds the answer whole before it answers: <ig>_base. Both sit in front of the same upstream
U with the same configuration; a third, <ig>_stream, runs the tree under test with
`stream_requests: true` as well, so that neither direction waits for a whole body.

Arms: direct (U's HTTP listener), nginx (BASELINES.md's proxy_pass to it), <ig> (the tree),
<ig>_base (held whole), <ig>_stream (answer and request as they arrive). Each round runs every
arm at every size (the binary-extension request of an FP32 [1, N] tensor, binary output
asked, so the answer is as large as the request), then bench/copy_costs for the floor of
one memcpy plus one loopback transfer of the size. Printed per size: each arm's p50 and
added p50 over direct (medians over rounds), the tree / held-whole ratio of the added p50
round by round, and the added p50 minus the floor. With --concurrency N: throughput and the
proxy's CPU per request instead, as ratios to nginx's.

  /usr/bin/python3 bench/answer_relay.py --base-binary /tmp/base/infergate --sizes 4,64 --rounds 3
  /usr/bin/python3 bench/answer_relay.py --path grpc --base-binary /tmp/base/infergate --sizes 4,64
  /usr/bin/python3 bench/answer_relay.py --path grpc-to-http --base-binary /tmp/base/infergate --sizes 4,64
  /usr/bin/python3 bench/answer_relay.py --path grpc-passthrough --base-binary /tmp/base/infergate --sizes 4,64
"""
import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import stream_requests  # noqa: E402
import suite  # noqa: E402
from infergate_process import InfergateProcess  # noqa: E402

MIB = 1 << 20


GATEWAY_PROTOCOL = {"http": "http", "grpc": "grpc", "grpc-to-http": "http", "grpc-passthrough": "grpc"}
GRPC_CLIENT = ("grpc-to-http", "grpc-passthrough")  # paths whose client speaks gRPC
# Paths with an <ig>_stream arm: where `stream_requests` sends the request on as it arrives
# (an HTTP binary body; a gRPC message toward a gRPC upstream).
STREAMED = ("http", "grpc", "grpc-passthrough")


def gateway_protocol(path):
    """The upstream protocol of the gateways under test."""
    return GATEWAY_PROTOCOL[path]


def proxies(path):
    ig = "ig_" + gateway_protocol(path)
    if path not in STREAMED:
        return ["nginx", ig, ig + "_base"]
    return ["nginx", ig, ig + "_base", ig + "_stream"]


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--base-binary", required=True, help="the infergate binary that holds answers whole")
    p.add_argument("--path", choices=tuple(GATEWAY_PROTOCOL), default="http",
                   help="http: HTTP passthrough; grpc: HTTP binary -> gRPC; grpc-to-http: gRPC -> "
                        "HTTP binary; grpc-passthrough: gRPC -> gRPC (default http)")
    p.add_argument("--sizes", default="4,64", help="tensor sizes in MiB, comma-separated")
    p.add_argument("--concurrency", type=int, default=1,
                   help="requests in flight; above 1, throughput and CPU per request instead of p50")
    suite.add_round_args(p)
    return p.parse_args()


def config(protocol, port, extra=""):
    return f"""upstreams:
  - name: u
    protocol: {protocol}
    endpoints: ["127.0.0.1:{port}"]{extra}
routes:
  - match: {{ model: "*" }}
    upstream: u
"""


def start_gateways(bench, base_binary, path):
    """<ig>_base (the other build) and <ig>_stream (this one, stream_requests on), toward U's
    listener of `path`'s upstream protocol."""
    u_http, u_grpc = bench.ports["direct"]
    protocol = gateway_protocol(path)
    port = u_http if protocol == "http" else u_grpc
    arms = [(f"ig_{protocol}_base", base_binary, "")]
    if path in STREAMED:
        arms.append((f"ig_{protocol}_stream", bench.infergate, "\n    stream_requests: true"))
    for via, binary, extra in arms:
        path_ = suite.write_config(bench.scratch, via, 2, config(protocol, port, extra))
        p = InfergateProcess(binary, via, path_, bench.scratch)
        bench.processes.append(p)
        if not p.wait_ready(30):
            raise suite.SetupError(f"{via} did not start; see {bench.scratch}/{via}.err")
        bench.wait_http_ready(p.port("http"))
        bench.ports[via] = (p.port("http"), p.port("grpc"))
        bench.pids[via] = (lambda pid: lambda: [pid])(p.pid)


def main():
    args = parse_args()
    args.kind = "grpc" if args.path in GRPC_CLIENT else "bin"
    arms = proxies(args.path)
    base_arm = arms[2]
    sizes, rows, floors = stream_requests.measure(
        args, "infergate-answer-relay.", lambda bench: start_gateways(bench, args.base_binary, args.path), arms)
    if args.concurrency > 1:
        return stream_requests.report_load(rows, sizes, args, arms)
    peaks = {k: statistics.median(run_[3] for run_ in runs) / 1024 for k, runs in rows.items()}  # MiB
    rows = {k: [run_[0] for run_ in runs] for k, runs in rows.items()}  # the p50s

    def ms(us):
        return f"{us / 1000:.2f}"

    print(f"\n{args.rounds} round(s), c=1, medians over rounds (ms); added: p50 minus direct's p50 in "
          "the same round; floor: one memcpy + one loopback transfer of the size, same round.\n")
    print(f"| size | arm | p50 | added | added - floor | proxy peak RSS MiB | added / {base_arm}'s (per round) |")
    print("|---|---|---:|---:|---:|---:|---|")
    for size in sizes:
        direct = rows[(size, "direct")]
        floor = floors[size]
        base = [a - d for a, d in zip(rows[(size, base_arm)], direct)]
        for via in arms:
            added = [a - d for a, d in zip(rows[(size, via)], direct)]
            over = [a - f for a, f in zip(added, floor)]
            ratios = ", ".join(f"{a / b:.2f}" if b > 0 else "n/a" for a, b in zip(added, base))
            print(f"| {size // MIB} MiB | {via} | {ms(statistics.median(rows[(size, via)]))} | "
                  f"{ms(statistics.median(added))} | {ms(statistics.median(over))} | {peaks[(size, via)]:.0f} | "
                  f"{ratios if via not in ('nginx', base_arm) else ''} |")
        print(f"| {size // MIB} MiB | direct | {ms(statistics.median(direct))} | | | | |")
        print(f"| {size // MIB} MiB | floor | {ms(statistics.median(floor))} | | | | |")


if __name__ == "__main__":
    main()
