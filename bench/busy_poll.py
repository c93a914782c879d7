#!/usr/bin/python3
"""What `busy_poll_us` does to the small-request paths: infergate with and without it, side
by side with direct and nginx, and what it costs in CPU.

Starts the suite's processes (bench/suite.py: U serving builtin models, ig_http, ig_grpc,
nginx) and two more gateways, ig_http_poll and ig_grpc_poll, configured the same plus
`busy_poll_us: --window`. U itself never polls. Each round runs one closed-loop `loadgen`
per arm (64 B request, --duration s after --warmup s) at concurrency 1, then the same at
--concurrency-high (throughput and CPU under load), reading each proxy's CPU time from
/proc around its run. Paths:

  http_passthrough   HTTP binary; infergate ig_http(_poll) -> U's HTTP listener
  http_json_to_grpc  HTTP JSON; infergate ig_grpc(_poll) -> U's gRPC listener
  grpc_passthrough   gRPC; infergate ig_grpc(_poll) -> U's gRPC listener
  (nginx: HTTP to U's HTTP listener, gRPC to U's gRPC listener)

Printed: per path and arm, the p50 at c=1 and its added p50 over direct (median over
rounds, and each round's ratio to nginx's added p50), the proxy's CPU per request at c=1,
and the throughput and CPU per request at the high concurrency.

  /usr/bin/python3 bench/busy_poll.py --window 50 --rounds 3
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cpu_split  # noqa: E402
import forwarding_report  # noqa: E402
import suite  # noqa: E402

PATHS = (("http_passthrough", "bin", "ig_http", "nginx"),
         ("http_json_to_grpc", "json", "ig_grpc", "nginx"),
         ("grpc_passthrough", "grpc", "ig_grpc", "nginx"))


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--window", type=int, default=50, help="busy_poll_us of the polling gateways")
    p.add_argument("--concurrency-high", type=int, default=64)
    suite.add_round_args(p)
    return p.parse_args()


def start_polling_gateways(bench, window):
    """ig_http_poll and ig_grpc_poll: the suite's gateways plus busy_poll_us."""
    u_http, u_grpc = bench.ports["direct"]
    for via, protocol, port in (("ig_grpc_poll", "grpc", u_grpc), ("ig_http_poll", "http", u_http)):
        g = bench.start_gateway(via, protocol, port, extra=f"busy_poll_us: {window}\n")
        bench.ports[via] = (g.port("http"), g.port("grpc"))
        bench.pids[via] = (lambda pid: lambda: [pid])(g.pid)


def run_one(bench, kind, via, concurrency, args):
    """(p50 us, rps, proxy CPU us per request or None for direct)."""
    http_port, grpc_port = bench.ports[via]
    pids = bench.pids[via]()
    command = [bench.loadgen] + bench.requests.loadgen_args(kind, 64, http_port, grpc_port) + [
        "--concurrency", str(concurrency), "--duration", str(args.duration), "--warmup", str(args.warmup)]
    before = cpu_split.snapshot(pids)
    out = subprocess.run(command, capture_output=True, text=True, check=True)
    spent = cpu_split.delta(before, cpu_split.snapshot(pids))
    report = json.loads(out.stdout)
    if report["requests"] == 0 or report["errors"]:
        raise SystemExit(f"{via} {kind}: {report['requests']} requests, {report['errors']} errors")
    # loadgen counts the measured window; /proc the warm-up too: scale by the run's share.
    share = args.duration / (args.duration + args.warmup)
    cpu = None
    if pids:
        ticks = sum(v[0] + v[1] for v in spent.values())
        cpu = ticks / cpu_split.TICK * 1e6 * share / report["requests"]
    return report["p50_us"], report["rps"], cpu


def main():
    args = parse_args()
    scratch = tempfile.mkdtemp(prefix="infergate-busy-poll.")
    bench = suite.Bench(None, scratch, args.build_dir)
    bench.requests = suite.Requests(scratch, forwarding_report.load_pb(scratch))
    bench.requests.write(("json", "bin", "grpc"), 64)
    rows = {}  # (path, arm, concurrency) -> [(p50, rps, cpu)] per round
    try:
        bench.start()
        start_polling_gateways(bench, args.window)
        for rnd in range(args.rounds):
            for path, kind, ig, ng in PATHS:
                arms = (("direct", "direct"), ("infergate", ig), (f"infergate, busy_poll_us {args.window}", ig + "_poll"),
                        ("nginx", ng))
                for concurrency in (1, args.concurrency_high):
                    for arm, via in arms:
                        if concurrency != 1 and arm == "direct":
                            continue
                        rows.setdefault((path, arm, concurrency), []).append(
                            run_one(bench, kind, via, concurrency, args))
            print(f"round {rnd + 1} done", flush=True)
    finally:
        bench.stop()

    def med(values):
        values = [v for v in values if v is not None]
        return statistics.median(values) if values else None

    print(f"\n{args.rounds} round(s); medians over rounds. c=1: p50, added p50 over direct (ratio to "
          f"nginx's added, per round), proxy CPU per request; c={args.concurrency_high}: req/s, proxy "
          "CPU per request.\n")
    print(f"| path | arm | c=1 p50 us | added p50 us | ratio to nginx's (per round) | c=1 CPU us/req | "
          f"c={args.concurrency_high} req/s | c={args.concurrency_high} CPU us/req |")
    print("|---|---|---:|---:|---|---:|---:|---:|")
    for path, _, _, _ in PATHS:
        direct = rows[(path, "direct", 1)]
        nginx = rows[(path, "nginx", 1)]
        for arm in ("infergate", f"infergate, busy_poll_us {args.window}", "nginx"):
            low = rows[(path, arm, 1)]
            high = rows[(path, arm, args.concurrency_high)]
            added = [r[0] - d[0] for r, d in zip(low, direct)]
            nginx_added = [n[0] - d[0] for n, d in zip(nginx, direct)]
            ratios = ", ".join(f"{a / n:.2f}" if n > 0 else "n/a" for a, n in zip(added, nginx_added))
            cpu_low, cpu_high = med(r[2] for r in low), med(r[2] for r in high)
            print(f"| {path} | {arm} | {med(r[0] for r in low):.0f} | {statistics.median(added):+.0f} | "
                  f"{ratios if arm != 'nginx' else '-'} | {cpu_low:.1f} | {med(r[1] for r in high):,.0f} | "
                  f"{cpu_high:.1f} |")
        print(f"| {path} | direct | {med(r[0] for r in direct):.0f} | | | | | |")


if __name__ == "__main__":
    main()
