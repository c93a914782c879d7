#!/usr/bin/python3
"""bench/run's driver: the performance suite in one command (bench/README.md, "The suite").

Starts, on loopback: U, an infergate serving the builtin `identity_fp32` model (2 workers);
two gateways in front of it, ig_grpc (every model to U's gRPC listener) and ig_http (to its
HTTP listener); Debian's nginx as a plain proxy of both protocols (/work/shared/BASELINES.md's
configuration). Then, in interleaved rounds, the scenarios (each writes OUT/<scenario>.csv):

  paths     the client requests json (HTTP JSON), bin (HTTP binary extension) and grpc
            (ModelInfer, raw contents), at 64 B and 4 MiB, closed loop at concurrency 1, 8
            and 64, each sent direct to U, through nginx, through ig_http and ig_grpc: the
            five forwarding paths and their baselines (4 MiB JSON at concurrency 1 only)
  sizes     bin through ig_grpc (HTTP binary -> gRPC), direct and through nginx, at 4 KiB,
            256 KiB, 4 MiB and 64 MiB, concurrency 1; with copy_costs' memcpy and loopback
            transfer of 4 and 64 MiB in the same round (copy.csv)
  openloop  grpc and bin at fixed offered rates (open loop), direct / nginx / gateway: the
            rate at which p99 passes 10 ms
  rss       a fresh gateway of each kind (and nginx): RSS at idle after a short warm-up,
            and its peak under 256 concurrent small requests
and once, after the rounds:
  instructions  instructions per 64 B request of the gateway process on each of the five
            paths (callgrind, one worker), and of nginx (one process) on the HTTP
            passthrough's request: figures machine noise does not move
  copies    bytes moved by memcpy in the gateway per tensor byte carried, 4 MiB requests on
            each path (bench/memcpy_count.cc preloaded, read on SIGUSR2)
  shm       bench/shm_handoff.sh: handoff pool vs inline vs client-shm pass-through at 1,
            16 and 64 MiB (its own processes; its CSV and report land beside the others)
  tls       bench/tls_cost.sh: TLS vs plaintext, HTTP and gRPC, against nginx doing the same

Every answer path is checked once before any timing (the correctness guard): the identity
model answers its input, so every via must give back the request's tensor bytes. CPU time
of the proxy and of U comes from /proc over each run's measured window; the proxy's peak
RSS is sampled during the run. OUT/meta.json records the command, machine, load and git
revision; bench/suite_report.py then writes summary.md, summary.json and the plots, and
with --compare FILE flags every figure worse than FILE's by more than its spread.

  bench/run [--quick] [--rounds N] [--duration S] [--warmup S] [--scenarios a,b]
            [--out DIR] [--build-dir DIR] [--no-build] [--compare SUMMARY_JSON]

Exit status: 0 every target met, 1 a target missed (or, with --compare, a regression),
2 a setup error (logs kept in the scratch directory), 3 the correctness guard failed.
"""
import argparse
import datetime
import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(BENCH)
sys.path.insert(0, BENCH)
import forwarding_report  # noqa: E402  (decode_http, decode_grpc, load_pb)
from host_stats import children, cpu_model, cpu_seconds, free_port, rss_kb  # noqa: E402
from infergate_process import InfergateProcess  # noqa: E402
from suite_requests import MODEL, GuardError, Requests  # noqa: E402,F401  (suite.Requests for the tools)

KINDS = ("json", "bin", "grpc")
MIB = 1 << 20
LOAD_COLUMNS = ["scenario", "round", "kind", "size_bytes", "concurrency", "rate", "via", "requests",
                "errors", "rps", "p50_us", "p90_us", "p99_us", "p999_us", "max_us",
                "proxy_cpu_us_per_req", "proxy_rss_kb", "upstream_cpu_us_per_req", "phase"]
COPY_COLUMNS = ["scenario", "round", "size_bytes", "memcpy_us", "loopback_us", "rtt_us"]


def add_round_args(parser):
    """The side scripts' common options (busy_poll.py, stream_requests.py): interleaved
    rounds, each run's measured and warm-up seconds, and the release tree to run."""
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=float, default=2.0)
    parser.add_argument("--warmup", type=float, default=0.5)
    parser.add_argument("--build-dir", default=os.path.join(ROOT, "build", "release"))


class SetupError(Exception):
    pass


# ---- the grid ------------------------------------------------------------------------------

def pick(given, default):
    return default if given is None else given


def grid(args):
    """What each scenario runs; --quick trims it to under two minutes."""
    if args.quick:
        return {
            # Two rounds, so that every figure has a spread for --compare to weigh.
            "rounds": pick(args.rounds, 2), "duration": pick(args.duration, 0.6),
            "warmup": pick(args.warmup, 0.2),
            "paths": {"sizes": [64], "concurrency": [1, 64]},
            "sizes": {"sizes": [4096, 4 * MIB]},
            "openloop": {"rates": [1000]},
            "rss": {"concurrency": 256},
            "instructions": {"requests": 60, "warmup": 10},
            "copies": {"size": pick(args.copies_size, 4 * MIB), "requests": 3, "warmup": 1},
            "shm": ["--quick", "--sizes", "16"],
            "tls": ["--rounds", "1", "--duration", "1", "--warmup", "0.2"],  # wrk: whole seconds
        }
    return {
        "rounds": pick(args.rounds, 3), "duration": pick(args.duration, 2.0),
        "warmup": pick(args.warmup, 0.5),
        "paths": {"sizes": [64, 4 * MIB], "concurrency": [1, 8, 64]},
        "sizes": {"sizes": [4096, 256 * 1024, 4 * MIB, 64 * MIB]},
        "openloop": {"rates": [250, 500, 1000, 2000, 4000]},
        "rss": {"concurrency": 256},
        "instructions": {"requests": 300, "warmup": 30},
        "copies": {"size": pick(args.copies_size, 4 * MIB), "requests": 10, "warmup": 2},
        "shm": ["--rounds", "3", "--duration", "2", "--warmup", "0.5"],
        "tls": ["--rounds", "3", "--duration", "2", "--warmup", "0.5"],
    }


# ---- request files -------------------------------------------------------------------------

# ---- processes -----------------------------------------------------------------------------

LIMITS = """limits:
  max_input_bytes: 1073741824
"""


class Bench:
    """The processes of one suite run and the runs themselves."""

    def __init__(self, g, scratch, build):
        self.g = g  # grid()
        self.scratch = scratch
        self.infergate = os.path.join(build, "gateway", "infergate")
        self.loadgen = os.path.join(build, "bench", "loadgen")
        self.copy_costs = os.path.join(build, "bench", "copy_costs")
        self.memcpy_count = os.path.join(build, "bench", "libmemcpy_count.so")
        self.processes = []  # InfergateProcess
        self.nginx = None
        self.ports = {}  # via -> (http, grpc)
        self.pids = {}  # via -> callable giving the proxy's pids now
        self.u = None
        self.keep_profiles = None  # --keep-profiles

    # -- starting and stopping --

    def start_infergate(self, label, body):
        path = write_config(self.scratch, label, 2, body)
        p = InfergateProcess(self.infergate, label, path, self.scratch)
        self.processes.append(p)
        if not p.wait_ready(30):
            raise SetupError(f"{label} did not start; see {self.scratch}/{label}.err")
        return p

    def start_gateway(self, label, protocol, port, extra=""):
        """A gateway routing every model to U's `protocol` listener at `port`; `extra`:
        more top-level configuration (YAML lines) before the upstreams."""
        p = self.start_infergate(label, extra + f"""upstreams:
  - name: u
    protocol: {protocol}
    endpoints: ["127.0.0.1:{port}"]
routes:
  - match: {{ model: "*" }}
    upstream: u
""")
        self.wait_http_ready(p.port("http"))
        return p

    def wait_http_ready(self, port, timeout=15):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
                conn.request("GET", "/v2/health/ready")
                if conn.getresponse().status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.1)
        raise SetupError(f"127.0.0.1:{port} is not ready after {timeout} s")

    def start(self):
        self.u = self.start_infergate("upstream", BUILTIN_BODY)
        u_http, u_grpc = self.u.port("http"), self.u.port("grpc")
        self.ports["direct"] = (u_http, u_grpc)
        self.pids["direct"] = lambda: []
        for via, protocol, port in (("ig_grpc", "grpc", u_grpc), ("ig_http", "http", u_http)):
            g = self.start_gateway(via, protocol, port)
            self.ports[via] = (g.port("http"), g.port("grpc"))
            self.pids[via] = (lambda pid: lambda: [pid])(g.pid)
        self.start_nginx(u_http, u_grpc)

    def nginx_config(self, name, u_http, u_grpc, single_process=False):
        """scratch/name: bench/nginx_proxy.conf.in in front of U's listeners on free ports;
        `single_process`: one process in the foreground that serves itself (no master), as
        callgrind runs it. The path and the (HTTP, gRPC) ports."""
        http_port, grpc_port = free_port(), free_port()
        os.makedirs(os.path.join(self.scratch, "nginx_tmp"), exist_ok=True)
        conf = os.path.join(self.scratch, name)
        with open(os.path.join(BENCH, "nginx_proxy.conf.in")) as f:
            text = f.read()
        for key, value in (("SCRATCH", self.scratch), ("U_HTTP", u_http), ("U_GRPC", u_grpc),
                           ("HTTP", http_port), ("GRPC", grpc_port)):
            text = text.replace(f"@{key}@", str(value))
        if single_process:
            text = text.replace("worker_processes 2;", "worker_processes 1;\nmaster_process off;\ndaemon off;")
            text = text.replace(f"pid {self.scratch}/nginx.pid;", f"pid {self.scratch}/{name}.pid;")
        with open(conf, "w") as f:
            f.write(text)
        return conf, http_port, grpc_port

    def start_nginx(self, u_http, u_grpc):
        conf, http_port, grpc_port = self.nginx_config("nginx.conf", u_http, u_grpc)
        with open(os.path.join(self.scratch, "nginx.out"), "w") as log:  # the child keeps its own
            self.nginx = subprocess.Popen(
                ["nginx", "-p", self.scratch, "-e", os.path.join(self.scratch, "nginx_error.log"),
                 "-c", conf, "-g", "daemon off;"], stdout=log, stderr=log)
        self.ports["nginx"] = (http_port, grpc_port)
        self.pids["nginx"] = lambda: [self.nginx.pid] + children(self.nginx.pid)
        self.wait_http_ready(http_port)

    def stop(self):
        statuses = {}
        for p in reversed(self.processes):
            statuses[p.label] = p.stop()
        if self.nginx is not None and self.nginx.poll() is None:
            self.nginx.terminate()
            try:
                self.nginx.wait(10)
            except subprocess.TimeoutExpired:
                self.nginx.kill()
        return statuses

    # -- measuring --

    def settle(self):
        """Waits (3 s at most) until U and the proxies are idle, so that what a run left in
        flight (4 MiB at concurrency 64) does not run into the next one."""
        pids = [self.u.pid] + [pid for via in self.pids for pid in self.pids[via]()]
        for _ in range(30):
            before = cpu_seconds(pids)
            time.sleep(0.1)
            if cpu_seconds(pids) - before < 0.015:
                return

    def loadgen_run(self, target_args, concurrency, rate, duration, warmup, proxy_pids):
        """Runs loadgen; returns (its JSON, proxy CPU s, U CPU s, window s, proxy peak RSS)."""
        command = [self.loadgen] + target_args + ["--concurrency", str(concurrency),
                                                  "--duration", str(duration), "--warmup", str(warmup)]
        if rate:
            command += ["--rate", str(rate)]
        peak = [rss_kb(proxy_pids)]
        stop = threading.Event()

        def sample():
            while not stop.wait(0.05):
                peak[0] = max(peak[0], rss_kb(proxy_pids))
        sampler = threading.Thread(target=sample, daemon=True)
        client = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        sampler.start()
        time.sleep(warmup)
        window = duration - 0.3 if duration > 1 else duration * 0.7
        proxy_before, u_before, t0 = cpu_seconds(proxy_pids), cpu_seconds([self.u.pid]), time.monotonic()
        time.sleep(window)
        proxy_after, u_after, t1 = cpu_seconds(proxy_pids), cpu_seconds([self.u.pid]), time.monotonic()
        out, err = client.communicate()
        stop.set()
        sampler.join()
        try:
            result = json.loads(out)
        except ValueError:
            result = {"requests": 0, "errors": 0, "error_kinds": err.strip()[-300:]}
        return result, proxy_after - proxy_before, u_after - u_before, t1 - t0, peak[0]

    def run(self, writer, scenario, rnd, kind, size, via, concurrency=1, rate=0, duration=None,
            warmup=None, phase="", row_via=None):
        """One loadgen run against `via` (its ports and pids); one row, under `row_via` when
        given (a temporary process standing for a via)."""
        duration = duration or self.g["duration"]
        warmup = self.g["warmup"] if warmup is None else warmup
        http_port, grpc_port = self.ports[via]
        pids = self.pids[via]()
        result, proxy_cpu, u_cpu, window, peak = self.loadgen_run(
            self.requests.loadgen_args(kind, size, http_port, grpc_port), concurrency, rate, duration,
            warmup, pids)
        done = result.get("rps", 0) * window

        def per_request(seconds):
            return f"{seconds * 1e6 / done:.1f}" if done > 0 else ""
        row = {"scenario": scenario, "round": rnd, "kind": kind, "size_bytes": size,
               "concurrency": concurrency, "rate": rate, "via": row_via or via,
               "requests": result.get("requests", 0), "errors": result.get("errors", 0),
               "rps": f"{result.get('rps', 0):.1f}",
               "proxy_cpu_us_per_req": per_request(proxy_cpu) if pids else "",
               "proxy_rss_kb": peak if pids else "", "upstream_cpu_us_per_req": per_request(u_cpu),
               "phase": phase}
        for q in ("p50_us", "p90_us", "p99_us", "p999_us", "max_us"):
            row[q] = f"{result.get(q, 0):.1f}" if q in result else ""
        writer.row(row)
        if result.get("errors") or not result.get("requests"):
            print(f"  {scenario} {kind} {size} B c={concurrency} rate={rate} via {via}: "
                  f"{result.get('requests', 0)} requests, {result.get('errors', 0)} errors "
                  f"{result.get('error_kinds', '')}", file=sys.stderr)
        self.settle()

    # -- the correctness guard --

    def guard(self, kinds_by_size, vias):
        for size, kinds in sorted(kinds_by_size.items()):
            for kind in kinds:
                want = self.requests.expected(size)
                for via in vias:
                    http_port, grpc_port = self.ports[via]
                    try:
                        got = self.requests.ask(kind, size, http_port, grpc_port)
                    except GuardError as e:
                        raise GuardError(f"{kind} {size} B via {via}: {e}") from None
                    if got != want:
                        raise GuardError(f"{kind} {size} B via {via}: the answer differs from the "
                                         f"input (datatype/shape {got[:2]} vs {want[:2]})")


class CsvWriter:
    def __init__(self, path, columns):
        self.columns = columns
        self.file = open(path, "w")
        self.file.write(",".join(columns) + "\n")

    def row(self, row):
        self.file.write(",".join(str(row.get(c, "")) for c in self.columns) + "\n")
        self.file.flush()

    def close(self):
        self.file.close()


# ---- scenarios -----------------------------------------------------------------------------

def scenario_paths(bench, writer, rnd):
    g = bench.g["paths"]
    for size in g["sizes"]:
        for concurrency in g["concurrency"]:
            for kind in KINDS:
                # 4 MiB as JSON is ~20 MB of text, ~0.1 s of parsing at U: beyond one in
                # flight a request waits seconds and a short run completes few.
                if kind == "json" and size > 64 * 1024 and concurrency > 1:
                    continue
                for via in ("direct", "nginx", "ig_http", "ig_grpc"):
                    warmup = bench.g["warmup"]
                    if size > 64 * 1024 and concurrency > 1:
                        warmup = max(warmup, 1.0)
                    bench.run(writer, "paths", rnd, kind, size, via, concurrency=concurrency,
                              warmup=warmup)


def scenario_sizes(bench, writer, copy_writer, rnd):
    for size in bench.g["sizes"]["sizes"]:
        if size >= 4 * MIB:
            copy_row(bench, copy_writer, rnd, size)
        for via in ("direct", "nginx", "ig_grpc"):
            bench.run(writer, "sizes", rnd, "bin", size, via,
                      warmup=max(bench.g["warmup"], 0.5 if size >= 64 * MIB else 0))


def copy_row(bench, writer, rnd, size):
    runs = "21" if size >= 64 * MIB else "101"
    out = subprocess.run([bench.copy_costs, str(size), runs], capture_output=True, text=True, check=True)
    costs = json.loads(out.stdout)
    writer.row({"scenario": "copy", "round": rnd, "size_bytes": size,
                "memcpy_us": f"{costs['memcpy_us']:.1f}", "loopback_us": f"{costs['loopback_us']:.1f}",
                "rtt_us": f"{costs['rtt_1byte_us']:.1f}"})


def scenario_openloop(bench, writer, rnd):
    for kind, via_kind in (("grpc", "ig_grpc"), ("bin", "ig_http")):
        for rate in bench.g["openloop"]["rates"]:
            for via in ("direct", "nginx", via_kind):
                # Connections enough for the rate at a few ms each; the latency counts from
                # when each request fell due, so a backlog shows as it would for users.
                bench.run(writer, "openloop", rnd, kind, 64, via, concurrency=64, rate=rate)


def scenario_rss(bench, writer, rnd):
    """Fresh gateways: idle RSS after a short warm-up, then the peak under load."""
    u_http, u_grpc = bench.ports["direct"]
    concurrency = bench.g["rss"]["concurrency"]
    for label, protocol, port, kind in (("rss_grpc", "grpc", u_grpc, "grpc"), ("rss_http", "http", u_http, "bin")):
        p = bench.start_gateway(f"{label}_{rnd}", protocol, port)
        via = "ig_grpc" if protocol == "grpc" else "ig_http"
        bench.ports[label], bench.pids[label] = (p.port("http"), p.port("grpc")), (lambda pid: lambda: [pid])(p.pid)
        try:
            for k in ("bin", "grpc"):  # both client protocols, a few requests each
                bench.loadgen_run(bench.requests.loadgen_args(k, 64, *bench.ports[label]), 4, 0, 0.5, 0,
                                  [p.pid])
            time.sleep(1.0)
            writer.row({"scenario": "rss", "round": rnd, "kind": kind, "size_bytes": 64, "via": via,
                        "proxy_rss_kb": rss_kb([p.pid]), "phase": "idle"})
            bench.run(writer, "rss", rnd, kind, 64, label, concurrency=concurrency, warmup=0.5,
                      phase="load", row_via=via)
        finally:
            bench.processes.remove(p)
            del bench.ports[label], bench.pids[label]
            code = p.stop()
        if code != 0:
            raise SetupError(f"the gateway {p.label} exited with status {code}")
    for kind in ("bin", "grpc"):
        writer.row({"scenario": "rss", "round": rnd, "kind": kind, "size_bytes": 64, "via": "nginx",
                    "proxy_rss_kb": rss_kb(bench.pids["nginx"]()), "phase": "idle"})
        bench.run(writer, "rss", rnd, kind, 64, "nginx", concurrency=concurrency, warmup=0.5, phase="load")


# Each forwarding path as (client kind, upstream protocol) for the instructions scenario.
INSTRUCTION_PATHS = (("grpc_passthrough", "grpc", "grpc"), ("http_passthrough", "bin", "http"),
                     ("http_json_to_grpc", "json", "grpc"), ("http_bin_to_grpc", "bin", "grpc"),
                     ("grpc_to_http_bin", "grpc", "http"))
# The upstream's own serving of the request (no gateway): the server side of each hop.
UPSTREAM_INSTRUCTION_PATHS = (("upstream_grpc", "grpc"), ("upstream_http_bin", "bin"))
# nginx's proxy_pass carrying the HTTP passthrough's request to U: the same count for the
# comparison proxy (its one process, which does all of its work).
NGINX_INSTRUCTION_PATH = "nginx_http_passthrough"
INSTRUCTION_COLUMNS = ["scenario", "path", "kind", "upstream", "size_bytes", "requests",
                       "instructions_per_request"]


def write_config(scratch, label, workers, body):
    """scratch/label.yaml: an infergate on ephemeral loopback ports with `workers` worker
    loops, the suite's LIMITS, then `body` (its upstreams and routes); the path."""
    path = os.path.join(scratch, label + ".yaml")
    with open(path, "w") as f:
        f.write('listeners:\n  http: { address: "127.0.0.1:0" }\n  grpc: { address: "127.0.0.1:0" }\n'
                f"workers: {workers}\n" + LIMITS + body)
    return path


# U's upstreams and routes: every model served by the builtin MODEL.
BUILTIN_BODY = f"""upstreams:
  - name: demo
    protocol: builtin
    models: [{MODEL}]
routes:
  - match: {{ model: "*" }}
    upstream: demo
"""


def routed_gateway_config(bench, label):
    """A one-worker gateway reaching U both ways: the header x-path: http picks U's HTTP
    listener, anything else its gRPC listener (HTTP header or gRPC metadata alike). Its
    per-request counts (instructions, copies) leave out the active health checks: a gRPC
    probe runs on the worker loop through grpc++ (about 215k instructions), once a second,
    so whether one fell inside a counted window moved the gRPC passthrough's figure by
    about 700 per request between runs and builds. The gateway answers ready as soon as it
    listens instead."""
    u_http, u_grpc = bench.ports["direct"]
    return write_config(bench.scratch, label, 1, f"""readiness: {{ policy: always }}
upstreams:
  - {{ name: uh, protocol: http, endpoints: ["127.0.0.1:{u_http}"], health_check: {{ enabled: false }} }}
  - {{ name: ug, protocol: grpc, endpoints: ["127.0.0.1:{u_grpc}"], health_check: {{ enabled: false }} }}
routes:
  - {{ match: {{ model: "*", headers: {{ x-path: http }} }}, upstream: uh }}
  - {{ match: {{ model: "*" }}, upstream: ug }}
""")


def path_client(bench, kind, upstream, size, http_port, grpc_port):
    """A function sending one request of `kind` and `size` along the path to `upstream`
    through a routed gateway, on one connection; and a function closing it."""
    import grpc  # pylint: disable=import-outside-toplevel
    body = bench.requests.body(kind, size)
    if kind == "grpc":
        channel = grpc.insecure_channel(f"127.0.0.1:{grpc_port}", options=[
            ("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", -1)])
        call = channel.unary_unary("/inference.GRPCInferenceService/ModelInfer")
        metadata = (("x-path", upstream),)
        return (lambda: call(body, metadata=metadata, timeout=600)), channel.close
    conn = http.client.HTTPConnection("127.0.0.1", http_port, timeout=600)
    headers = dict(bench.requests.headers(kind, size), **{"x-path": upstream})

    def one():
        conn.request("POST", f"/v2/models/{MODEL}/infer", body=body, headers=headers)
        r = conn.getresponse()
        r.read()
        if r.status != 200:
            raise SetupError(f"{kind} -> {upstream}: HTTP {r.status}")
    return one, conn.close


COPY_COUNT_COLUMNS = ["scenario", "path", "kind", "upstream", "size_bytes", "requests",
                      "memcpy_bytes_per_request", "memcpy_calls_per_request", "copies_per_tensor_byte"]


def scenario_copies(bench, writer, size, requests, warmup):
    """Bytes moved by memcpy per request in the gateway process (bench/memcpy_count.cc,
    preloaded), per tensor byte carried (the input and the identical output): 1.0 means the
    gateway copied everything it carried once."""
    counts = os.path.join(bench.scratch, "memcpy_counts")
    g = InfergateProcess(bench.infergate, "copies", routed_gateway_config(bench, "copies"), bench.scratch,
                         env={"LD_PRELOAD": bench.memcpy_count, "MEMCPY_COUNT_FILE": counts})

    def snapshot():
        lines = _count_lines(counts)
        os.kill(g.pid, signal.SIGUSR2)
        for _ in range(100):
            now = _count_lines(counts)
            if len(now) > len(lines):
                bytes_, calls = now[-1].split()
                return int(bytes_), int(calls)
            time.sleep(0.02)
        raise SetupError("the memcpy counter did not answer SIGUSR2")
    try:
        if not g.wait_ready(30):
            raise SetupError(f"the counting gateway did not start; see {bench.scratch}/copies.err")
        bench.wait_http_ready(g.port("http"))
        for name, kind, upstream in INSTRUCTION_PATHS:
            one, close = path_client(bench, kind, upstream, size, g.port("http"), g.port("grpc"))
            for _ in range(warmup):
                one()
            bytes_before, calls_before = snapshot()
            for _ in range(requests):
                one()
            bytes_after, calls_after = snapshot()
            close()
            per_request = (bytes_after - bytes_before) / requests
            writer.row({"scenario": "copies", "path": name, "kind": kind, "upstream": upstream,
                        "size_bytes": size, "requests": requests,
                        "memcpy_bytes_per_request": round(per_request),
                        "memcpy_calls_per_request": round((calls_after - calls_before) / requests, 1),
                        "copies_per_tensor_byte": f"{per_request / (2 * size):.3f}"})
    finally:
        code = g.stop()
    if code != 0:
        raise SetupError(f"the counting gateway exited with status {code}")


def _count_lines(path):
    try:
        with open(path) as f:
            return f.read().splitlines()
    except OSError:
        return []


def scenario_instructions(bench, writer, requests, warmup, keep=None):
    """Instructions per request of the gateway process (callgrind): one gateway, 1 worker,
    reaching U both ways; per path `warmup` requests, the counters zeroed, `requests`
    requests on one connection, a dump. Only the worker loop's thread is counted (callgrind
    keeps each thread apart): it carries every one of these paths, while grpc++'s own
    threads wake on timers and add more the slower valgrind runs, which made the figure move
    by 3-4k between runs of one tree. Machine noise does not move what is left, so one run
    is enough (it runs once, not per round). Then the same for an upstream like U (builtin
    identity_fp32, 1 worker) answering the 64 B request itself over gRPC and over HTTP
    binary: the server side of each hop, what a transcoding path pays U's gRPC listener
    where nginx's arm pays its HTTP one. With `keep`, each path's dumps are copied to
    keep/<path>.<n>.callgrind for callgrind_annotate."""
    wrapper = ["valgrind", "--tool=callgrind", "--separate-threads=yes",
               "--callgrind-out-file=" + os.path.join(bench.scratch, "cg.%p")]
    g = InfergateProcess(bench.infergate, "callgrind", routed_gateway_config(bench, "callgrind"),
                         bench.scratch, wrapper=wrapper)
    try:
        if not g.wait_ready(120):
            raise SetupError(f"the gateway under callgrind did not start; see {bench.scratch}/callgrind.err")
        bench.wait_http_ready(g.port("http"), timeout=120)
        for name, kind, upstream in INSTRUCTION_PATHS:
            _count_instructions(bench, writer, g, name, kind, upstream, requests, warmup, keep)
    finally:
        g.stop()
    u_config = write_config(bench.scratch, "callgrind_u", 1, BUILTIN_BODY)
    u = InfergateProcess(bench.infergate, "callgrind_u", u_config, bench.scratch, wrapper=wrapper)
    try:
        if not u.wait_ready(120):
            raise SetupError(f"the upstream under callgrind did not start; see {bench.scratch}/callgrind_u.err")
        bench.wait_http_ready(u.port("http"), timeout=120)
        for name, kind in UPSTREAM_INSTRUCTION_PATHS:
            _count_instructions(bench, writer, u, name, kind, "builtin", requests, warmup, keep)
    finally:
        u.stop()
    _count_nginx_instructions(bench, writer, requests, warmup, keep)


def _count_nginx_instructions(bench, writer, requests, warmup, keep):
    """The nginx_http_passthrough row: Debian's nginx with bench/nginx_proxy.conf.in as one
    process (no master, one worker's work) under callgrind, the HTTP passthrough's 64 B
    binary request to U's HTTP listener, counted as the gateway's rows are. All of nginx's
    work is that process's one thread, so the whole dump counts."""
    conf, http_port, grpc_port = bench.nginx_config("callgrind_nginx.conf", *bench.ports["direct"],
                                                     single_process=True)
    err = os.path.join(bench.scratch, "callgrind_nginx.err")
    with open(err, "w") as log:
        proc = subprocess.Popen(["valgrind", "--tool=callgrind",
                                 "--callgrind-out-file=" + os.path.join(bench.scratch, "cg.%p"),
                                 "nginx", "-p", bench.scratch, "-e", err, "-c", conf],
                                stdout=log, stderr=log)
    try:
        bench.wait_http_ready(http_port, timeout=120)
        one, close = path_client(bench, "bin", "http", 64, http_port, grpc_port)
        for _ in range(warmup):
            one()
        for old in _dumps(bench.scratch, proc.pid):
            os.remove(old)
        subprocess.run(["callgrind_control", "--zero", str(proc.pid)], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(requests):
            one()
        subprocess.run(["callgrind_control", "--dump", str(proc.pid)], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        close()
        dumps = sorted(_dumps(bench.scratch, proc.pid))
        total = sum(_summary_instructions(dump) for dump in dumps)
        if keep:
            os.makedirs(keep, exist_ok=True)
            for n, dump in enumerate(dumps):
                shutil.copyfile(dump, os.path.join(keep, f"{NGINX_INSTRUCTION_PATH}.{n}.callgrind"))
        writer.row({"scenario": "instructions", "path": NGINX_INSTRUCTION_PATH, "kind": "bin",
                    "upstream": "http", "size_bytes": 64, "requests": requests,
                    "instructions_per_request": total // requests})
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _count_instructions(bench, writer, g, name, kind, upstream, requests, warmup, keep):
    """One row of instructions.csv: `requests` 64 B requests of `kind` to process `g` (under
    callgrind), after `warmup` of them, counted on its worker loop's thread."""
    one, close = path_client(bench, kind, upstream, 64, g.port("http"), g.port("grpc"))
    for _ in range(warmup):
        one()
    for old in _dumps(bench.scratch, g.pid):
        os.remove(old)
    subprocess.run(["callgrind_control", "--zero", str(g.pid)], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    for _ in range(requests):
        one()
    subprocess.run(["callgrind_control", "--dump", str(g.pid)], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    close()
    total = sum(_loop_instructions(dump) for dump in _dumps(bench.scratch, g.pid))
    if keep:
        os.makedirs(keep, exist_ok=True)
        for n, dump in enumerate(sorted(_dumps(bench.scratch, g.pid))):
            shutil.copyfile(dump, os.path.join(keep, f"{name}.{n}.callgrind"))
    writer.row({"scenario": "instructions", "path": name, "kind": kind, "upstream": upstream,
                "size_bytes": 64, "requests": requests,
                "instructions_per_request": total // requests})


def _loop_instructions(dump):
    """The instructions in a callgrind dump of one thread when it is a worker loop's (it ran
    EventLoop::run), else 0."""
    total, loop = 0, False
    with open(dump) as f:
        for line in f:
            if line.startswith("summary:"):
                total = int(line.split()[1])
            elif "EventLoop::run()" in line and line.startswith(("fn=", "cfn=")):
                loop = True
    return total if loop else 0


def _summary_instructions(dump):
    """The instructions in a callgrind dump, whatever ran them."""
    with open(dump) as f:
        for line in f:
            if line.startswith("summary:"):
                return int(line.split()[1])
    return 0


def _dumps(scratch, pid):
    prefix = f"cg.{pid}."
    return [os.path.join(scratch, n) for n in os.listdir(scratch) if n.startswith(prefix)]


# ---- main ----------------------------------------------------------------------------------

ROUND_SCENARIOS = ("rss", "paths", "sizes", "openloop")  # interleaved, once per round
ONCE_SCENARIOS = ("instructions", "copies", "shm", "tls")  # after the rounds
# Scenarios that are a script of their own: (script, the name of its CSV and report).
EXTERNAL = {"shm": ("shm_handoff.sh", "shm_handoff"), "tls": ("tls_cost.sh", "tls_cost")}


def build(args):
    if args.no_build:
        return
    subprocess.run(["cmake", "-S", ROOT, "-B", args.build_dir, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
                    "-DINFERGATE_TESTS=OFF", "-DINFERGATE_BENCH=ON"], check=True, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    subprocess.run(["cmake", "--build", args.build_dir, "--target", "loadgen", "infergate", "copy_costs",
                    "memcpy_count"], check=True)


def source_of(build_dir):
    """The source tree `build_dir` was configured from (its CMakeCache.txt says), else this
    checkout: a --build-dir of another worktree measures that worktree's code."""
    try:
        with open(os.path.join(build_dir, "CMakeCache.txt")) as f:
            for line in f:
                if line.startswith("CMAKE_HOME_DIRECTORY:"):
                    return line.split("=", 1)[1].strip()
    except OSError:
        pass
    return ROOT


def git_revision(build_dir):
    """The short revision of the tree the measured binaries were built from."""
    try:
        return subprocess.run(["git", "-C", source_of(build_dir), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def malloc_of(infergate):
    """The malloc the gateway binary runs with, as `infergate version` says it."""
    try:
        out = subprocess.run([infergate, "version"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return next((l.split(":", 1)[1].strip() for l in out.splitlines() if l.startswith("malloc:")), "unknown")


def parse_args():
    parser = argparse.ArgumentParser(prog="bench/run", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a trimmed grid, under two minutes")
    parser.add_argument("--rounds", type=int, help="interleaved repetitions (3; quick 2)")
    parser.add_argument("--duration", type=float, help="measured seconds per run (2; quick 0.6)")
    parser.add_argument("--warmup", type=float, help="warm-up seconds per run (0.5; quick 0.2)")
    everything = ",".join(ROUND_SCENARIOS + ONCE_SCENARIOS)
    parser.add_argument("--scenarios", default=everything, help=f"comma-separated (default {everything})")
    parser.add_argument("--out", help="results directory (default bench/results/<date>/suite[-quick])")
    parser.add_argument("--build-dir", default=os.path.join(ROOT, "build", "release"))
    parser.add_argument("--no-build", action="store_true")
    parser.add_argument("--copies-size", type=int, metavar="BYTES",
                        help="copies: the tensor size counted (4 MiB by default; a multiple of 4)")
    parser.add_argument("--keep-profiles", metavar="DIR",
                        help="instructions: keep each path's callgrind dumps in DIR (for callgrind_annotate)")
    parser.add_argument("--compare", metavar="SUMMARY_JSON",
                        help="flag every stable figure (counts, memory, ratios within a round) worse "
                             "than this saved summary's by more than its spread")
    parser.add_argument("--compare-all", action="store_true",
                        help="with --compare: raw latencies and rates too")
    args = parser.parse_args()
    args.scenarios = [s for s in args.scenarios.split(",") if s]
    unknown = set(args.scenarios) - set(ROUND_SCENARIOS + ONCE_SCENARIOS)
    if unknown:
        parser.error(f"unknown scenario(s): {', '.join(sorted(unknown))}")
    return args


def measure(bench, scenarios, out):
    """The scenarios run against this suite's own processes; 0, or 2 / 3 (setup, guard)."""
    g = bench.g
    try:
        bench.requests = Requests(bench.scratch, forwarding_report.load_pb(bench.scratch))
        by_size = {}
        if "paths" in scenarios:
            for size in g["paths"]["sizes"]:
                by_size.setdefault(size, set()).update(KINDS)
        if "sizes" in scenarios:
            for size in g["sizes"]["sizes"]:
                by_size.setdefault(size, set()).add("bin")
        if {"openloop", "rss", "instructions"} & set(scenarios):
            by_size.setdefault(64, set()).update(KINDS)
        if "copies" in scenarios:
            by_size.setdefault(g["copies"]["size"], set()).update(KINDS)
        for size, kinds in by_size.items():
            bench.requests.write(kinds, size)
        bench.start()
        print(f"bench/run: guard, then {g['rounds']} round(s) of {', '.join(scenarios)}", file=sys.stderr)
        bench.guard(by_size, ("direct", "nginx", "ig_http", "ig_grpc"))
        per_round = [s for s in scenarios if s in ROUND_SCENARIOS]
        writers = {s: CsvWriter(os.path.join(out, s + ".csv"), LOAD_COLUMNS) for s in per_round}
        if "sizes" in scenarios:
            writers["copy"] = CsvWriter(os.path.join(out, "copy.csv"), COPY_COLUMNS)
        for rnd in range(1, g["rounds"] + 1):
            for s in per_round:
                t = time.time()
                if s == "paths":
                    scenario_paths(bench, writers[s], rnd)
                elif s == "sizes":
                    scenario_sizes(bench, writers[s], writers["copy"], rnd)
                elif s == "openloop":
                    scenario_openloop(bench, writers[s], rnd)
                elif s == "rss":
                    scenario_rss(bench, writers[s], rnd)
                print(f"  round {rnd}: {s} in {time.time() - t:.0f} s", file=sys.stderr)
        for w in writers.values():
            w.close()
        if "instructions" in scenarios:
            t = time.time()
            writer = CsvWriter(os.path.join(out, "instructions.csv"), INSTRUCTION_COLUMNS)
            scenario_instructions(bench, writer, g["instructions"]["requests"], g["instructions"]["warmup"],
                                  keep=bench.keep_profiles)
            writer.close()
            print(f"  instructions in {time.time() - t:.0f} s", file=sys.stderr)
        if "copies" in scenarios:
            t = time.time()
            writer = CsvWriter(os.path.join(out, "copies.csv"), COPY_COUNT_COLUMNS)
            scenario_copies(bench, writer, g["copies"]["size"], g["copies"]["requests"], g["copies"]["warmup"])
            writer.close()
            print(f"  copies in {time.time() - t:.0f} s", file=sys.stderr)
        status = 0
    except SetupError as e:
        print(f"bench/run: {e}", file=sys.stderr)
        status = 2
    except GuardError as e:
        print(f"bench/run: correctness guard: {e}", file=sys.stderr)
        status = 3
    finally:
        exits = bench.stop()
    unclean = {label: code for label, code in exits.items() if code != 0}
    if unclean and status == 0:
        print(f"bench/run: processes did not exit cleanly: {unclean}", file=sys.stderr)
        status = 2
    return status


def run_external(args, g, out):
    """The scenarios that are a script of their own (each starts and stops its processes):
    their results into `out`, and external.json naming each one's report and exit status."""
    external = {}
    for s in (s for s in args.scenarios if s in EXTERNAL):
        t = time.time()
        script, name = EXTERNAL[s]
        command = [os.path.join(BENCH, script), "--no-build", "--build-dir", args.build_dir, "--out", out] + g[s]
        with open(os.path.join(out, name + ".log"), "w") as log:
            code = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, check=False).returncode
        external[s] = {"command": " ".join(["bench/" + script] + command[1:]), "status": code,
                       "report": name + ".md", "csv": name + ".csv", "log": name + ".log"}
        print(f"  {s} ({script}) in {time.time() - t:.0f} s: exit {code}", file=sys.stderr)
    with open(os.path.join(out, "external.json"), "w") as f:
        json.dump(external, f, indent=2)
    return external


def main():
    args = parse_args()
    for tool in ("nginx", "protoc") + (("valgrind", "callgrind_control") if "instructions" in args.scenarios else ()):
        if shutil.which(tool) is None:
            print(f"bench/run: {tool} not found (scripts/setup --bench installs it)", file=sys.stderr)
            return 2
    build(args)
    g = grid(args)
    out = args.out or os.path.join(BENCH, "results", datetime.date.today().isoformat(),
                                   "suite-quick" if args.quick else "suite")
    os.makedirs(out, exist_ok=True)
    scratch = tempfile.mkdtemp(prefix="infergate-suite.")
    started, load_start = time.time(), open("/proc/loadavg").read().split()[:3]
    bench = Bench(g, scratch, args.build_dir)
    bench.keep_profiles = args.keep_profiles and os.path.abspath(args.keep_profiles)
    status = measure(bench, args.scenarios, out)
    if status != 0:
        print(f"bench/run: logs kept in {scratch}", file=sys.stderr)
        return status
    shutil.rmtree(scratch, ignore_errors=True)
    external = run_external(args, g, out)
    if any(e["status"] not in (0, 1) for e in external.values()):
        print("bench/run: a scenario script failed; its log is in " + out, file=sys.stderr)
        return 2
    meta = {"command": "bench/run" + "".join(" " + a for a in sys.argv[1:]),
            "machine": f"{os.cpu_count()} vCPU {cpu_model()}",
            "load_start": " ".join(load_start), "load_end": " ".join(open("/proc/loadavg").read().split()[:3]),
            "started": datetime.datetime.fromtimestamp(started).isoformat(timespec="seconds"),
            "seconds": round(time.time() - started), "git": git_revision(args.build_dir), "quick": args.quick,
            "malloc": malloc_of(bench.infergate)}
    with open(os.path.join(out, "meta.json"), "w") as f:
        json.dump(meta, f, indent=2)
    report = subprocess.run([sys.executable, os.path.join(BENCH, "suite_report.py"), "summarize", out],
                            check=False)
    status = report.returncode
    print(f"bench/run: results in {out} ({meta['seconds']} s)", file=sys.stderr)
    if args.compare and status in (0, 1):
        compared = subprocess.run([sys.executable, os.path.join(BENCH, "suite_report.py"), "compare",
                                   os.path.join(out, "summary.json"), args.compare]
                                  + (["--all"] if args.compare_all else []), check=False)
        status = max(status, compared.returncode)
    return status


if __name__ == "__main__":
    sys.exit(main())
