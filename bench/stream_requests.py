#!/usr/bin/python3
"""What `stream_requests` does to the latency of large binary requests.

infergate sending a body on as it arrives (`stream_requests: true`), against the same
gateway reading it whole first (the default), side by side with direct and nginx, with the
floor of one memcpy plus one loopback transfer of the size measured in the same round.

Starts the suite's processes (bench/suite.py: U serving builtin models, ig_http, ig_grpc,
nginx: the gateways read bodies whole first) and two more gateways, ig_http_stream and
ig_grpc_stream, configured the same but with `stream_requests: true` on their upstream. Each round runs, for each size, one closed-loop
`loadgen` per arm at concurrency 1 (the binary-extension request of an FP32 [1, N] tensor,
binary output asked, so the answer is as large as the request), then bench/copy_costs for the
floor. Paths:

  http_bin_to_grpc   ig_grpc(_stream) -> U's gRPC listener   (the suite's T3 path)
  http_passthrough   ig_http(_stream) -> U's HTTP listener
  (direct: U's HTTP listener; nginx: BASELINES.md's proxy_pass to it)

With --client grpc the client is a gRPC one (ModelInfer, raw contents) instead, and the
one path is gRPC passthrough: ig_grpc(_stream)'s gRPC listener -> U's gRPC listener
(direct: U's gRPC listener; nginx: grpc_pass to it).

Printed: per size and path, each arm's p50 and its added p50 over direct (median over
rounds), the streamed/whole ratio of the added p50 taken round by round, and each arm's added
p50 minus the floor.

With --concurrency N (N > 1) the runs are closed loops at N instead, and the table gives
each arm's throughput and the proxy's CPU time per request (user + system, /proc), the
figures that a relay keeping bytes in cache would move.

  /usr/bin/python3 bench/stream_requests.py --sizes 4,64 --rounds 3
  /usr/bin/python3 bench/stream_requests.py --sizes 4 --rounds 3 --concurrency 64
  /usr/bin/python3 bench/stream_requests.py --client grpc --sizes 4,64 --rounds 5
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import forwarding_report  # noqa: E402
import suite  # noqa: E402

MIB = 1 << 20
BIN_PATHS = (("http_bin_to_grpc", "ig_grpc"), ("http_passthrough", "ig_http"))
GRPC_PATHS = (("grpc_passthrough", "ig_grpc"),)


def paths_of(args):
    return GRPC_PATHS if request_kind(args) == "grpc" else BIN_PATHS


def proxies_of(paths):
    return ["nginx"] + [v for _, ig in paths for v in (ig, ig + "_stream")]


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sizes", default="4,64", help="tensor sizes in MiB, comma-separated")
    p.add_argument("--concurrency", type=int, default=1,
                   help="requests in flight; above 1, throughput and CPU per request instead of p50")
    p.add_argument("--client", dest="kind", choices=("bin", "grpc"), default="bin",
                   help="bin: HTTP binary-extension requests (two paths); grpc: gRPC ModelInfer (passthrough)")
    suite.add_round_args(p)
    return p.parse_args()


def start_streaming_gateways(bench, paths=BIN_PATHS):
    """The suite's gateways of `paths` again with stream_requests on: ig_grpc_stream (toward
    U's gRPC listener) and ig_http_stream (toward its HTTP one)."""
    u_http, u_grpc = bench.ports["direct"]
    wanted = {ig + "_stream" for _, ig in paths}
    for via, protocol, port in (("ig_grpc_stream", "grpc", u_grpc), ("ig_http_stream", "http", u_http)):
        if via not in wanted:
            continue
        p = bench.start_infergate(via, f"""upstreams:
  - name: u
    protocol: {protocol}
    endpoints: ["127.0.0.1:{port}"]
    stream_requests: true
routes:
  - match: {{ model: "*" }}
    upstream: u
""")
        bench.wait_http_ready(p.port("http"))
        bench.ports[via] = (p.port("http"), p.port("grpc"))
        bench.pids[via] = (lambda pid: lambda: [pid])(p.pid)


def run(bench, via, size, args):
    """One closed-loop run: (p50 us, requests/s, the proxy's CPU us per request, its peak
    RSS in kB), the CPU sampled after the warm-up, as the suite does; the RSS every 50 ms
    of the run (it includes what the process kept from earlier runs)."""
    http_port, grpc_port = bench.ports[via]
    pids = bench.pids[via]()
    report, proxy_cpu, _, window, peak_kb = bench.loadgen_run(
        bench.requests.loadgen_args(request_kind(args), size, http_port, grpc_port), args.concurrency, 0,
        args.duration, args.warmup, pids)
    if report["requests"] == 0 or report["errors"]:
        raise SystemExit(f"{via} {size} B: {report['requests']} requests, {report['errors']} errors")
    bench.settle()
    cpu_us = proxy_cpu * 1e6 / (report["rps"] * window) if pids and report["rps"] else 0.0
    return report["p50_us"], report["rps"], cpu_us, peak_kb


def request_kind(args):
    """The request every arm gets: "bin" (the binary extension) unless the caller's
    arguments say otherwise (answer_relay.py's gRPC client: "grpc")."""
    return getattr(args, "kind", "bin")


def floor_us(bench, size):
    runs = "21" if size >= 64 * MIB else "101"
    out = subprocess.run([bench.copy_costs, str(size), runs], capture_output=True, text=True, check=True)
    costs = json.loads(out.stdout)
    return costs["memcpy_us"] + costs["loopback_us"]


def measure(args, prefix, start_more, proxies):
    """The suite's processes plus those `start_more(bench)` starts, every arm (direct and
    `proxies`) at every size of --sizes in interleaved rounds, the floor in each round at
    c=1. Returns (sizes, rows: (size, arm) -> [(p50 us, req/s, CPU us/req)] per round,
    floors: size -> [floor us] per round)."""
    sizes = [int(s) * MIB for s in args.sizes.split(",")]
    scratch = tempfile.mkdtemp(prefix=prefix)
    bench = suite.Bench(None, scratch, args.build_dir)
    bench.requests = suite.Requests(scratch, forwarding_report.load_pb(scratch))
    for size in sizes:
        bench.requests.write((request_kind(args),), size)
    rows, floors = {}, {}
    arms = ["direct"] + proxies
    try:
        bench.start()
        start_more(bench)
        for rnd in range(args.rounds):
            for size in sizes:
                if args.concurrency == 1:
                    floors.setdefault(size, []).append(floor_us(bench, size))
                order = arms[rnd % len(arms):] + arms[:rnd % len(arms)]  # turn by one each round
                for via in order:
                    rows.setdefault((size, via), []).append(run(bench, via, size, args))
            print(f"round {rnd + 1} done", flush=True)
    finally:
        bench.stop()
    return sizes, rows, floors


def main():
    args = parse_args()
    paths = paths_of(args)
    proxies = proxies_of(paths)
    sizes, rows, floors = measure(args, "infergate-stream-requests.",
                                  lambda bench: start_streaming_gateways(bench, paths), proxies)
    if args.concurrency > 1:
        return report_load(rows, sizes, args, proxies)
    rows = {k: [run_[0] for run_ in runs] for k, runs in rows.items()}  # the p50s

    def ms(us):
        return f"{us / 1000:.2f}"

    print(f"\n{args.rounds} round(s), c=1, medians over rounds (ms); added: p50 minus direct's p50 in "
          "the same round; floor: one memcpy + one loopback transfer of the size, same round.\n")
    print("| size | path | arm | p50 | added | added - floor | streamed / whole added (per round) |")
    print("|---|---|---|---:|---:|---:|---|")
    for size in sizes:
        direct = rows[(size, "direct")]
        floor = floors[size]

        def added(via):
            return [a - d for a, d in zip(rows[(size, via)], direct)]
        for path, ig in paths:
            streamed, whole = added(ig + "_stream"), added(ig)
            ratios = ", ".join(f"{s / w:.2f}" if w > 0 else "n/a" for s, w in zip(streamed, whole))
            for arm, via, values in (("streamed", ig + "_stream", streamed), ("whole first", ig, whole)):
                over = [a - f for a, f in zip(values, floor)]
                print(f"| {size // MIB} MiB | {path} | {arm} | {ms(statistics.median(rows[(size, via)]))} | "
                      f"{ms(statistics.median(values))} | {ms(statistics.median(over))} | "
                      f"{ratios if arm == 'streamed' else ''} |")
        nginx = added("nginx")
        print(f"| {size // MIB} MiB | - | nginx | {ms(statistics.median(rows[(size, 'nginx')]))} | "
              f"{ms(statistics.median(nginx))} | {ms(statistics.median(a - f for a, f in zip(nginx, floor)))} | |")
        print(f"| {size // MIB} MiB | - | direct | {ms(statistics.median(direct))} | | | |")
        print(f"| {size // MIB} MiB | - | floor | {ms(statistics.median(floor))} | | | |")


def report_load(rows, sizes, args, proxies):
    """Throughput and the proxy's CPU per request at --concurrency, each against nginx's
    in the same round, for `proxies` (nginx among them)."""
    print(f"\n{args.rounds} round(s), c={args.concurrency}, medians over rounds; ratios to nginx "
          "taken round by round.\n")
    print("| size | arm | req/s | proxy CPU us/req | proxy peak RSS MiB | req/s / nginx's (per round) | "
          "CPU / nginx's (per round) |")
    print("|---|---|---:|---:|---:|---|---|")
    for size in sizes:
        nginx = rows[(size, "nginx")]
        for via in proxies:
            runs = rows[(size, via)]
            rps = ", ".join(f"{r[1] / n[1]:.2f}" for r, n in zip(runs, nginx)) if via != "nginx" else ""
            cpu = ", ".join(f"{r[2] / n[2]:.2f}" for r, n in zip(runs, nginx) if n[2]) if via != "nginx" else ""
            print(f"| {size // MIB} MiB | {via} | {statistics.median(r[1] for r in runs):.0f} | "
                  f"{statistics.median(r[2] for r in runs):.0f} | {statistics.median(r[3] for r in runs) / 1024:.0f} | "
                  f"{rps} | {cpu} |")


if __name__ == "__main__":
    main()
