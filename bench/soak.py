#!/usr/bin/python3
"""bench/soak's driver: a steady mixed load on a gateway for a long time, with reloads and
upstream restarts, watching its memory, descriptors and answers.

Run with Debian's /usr/bin/python3 (python3-grpcio, python3-protobuf, python3-numpy,
python3-matplotlib; the gRPC stubs come from tests/e2e/grpc_stubs.py).

  soak.py --infergate BIN --out DIR [--duration 1800] [--reload-every 60]
      [--restart-every 300] [--sample-every 5] [--warmup 120] [--load-scale 1]
      [--timeout 10] [--command TEXT]

Processes, on loopback:
  U  infergate serving builtin models (simple, identity_fp32, repeat_int32), 2 workers,
     client shared memory allowed for keys "/infergate_*" (it maps the gateway's pools and
     the client's region). Started on port 0 once; every restart binds the same ports.
  G  the gateway under test, 2 workers, two upstreams for the same U: `u-grpc` (U's gRPC
     address) and `u-http` (U's HTTP address), each `colocated: true` with a handoff pool
     (min_bytes 64 KiB), fast health checks and outlier ejection. Requests carrying
     `x-soak-upstream: http` (header or gRPC metadata) go to u-http, the rest to u-grpc, so
     every client protocol meets both upstream protocols (passthrough and transcoding).

Load (threads of this process, each paced at its own rate, x --load-scale; every other
request to each upstream):
  http_json     simple, HTTP JSON                                 50/s
  http_binary   simple, HTTP binary-tensor in and out             50/s
  grpc_infer    simple, gRPC ModelInfer                           50/s
  grpc_stream   simple, 8 requests per gRPC ModelStreamInfer       6 streams/s
  sse           repeat_int32, HTTP generate_stream, u-http only   15/s (the generate
                extension needs an HTTP upstream)
  handoff_http  identity_fp32 [1,65536] (256 KiB), binary: pools  15/s
  handoff_grpc  the same over gRPC ModelInfer: pools              10/s
  client_shm    identity_fp32 [1,32768] in and out of the
                client's own region, HTTP JSON                    10/s
Every answer is compared with what the model must return, each request has a deadline of
--timeout seconds. Each request ends as one of:
  correct     the expected answer
  wrong       another answer: a wrong value, or an error that is not an upstream refusal,
              or an upstream refusal outside a restart window
  unanswered  no answer within the deadline, or a broken connection to G
  refused     HTTP 502/503 with {"error": ...}, gRPC UNAVAILABLE, or an in-band stream
              error naming the upstream, on a request that overlaps a restart window:
              [SIGTERM to U, G routing to U again + 1 s]

Every --reload-every s G's config file is rewritten with a small real change (the routes'
timeout_ms toggles between 8000 and 9000, an unused route comes and goes) and reloaded, in
turn by SIGHUP, by the file watch alone and by POST /admin/reload; it took when
/admin/routes shows the new generation and timeouts. Every --restart-every s U gets SIGTERM,
is waited for and started again on the same ports. Every --sample-every s: G's VmRSS
(RssAnon, RssShmem), open descriptors, threads, and the counts so far.

Targets: 0 wrong, 0 unanswered; G's VmRSS at the end (median of the last 3 samples) within
5% of its VmRSS after the warm-up (median of the first 3 samples from --warmup on). Checks:
every reload took, U routable again after every restart, the pools used, G and U exit 0 on
SIGTERM, no client hung, G's pools unlinked.

Writes DIR/soak.csv, soak_events.csv, soak.png and soak.md. Exit status: 0 every target
met, 1 one missed, 2 setup error.
"""
import argparse
import collections
import csv
import datetime
import http.client
import importlib.util
import json
import math
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

from infergate_process import InfergateProcess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HEADER = "x-soak-upstream"
MIN_BYTES = 65536
POOL_BYTES = 33554432
HANDOFF_ELEMENTS = 65536   # FP32: 256 KiB, above MIN_BYTES
SHM_ELEMENTS = 32768       # FP32: 128 KiB each way in the client's region
STREAM_LENGTH = 8
RESTART_GRACE_S = 1.0
RSS_TARGET_PERCENT = 5.0
RSS_SPAN = 3  # samples whose median is the RSS after the warm-up, and at the end
TIMEOUTS_MS = (8000, 9000)  # the routes' timeout_ms, toggled by the reloads
RELOAD_TRIGGERS = ("SIGHUP", "file watch", "POST /admin/reload")

# kind -> requests (streams for grpc_stream) per second at --load-scale 1
RATES = {"http_json": 50, "http_binary": 50, "grpc_infer": 50, "grpc_stream": 6, "sse": 15,
         "handoff_http": 15, "handoff_grpc": 10, "client_shm": 10}

UPSTREAM_CONFIG = """\
listeners:
  http:    {{ address: "127.0.0.1:{http}" }}
  grpc:    {{ address: "127.0.0.1:{grpc}" }}
  metrics: {{ address: "127.0.0.1:0" }}
workers: 2
upstreams:
  - name: demo
    protocol: builtin
    models: [simple, identity_fp32, repeat_int32]
routes:
  - match: {{ model: "*" }}
    upstream: demo
shm: {{ enabled: true, allowed_key_prefixes: ["/infergate_"] }}
"""

GATEWAY_UPSTREAM = """\
  - name: {name}
    protocol: {protocol}
    endpoints: ["127.0.0.1:{port}"]
    colocated: true
    handoff: {{ min_bytes: {min_bytes}, pool_bytes: {pool_bytes}, kind: system }}
    health_check: {{ interval_ms: 250, timeout_ms: 500, healthy_threshold: 1, unhealthy_threshold: 1 }}
    outlier: {{ consecutive_failures: 2, base_ejection_ms: 250, max_ejection_ms: 1000 }}
    retry: {{ max_retries: 2 }}
"""

GATEWAY_ROUTES = """\
  - name: via-http
    match: {{ model: "*", headers: {{ {header}: http }} }}
    upstream: u-http
    timeout_ms: {timeout}
  - name: via-grpc
    match: {{ model: "*" }}
    upstream: u-grpc
    timeout_ms: {timeout}
"""

UNUSED_ROUTE = """\
  - name: unused-{n}
    match: {{ model: soak-unused-{n} }}
    upstream: u-grpc
"""

GATEWAY_HEAD = """\
# bench/soak's gateway, change {change}
listeners:
  http:    { address: "127.0.0.1:0" }
  grpc:    { address: "127.0.0.1:0" }
  metrics: { address: "127.0.0.1:0" }
workers: 2
shm: { enabled: true, allowed_key_prefixes: ["/infergate_"] }
lifecycle: { watch_config: true, watch_interval_ms: 1000 }
"""


def gateway_config(u_http, u_grpc, change):
    """G's config text; `change` (0, 1, ...) picks the routes' timeout and the unused route."""
    upstreams = "".join(GATEWAY_UPSTREAM.format(name=name, protocol=protocol, port=port,
                                                min_bytes=MIN_BYTES, pool_bytes=POOL_BYTES)
                        for name, protocol, port in (("u-grpc", "grpc", u_grpc),
                                                     ("u-http", "http", u_http)))
    routes = UNUSED_ROUTE.format(n=change) if change % 2 else ""
    routes += GATEWAY_ROUTES.format(header=HEADER, timeout=route_timeout(change))
    return (GATEWAY_HEAD.replace("{change}", str(change)) + "upstreams:\n" + upstreams +
            "routes:\n" + routes)


def route_timeout(change):
    return TIMEOUTS_MS[change % 2]


def write_atomically(path, text):
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


class SetupError(Exception):
    pass


# ---- processes ----------------------------------------------------------------------------

def start_infergate(binary, label, config_text, scratch):
    path = os.path.join(scratch, label + ".yaml")
    write_atomically(path, config_text)
    p = InfergateProcess(binary, label, path, scratch, keep_stdout=True)
    if not p.wait_ready():
        p.stop(5)
        return None
    return p


def proc_status(pid):
    """VmRSS, RssAnon, RssShmem (KiB) and Threads of a live process."""
    fields = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "RssAnon", "RssShmem", "Threads"):
                fields[key] = int(value.split()[0])
    return fields


def cpu_seconds(pid):
    """User + system CPU time of a live process so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def open_fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


# ---- admin API and metrics ----------------------------------------------------------------

def http_get(port, path, method="GET", timeout=5):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request(method, path)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def admin(port, path):
    status, body = http_get(port, path)
    if status != 200:
        raise RuntimeError(f"{path}: HTTP {status}")
    return json.loads(body)


def reload_counts(port):
    """infergate_config_reloads_total by result, from G's /metrics."""
    _, body = http_get(port, "/metrics")
    counts = {"success": 0, "failure": 0}
    for line in body.decode().splitlines():
        if line.startswith("infergate_config_reloads_total{"):
            for result in counts:
                if f'result="{result}"' in line:
                    counts[result] = int(float(line.rsplit(" ", 1)[1]))
    return counts


def routable(upstreams_json):
    """Whether both upstreams' endpoint is healthy, routable and has its pool registered."""
    for u in upstreams_json["upstreams"]:
        for e in u.get("endpoints", []):
            handoff = e.get("handoff", {})
            if e["health"] != "healthy" or not e["routable"] or not handoff.get("pool_ready"):
                return False
    return True


def handoff_counters(upstreams_json):
    """{upstream name: its endpoint's handoff counters}."""
    return {u["name"]: e.get("handoff", {})
            for u in upstreams_json["upstreams"] for e in u.get("endpoints", [])}


# ---- the tally ----------------------------------------------------------------------------

class Tally:
    """Every request's outcome, by kind, and the restart windows that decide whether an
    upstream refusal is expected. Thread-safe."""

    OUTCOMES = ("correct", "wrong", "unanswered", "refused")

    def __init__(self, timeout):
        self.timeout = timeout
        self.lock = threading.Lock()
        self.sent = collections.Counter()
        self.counts = collections.defaultdict(collections.Counter)  # kind -> outcome -> n
        self.windows = []  # [start, end]; end = inf while U is restarting
        self.window_refused = collections.Counter()
        self.refusal_messages = collections.Counter()
        self.failures = []  # the first ones: (t, kind, outcome, detail)
        self.failure_kinds = collections.Counter()  # "unanswered", "wrong: ...": n
        self.zero = time.monotonic()

    def start(self, kind, n=1):
        with self.lock:
            self.sent[kind] += n

    def open_window(self, start):
        with self.lock:
            self.windows.append([start, math.inf])
            return len(self.windows) - 1

    def close_window(self, index, end):
        with self.lock:
            self.windows[index][1] = end

    def _window_of(self, t0, t1):
        for i, (start, end) in enumerate(self.windows):
            if t1 >= start and t0 <= end:
                return i
        return None

    def record(self, kind, t0, t1, outcome, detail=""):
        """outcome: correct, wrong, unanswered, or "error" (an upstream refusal: refused
        inside a restart window, wrong outside)."""
        if outcome == "correct" and t1 - t0 > self.timeout:
            outcome, detail = "unanswered", f"answered after {t1 - t0:.1f} s"
        with self.lock:
            if outcome == "error":
                window = self._window_of(t0, t1)
                if window is not None:
                    self.window_refused[window] += 1
                    self.refusal_messages[detail[:160]] += 1
                    self.counts[kind]["refused"] += 1
                    return
                outcome, detail = "wrong", "upstream refusal outside a restart: " + detail
            self.counts[kind][outcome] += 1
            if outcome != "correct":
                self._failure(kind, t1, outcome, detail)

    def _failure(self, kind, t1, outcome, detail):
        if outcome == "unanswered":
            self.failure_kinds["unanswered"] += 1
        elif detail.startswith("upstream refusal outside"):
            self.failure_kinds["wrong: an upstream refusal outside a restart window"] += 1
        elif detail.startswith("error "):
            self.failure_kinds["wrong: another error answer"] += 1
        else:
            self.failure_kinds["wrong: a wrong answer"] += 1
        if len(self.failures) < 50:
            self.failures.append((t1 - self.zero, kind, outcome, detail[:400]))

    def totals(self):
        with self.lock:
            total = collections.Counter()
            for c in self.counts.values():
                total.update(c)
            return {o: total[o] for o in self.OUTCOMES}


# ---- requests and their expected answers --------------------------------------------------

def simple_inputs(rng):
    a = [rng.randrange(-100000, 100000) for _ in range(16)]
    b = [rng.randrange(-100000, 100000) for _ in range(16)]
    return a, b, {"OUTPUT0": [x + y for x, y in zip(a, b)],
                  "OUTPUT1": [x - y for x, y in zip(a, b)]}


def int32_bytes(values):
    return np.asarray(values, dtype="<i4").tobytes()


def fp32_tensor(rng, n):
    return (np.arange(n, dtype="<f4") * np.float32(0.5) + np.float32(rng.randrange(1 << 20)))


def is_error_json(body):
    try:
        doc = json.loads(body)
    except ValueError:
        return False
    return isinstance(doc, dict) and isinstance(doc.get("error"), str)


class Http:
    """One keep-alive connection to G's HTTP listener; reopened after a failure."""

    def __init__(self, port, timeout):
        self.port, self.timeout = port, timeout
        self.conn = None

    def post(self, path, body, headers):
        if self.conn is None:
            self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout)
        try:
            self.conn.request("POST", path, body=body, headers=headers)
            response = self.conn.getresponse()
            data = response.read()
        except Exception:
            self.close()
            raise
        if response.will_close:
            self.close()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, data

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def http_outcome(call, check):
    """Sends with `call()` -> (status, headers, body), judges with check(headers, body) -> ""
    or why it is wrong. Returns (outcome, detail)."""
    try:
        status, headers, body = call()
    except (socket.timeout, TimeoutError):
        return "unanswered", "no answer within the deadline"
    except (OSError, http.client.HTTPException) as e:
        return "unanswered", f"connection to G: {type(e).__name__}: {e}"
    if status in (502, 503) and is_error_json(body):
        return "error", f"HTTP {status}: {json.loads(body)['error']}"
    if status != 200:
        return "wrong", f"error HTTP {status}: {body[:300]!r}"
    try:
        why = check(headers, body)
    except (ValueError, KeyError, TypeError, IndexError) as e:
        why = f"answer does not parse: {type(e).__name__}: {e}: {body[:200]!r}"
    return ("wrong", why) if why else ("correct", "")


def binary_outputs(headers, body):
    """(the JSON header, {name: (output JSON, its binary section or None)}) of an HTTP
    answer, binary-tensor or plain JSON."""
    hlen = headers.get("inference-header-content-length")
    header = json.loads(body[:int(hlen)] if hlen is not None else body)
    offset = int(hlen) if hlen is not None else len(body)
    outputs = {}
    for o in header["outputs"]:
        size = (o.get("parameters") or {}).get("binary_data_size")
        section = None
        if size is not None:
            section = body[offset:offset + size]
            offset += size
        outputs[o["name"]] = (o, section)
    if offset != len(body):
        raise ValueError(f"{len(body) - offset} bytes past the binary sections")
    return header, outputs


def check_tensor(name, out, datatype, shape):
    if out.get("datatype") != datatype or list(out.get("shape", [])) != shape:
        return f"{name} is {out.get('datatype')} {out.get('shape')}, expected {datatype} {shape}"
    return ""


# ---- clients ------------------------------------------------------------------------------

class Worker(threading.Thread):
    """One kind of request, one after another, paced at `rate` per second."""

    kind = ""

    def __init__(self, soak, rate, seed):
        super().__init__(daemon=True, name=self.kind)
        self.soak, self.tally, self.rate = soak, soak.tally, rate
        self.rng = random.Random(seed)
        self.n = 0

    def run(self):
        period = 1.0 / self.rate
        due = time.monotonic()
        while not self.soak.stopping.wait(max(0.0, due - time.monotonic())):
            self.once()
            self.n += 1
            due = max(due + period, time.monotonic() - period)
        self.close()

    def upstream(self):
        """Every other request to u-http."""
        return "http" if self.n % 2 else "grpc"

    def headers(self, content_type="application/json"):
        h = {"Content-Type": content_type}
        if self.upstream() == "http":
            h[HEADER] = "http"
        return h

    def metadata(self):
        return ((HEADER, "http"),) if self.upstream() == "http" else ()

    def judge(self, call, check):
        self.tally.start(self.kind)
        t0 = time.monotonic()
        outcome, detail = http_outcome(call, check)
        self.tally.record(self.kind, t0, time.monotonic(), outcome,
                          f"{detail} (to u-{self.upstream()})" if detail else "")

    def close(self):
        pass


class HttpWorker(Worker):
    """A worker with its own keep-alive connection to G's HTTP listener."""

    def __init__(self, soak, rate, seed):
        super().__init__(soak, rate, seed)
        self.http = Http(soak.g_http, soak.args.timeout)

    def close(self):
        self.http.close()


class HttpJson(HttpWorker):
    kind = "http_json"

    def once(self):
        a, b, want = simple_inputs(self.rng)
        rid = f"j{self.n}"
        body = json.dumps({"id": rid, "inputs": [
            {"name": "INPUT0", "shape": [1, 16], "datatype": "INT32", "data": a},
            {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32", "data": b}]})

        def check(headers, data):
            doc = json.loads(data)
            if doc.get("id") != rid or doc.get("model_name") != "simple":
                return f"id {doc.get('id')!r} model {doc.get('model_name')!r}, sent {rid!r} simple"
            outs = {o["name"]: o for o in doc["outputs"]}
            for name, values in want.items():
                o = outs.get(name, {})
                why = check_tensor(name, o, "INT32", [1, 16])
                if why or o.get("data") != values:
                    return why or f"{name} = {o.get('data')}, expected {values}"
            return ""

        self.judge(lambda: self.http.post("/v2/models/simple/infer", body, self.headers()), check)


class HttpBinary(HttpWorker):
    kind = "http_binary"

    def once(self):
        a, b, want = simple_inputs(self.rng)
        header = json.dumps({"inputs": [
            {"name": n, "shape": [1, 16], "datatype": "INT32",
             "parameters": {"binary_data_size": 64}} for n in ("INPUT0", "INPUT1")],
            "outputs": [{"name": n, "parameters": {"binary_data": True}}
                        for n in ("OUTPUT0", "OUTPUT1")]}).encode()
        body = header + int32_bytes(a) + int32_bytes(b)
        headers = self.headers("application/octet-stream")
        headers["Inference-Header-Content-Length"] = str(len(header))

        def check(response_headers, data):
            _, outs = binary_outputs(response_headers, data)
            for name, values in want.items():
                o, section = outs.get(name, ({}, None))
                why = check_tensor(name, o, "INT32", [1, 16])
                if why or section != int32_bytes(values):
                    return why or f"{name}'s binary section differs from {values}"
            return ""

        self.judge(lambda: self.http.post("/v2/models/simple/infer", body, headers), check)


class HandoffHttp(HttpWorker):
    """identity_fp32 with a tensor above min_bytes, binary in and out: the handoff pool."""
    kind = "handoff_http"

    def once(self):
        tensor = fp32_tensor(self.rng, HANDOFF_ELEMENTS).tobytes()
        header = json.dumps({"inputs": [
            {"name": "INPUT0", "shape": [1, HANDOFF_ELEMENTS], "datatype": "FP32",
             "parameters": {"binary_data_size": len(tensor)}}],
            "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": True}}]}).encode()
        headers = self.headers("application/octet-stream")
        headers["Inference-Header-Content-Length"] = str(len(header))

        def check(response_headers, data):
            _, outs = binary_outputs(response_headers, data)
            o, section = outs.get("OUTPUT0", ({}, None))
            why = check_tensor("OUTPUT0", o, "FP32", [1, HANDOFF_ELEMENTS])
            if why or section != tensor:
                return why or "OUTPUT0's binary section differs from the input"
            return ""

        self.judge(lambda: self.http.post("/v2/models/identity_fp32/infer", header + tensor,
                                          headers), check)


class Sse(HttpWorker):
    """repeat_int32 through generate_stream: three events, OUT = IN[i], IDX = i."""
    kind = "sse"

    def upstream(self):
        return "http"  # the generate extension needs an HTTP (or builtin) upstream

    def once(self):
        values = [self.rng.randrange(-1000000, 1000000) for _ in range(3)]
        body = json.dumps({"IN": values, "DELAY": [0, 0, 0], "WAIT": [0]})

        def check(headers, data):
            if not headers.get("content-type", "").startswith("text/event-stream"):
                return f"content-type {headers.get('content-type')!r}"
            events = [json.loads(e[len(b"data: "):]) for e in data.split(b"\n\n") if e.strip()]
            errors = [e["error"] for e in events if "error" in e]
            if errors:
                raise StreamError(errors[0])
            got = [(e.get("OUT"), e.get("IDX")) for e in events]
            want = [(v, i) for i, v in enumerate(values)]
            return "" if got == want else f"events (OUT, IDX) {got}, expected {want}"

        def call():
            return self.http.post("/v2/models/repeat_int32/generate_stream", body, self.headers())

        self.tally.start(self.kind)
        t0 = time.monotonic()
        try:
            outcome, detail = http_outcome(call, check)
        except StreamError as e:
            outcome, detail = "error", f"in-stream error event: {e}"
        self.tally.record(self.kind, t0, time.monotonic(), outcome, detail)


class StreamError(Exception):
    pass


class ClientShm(HttpWorker):
    """identity_fp32 whose input and output live in the client's own region (registered
    at G; G registers it at U and passes it by reference)."""
    kind = "client_shm"

    def __init__(self, soak, rate, seed):
        super().__init__(soak, rate, seed)
        self.region = soak.region
        self.size = SHM_ELEMENTS * 4

    def once(self):
        tensor = fp32_tensor(self.rng, SHM_ELEMENTS).tobytes()
        buf = self.region.buf
        buf[:self.size] = tensor
        buf[self.size:2 * self.size] = b"\xff" * self.size
        name, s = self.soak.region_name, self.size
        body = json.dumps({"inputs": [
            {"name": "INPUT0", "shape": [1, SHM_ELEMENTS], "datatype": "FP32",
             "parameters": {"shared_memory_region": name, "shared_memory_byte_size": s,
                            "shared_memory_offset": 0}}],
            "outputs": [{"name": "OUTPUT0", "parameters": {
                "shared_memory_region": name, "shared_memory_byte_size": s,
                "shared_memory_offset": s}}]})

        def check(headers, data):
            doc = json.loads(data)
            o = {x["name"]: x for x in doc["outputs"]}.get("OUTPUT0", {})
            why = check_tensor("OUTPUT0", o, "FP32", [1, SHM_ELEMENTS])
            if why or "data" in o:
                return why or "OUTPUT0 answered inline as well as into the region"
            if bytes(buf[s:2 * s]) != tensor:
                return "the region's output half differs from the input"
            return ""

        self.judge(lambda: self.http.post("/v2/models/identity_fp32/infer", body,
                                          self.headers()), check)


class GrpcWorker(Worker):
    """A worker with its own channel to G's gRPC listener."""

    def __init__(self, soak, rate, seed):
        super().__init__(soak, rate, seed)
        import grpc  # pylint: disable=import-outside-toplevel
        self.grpc = grpc
        self.pb = soak.pb
        self.channel = grpc.insecure_channel(f"127.0.0.1:{soak.g_grpc}")
        self.stub = soak.pb_grpc.GRPCInferenceServiceStub(self.channel)

    def error_outcome(self, e):
        code, details = e.code(), e.details() or ""
        if code == self.grpc.StatusCode.DEADLINE_EXCEEDED:
            return "unanswered", f"{code.name}: {details}"
        if code == self.grpc.StatusCode.UNAVAILABLE:
            return "error", f"{code.name}: {details}"
        return "wrong", f"error {code.name}: {details}"

    def unary(self, request, check):
        self.tally.start(self.kind)
        t0 = time.monotonic()
        try:
            response = self.stub.ModelInfer(request, timeout=self.soak.args.timeout,
                                            metadata=self.metadata())
            why = check(response)
            outcome, detail = ("wrong", why) if why else ("correct", "")
        except self.grpc.RpcError as e:
            outcome, detail = self.error_outcome(e)
        self.tally.record(self.kind, t0, time.monotonic(), outcome,
                          f"{detail} (to u-{self.upstream()})" if detail else "")

    def close(self):
        self.channel.close()


def simple_request(pb, a, b, rid):
    req = pb.ModelInferRequest(model_name="simple", id=rid)
    for name, values in (("INPUT0", a), ("INPUT1", b)):
        t = req.inputs.add()
        t.name, t.datatype = name, "INT32"
        t.shape.extend([1, 16])
        req.raw_input_contents.append(int32_bytes(values))
    return req


def check_simple_response(response, want, rid):
    if response.id != rid or response.model_name != "simple":
        return f"id {response.id!r} model {response.model_name!r}, sent {rid!r} simple"
    got = {}
    for i, out in enumerate(response.outputs):
        why = check_tensor(out.name, {"datatype": out.datatype, "shape": list(out.shape)},
                           "INT32", [1, 16])
        if why:
            return why
        raw = response.raw_output_contents
        got[out.name] = (bytes(raw[i]) if i < len(raw)
                         else int32_bytes(list(out.contents.int_contents)))
    expected = {name: int32_bytes(values) for name, values in want.items()}
    return "" if got == expected else f"outputs {sorted(got)} differ from {want}"


class GrpcInfer(GrpcWorker):
    kind = "grpc_infer"

    def once(self):
        a, b, want = simple_inputs(self.rng)
        rid = f"g{self.n}"
        self.unary(simple_request(self.pb, a, b, rid),
                   lambda r: check_simple_response(r, want, rid))


class HandoffGrpc(GrpcWorker):
    kind = "handoff_grpc"

    def once(self):
        tensor = fp32_tensor(self.rng, HANDOFF_ELEMENTS).tobytes()
        req = self.pb.ModelInferRequest(model_name="identity_fp32")
        t = req.inputs.add()
        t.name, t.datatype = "INPUT0", "FP32"
        t.shape.extend([1, HANDOFF_ELEMENTS])
        req.raw_input_contents.append(tensor)

        def check(response):
            outs = list(response.outputs)
            if [o.name for o in outs] != ["OUTPUT0"] or len(response.raw_output_contents) != 1:
                return f"outputs {[o.name for o in outs]}, expected OUTPUT0 in raw contents"
            why = check_tensor("OUTPUT0", {"datatype": outs[0].datatype,
                                           "shape": list(outs[0].shape)},
                               "FP32", [1, HANDOFF_ELEMENTS])
            if why or bytes(response.raw_output_contents[0]) != tensor:
                return why or "OUTPUT0 differs from the input"
            return ""

        self.unary(req, check)


class GrpcStream(GrpcWorker):
    """STREAM_LENGTH simple requests on one ModelStreamInfer, answers matched by id."""
    kind = "grpc_stream"

    def once(self):
        expected, requests = {}, []
        for i in range(STREAM_LENGTH):
            a, b, want = simple_inputs(self.rng)
            rid = f"s{self.n}-{i}"
            expected[rid] = want
            requests.append(simple_request(self.pb, a, b, rid))
        self.tally.start(self.kind, len(requests))
        t0 = time.monotonic()
        pending = dict(expected)
        try:
            for r in self.stub.ModelStreamInfer(iter(requests), timeout=self.soak.args.timeout,
                                                metadata=self.metadata()):
                self.answer(r, pending, t0)
            tail = ("unanswered", "the stream ended without this answer")
        except self.grpc.RpcError as e:
            tail = self.error_outcome(e)
        for _ in pending:
            self.tally.record(self.kind, t0, time.monotonic(), tail[0],
                              f"{tail[1]} (to u-{self.upstream()})")

    def answer(self, r, pending, t0):
        rid = r.infer_response.id
        if rid not in pending:
            if not r.error_message or not pending:
                self.tally.record(self.kind, t0, time.monotonic(), "wrong",
                                  f"an extra answer, id {rid!r}: {r.error_message or 'data'}")
                return
            rid = next(iter(pending))  # an in-band error without the id: the oldest open
        want = pending.pop(rid)
        if r.error_message:
            refusal = upstream_refusal(r.error_message)
            outcome = "error" if refusal else "wrong"
            detail = f"{'' if refusal else 'error '}in-band: {r.error_message}"
        else:
            why = check_simple_response(r.infer_response, want, rid)
            outcome, detail = ("wrong", why) if why else ("correct", "")
        self.tally.record(self.kind, t0, time.monotonic(), outcome,
                          f"{detail} (to u-{self.upstream()})" if detail else "")


def upstream_refusal(message):
    text = message.lower()
    return "upstream" in text or "unavailable" in text


WORKERS = {"http_json": HttpJson, "http_binary": HttpBinary, "grpc_infer": GrpcInfer,
           "grpc_stream": GrpcStream, "sse": Sse, "handoff_http": HandoffHttp,
           "handoff_grpc": HandoffGrpc, "client_shm": ClientShm}


# ---- the soak -----------------------------------------------------------------------------

def load_stubs():
    spec = importlib.util.spec_from_file_location(
        "grpc_stubs", os.path.join(ROOT, "tests", "e2e", "grpc_stubs.py"))
    grpc_stubs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(grpc_stubs)
    pb, pb_grpc, _, _ = grpc_stubs.load()
    return pb, pb_grpc, os.path.dirname(os.path.abspath(pb.__file__))


class Soak:
    def __init__(self, args, scratch):
        self.args, self.scratch = args, scratch
        self.tally = Tally(args.timeout)
        self.stopping = threading.Event()
        self.u = self.g = None
        self.u_config = None
        self.change = 0
        self.samples = []   # dicts, CSV columns
        self.events = []    # (time_s, event, detail)
        self.restarts = []  # dicts
        self.reloads = []   # dicts
        self.workers = []
        self.sample_lock = threading.Lock()
        self.last_cpu = (0.0, 0.0)  # (time_s, G's CPU seconds) at the last sample
        self.region = None
        self.region_name = f"soak_{os.getpid()}"
        self.region_key = f"/infergate_soak_{os.getpid()}"
        self.t0 = None
        self.pb, self.pb_grpc, self.stubs_dir = load_stubs()

    def now(self):
        return time.monotonic() - self.t0

    # -- processes --
    def start_processes(self):
        self.u = start_infergate(self.args.infergate, "U", UPSTREAM_CONFIG.format(http=0, grpc=0),
                                 self.scratch)
        if self.u is None:
            raise SetupError(f"U did not start (see {self.scratch}/U.err)")
        self.u_http, self.u_grpc = self.u.port("http"), self.u.port("grpc")
        self.u_config = UPSTREAM_CONFIG.format(http=self.u_http, grpc=self.u_grpc)
        self.g_config = os.path.join(self.scratch, "G.yaml")
        self.g = start_infergate(self.args.infergate, "G",
                                 gateway_config(self.u_http, self.u_grpc, 0), self.scratch)
        if self.g is None:
            raise SetupError(f"G did not start (see {self.scratch}/G.err)")
        self.g_http, self.g_grpc = self.g.port("http"), self.g.port("grpc")
        self.g_metrics = self.g.port("metrics")
        if not self.wait_routable(30):
            raise SetupError(f"G never showed both upstreams healthy with their pools ready: "
                             f"{admin(self.g_metrics, '/admin/upstreams')}")

    def wait_routable(self, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if routable(admin(self.g_metrics, "/admin/upstreams")):
                    return True
            except (OSError, RuntimeError, ValueError):
                pass
            time.sleep(0.05)
        return False

    def register_region(self):
        from multiprocessing import resource_tracker, shared_memory  # pylint: disable=import-outside-toplevel
        size = 2 * SHM_ELEMENTS * 4
        self.region = shared_memory.SharedMemory(name=self.region_key.lstrip("/"), create=True,
                                                 size=size)
        resource_tracker.unregister(self.region._name, "shared_memory")  # pylint: disable=protected-access
        body = json.dumps({"key": self.region_key, "offset": 0, "byte_size": size})
        conn = http.client.HTTPConnection("127.0.0.1", self.g_http, timeout=10)
        conn.request("POST", f"/v2/systemsharedmemory/region/{self.region_name}/register", body,
                     {"Content-Type": "application/json"})
        response = conn.getresponse()
        data = response.read()
        conn.close()
        if response.status != 200:
            raise SetupError(f"registering the client region at G: HTTP {response.status} {data!r}")

    def release_region(self):
        if self.region is None:
            return
        self.region.close()
        try:
            os.unlink("/dev/shm/" + self.region_key.lstrip("/"))
        except FileNotFoundError:
            pass

    # -- the run --
    def run(self):
        self.t0 = time.monotonic()
        self.tally.zero = self.t0
        self.last_cpu = (0.0, cpu_seconds(self.g.pid))
        scale = self.args.load_scale
        for i, (kind, rate) in enumerate(RATES.items()):
            worker = WORKERS[kind](self, rate * scale, seed=1000 + i)
            self.workers.append(worker)
        for worker in self.workers:
            worker.start()
        self.sample()
        sampler = threading.Thread(target=self.sample_loop, daemon=True)
        sampler.start()
        self.schedule()
        self.stopping.set()
        sampler.join()
        for worker in self.workers:
            worker.join(self.args.timeout + 10)
        hung = [w.kind for w in self.workers if w.is_alive()]
        if hung:
            self.events.append((self.now(), "hung client", ",".join(hung)))

    def schedule(self):
        """Reloads and restarts, in order, until the end; the last sample at the end."""
        a = self.args
        next_reload, next_restart = a.reload_every, a.restart_every
        while True:
            due = min(next_reload, next_restart, a.duration)
            if self.stopping.wait(max(0.0, due - self.now())):
                return
            if due >= a.duration:
                self.sample()
                return
            if due == next_restart:
                self.guarded(self.restart_upstream)
                next_restart += a.restart_every
            else:
                self.guarded(self.reload)
                next_reload += a.reload_every

    def guarded(self, step):
        """A reload or restart; G not answering its admin API is an event, not a crash."""
        try:
            step()
        except (OSError, RuntimeError, ValueError, http.client.HTTPException) as e:
            self.events.append((round(self.now(), 2), "admin error",
                                f"{step.__name__}: {type(e).__name__}: {e}"))
            if self.g.proc.poll() is not None:
                self.g_died()

    def sample_loop(self):
        while not self.stopping.wait(self.args.sample_every - self.now() % self.args.sample_every):
            if self.now() < self.args.duration - 0.5 * self.args.sample_every:
                self.sample()

    def sample(self):
        with self.sample_lock:
            if self.g.proc.poll() is not None:
                self.g_died()
                return
            try:
                self.write_sample()
            except FileNotFoundError:  # G's /proc entry went: it is exiting
                self.g_died()

    def g_died(self):
        if not any(e[1] == "G exited" for e in self.events):
            self.g.proc.wait()
            self.events.append((round(self.now(), 2), "G exited", str(self.g.proc.returncode)))
        self.stopping.set()

    def write_sample(self):
        status = proc_status(self.g.pid)
        now, cpu = self.now(), cpu_seconds(self.g.pid)
        last_now, last_cpu = self.last_cpu
        self.last_cpu = (now, cpu)
        totals = self.tally.totals()
        row = {"time_s": round(self.now(), 2), "rss_kib": status["VmRSS"],
               "fds": open_fds(self.g.pid), "requests": sum(totals.values()),
               "wrong": totals["wrong"], "unanswered": totals["unanswered"],
               "refused": totals["refused"], "rss_anon_kib": status.get("RssAnon", 0),
               "rss_shmem_kib": status.get("RssShmem", 0), "threads": status["Threads"],
               "cpu_percent": round(100 * (cpu - last_cpu) / max(now - last_now, 1e-3), 1)}
        self.samples.append(row)
        self.soak_csv.writerow(row)
        self.soak_csv_file.flush()

    # -- reloads --
    def reload(self):
        before = admin(self.g_metrics, "/admin/routes")["generation"]
        counts = reload_counts(self.g_metrics)
        self.change += 1
        trigger = RELOAD_TRIGGERS[(self.change - 1) % len(RELOAD_TRIGGERS)]
        at = self.now()
        write_atomically(self.g_config, gateway_config(self.u_http, self.u_grpc, self.change))
        if trigger == "SIGHUP":
            os.kill(self.g.pid, signal.SIGHUP)
        elif trigger.startswith("POST"):
            http_get(self.g_metrics, "/admin/reload", method="POST", timeout=10)
        took = self.wait_reload(before)
        after = reload_counts(self.g_metrics)
        failed = after["failure"] - counts["failure"]
        ok = took is not None and failed == 0
        self.reloads.append({"at": at, "trigger": trigger, "took_s": took, "ok": ok,
                             "failed": failed})
        self.events.append((round(at, 2), "reload", f"{trigger}; " + (
            f"took in {took:.2f} s" if ok else f"NOT TAKEN ({failed} failed reloads)")))

    def wait_reload(self, before, timeout=10):
        """Seconds until /admin/routes shows a newer generation with this change's routes."""
        start = time.monotonic()
        want_unused = self.change % 2 == 1
        while time.monotonic() - start < timeout:
            routes = admin(self.g_metrics, "/admin/routes")
            timeouts = {r["timeout_ms"] for r in routes["routes"]
                        if r["match"]["model_kind"] == "any"}
            unused = any(r["match"]["model"].startswith("soak-unused-") for r in routes["routes"])
            if (routes["generation"] > before and timeouts == {route_timeout(self.change)}
                    and unused == want_unused):
                return time.monotonic() - start
            time.sleep(0.05)
        return None

    # -- restarts --
    def restart_upstream(self):
        record = {"at": self.now()}
        window = self.tally.open_window(time.monotonic())
        code = self.u.stop(timeout=30)
        record["exit"] = code
        record["stop_s"] = self.now() - record["at"]
        self.u = self.start_upstream_again()
        record["ready_s"] = self.now() - record["at"] if self.u else None
        readmitted = self.u is not None and self.wait_routable(30)
        record["readmit_s"] = self.now() - record["at"] if readmitted else None
        self.tally.close_window(window, time.monotonic() + RESTART_GRACE_S)
        record["window"] = window
        self.restarts.append(record)
        self.events.append((round(record["at"], 2), "restart", self.restart_text(record)))
        if self.u is None:
            raise SetupError(f"U did not start again on its ports (see {self.scratch}/U.err)")

    def start_upstream_again(self):
        """U on the same ports; a few tries while a port is still held (5 s)."""
        deadline = time.monotonic() + 5
        while True:
            u = start_infergate(self.args.infergate, "U", self.u_config, self.scratch)
            if u is not None or time.monotonic() > deadline:
                return u
            time.sleep(0.2)

    @staticmethod
    def restart_text(r):
        def secs(v):
            return "never" if v is None else f"{v:.2f} s"
        return (f"U exit {r['exit']} after {r['stop_s']:.2f} s; ready at {secs(r['ready_s'])}; "
                f"routable again at {secs(r['readmit_s'])}")

    # -- the end --
    def finish(self):
        """Stops G and U; the final admin state and exit statuses."""
        end = {}
        try:
            end["upstreams"] = admin(self.g_metrics, "/admin/upstreams")
            end["reload_counts"] = reload_counts(self.g_metrics)
        except (OSError, RuntimeError, ValueError) as e:
            end["admin_error"] = str(e)
        g_pid = self.g.pid
        end["g_exit"] = self.g.stop(timeout=30)
        end["u_exit"] = self.u.stop(timeout=30) if self.u else None
        end["pools_left"] = sorted(n for n in os.listdir("/dev/shm")
                                   if n.startswith(f"infergate_pool_{g_pid}_"))
        for name in end["pools_left"]:
            os.unlink("/dev/shm/" + name)
        self.release_region()
        return end


# ---- the report ---------------------------------------------------------------------------

CSV_COLUMNS = ["time_s", "rss_kib", "fds", "requests", "wrong", "unanswered", "refused",
               "rss_anon_kib", "rss_shmem_kib", "threads", "cpu_percent"]


def rss_growth(samples, warmup):
    """(baseline, end, growth %): baseline the median VmRSS of the first RSS_SPAN samples
    from the warm-up on, end that of the last RSS_SPAN (a sample taken during a restart's
    burst counts for less); each a dict {rss_kib, time_s} (the time of its middle sample)."""
    after = [s for s in samples if s["time_s"] >= warmup]
    if len(after) < 2:
        return None, None, None
    span = max(1, min(RSS_SPAN, len(after) // 2))

    def median_of(part):
        return {"rss_kib": float(np.median([s["rss_kib"] for s in part])),
                "time_s": part[len(part) // 2]["time_s"]}

    base, end = median_of(after[:span]), median_of(after[-span:])
    return base, end, 100.0 * (end["rss_kib"] - base["rss_kib"]) / base["rss_kib"]


def slope_per_hour(samples, warmup, field):
    """Least-squares slope of `field` over the samples after the warm-up, per hour."""
    after = [s for s in samples if s["time_s"] >= warmup]
    if len(after) < 3:
        return None
    t = np.array([s["time_s"] for s in after])
    y = np.array([s[field] for s in after], dtype=float)
    return float(np.polyfit(t, y, 1)[0] * 3600)


def plot(path, samples, events, args, title):
    import matplotlib  # pylint: disable=import-outside-toplevel
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
    fig, axes = plt.subplots(4, 1, figsize=(11, 10.5), sharex=True,
                             gridspec_kw={"height_ratios": [3, 2, 2, 2]})
    plot_rss(axes[0], samples, args)
    plot_parts(axes[1], samples)
    plot_counts(axes[2], samples)
    plot_rate(axes[3], samples)
    for ax in axes:
        mark_events(ax, events, args)
        ax.grid(True, alpha=0.3)
        ax.legend(loc="upper left", fontsize=8)
    axes[3].set_xlabel("minutes (dotted grey: reload; dashed red: upstream restart; "
                       "shaded: warm-up)")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def minutes(samples):
    return [s["time_s"] / 60 for s in samples]


def plot_rss(ax, samples, args):
    """VmRSS on its own scale, with the baseline after the warm-up and the target's limit."""
    ax.plot(minutes(samples), [s["rss_kib"] / 1024 for s in samples], label="VmRSS",
            color="tab:blue", marker=".", markersize=3)
    base, _, _ = rss_growth(samples, args.warmup)
    if base is not None:
        mib = base["rss_kib"] / 1024
        span = (args.warmup / 60, samples[-1]["time_s"] / 60)
        ax.hlines(mib, *span, color="tab:blue", linestyle=":", linewidth=1,
                  label=f"after warm-up ({mib:.1f} MiB)")
        limit = mib * (1 + RSS_TARGET_PERCENT / 100)
        ax.hlines(limit, *span, color="red", linestyle=":", linewidth=1,
                  label=f"+{RSS_TARGET_PERCENT:g}%: the target's limit ({limit:.1f} MiB)")
    ax.set_ylabel("G's VmRSS, MiB")


def plot_parts(ax, samples):
    t = minutes(samples)
    ax.plot(t, [s["rss_anon_kib"] / 1024 for s in samples], label="RssAnon (heap)",
            color="tab:blue")
    ax.plot(t, [s["rss_shmem_kib"] / 1024 for s in samples], label="RssShmem (pool pages)",
            color="tab:cyan", linestyle="--")
    ax.set_ylabel("MiB")
    ax.set_ylim(bottom=0)


def plot_counts(ax, samples):
    t = minutes(samples)
    ax.plot(t, [s["fds"] for s in samples], label="open fds", color="tab:green")
    ax.plot(t, [s["threads"] for s in samples], label="threads", color="tab:olive",
            linestyle="--")
    ax.set_ylabel("count")
    ax.set_ylim(bottom=0)


def plot_rate(ax, samples):
    """Answers per second between samples; refusals and failures, cumulative, on the right
    (a step rises over the interval in which they happened)."""
    t, answered = [], []
    for prev, s in zip(samples, samples[1:]):
        dt = s["time_s"] - prev["time_s"]
        if dt > 0:
            t.append(s["time_s"] / 60)
            answered.append((s["requests"] - prev["requests"]) / dt)
    ax.plot(t, answered, label="answers/s", color="tab:purple")
    ax.set_ylabel("answers per second")
    ax.set_ylim(0, max(answered, default=1) * 1.25)
    right = ax.twinx()
    right.step(minutes(samples), [s["refused"] for s in samples], where="pre",
               color="tab:orange", label="refused", linewidth=1)
    right.step(minutes(samples), [s["wrong"] + s["unanswered"] for s in samples], where="pre",
               color="red", label="wrong + unanswered", linewidth=1.5)
    right.set_ylabel("cumulative")
    rises = [(p, s) for p, s in zip(samples, samples[1:])
             if s["wrong"] + s["unanswered"] > p["wrong"] + p["unanswered"]]
    if rises:
        right.plot([(p["time_s"] + s["time_s"]) / 120 for p, s in rises],
                   [s["wrong"] + s["unanswered"] for _, s in rises], "x", color="red",
                   markersize=9, label="new wrong or unanswered in that interval")
    top = max(max(s["refused"], s["wrong"] + s["unanswered"]) for s in samples)
    right.set_ylim(0, max(1, top) * 1.25)
    right.legend(loc="upper right", fontsize=8)


def mark_events(ax, events, args):
    ax.axvspan(0, args.warmup / 60, color="grey", alpha=0.12)
    for at, kind, _ in events:
        if kind == "reload":
            ax.axvline(at / 60, color="grey", linestyle=":", linewidth=0.8)
        elif kind == "restart":
            ax.axvline(at / 60, color="red", linestyle="--", linewidth=1)


class Report:
    """soak.md: the targets, the totals, the events."""

    def __init__(self, soak, end, meta):
        self.soak, self.end, self.meta = soak, end, meta
        self.args = soak.args
        self.checks = []  # (name, measured, ok)

    def check(self, name, measured, ok):
        self.checks.append((name, measured, ok))

    def evaluate(self):
        """The targets, then the run's checks; whether all passed."""
        s, totals = self.soak, self.soak.tally.totals()
        self.check("wrong answers: 0", str(totals["wrong"]), totals["wrong"] == 0)
        self.check("unanswered requests: 0", str(totals["unanswered"]), totals["unanswered"] == 0)
        base, last, growth = rss_growth(s.samples, self.args.warmup)
        if growth is None:
            self.check(f"RSS growth after warm-up < {RSS_TARGET_PERCENT:g}%",
                       "too few samples after the warm-up", False)
        else:
            self.check(f"RSS growth after warm-up < {RSS_TARGET_PERCENT:g}%",
                       f"{growth:+.2f}% ({base['rss_kib'] / 1024:.1f} MiB at "
                       f"{base['time_s']:.0f} s -> {last['rss_kib'] / 1024:.1f} MiB at "
                       f"{last['time_s']:.0f} s; medians of {RSS_SPAN} samples)",
                       growth < RSS_TARGET_PERCENT)
        self.check_run()
        return all(ok for _, _, ok in self.checks)

    def check_run(self):
        """That the run was what it claims: reloads, restarts, pools, clean exits."""
        s = self.soak
        took = sum(1 for r in s.reloads if r["ok"])
        self.check("every reload took (new generation and routes in /admin/routes, no failed "
                   "reload)", f"{took} of {len(s.reloads)}", took == len(s.reloads))
        back = sum(1 for r in s.restarts if r["readmit_s"] is not None)
        self.check("U routable again after every restart (healthy, pool registered)",
                   f"{back} of {len(s.restarts)}", back == len(s.restarts))
        used = self.pool_bytes()
        self.check("the handoff pools were used", f"{used:,} bytes in through the pools",
                   used > 0)
        self.check("G exits 0 on SIGTERM at the end", str(self.end.get("g_exit")),
                   self.end.get("g_exit") == 0)
        u_codes = [r["exit"] for r in s.restarts] + [self.end.get("u_exit")]
        self.check("U exits 0 on every SIGTERM", ", ".join(map(str, u_codes)),
                   all(c == 0 for c in u_codes))
        died = [e for e in s.events if e[1] == "G exited"]
        self.check("G stayed up until the end", f"exited with {died[0][2]} at {died[0][0]:.0f} s"
                   if died else "yes", not died)
        admin_errors = [e for e in s.events if e[1] == "admin error"]
        self.check("G's admin API answered every reload and restart step",
                   admin_errors[0][2] if admin_errors else "yes", not admin_errors)
        hung = [e for e in s.events if e[1] == "hung client"]
        self.check("no client thread left hanging", hung[0][2] if hung else "none", not hung)
        pools = self.end.get("pools_left", [])
        self.check("G's pools unlinked at exit", ", ".join(pools) or "yes", not pools)

    def pool_bytes(self):
        counters = handoff_counters(self.end.get("upstreams", {"upstreams": []}))
        return sum(c.get("pool_bytes_in", 0) for c in counters.values())

    def markdown(self):
        passed = self.evaluate()
        out = self.header() + self.targets(passed) + self.totals_table() + self.over_time()
        out += self.restart_table() + self.reload_summary() + self.handoff_table()
        out += self.failure_list()
        return "\n".join(out) + "\n", passed

    def header(self):
        a, m = self.args, self.meta
        return [f"# Soak: {span_text(a.duration)} of mixed load with reloads and upstream "
                f"restarts ({m['machine']})", "",
                f"`{a.command}`; started {m['started']}; load average {m['load']}; "
                f"{m['build']}.", "",
                "U: infergate serving builtin `simple`, `identity_fp32`, `repeat_int32` (2 "
                "workers, client shm allowed). G: the gateway under test (2 workers), upstreams "
                "`u-grpc` and `u-http` (U's gRPC and HTTP addresses), each `colocated: true` "
                f"with a handoff pool (`min_bytes: {MIN_BYTES}`, `pool_bytes: {POOL_BYTES}`), "
                "health checks every 250 ms (thresholds 1), outlier ejection after 2 failures; "
                f"`{HEADER}: http` routes to u-http, the rest to u-grpc. Load at "
                f"--load-scale {a.load_scale:g}: " + ", ".join(
                    f"{k} {r * a.load_scale:g}/s" for k, r in RATES.items()) +
                f" (grpc_stream: streams of {STREAM_LENGTH}), every other request to each "
                f"upstream (sse: u-http only); each answer checked; deadline {a.timeout:g} s. "
                f"Reload every {a.reload_every:g} s (SIGHUP, file watch, POST /admin/reload in "
                f"turn), U restarted (SIGTERM, same ports) every {a.restart_every:g} s, a "
                f"sample every {a.sample_every:g} s, warm-up {a.warmup:g} s. Refused: an "
                "upstream refusal (HTTP 502/503 with an error body, gRPC UNAVAILABLE, an in-band "
                "upstream error) on a request overlapping [SIGTERM to U, U routable again + "
                f"{RESTART_GRACE_S:g} s]; outside that window the same answer counts as wrong.",
                ""]

    def targets(self, passed):
        out = ["## Targets", "", "| target | measured | |", "|---|---|---|"]
        out += [f"| {n} | {m} | {'PASS' if ok else '**MISS**'} |" for n, m, ok in self.checks]
        return out + ["", f"**{'PASS' if passed else 'MISS'}**", ""]

    def totals_table(self):
        tally = self.soak.tally
        out = ["## Requests", "", "| kind | sent | correct | wrong | unanswered | refused |",
               "|---|---:|---:|---:|---:|---:|"]
        for kind in list(RATES) + ["all"]:
            if kind == "all":
                c, sent = tally.totals(), sum(tally.sent.values())
            else:
                c, sent = tally.counts[kind], tally.sent[kind]
            out.append(f"| {kind} | {sent:,} | {c['correct']:,} | {c['wrong']:,} | "
                       f"{c['unanswered']:,} | {c['refused']:,} |")
        return out + ["", "Streams count each message; sent minus the four outcomes: requests "
                      "still open when the clients stopped (0 expected).", ""]

    def over_time(self):
        s, a = self.soak.samples, self.args
        if not s:
            return []
        after = [x for x in s if x["time_s"] >= a.warmup] or s
        rss_slope = slope_per_hour(s, a.warmup, "rss_kib")
        fd_slope = slope_per_hour(s, a.warmup, "fds")
        out = ["## G over time", "",
               "| | first sample | after warm-up | end | max after warm-up | trend after "
               "warm-up, per hour |", "|---|---:|---:|---:|---:|---:|"]
        for label, field, slope in (("VmRSS MiB", "rss_kib", rss_slope),
                                    ("RssAnon MiB", "rss_anon_kib", None),
                                    ("RssShmem MiB", "rss_shmem_kib", None),
                                    ("open fds", "fds", fd_slope), ("threads", "threads", None)):
            div = 1024 if field.endswith("kib") else 1
            vals = [x[field] / div for x in (s[0], after[0], s[-1])]
            top = max(x[field] for x in after) / div
            trend = "" if slope is None else f"{slope / div:+.2f}"
            out.append(f"| {label} | {vals[0]:,.1f} | {vals[1]:,.1f} | {vals[2]:,.1f} | "
                       f"{top:,.1f} | {trend} |")
        fds_max = max(x["fds"] for x in s)
        cpu = float(np.mean([x["cpu_percent"] for x in s[1:]])) if len(s) > 1 else 0.0
        return out + ["", f"Max open fds over the whole run: {fds_max}. G's CPU: {cpu:.0f}% of "
                      f"one core on average. Samples: {len(s)} (`soak.csv`); the plot: "
                      "`soak.png`.", ""]

    def restart_table(self):
        rs = self.soak.restarts
        if not rs:
            return []
        out = ["## Upstream restarts", "", "| at s | U exit | stop took s | ready after s | "
               "routable in G after s | refused |", "|---:|---:|---:|---:|---:|---:|"]
        for r in rs:
            out.append(f"| {r['at']:.0f} | {r['exit']} | {r['stop_s']:.2f} | "
                       f"{fmt(r['ready_s'])} | {fmt(r['readmit_s'])} | "
                       f"{self.soak.tally.window_refused[r['window']]} |")
        messages = self.soak.tally.refusal_messages.most_common(6)
        if messages:
            out += ["", "Most frequent refusals:", ""]
            out += [f"- {n} x `{m}`" for m, n in messages]
        return out + [""]

    def reload_summary(self):
        rs = self.soak.reloads
        if not rs:
            return []
        by = collections.Counter(r["trigger"] for r in rs)
        took = [r["took_s"] for r in rs if r["took_s"] is not None]
        counts = self.end.get("reload_counts", {})
        return ["## Reloads", "",
                f"{len(rs)} reloads ({', '.join(f'{k} {v}' for k, v in by.items())}); "
                f"{sum(r['ok'] for r in rs)} took, seen in /admin/routes after at most "
                f"{max(took, default=0):.2f} s. `infergate_config_reloads_total` at the end: "
                f"{counts.get('success', '?')} success, {counts.get('failure', '?')} failure "
                "(a SIGHUP or POST may be joined by the file watch's own reload).", ""]

    def handoff_table(self):
        counters = handoff_counters(self.end.get("upstreams", {"upstreams": []}))
        if not counters:
            return ["## Handoff", "", f"no admin state at the end: {self.end.get('admin_error')}",
                    ""]
        keys = ["pool_bytes_in", "pool_bytes_out", "passthrough_bytes", "inline_bytes",
                "pool_full", "inline_retries", "pool_registrations", "region_registrations",
                "refusals"]
        out = ["## Handoff (G's /admin/upstreams at the end)", "",
               "| upstream | " + " | ".join(keys) + " | tensors through the pool (in) |",
               "|---|" + "---:|" * (len(keys) + 1)]
        for name, c in sorted(counters.items()):
            tensors = c.get("pool_bytes_in", 0) // (HANDOFF_ELEMENTS * 4)
            out.append(f"| {name} | " + " | ".join(f"{c.get(k, 0):,}" for k in keys) +
                       f" | ~{tensors:,} |")
        return out + ["", f"A tensor is {HANDOFF_ELEMENTS * 4:,} bytes (handoff_http and "
                      "handoff_grpc); client_shm's region goes by reference (passthrough_bytes).",
                      ""]

    def failure_list(self):
        tally = self.soak.tally
        if not tally.failures:
            return []
        out = ["## Failures", "", ", ".join(f"{k}: {v}" for k, v in
                                             tally.failure_kinds.most_common()), "",
               "The first ones (s from the start, kind, outcome, detail):", ""]
        out += [f"- {t:.1f} s {kind} {outcome}: {detail}"
                for t, kind, outcome, detail in tally.failures[:20]]
        return out + [""]


def span_text(seconds):
    return f"{seconds:g} s" if seconds < 600 else f"{seconds / 60:.0f} min"


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def fmt(v):
    return "never" if v is None else f"{v:.2f}"


def meta_of(args):
    with open("/proc/cpuinfo") as f:
        model = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "?")
    return {"machine": f"{os.cpu_count()} vCPU {model}",
            "started": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
            "load_start": loadavg(),
            "build": build_text(args.infergate)}


def build_text(binary):
    built = datetime.datetime.fromtimestamp(os.path.getmtime(binary)).strftime("%Y-%m-%d %H:%M")
    rev = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                         capture_output=True, text=True).stdout.strip() or "?"
    text = f"{os.path.relpath(binary, ROOT)} built {built}, tree at {rev}"
    sources = [os.path.join(ROOT, d) for d in ("gateway", "shm", "codecs", "config", "routing")]
    newer = subprocess.run(["find", *sources, "-type", "f", "(", "-name", "*.cc", "-o", "-name",
                            "*.h", ")", "-newer", binary], capture_output=True,
                           text=True).stdout.split()
    if newer:
        text += (f" (**{len(newer)} source files changed after this build**, e.g. "
                 f"{os.path.relpath(newer[0], ROOT)})")
    return text


def write_outputs(soak, end, meta):
    a = soak.args
    meta["load"] = f"{meta['load_start']} at start, {loadavg()} at end"
    with open(os.path.join(a.out, "soak_events.csv"), "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["time_s", "event", "detail"])
        w.writerows(soak.events)
    md, passed = Report(soak, end, meta).markdown()
    with open(os.path.join(a.out, "soak.md"), "w") as f:
        f.write(md)
    totals = soak.tally.totals()
    _, _, growth = rss_growth(soak.samples, a.warmup)
    title = (f"infergate soak, {span_text(a.duration)}: {totals['correct']:,} correct, "
             f"{totals['wrong']} wrong, {totals['unanswered']} unanswered, "
             f"{totals['refused']} refused; RSS after warm-up "
             f"{'n/a' if growth is None else f'{growth:+.2f}%'}: "
             f"{'PASS' if passed else 'MISS'}")
    plot(os.path.join(a.out, "soak.png"), soak.samples, soak.events, a, title)
    return md, passed


# ---- main ---------------------------------------------------------------------------------

def run(args):
    os.makedirs(args.out, exist_ok=True)
    scratch = tempfile.mkdtemp(prefix="infergate-soak-")
    meta = meta_of(args)
    soak = Soak(args, scratch)
    # The samples go to the scratch directory as they come (kept there if the run fails)
    # and to --out with the rest once it got to its report.
    csv_path = os.path.join(scratch, "soak.csv")
    csv_file = open(csv_path, "w", newline="")
    soak.soak_csv_file = csv_file
    soak.soak_csv = csv.DictWriter(csv_file, CSV_COLUMNS, lineterminator="\n")
    soak.soak_csv.writeheader()
    end = None
    try:
        soak.start_processes()
        soak.register_region()
        print(f"soak: U pid {soak.u.pid}, G pid {soak.g.pid} (http {soak.g_http}, grpc "
              f"{soak.g_grpc}, metrics {soak.g_metrics}); {args.duration:g} s of load; logs in "
              f"{scratch}", file=sys.stderr, flush=True)
        soak.run()
        end = soak.finish()
    except SetupError as e:
        stop_quietly(soak)
        print(f"soak.py: {e}; logs kept in {scratch}", file=sys.stderr)
        return 2
    except BaseException:  # a bug here, Ctrl-C, SIGTERM: no process left behind
        stop_quietly(soak)
        print(f"soak.py: stopped; logs kept in {scratch}", file=sys.stderr)
        raise
    finally:
        csv_file.close()
        shutil.rmtree(soak.stubs_dir, ignore_errors=True)
    shutil.copy(csv_path, os.path.join(args.out, "soak.csv"))
    md, passed = write_outputs(soak, end, meta)
    print(md)
    print(f"written: {', '.join(os.path.join(args.out, n) for n in ('soak.csv', 'soak_events.csv', 'soak.png', 'soak.md'))}",
          file=sys.stderr)
    if passed:
        shutil.rmtree(scratch, ignore_errors=True)
    else:
        print(f"soak.py: logs kept in {scratch}", file=sys.stderr)
    return 0 if passed else 1


def stop_quietly(soak):
    soak.stopping.set()
    for worker in soak.workers:
        worker.join(soak.args.timeout + 5)
    for p in (soak.g, soak.u):
        if p is not None:
            p.stop(timeout=15)
    soak.release_region()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--infergate", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--duration", type=float, default=1800)
    parser.add_argument("--reload-every", type=float, default=60)
    parser.add_argument("--restart-every", type=float, default=300)
    parser.add_argument("--sample-every", type=float, default=5)
    parser.add_argument("--warmup", type=float, default=120)
    parser.add_argument("--load-scale", type=float, default=1.0)
    parser.add_argument("--timeout", type=float, default=10)
    parser.add_argument("--command", default="bench/soak")
    args = parser.parse_args()
    for name in ("duration", "reload_every", "restart_every", "sample_every", "load_scale",
                 "timeout"):
        if getattr(args, name) <= 0:
            parser.error(f"--{name.replace('_', '-')} must be above 0")
    if not 0 <= args.warmup < args.duration:
        parser.error("needs 0 <= --warmup < --duration")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
