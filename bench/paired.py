#!/usr/bin/python3
"""The c=1 added latency with request-by-request pairing: one client sends the same HTTP
request in turn straight to the upstream, through infergate and through nginx, one
request at a time, so the three arms share every drift of the machine (another tenant's
burst, a frequency change) that separate runs do not.

Starts the suite's processes (bench/suite.py: U serving builtin models, ig_http, ig_grpc,
nginx). Paths (--paths, default both):

  http_passthrough   the 64 B binary request; infergate: ig_http (to U's HTTP listener)
  http_json_to_grpc  the 64 B JSON request; infergate: ig_grpc (to U's gRPC listener)

nginx proxies both to U's HTTP listener, as in the suite (BASELINES.md's configuration).
Each round sends --requests rotations (direct, infergate, nginx; the order turns by one
each rotation) on three kept-alive connections, after --warmup rotations, and prints:

  p50 per arm, added p50 (arm's p50 - direct's p50), ratio = infergate added / nginx added

then the medians over rounds. Also the median of the per-rotation differences (each
rotation's arm latency minus the same rotation's direct latency), which pairs even more
closely. The client is Python: its own time per request is in every arm and cancels in
the differences, but it makes every arm's latency longer than loadgen's.

  /usr/bin/python3 bench/paired.py --rounds 3 --requests 3000

The suite's T1a and T2 targets stay as measured by loadgen in separate runs (summary.md);
these figures are for the record beside them (bench/README.md).
"""
import argparse
import os
import socket
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import forwarding_report  # noqa: E402
import suite  # noqa: E402

PATHS = {"http_passthrough": ("bin", "ig_http"), "http_json_to_grpc": ("json", "ig_grpc")}


class KeptAlive:
    """One HTTP/1.1 connection sending one prepared request and reading its answer."""

    def __init__(self, port, request):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.request = request
        self.buf = bytearray(1 << 16)

    def ask(self):
        """Seconds from the send to the answer's last byte; raises on anything but a 200."""
        start = time.perf_counter()
        self.sock.sendall(self.request)
        view = memoryview(self.buf)
        got = 0
        head_end = -1
        need = None
        while need is None or got < need:
            n = self.sock.recv_into(view[got:])
            if n == 0:
                raise RuntimeError("connection closed")
            got += n
            if head_end < 0:
                head_end = bytes(self.buf[:got]).find(b"\r\n\r\n")
                if head_end >= 0:
                    head = bytes(self.buf[:head_end]).decode("latin-1")
                    if not head.startswith("HTTP/1.1 200"):
                        raise RuntimeError(f"answered {head.splitlines()[0]!r}")
                    length = [line.split(":", 1)[1] for line in head.split("\r\n")[1:]
                              if line.lower().startswith("content-length:")]
                    if not length:
                        raise RuntimeError("an answer without Content-Length")
                    need = head_end + 4 + int(length[0])
                    if need > len(self.buf):
                        raise RuntimeError("answer too large for this client")
        return time.perf_counter() - start

    def close(self):
        self.sock.close()


def http_request(requests, kind, size):
    body = requests.body(kind, size)
    headers = {"Host": "127.0.0.1", "Content-Length": str(len(body)), **requests.headers(kind, size)}
    head = f"POST /v2/models/{suite.MODEL}/infer HTTP/1.1\r\n" + "".join(
        f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
    return head.encode() + body


def one_round(bench, kind, via, requests_per_round, warmup):
    request = http_request(bench.requests, kind, 64)
    arms = ("direct", via, "nginx")
    conns = {arm: KeptAlive(bench.ports[arm][0], request) for arm in arms}
    times = {arm: [] for arm in arms}
    try:
        for i in range(warmup + requests_per_round):
            order = arms[i % 3:] + arms[:i % 3]
            took = {arm: conns[arm].ask() for arm in order}
            if i >= warmup:
                for arm in arms:
                    times[arm].append(took[arm])
    finally:
        for c in conns.values():
            c.close()
    us = {arm: [t * 1e6 for t in ts] for arm, ts in times.items()}
    p50 = {arm: statistics.median(ts) for arm, ts in us.items()}
    added = {arm: p50[arm] - p50["direct"] for arm in (via, "nginx")}
    diff = {arm: statistics.median(a - d for a, d in zip(us[arm], us["direct"])) for arm in (via, "nginx")}
    ratio = added[via] / added["nginx"] if added["nginx"] > 0 else float("nan")
    diff_ratio = diff[via] / diff["nginx"] if diff["nginx"] > 0 else float("nan")
    return {"direct_p50": p50["direct"], "ig_p50": p50[via], "nginx_p50": p50["nginx"],
            "ig_added": added[via], "nginx_added": added["nginx"], "ratio": ratio,
            "ig_diff": diff[via], "nginx_diff": diff["nginx"], "diff_ratio": diff_ratio}


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--paths", default=",".join(PATHS), help="comma-separated: " + ", ".join(PATHS))
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--requests", type=int, default=3000, help="rotations measured per round")
    p.add_argument("--warmup", type=int, default=300, help="rotations before measuring")
    p.add_argument("--build-dir", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                       "..", "build", "release"))
    return p.parse_args()


def main():
    args = parse_args()
    paths = [p for p in args.paths.split(",") if p]
    for p in paths:
        if p not in PATHS:
            raise SystemExit(f"unknown path {p!r}; known: {', '.join(PATHS)}")
    scratch = tempfile.mkdtemp(prefix="infergate-paired.")
    bench = suite.Bench(None, scratch, args.build_dir)
    bench.requests = suite.Requests(scratch, forwarding_report.load_pb(scratch))
    bench.requests.write(("json", "bin"), 64)
    results = {p: [] for p in paths}
    fields = ("direct_p50", "ig_p50", "nginx_p50", "ig_added", "nginx_added", "ratio",
              "ig_diff", "nginx_diff", "diff_ratio")
    try:
        bench.start()
        for rnd in range(args.rounds):
            for path in paths:
                kind, via = PATHS[path]
                r = one_round(bench, kind, via, args.requests, args.warmup)
                results[path].append(r)
                print(f"round {rnd + 1} {path:18s} p50 direct {r['direct_p50']:6.1f} infergate "
                      f"{r['ig_p50']:6.1f} nginx {r['nginx_p50']:6.1f} us; added infergate "
                      f"{r['ig_added']:5.1f} nginx {r['nginx_added']:5.1f} us, ratio {r['ratio']:.2f}; "
                      f"per-rotation {r['ig_diff']:5.1f} / {r['nginx_diff']:5.1f} us, "
                      f"ratio {r['diff_ratio']:.2f}", flush=True)
        print(f"medians over {args.rounds} round(s) of {args.requests} rotations (us):")
        print("| path | direct p50 | infergate p50 | nginx p50 | infergate added | nginx added | "
              "ratio (per round) | per-rotation ratio |")
        print("|---|---:|---:|---:|---:|---:|---|---:|")
        for path, rows in results.items():
            med = {k: statistics.median(r[k] for r in rows) for k in fields}
            per_round = ", ".join(f"{r['ratio']:.2f}" for r in rows)
            print(f"| {path} | {med['direct_p50']:.1f} | {med['ig_p50']:.1f} | {med['nginx_p50']:.1f} | "
                  f"{med['ig_added']:.1f} | {med['nginx_added']:.1f} | {med['ratio']:.2f} ({per_round}) | "
                  f"{med['diff_ratio']:.2f} |")
    finally:
        bench.stop()


if __name__ == "__main__":
    main()
