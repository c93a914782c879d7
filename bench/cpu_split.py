#!/usr/bin/python3
"""Where a proxy's CPU per request goes: user and system time, context switches, page
faults and the busy threads, for infergate and nginx side by side on the same request.

Starts the suite's processes (bench/suite.py: U serving builtin models, ig_http, ig_grpc,
nginx), then for each round and each via runs one closed-loop `loadgen` (--kind: an HTTP
binary, HTTP JSON or gRPC request; --size tensor bytes, 64 by default; at the given
concurrency) and reads /proc around it. ig_http forwards to the upstream's HTTP listener,
ig_grpc to its gRPC one: a gRPC request via ig_http is the gRPC -> HTTP path, a binary one
via ig_grpc the HTTP binary -> gRPC path.

  user, sys     the proxy's utime and stime per request (us)
  vol, invol    voluntary and involuntary context switches per request, all its threads
  faults        minor page faults per request, all its threads (fresh memory touched)
  threads       (--threads) each thread's CPU and faults per request, busiest first
  syscalls      (--syscalls) system calls per request by name, counted by `perf stat` on the
                kernel's syscall tracepoints for the proxy's processes during the run

Run from the repository root after building the release tree (bench/run builds it):

  /usr/bin/python3 bench/cpu_split.py --concurrency 64 --duration 5 --rounds 3 ig_http nginx

The figures are as noisy as the machine: rounds alternate the vias, and the medians are
printed last. /proc counts in clock ticks (10 ms): keep --duration at a few seconds.
"""
import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import forwarding_report  # noqa: E402
import suite  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def threads_of(pid):
    """{tid name: (utime, stime, voluntary, involuntary, minor faults)} per thread of `pid`."""
    out = {}
    for task in glob.glob(f"/proc/{pid}/task/*"):
        try:
            with open(os.path.join(task, "stat")) as f:
                text = f.read()
            name = text[text.index("(") + 1:text.rindex(")")]
            fields = text.rsplit(")", 1)[1].split()
            switches = {}
            with open(os.path.join(task, "status")) as f:
                for line in f:
                    key, _, value = line.partition(":")
                    if key in ("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches"):
                        switches[key] = int(value)
            out[f"{os.path.basename(task)} {name}"] = (
                int(fields[11]), int(fields[12]), switches.get("voluntary_ctxt_switches", 0),
                switches.get("nonvoluntary_ctxt_switches", 0), int(fields[7]))
        except (OSError, ValueError, IndexError):
            pass  # a thread that ended meanwhile
    return out


def snapshot(pids):
    merged = {}
    for pid in pids:
        for key, value in threads_of(pid).items():
            merged[f"{pid}/{key}"] = value
    return merged


def delta(before, after):
    return {k: tuple(a - b for a, b in zip(v, before.get(k, (0,) * len(v)))) for k, v in after.items()}


# The calls a proxy makes on its request path, each a tracepoint `perf stat` can count.
SYSCALLS = ("read", "readv", "recvfrom", "recvmsg", "write", "writev", "sendto", "sendmsg",
            "epoll_wait", "epoll_pwait", "epoll_ctl", "accept4", "close", "futex", "eventfd2",
            "io_uring_enter", "setsockopt", "getsockopt", "clock_gettime")


def count_syscalls(pids):
    """Starts `perf stat` on `pids`; returns a function that stops it and gives {call: count}."""
    events = ["raw_syscalls:sys_enter"] + [f"syscalls:sys_enter_{name}" for name in SYSCALLS]
    out = tempfile.NamedTemporaryFile(mode="r", suffix=".perf", delete=False)
    perf = subprocess.Popen(["perf", "stat", "-x", ",", "-o", out.name, "-e", ",".join(events),
                             "-p", ",".join(str(p) for p in pids)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def stop():
        perf.send_signal(2)  # SIGINT: perf writes its counts and exits
        perf.wait(timeout=10)
        counts = {}
        for line in out.read().splitlines():
            fields = line.split(",")
            if len(fields) > 2 and fields[0].strip().isdigit():
                name = fields[2].split(":")[-1].replace("sys_enter_", "").replace("sys_enter", "all")
                counts[name] = int(fields[0])
        os.unlink(out.name)
        return counts
    return stop


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("vias", nargs="+", choices=("ig_http", "ig_grpc", "nginx"))
    p.add_argument("--concurrency", type=int, default=64)
    p.add_argument("--duration", type=float, default=5.0)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--kind", choices=("bin", "json", "grpc"), default="bin")
    p.add_argument("--size", type=int, default=64, help="tensor bytes (FP32, a multiple of 4)")
    p.add_argument("--threads", action="store_true", help="print each busy thread's share")
    p.add_argument("--syscalls", action="store_true",
                   help="count the proxy's system calls per request (perf stat, tracepoints)")
    p.add_argument("--build-dir", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                       "..", "build", "release"))
    return p.parse_args()


def main():
    args = parse_args()
    scratch = tempfile.mkdtemp(prefix="infergate-cpu-split.")
    bench = suite.Bench(None, scratch, args.build_dir)
    bench.requests = suite.Requests(scratch, forwarding_report.load_pb(scratch))
    bench.requests.write((args.kind,), args.size)
    results = {via: [] for via in args.vias}
    try:
        bench.start()
        for rnd in range(args.rounds):
            for via in args.vias:
                http_port, grpc_port = bench.ports[via]
                pids = bench.pids[via]()
                command = [bench.loadgen] + bench.requests.loadgen_args(args.kind, args.size, http_port, grpc_port) + [
                    "--concurrency", str(args.concurrency), "--duration", str(args.duration)]
                stop_counting = count_syscalls(pids) if args.syscalls else None
                if stop_counting:
                    time.sleep(0.3)  # perf attaches to every thread before the load starts
                before = snapshot(pids)
                run = subprocess.run(command, capture_output=True, text=True, check=True)
                spent = delta(before, snapshot(pids))
                calls = stop_counting() if stop_counting else {}
                report = json.loads(run.stdout)
                n = report["requests"]
                if n == 0 or report["errors"]:
                    raise SystemExit(f"{via}: {n} requests, {report['errors']} errors")
                row = {
                    "rps": report["rps"],
                    "user": sum(v[0] for v in spent.values()) / TICK * 1e6 / n,
                    "sys": sum(v[1] for v in spent.values()) / TICK * 1e6 / n,
                    "vol": sum(v[2] for v in spent.values()) / n,
                    "invol": sum(v[3] for v in spent.values()) / n,
                    "faults": sum(v[4] for v in spent.values()) / n,
                }
                row.update({f"sc_{name}": count / n for name, count in calls.items()})
                results[via].append(row)
                print(f"round {rnd + 1} {via:8s} rps {row['rps']:8.0f}  user {row['user']:5.2f}  "
                      f"sys {row['sys']:5.2f} us/req  switches {row['vol']:.3f} vol {row['invol']:.3f} invol  faults {row['faults']:.1f} /req")
                if calls:
                    busy = sorted(((k, v / n) for k, v in calls.items() if k != "all" and v), key=lambda kv: -kv[1])
                    print(f"    syscalls/req {calls.get('all', 0) / n:6.2f}: " +
                          "  ".join(f"{k} {v:.2f}" for k, v in busy))
                if args.threads:
                    busy = sorted(spent.items(), key=lambda kv: -(kv[1][0] + kv[1][1]))
                    for key, (u, s, _, _, faults) in busy:
                        if u + s > 0 or faults > 0:
                            print(f"    {key:40s} {(u + s) / TICK * 1e6 / n:6.2f} us/req  "
                                  f"{faults / n:7.1f} faults/req")
        print(f"medians over {args.rounds} round(s):")
        for via, rows in results.items():
            med = {k: statistics.median(r.get(k, 0) for r in rows) for k in rows[0]}
            print(f"  {via:8s} rps {med['rps']:8.0f}  user {med['user']:5.2f}  sys {med['sys']:5.2f}  "
                  f"total {med['user'] + med['sys']:5.2f} us/req  switches {med['vol'] + med['invol']:.3f}  faults {med['faults']:.1f} /req")
            if args.syscalls:
                calls = {k[3:]: v for k, v in med.items() if k.startswith("sc_") and k != "sc_all" and v >= 0.005}
                print(f"           syscalls/req {med.get('sc_all', 0):6.2f}: " +
                      "  ".join(f"{k} {v:.2f}" for k, v in sorted(calls.items(), key=lambda kv: -kv[1])))
    finally:
        bench.stop()


if __name__ == "__main__":
    main()
