#!/usr/bin/python3
"""What the gateway's active gRPC health probes cost it: CPU time per probe, for this tree's
gateway and (with --base-binary) another one, side by side.

  U        infergate serving the builtin models, its gRPC listener on 0.0.0.0 so that
           127.0.0.2, 127.0.0.3, ... reach it as distinct endpoints
  G_<bin>  a gateway (2 workers) with one gRPC upstream of --endpoints such endpoints,
           probed every --interval-ms, and no request at all

Each round measures every gateway in turn for --duration seconds: the probes it answered
(the admin API's probes_good, summed over endpoints, before and after) and its CPU time
(utime + stime of all its threads, /proc). CPU per probe = CPU / probes. An idle gateway's
own ticking is included; --idle-check measures one with probes off for comparison.

  /usr/bin/python3 bench/probe_cost.py [--build-dir build/release] [--base-binary PATH]
      [--endpoints 16] [--interval-ms 10] [--duration 5] [--rounds 3] [--out DIR]
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests", "e2e"))
from harness import LOOPBACK_HEAD  # noqa: E402
from infergate_process import cpu_seconds, start_with_config as start, write_results  # noqa: E402

U_CONFIG = """listeners:
  http:    { address: "127.0.0.1:0" }
  grpc:    { address: "0.0.0.0:0" }
  metrics: { address: "127.0.0.1:0" }
workers: 2
upstreams:
  - { name: demo, protocol: builtin, models: [simple] }
routes:
  - match: { model: "*" }
    upstream: demo
"""

G_CONFIG = LOOPBACK_HEAD + """readiness: { policy: always }
upstreams:
  - name: fleet
    protocol: grpc
    endpoints: [%s]
    health_check: { enabled: %s, interval_ms: %d, timeout_ms: 5000 }
routes:
  - match: { model: "*" }
    upstream: fleet
"""

def probes(g):
    with urllib.request.urlopen("http://%s/admin/upstreams" % g.address("metrics"), timeout=30) as r:
        data = json.load(r)
    return sum(e["probes_good"] + e["probes_bad"] for u in data["upstreams"] for e in u["endpoints"])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build-dir", default=os.path.join(HERE, "..", "build", "release"))
    parser.add_argument("--base-binary")
    parser.add_argument("--endpoints", type=int, default=16)
    parser.add_argument("--interval-ms", type=int, default=10)
    parser.add_argument("--duration", type=float, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--idle-check", action="store_true")
    parser.add_argument("--out")
    args = parser.parse_args()
    binary = os.path.join(args.build_dir, "gateway", "infergate")
    scratch = tempfile.mkdtemp(prefix="infergate-probe-cost.")
    u = start(binary, "U", U_CONFIG, scratch)
    port = u.port("grpc")
    endpoints = ", ".join('"127.0.0.%d:%d"' % (i + 2, port) for i in range(args.endpoints))
    arms = {"new": (binary, "true")}
    if args.base_binary:
        arms["base"] = (args.base_binary, "true")
    if args.idle_check:
        arms["new_no_probes"] = (binary, "false")
    gateways = {}
    rows = []
    try:
        for name, (path, enabled) in arms.items():
            gateways[name] = start(path, "G_" + name, G_CONFIG % (endpoints, enabled, args.interval_ms), scratch)
        time.sleep(1)  # every endpoint's first probe, and connections, made
        for r in range(args.rounds):
            order = list(gateways)[r % len(gateways):] + list(gateways)[:r % len(gateways)]
            for name in order:
                g = gateways[name]
                p0, c0 = probes(g), cpu_seconds(g.pid)
                time.sleep(args.duration)
                p1, c1 = probes(g), cpu_seconds(g.pid)
                rows.append({"round": r + 1, "arm": name, "probes": p1 - p0, "cpu_s": c1 - c0,
                             "cpu_us_per_probe": (c1 - c0) * 1e6 / (p1 - p0) if p1 > p0 else None})
                print("round %d %-14s %6d probes  %.3f s CPU" % (r + 1, name, p1 - p0, c1 - c0),
                      file=sys.stderr)
    finally:
        for g in gateways.values():
            g.stop()
        u.stop()
    lines = ["| arm | probes/s | gateway CPU | CPU per probe (per round) |", "|---|---:|---:|---:|"]
    for name in gateways:
        mine = [x for x in rows if x["arm"] == name]
        per = [x["cpu_us_per_probe"] for x in mine if x["cpu_us_per_probe"] is not None]
        lines.append("| %s | %.0f | %.1f%% of a core | %s |" % (
            name, statistics.median(x["probes"] for x in mine) / args.duration,
            100 * statistics.median(x["cpu_s"] for x in mine) / args.duration,
            ("%.1f us (%s)" % (statistics.median(per), ", ".join("%.1f" % p for p in per))) if per else "-"))
    table = "\n".join(lines)
    print(table)
    if args.out:
        write_results(args.out, "probe_cost", rows, table, ["bench/probe_cost.py"] + sys.argv[1:])


if __name__ == "__main__":
    main()
