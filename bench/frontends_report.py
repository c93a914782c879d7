#!/usr/bin/env python3
"""frontends.sh's helper: turns runs into CSV rows, and the CSV into the Markdown report.

  frontends_report.py wrk < wrk-output                  -> loadgen-like JSON
  frontends_report.py row ROUND CONC CASE TOOL SERVER_CPU CLIENT_CPU MACHINE_BUSY < json
                                                        -> one CSV line
  frontends_report.py table CSV --command C --machine M --load L --response-bytes N
                                                        -> Markdown; exit 1 if a target is missed
"""
import argparse
import csv
import json
import re
import statistics
import sys

FIELDS = ["requests", "errors", "rps", "p50_us", "p90_us", "p99_us", "p999_us", "max_us",
          "client_cpu_pct"]
CASE_NAMES = {
    "http_json": "HTTP JSON -> infergate",
    "http_binary": "HTTP binary -> infergate",
    "http_fixed": "HTTP fixed -> nginx `return 200`, 2 workers",
    "http_fixed_1w": "HTTP fixed -> nginx `return 200`, 1 worker",
    "grpc": "gRPC -> infergate",
    "grpc_bare": "gRPC -> bare grpc++ server",
    "grpc_bare_raw": "gRPC -> bare grpc++ server, raw ByteBuffer",
}
# (name, numerator case, denominator case, tool, concurrency, target or None)
RATIOS = [
    ("HTTP JSON / nginx ceiling", "http_json", "http_fixed", "loadgen", 64, 0.7),
    ("HTTP JSON / nginx ceiling", "http_json", "http_fixed", "loadgen", 1, None),
    ("HTTP binary / nginx ceiling", "http_binary", "http_fixed", "loadgen", 64, None),
    ("HTTP binary / nginx ceiling", "http_binary", "http_fixed", "loadgen", 1, None),
    ("HTTP JSON / nginx 1 worker (its best case here)", "http_json", "http_fixed_1w", "loadgen", 64, None),
    ("gRPC / bare grpc++ server", "grpc", "grpc_bare", "loadgen", 64, 0.8),
    ("gRPC / bare grpc++ server", "grpc", "grpc_bare", "loadgen", 1, None),
    ("gRPC / bare raw ByteBuffer server", "grpc", "grpc_bare_raw", "loadgen", 64, None),
    ("gRPC / bare raw ByteBuffer server", "grpc", "grpc_bare_raw", "loadgen", 1, None),
    ("HTTP JSON / nginx ceiling (wrk cross-check)", "http_json", "http_fixed", "wrk", 64, None),
]


def to_us(text):
    value, unit = re.match(r"([\d.]+)(us|ms|s)", text).groups()
    return round(float(value) * {"us": 1, "ms": 1e3, "s": 1e6}[unit])


def parse_wrk(text):
    out = {"requests": 0, "errors": 0, "rps": 0.0, "error_kinds": {}}
    if m := re.search(r"(\d+) requests in", text):
        out["requests"] = int(m.group(1))
    if m := re.search(r"Requests/sec:\s+([\d.]+)", text):
        out["rps"] = float(m.group(1))
    if m := re.search(r"Latency\s+\S+\s+\S+\s+(\S+)", text):
        out["max_us"] = to_us(m.group(1))
    for pct, key in (("50", "p50_us"), ("90", "p90_us"), ("99", "p99_us")):
        if m := re.search(rf"\s{pct}%\s+(\S+)", text):
            out[key] = to_us(m.group(1))
    if m := re.search(r"Non-2xx or 3xx responses: (\d+)", text):
        out["error_kinds"]["non_2xx"] = int(m.group(1))
    if m := re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text):
        for kind, n in zip(("connect", "read", "write", "timeout"), m.groups()):
            if int(n):
                out["error_kinds"]["socket_" + kind] = int(n)
    out["errors"] = sum(out["error_kinds"].values())
    out["requests"] -= out["error_kinds"].get("non_2xx", 0)
    return out


def median(rows, field):
    values = [float(r[field]) for r in rows if r.get(field) not in ("", None)]
    return statistics.median(values) if values else None


def cpu_per_request(rows):
    values = [float(r["server_cpu_pct"]) * 1e4 / float(r["rps"]) for r in rows
              if r.get("server_cpu_pct") and r.get("rps") and float(r["rps"]) > 0]
    return statistics.median(values) if values else None


def fmt(value, digits=0):
    if value is None:
        return "-"
    return f"{value:,.{digits}f}"


def table(args):
    with open(args.csv) as f:
        rows = list(csv.DictReader(f))
    groups = {}
    for r in rows:
        groups.setdefault((r["tool"], r["case"], int(r["concurrency"])), []).append(r)
    rounds = len({r["round"] for r in rows})
    out = [
        f"# Frontends against their ceilings ({args.machine})",
        "",
        f"`{args.command}`: {rounds} interleaved rounds, medians; load average {args.load}; "
        f"{args.elapsed} s of runs. `simple` model (INT32 [1,16] x 2); "
        f"infergate's JSON response and nginx's fixed body are {args.response_bytes} bytes.",
        "",
        "| path | tool | c | req/s | range over rounds | p50 us | p99 us | p99.9 us | client CPU % | server CPU % | machine busy % | server CPU us/req | errors |",
        "|---|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for (tool, case, conc), group in sorted(groups.items(),
                                            key=lambda kv: (kv[0][0] != "loadgen", kv[0][2],
                                                            list(CASE_NAMES).index(kv[0][1]))):
        rps = [float(r["rps"] or 0) for r in group]
        errors = sum(int(r["errors"] or 0) for r in group)
        out.append(
            f"| {CASE_NAMES[case]} | {tool} | {conc} | {fmt(median(group, 'rps'))} | "
            f"{fmt(min(rps))}-{fmt(max(rps))} | {fmt(median(group, 'p50_us'))} | "
            f"{fmt(median(group, 'p99_us'))} | {fmt(median(group, 'p999_us'))} | "
            f"{fmt(median(group, 'client_cpu_pct'))} | {fmt(median(group, 'server_cpu_pct'))} | "
            f"{fmt(median(group, 'machine_busy_pct'))} | {fmt(cpu_per_request(group), 1)} | {errors} |")
    out += ["", "| ratio | tool | c | per round (back to back) | median of rounds | of median req/s | target (on the median of rounds) |",
            "|---|---|---:|---|---:|---:|---|"]
    missed = False
    for name, num, den, tool, conc, target in RATIOS:
        a, b = groups.get((tool, num, conc)), groups.get((tool, den, conc))
        if not a or not b:
            continue
        of_medians = median(a, "rps") / median(b, "rps") if median(b, "rps") else 0.0
        by_round = {r["round"]: float(r["rps"] or 0) for r in b}
        per_round = [float(r["rps"] or 0) / by_round[r["round"]] for r in a
                     if by_round.get(r["round"])]
        ratio = statistics.median(per_round) if per_round else 0.0
        verdict = ""
        if target is not None:
            met = ratio >= target
            missed |= not met
            verdict = f">= {target}x: {'**met**' if met else '**MISSED**'}"
        out.append(f"| {name} | {tool} | {conc} | {', '.join(f'{x:.2f}' for x in per_round)} | "
                   f"**{ratio:.2f}x** | {of_medians:.2f}x | {verdict} |")
    out += ["", "CPU figures are sampled from /proc over the measured window. client and "
            "server CPU %: the load generator's and the server's processes (nginx: master "
            "and workers), 100 = one core; machine busy %: every process on the machine, "
            "100 = all cores busy. server CPU us/req = server CPU time / requests. The "
            f"machine has {args.machine.split()[0]} cores in all, shared by client and server."]
    print("\n".join(out))
    return 1 if missed else 0


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    if mode == "wrk":
        print(json.dumps(parse_wrk(sys.stdin.read())))
        return 0
    if mode == "row":
        try:
            result = json.loads(sys.stdin.read())
        except ValueError:
            result = {"errors": 1, "error_kinds": {"no_result": 1}}
        kinds = ";".join(f"{k}={v}" for k, v in sorted(result.get("error_kinds", {}).items()))
        round_, conc, case, tool, server_cpu, client_cpu, machine_busy = sys.argv[2:9]
        # loadgen measures its own CPU over its window; wrk's is sampled from /proc.
        if tool != "loadgen":
            result["client_cpu_pct"] = client_cpu
        values = [str(result.get(f, "")) for f in FIELDS]
        csv.writer(sys.stdout, lineterminator="\n").writerow(
            [round_, conc, case, tool] + values + [server_cpu, machine_busy, kinds])
        return 0
    if mode == "table":
        parser = argparse.ArgumentParser()
        parser.add_argument("csv")
        parser.add_argument("--command", required=True)
        parser.add_argument("--machine", required=True)
        parser.add_argument("--load", required=True)
        parser.add_argument("--response-bytes", required=True)
        parser.add_argument("--elapsed", default="?")
        return table(parser.parse_args(sys.argv[2:]))
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
