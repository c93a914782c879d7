#!/usr/bin/python3
"""What an upstream endpoint written as a host name ("localhost:PORT") costs against the
same upstream written as an IP ("127.0.0.1:PORT"), before and after a change.

  U                 infergate serving the builtin `simple` model (2 workers)
  <bin>_<form>_<p>  a gateway (2 workers) routing every model to U's listener of protocol
                    <p> (grpc, http), its endpoint written as <form> (ip, name), for each
                    binary <bin>: `new` (--build-dir) and, with --base-binary, `base`

Each round runs, in a rotating order, one closed-loop `loadgen` per arm and concurrency:
the `simple` request over gRPC to the gRPC gateways (gRPC passthrough) and over HTTP with
binary tensors to the HTTP ones (HTTP passthrough), and the same straight to U (direct).
Per arm: p50 at concurrency 1 (and what it adds over direct in the same round), requests
per second at concurrency 64, and the gateway's CPU time per request at 64 (utime + stime
of all its threads, from /proc).

  /usr/bin/python3 bench/host_names.py [--build-dir build/release] [--base-binary PATH]
      [--rounds 3] [--duration 2] [--out DIR]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests", "e2e"))
from harness import LOOPBACK_HEAD  # noqa: E402
from infergate_process import cpu_seconds, start_with_config as start, write_results  # noqa: E402

U_CONFIG = LOOPBACK_HEAD + """upstreams:
  - { name: demo, protocol: builtin, models: [simple] }
routes:
  - match: { model: "*" }
    upstream: demo
"""

# No probes: a health probe is not per-request work (bench/README.md, the instruction
# scenario), and grpc++ carries gRPC probes whatever the endpoint's form.
G_CONFIG = LOOPBACK_HEAD + """readiness: { policy: always }
upstreams:
  - name: u
    protocol: %s
    endpoints: ["%s"]
    health_check: { enabled: false }
routes:
  - match: { model: "*" }
    upstream: u
"""

def load(loadgen, protocol, port, concurrency, duration):
    target = ("grpc://127.0.0.1:%d" % port) if protocol == "grpc" else ("http://127.0.0.1:%d" % port)
    command = [loadgen, target, "--model", "simple", "--concurrency", str(concurrency),
               "--duration", str(duration), "--warmup", "0.5"]
    if protocol == "http":
        command.append("--binary")
    out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    result = json.loads(out)
    if result["errors"]:
        raise RuntimeError("%s: %d errors: %s" % (" ".join(command), result["errors"], result.get("error_kinds")))
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build-dir", default=os.path.join(HERE, "..", "build", "release"))
    parser.add_argument("--base-binary", help="a gateway binary to measure beside this tree's")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=float, default=2)
    parser.add_argument("--out", help="directory for host_names.{json,md}")
    args = parser.parse_args()
    binary = os.path.join(args.build_dir, "gateway", "infergate")
    loadgen = os.path.join(args.build_dir, "bench", "loadgen")
    binaries = {"new": binary}
    if args.base_binary:
        binaries["base"] = args.base_binary
    scratch = tempfile.mkdtemp(prefix="infergate-host-names.")
    u = start(binary, "U", U_CONFIG, scratch)
    gateways = {}
    rows = []
    try:
        for name, path in binaries.items():
            for form, host in (("ip", "127.0.0.1"), ("name", "localhost")):
                for protocol in ("grpc", "http"):
                    label = "%s_%s_%s" % (name, form, protocol)
                    endpoint = "%s:%d" % (host, u.port(protocol))
                    gateways[label] = start(path, label, G_CONFIG % (protocol, endpoint), scratch)
        arms = ["direct_grpc", "direct_http"] + sorted(gateways)
        for r in range(args.rounds):
            order = arms[r % len(arms):] + arms[:r % len(arms)]
            for concurrency in (1, 64):
                for arm in order:
                    protocol = arm.rsplit("_", 1)[1]
                    process = u if arm.startswith("direct") else gateways[arm]
                    before = cpu_seconds(process.pid)
                    result = load(loadgen, protocol, process.port(protocol), concurrency, args.duration)
                    cpu = cpu_seconds(process.pid) - before
                    seconds = result["requests"] / result["rps"] if result["rps"] else args.duration
                    rows.append({"round": r + 1, "arm": arm, "concurrency": concurrency,
                                 "p50_us": result["p50_us"], "rps": result["rps"],
                                 # The warm-up's half second is counted in the ticks too.
                                 "cpu_us_per_request": cpu * 1e6 /
                                 (result["rps"] * (seconds + 0.5)) if result["rps"] else None})
                    print("round %d c=%-2d %-16s p50 %6.0f us  %7.0f rps" % (
                        r + 1, concurrency, arm, result["p50_us"], result["rps"]), file=sys.stderr)
    finally:
        for g in gateways.values():
            g.stop()
        u.stop()

    def median(arm, concurrency, key):
        values = [x[key] for x in rows if x["arm"] == arm and x["concurrency"] == concurrency]
        return statistics.median(values), values

    lines = ["| arm | c=1 p50 | added over direct (per round) | c=64 rps | c=64 gateway CPU per request |",
             "|---|---:|---:|---:|---:|"]
    for arm in sorted(gateways):
        protocol = arm.rsplit("_", 1)[1]
        p50, _ = median(arm, 1, "p50_us")
        added = [x["p50_us"] - d["p50_us"] for x in rows if x["arm"] == arm and x["concurrency"] == 1
                 for d in rows if d["arm"] == "direct_" + protocol and d["concurrency"] == 1
                 and d["round"] == x["round"]]
        rps, _ = median(arm, 64, "rps")
        cpu, _ = median(arm, 64, "cpu_us_per_request")
        lines.append("| %s | %.0f us | %.0f us (%s) | %.0f | %.1f us |" % (
            arm, p50, statistics.median(added), ", ".join("%.0f" % a for a in added), rps, cpu))
    for protocol in ("grpc", "http"):
        p50, _ = median("direct_" + protocol, 1, "p50_us")
        rps, _ = median("direct_" + protocol, 64, "rps")
        lines.append("| direct_%s | %.0f us | | %.0f | |" % (protocol, p50, rps))
    table = "\n".join(lines)
    print(table)
    if args.out:
        write_results(args.out, "host_names", rows, table, ["bench/host_names.py"] + sys.argv[1:])


if __name__ == "__main__":
    main()
