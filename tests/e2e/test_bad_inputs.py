"""End-to-end: a corpus of malformed and hostile requests (bad_inputs.py), over HTTP and
gRPC, each with the answer it must get, and then the gateways still answer correctly,
hold no more file descriptors and no more memory than before the corpus.

  U         a builtin-only infergate, the upstream; client shm on for keys "/infergate_bad_"
            (the shared-memory cases are sent to it directly)
  G_local   builtin models in-process: decodes everything itself (max_input_bytes 1 MiB,
            for one decompression case)
  G_grpc    every model -> U over gRPC (HTTP bodies decoded and sent as ModelInfer; gRPC
            passed through)
  G_http    every model -> U over HTTP (HTTP bodies passed through; gRPC decoded and sent
            as binary-tensor /infer)

Each case is one subTest named after the case and the gateway; one test method per
family (test_01_... in order); test_zz_after_the_corpus comes last. A case's `why` (in the
failure message) names the rule that decides its expectation: PROTOCOL.md section, RFC,
or config/README.md.

Memory and descriptors. Before the corpus, setUpModule warms every process up: a few
hundred good and bad requests each (HTTP JSON, binary, framing errors on fresh
connections, gRPC unary and streams, shared memory), then the whole corpus once with its
answers not checked, so that allocator pools and size classes, parser buffers, upstream
connection pools and per-thread caches exist before the baseline (a leak still shows: a
second pass leaks again). It then records VmRSS and the open descriptors of each process,
with every connection of the test closed. After the corpus the same figures are read
again (polled for up to 10 s, closes being asynchronous): RSS within 10% of the warm
figure, descriptors back to it, except the keep-alive connections between a forwarder and
U, which its pool may open or close as it sees fit (at most POOL_SLACK more: a connection
leaked per request would be hundreds). BAD_INPUTS_TRACE=1 prints the figures after every
family.

Under AddressSanitizer freed blocks sit in a quarantine (256 MiB by default) before they
are reused, so RSS would keep growing with every request until the quarantine is full
and measure the quarantine, not the gateway. The processes started here get
quarantine_size_mb=8 (and a 64 KiB per-thread quarantine) appended to ASAN_OPTIONS unless
it is set already: small enough for the warm-up to fill it, big enough to still catch a
use after free of the recent past. Every process must exit 0 on SIGTERM without a
sanitizer report (LeakSanitizer included).

Run: INFERGATE_BIN=... python3 -m unittest -v test_bad_inputs
"""
import json
import os
import select
import socket
import struct
import sys
import threading
import time
import unittest

import grpc
import hpack
import numpy as np

import bad_inputs as B
import grpc_stubs
from harness import LOOPBACK_HEAD, Gateway, Processes, small_asan_quarantine, wait_until
from shm_helpers import ShmObjects

pb = None
PROCESSES = Processes()
GW = {}  # label -> Gateway
OBJECTS = ShmObjects("infergate_bad_%d_" % os.getpid())
SHM = {}  # "key", "small": the keys of the two objects; "objects": the ShmObject list
BASELINE = {}  # label -> {"rss": kB, "fds": n}
FIGURES = {}  # label -> after-corpus figures, printed at the end
COUNTS = {}  # family -> [cases, subtests]
STARTED = [0.0]
KNOWN_SEEN = set()  # (case, gateway) of the known findings that ran and still fail

LOCAL = LOOPBACK_HEAD + """limits:
  max_input_bytes: 1048576
upstreams:
  - { name: local, protocol: builtin }
routes:
  - match: { model: "*" }
    upstream: local
"""

FORWARDER = LOOPBACK_HEAD + """upstreams:
  - { name: u, protocol: $protocol, endpoints: ["$endpoint"], timeout_ms: 30000 }
routes:
  - match: { model: "*" }
    upstream: u
"""

U_SHM = """
shm:
  enabled: true
  allowed_key_prefixes: ["/infergate_bad_"]
  listeners: [http, grpc]
"""

MAX = 2 ** 31 - 1
CHANNEL_OPTIONS = [("grpc.max_send_message_length", MAX), ("grpc.max_receive_message_length", MAX),
                   ("grpc.max_metadata_size", 1 << 20)]
SERVICE = "/inference.GRPCInferenceService/"
# Pooled forwarder <-> U connections may differ by this many from the warm figure (one per
# worker and direction, say); a connection leaked per request would be hundreds.
POOL_SLACK = 4


# ---- module set-up -------------------------------------------------------------------------

def setUpModule():
    global pb
    STARTED[0] = time.time()
    pb = grpc_stubs.load()[0]
    with small_asan_quarantine():
        start_gateways()


def start_gateways():
    try:
        big = OBJECTS.make(4096, fill=0)
        small = OBJECTS.make(4096, fill=0)
        SHM.update(key=big.key, small=small.key, objects=[big, small])
        GW[B.U] = PROCESSES.start(B.U, Gateway.builtin_upstream(extra=U_SHM))
        GW[B.L] = PROCESSES.start(B.L, Gateway.from_template(LOCAL))
        GW[B.G] = PROCESSES.start(B.G, Gateway.from_template(FORWARDER, protocol="grpc",
                                                             endpoint=GW[B.U].address("grpc")))
        GW[B.H] = PROCESSES.start(B.H, Gateway.from_template(FORWARDER, protocol="http",
                                                             endpoint=GW[B.U].address("http")))
        status, _, body = http_request(B.U, "POST", "/v2/systemsharedmemory/region/bad_r/register",
                                       B.dumps({"key": SHM["key"], "byte_size": 256}))
        assert status == 200, body
        warm_up()
        corpus_pass()
        status, _, body = http_request(B.U, "POST", "/v2/systemsharedmemory/unregister")
        assert status == 200, body
        status, _, body = http_request(B.U, "POST", "/v2/systemsharedmemory/region/bad_r/register",
                                       B.dumps({"key": SHM["key"], "byte_size": 256}))
        assert status == 200, body
        close_channels()
        for label in GW:
            BASELINE[label] = settled_figures(label)
    except BaseException:
        _tear_down()
        raise


def _tear_down():
    close_channels()
    problems = PROCESSES.stop_all()
    for obj in SHM.get("objects", []):
        obj.close()
    left = OBJECTS.remove_left()
    if left:
        problems.append("shared-memory objects left in /dev/shm: %s" % left)
    return problems


def tearDownModule():
    problems = _tear_down()
    report()
    assert not problems, "\n".join(problems)


def report():
    """The figures of the run, on stderr (the corpus size per family, RSS and fds)."""
    lines = ["", "test_bad_inputs: %.1f s" % (time.time() - STARTED[0])]
    total = [0, 0]
    for family, (cases, subtests) in sorted(COUNTS.items()):
        lines.append("  %-32s %4d cases %5d requests" % (family, cases, subtests))
        total[0] += cases
        total[1] += subtests
    lines.append("  %-32s %4d cases %5d requests" % ("total", total[0], total[1]))
    lines.append("  known findings still open (bad_inputs.KNOWN): %d of %d requests"
                 % (len(KNOWN_SEEN), total[1]))
    for label in GW:
        base, after = BASELINE.get(label), FIGURES.get(label)
        if base and after:
            lines.append("  %-8s RSS %d -> %d kB (%+.1f%%), fds %d -> %d (pooled with U: %d -> %d)" % (
                label, base["rss"], after["rss"], 100.0 * (after["rss"] - base["rss"]) / base["rss"],
                base["fds"], after["fds"], base["pool"], after["pool"]))
    sys.stderr.write("\n".join(lines) + "\n")


# ---- process figures --------------------------------------------------------------------------

def rss_kb(label):
    with open("/proc/%d/status" % GW[label].proc.pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def fds(label):
    path = "/proc/%d/fd" % GW[label].proc.pid
    out = []
    for name in os.listdir(path):
        try:
            out.append(os.readlink(os.path.join(path, name)))
        except OSError:
            pass
    return out


def tcp_endpoints():
    """socket inode -> (local port, remote port, state) for every TCP socket."""
    table = {}
    states = {"01": "ESTABLISHED", "0A": "LISTEN", "08": "CLOSE_WAIT", "06": "TIME_WAIT"}
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(name) as f:
                next(f)
                for line in f:
                    parts = line.split()
                    local, remote, state, inode = parts[1], parts[2], parts[3], parts[9]
                    table[inode] = (int(local.rsplit(":", 1)[1], 16), int(remote.rsplit(":", 1)[1], 16),
                                    states.get(state, state))
        except OSError:
            pass
    return table


def sockets_of(label, table):
    """[(local port, remote port, state)] of the TCP sockets of a process."""
    out = []
    for target in fds(label):
        if target.startswith("socket:[") and target[8:-1] in table:
            out.append(table[target[8:-1]])
    return out


def descriptor_figures(label):
    """The open descriptors of a process: "own" (files, listeners, eventfds, client
    connections: must come back exactly) and "pool" (connections between a forwarder and
    U, kept alive and opened or closed as the forwarders' pools see fit: HTTP keeps up to
    limits.max_connections per endpoint and worker), with a description for messages."""
    table = tcp_endpoints()
    u_ports = {GW[B.U].port("http"), GW[B.U].port("grpc")}
    forwarder_ports = set()
    for fwd in (B.G, B.H):
        forwarder_ports |= {local for local, remote, _ in sockets_of(fwd, table) if remote in u_ports}
    counts, total, pool = {}, 0, 0
    for target in fds(label):
        total += 1
        key = "file " + target
        if target.startswith("socket:["):
            local, remote, state = table.get(target[8:-1], (0, 0, "unix/other"))
            key = "tcp %s %s->%s" % (state, local, remote) if local else "socket (not TCP)"
            if (label in (B.G, B.H) and remote in u_ports) or (
                    label == B.U and local in u_ports and remote in forwarder_ports):
                pool += 1
                key = "pool " + key
        elif target.startswith("anon_inode:"):
            key = target
        counts[key] = counts.get(key, 0) + 1
    return {"fds": total, "own": total - pool, "pool": pool, "fd_list": counts}


def settled_figures(label, timeout=10):
    """RSS and descriptors once the descriptor count has not changed for a second."""
    last, since, deadline = None, time.time(), time.time() + timeout
    while time.time() < deadline:
        n = len(fds(label))
        if n != last:
            last, since = n, time.time()
        elif time.time() - since >= 1.0:
            break
        time.sleep(0.1)
    return {"rss": rss_kb(label), **descriptor_figures(label)}


# ---- HTTP -------------------------------------------------------------------------------------

class Reply:
    def __init__(self, status=None, headers=None, body=b"", raw=b"", closed=False, error=None):
        self.status, self.headers, self.body, self.raw = status, headers or {}, body, raw
        self.closed, self.error = closed, error


def parse_head(head):
    lines = head.split(b"\r\n")
    parts = lines[0].split(b" ", 2)
    status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else None
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        headers[name.strip().lower().decode("latin-1")] = value.strip().decode("latin-1")
    return status, headers


def dechunk(data):
    out, i = [], 0
    while True:
        end = data.find(b"\r\n", i)
        if end < 0:
            return b"".join(out)
        size = int(data[i:end].split(b";")[0] or b"0", 16)
        if size == 0:
            return b"".join(out)
        out.append(data[end + 2:end + 2 + size])
        i = end + 2 + size + 2


def http_request(label, method, path, body=b"", headers=(), timeout=30):
    """One request on a new connection with Connection: close; (status, headers, body).
    The path may hold surrogate-escaped bytes (written raw on the wire)."""
    names = {k.lower() for k, _ in headers}
    lines = [method.encode() + b" " + path.encode("utf-8", "surrogateescape") + b" HTTP/1.1"]
    if "host" not in names:
        lines.append(b"Host: 127.0.0.1")
    if "content-length" not in names and (body or method in ("POST", "PUT", "PATCH")):
        lines.append(b"Content-Length: %d" % len(body))
    lines += [k.encode() + b": " + v.encode("latin-1") for k, v in headers]
    lines.append(b"Connection: close")
    data = b"\r\n".join(lines) + b"\r\n\r\n" + body
    s = socket.create_connection(("127.0.0.1", GW[label].port("http")), timeout=timeout)
    chunks = []
    try:
        try:
            s.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # answered before the body was read: the answer is still there
        while True:
            try:
                chunk = s.recv(1 << 16)
            except ConnectionResetError:
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        s.close()
    raw = b"".join(chunks)
    head, _, rest = raw.partition(b"\r\n\r\n")
    status, hdrs = parse_head(head)
    if hdrs.get("transfer-encoding", "").lower() == "chunked":
        rest = dechunk(rest)
    elif "content-length" in hdrs:
        rest = rest[:int(hdrs["content-length"])]
    return status, hdrs, rest


def raw_exchange(label, data, shut=False, timeout=5):
    """Writes `data` on a new connection; reads one answer (head and Content-Length body) or
    the close. Reply.closed: the peer closed (EOF or reset) right after that answer, or
    without one."""
    s = socket.create_connection(("127.0.0.1", GW[label].port("http")), timeout=timeout)
    try:
        try:
            s.sendall(data)
            if shut:
                s.shutdown(socket.SHUT_WR)
        except (BrokenPipeError, ConnectionResetError):
            pass
        buf = b""
        try:
            while b"\r\n\r\n" not in buf:
                chunk = s.recv(1 << 16)
                if not chunk:
                    s.close()
                    return Reply(raw=buf, closed=True)
                buf += chunk
        except ConnectionResetError:
            s.close()
            return Reply(raw=buf, closed=True)
        except socket.timeout:
            s.close()
            return Reply(raw=buf, error="timeout after %d s waiting for an answer" % timeout)
        head, _, rest = buf.partition(b"\r\n\r\n")
        status, headers = parse_head(head)
        n = int(headers.get("content-length", "0") or 0)
        try:
            while len(rest) < n:
                chunk = s.recv(1 << 16)
                if not chunk:
                    break
                rest += chunk
        except (ConnectionResetError, socket.timeout):
            pass
        reply = Reply(status, headers, rest[:n], raw=buf)
        reply.sock = s
        return reply
    except BaseException:
        s.close()
        raise


def peer_closes(reply, timeout=5):
    """Whether the connection of `reply` is closed by the peer within `timeout` (and closes
    our side)."""
    s = reply.sock
    try:
        s.settimeout(timeout)
        try:
            return s.recv(1) == b""
        except ConnectionResetError:
            return True
        except socket.timeout:
            return False
    finally:
        s.close()


# ---- gRPC ---------------------------------------------------------------------------------------

_channels = {}


def channel(label):
    if label not in _channels:
        _channels[label] = grpc.insecure_channel(GW[label].address("grpc"), options=CHANNEL_OPTIONS)
    return _channels[label]


def close_channels():
    for ch in list(_channels.values()):
        ch.close()
    _channels.clear()
    grpc_stubs.close_channels()


def grpc_unary(label, rpc, data, metadata=(), fresh=False, timeout=30):
    """("OK", response bytes) or (code name, details)."""
    ch = grpc.insecure_channel(GW[label].address("grpc"), options=CHANNEL_OPTIONS) if fresh else channel(label)
    try:
        call = ch.unary_unary(SERVICE + rpc, request_serializer=None, response_deserializer=None)
        try:
            return B.OK, call(data, metadata=metadata, timeout=timeout)
        except grpc.RpcError as e:
            return e.code().name, e.details() or ""
    finally:
        if fresh:
            ch.close()


def grpc_stream(label, messages, metadata=(), timeout=30):
    """(final code name, details, [(id, error_message)])."""
    call = channel(label).stream_stream(SERVICE + "ModelStreamInfer", request_serializer=None,
                                        response_deserializer=None)
    got = []
    try:
        for raw in call(iter(messages), metadata=metadata, timeout=timeout):
            m = pb.ModelStreamInferResponse.FromString(raw)
            got.append((m.infer_response.id, m.error_message))
        return B.OK, "", got
    except grpc.RpcError as e:
        return e.code().name, e.details() or "", got


# ---- raw HTTP/2 -----------------------------------------------------------------------------------

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + B.h2_frame(4, 0, 0)


def hpack_literal(name, value):
    """A literal header field never indexed, no Huffman (lengths < 127)."""
    return b"\x10" + bytes([len(name)]) + name + bytes([len(value)]) + value


def h2_headers(path):
    block = b"".join(hpack_literal(n, v) for n, v in (
        (b":method", b"POST"), (b":scheme", b"http"), (b":path", path.encode()),
        (b":authority", b"localhost"), (b"content-type", b"application/grpc"), (b"te", b"trailers")))
    return B.h2_frame(1, 4, 1, block)


class H2Conn:
    """A client HTTP/2 connection on a raw socket: frames on stream 1 are collected."""

    def __init__(self, label):
        self.sock = socket.create_connection(("127.0.0.1", GW[label].port("grpc")), timeout=5)
        self.buf = b""
        self.events = []  # ("DATA", payload) / ("HEADERS", {fields}, end) / ("RST", code) / ("GOAWAY",) / ("EOF",)
        self.conn_window = self.stream_window = 65535
        self.hpack = hpack.Decoder()  # the connection's one decoding context

    def send(self, data):
        self.sock.sendall(data)

    def pump(self, wait):
        """Reads what arrives within `wait` seconds; False once the peer closed."""
        self.sock.setblocking(False)
        try:
            r, _, _ = select.select([self.sock], [], [], wait)
            if not r:
                return True
            try:
                chunk = self.sock.recv(1 << 20)
            except (BlockingIOError, InterruptedError):
                return True
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                self.events.append(("EOF",))
                return False
            self.buf += chunk
            while len(self.buf) >= 9:
                n = int.from_bytes(self.buf[:3], "big")
                if len(self.buf) < 9 + n:
                    break
                kind, flags = self.buf[3], self.buf[4]
                sid = int.from_bytes(self.buf[5:9], "big") & 0x7FFFFFFF
                payload, self.buf = self.buf[9:9 + n], self.buf[9 + n:]
                if kind == 4 and not flags & 1:
                    self.sock.setblocking(True)
                    self.sock.sendall(B.h2_frame(4, 1, 0))
                    self.sock.setblocking(False)
                elif kind == 6 and not flags & 1:
                    self.sock.setblocking(True)
                    self.sock.sendall(B.h2_frame(6, 1, 0, payload))
                    self.sock.setblocking(False)
                elif kind == 8:
                    inc = int.from_bytes(payload, "big") & 0x7FFFFFFF
                    if sid == 0:
                        self.conn_window += inc
                    elif sid == 1:
                        self.stream_window += inc
                elif kind == 7:
                    self.events.append(("GOAWAY",))
                elif sid == 1 and kind == 0:
                    self.events.append(("DATA", payload))
                elif sid == 1 and kind == 1:
                    self.events.append(("HEADERS", self.header_fields(payload), bool(flags & 1)))
                elif sid == 1 and kind == 3:
                    self.events.append(("RST", int.from_bytes(payload, "big")))
            return True
        finally:
            self.sock.setblocking(True)

    def header_fields(self, block):
        """{name: value} of a header block (HPACK in full: indexed, Huffman-coded)."""
        return {name.decode("latin-1"): value.decode("latin-1") for name, value in self.hpack.decode(block, raw=True)}

    def ended(self):
        return any(e[0] in ("RST", "GOAWAY", "EOF") or (e[0] == "HEADERS" and e[2]) for e in self.events)

    def collect(self, seconds):
        deadline = time.time() + seconds
        while time.time() < deadline and not self.ended():
            if not self.pump(min(0.2, max(0.0, deadline - time.time()))):
                break

    def close(self):
        self.sock.close()


# ---- warm-up ------------------------------------------------------------------------------------

def warm_up():
    """A few hundred good and bad requests per process, so that what a request leaves
    allocated (pools, buffers, caches, upstream connections) exists before the baseline."""
    simple = B.SIMPLE_JSON
    fp32 = np.arange(64 * 1024, dtype=np.float32).tobytes()  # 256 KiB
    big_json = B.json_infer("FP32", [0.5] * 30000, shape=(1, 30000))
    good_grpc = grpc_stubs.simple_infer_request().SerializeToString()
    bad_grpc = grpc_stubs.simple_infer_request()
    bad_grpc.inputs[0].shape[1] = 15
    bad_grpc = bad_grpc.SerializeToString()
    big_grpc = pb.ModelInferRequest(model_name="identity_fp32")
    t = big_grpc.inputs.add()
    t.name, t.datatype = "INPUT0", "FP32"
    t.shape.extend([1, 64 * 1024])
    big_grpc.raw_input_contents.append(fp32)
    big_grpc = big_grpc.SerializeToString()
    body, n = B.binary_infer([("INPUT0", "FP32", (1, 64 * 1024), fp32, B.AUTO)])
    for label in (B.L, B.G, B.H, B.U):
        conn = GW[label].connection()
        for i in range(120):
            for payload, want in ((simple, 200), (b'{"inputs":[', 400), (B.FP32_ONE.replace(b"FP32", b"FP16"), 400)):
                conn.request("POST", "/v2/models/simple/infer" if payload is simple else "/v2/models/identity_fp32/infer",
                             payload)
                resp = conn.getresponse()
                resp.read()
                assert resp.status == want, (label, resp.status)
        for i in range(12):
            conn.request("POST", "/v2/models/identity_fp32/infer", body, {"Inference-Header-Content-Length": str(n)})
            conn.getresponse().read()
            conn.request("POST", "/v2/models/identity_fp32/infer", big_json)
            conn.getresponse().read()
        conn.close()
        for i in range(30):
            reply = raw_exchange(label, b"\x00garbage\r\n\r\n")
            if hasattr(reply, "sock"):
                reply.sock.close()
            http_request(label, "GET", "/v2/models/nope")
        for i in range(100):
            grpc_unary(label, "ModelInfer", good_grpc)
            grpc_unary(label, "ModelInfer", bad_grpc)
        for i in range(12):
            grpc_unary(label, "ModelInfer", big_grpc)
        for i in range(5):
            grpc_stream(label, [good_grpc, bad_grpc, good_grpc, b"\x0f", good_grpc])
        grpc_unary(label, "ModelInfer", good_grpc, metadata=(("x-big", "v" * 70000),), fresh=True)
    shm_body = B.dumps({"inputs": [{"name": "INPUT0", "shape": [1, 16], "datatype": "INT32", "parameters": {
        "shared_memory_region": "bad_r", "shared_memory_byte_size": 64}}]})
    for i in range(30):
        status, _, _ = http_request(B.U, "POST", "/v2/models/identity_int32/infer", shm_body)
        assert status == 200


# ---- the corpus ---------------------------------------------------------------------------------

def families():
    """[(family, cases)] in the order the test methods send them."""
    return [
        ("HTTP framing", B.framing_cases()),
        ("HTTP cut off mid-message", B.cut_off_cases()),
        ("header floods, huge lengths", B.flood_cases()),
        ("JSON syntax", B.json_syntax_cases()),
        ("JSON structure, duplicates", B.json_structure_cases()),
        ("datatypes, shapes, limits", B.datatype_cases()),
        ("NaN / Infinity", B.nan_cases()),
        ("binary tensor extension", B.binary_cases()),
        ("BYTES elements (HTTP)", B.bytes_http_cases()),
        ("compression", B.compression_cases()),
        ("HTTP parameter kinds", B.http_parameter_cases()),
        ("routes, models, versions", B.route_cases()),
        ("invalid UTF-8 (HTTP)", B.utf8_http_cases()),
        ("deeply nested JSON", B.deep_json_cases()),
        ("gRPC tensors", B.grpc_tensor_cases(pb)),
        ("gRPC parameter kinds", B.grpc_parameter_cases(pb)),
        ("protobuf wire, UTF-8", B.protobuf_cases(pb)),
        ("gRPC metadata floods", B.metadata_cases(pb)),
        ("shared memory", B.shm_cases(pb, SHM["key"], SHM["small"])),
        ("ModelStreamInfer in-band", B.stream_cases(pb)),
        ("gRPC cut off (raw HTTP/2)", B.h2_cases()),
    ]


def corpus_pass():
    """Every case sent once, its answer not checked (part of the warm-up)."""
    runner = Corpus("test_zz_after_the_corpus")
    for _, cases in families():
        for case in cases:
            for label in case.targets:
                try:
                    runner.run_case(case, label)
                except Exception:  # noqa: BLE001 - the answers are checked by the tests
                    pass
    for _, run, targets in runner.cancel_cases():
        for label in targets:
            try:
                run(label)
            except Exception:  # noqa: BLE001
                pass


# ---- the test ----------------------------------------------------------------------------------

def error_text(body):
    """The message of a JSON error body {"error": "..."}; raises when it is not one."""
    parsed = json.loads(body)
    if not isinstance(parsed, dict) or set(parsed) != {"error"} or not isinstance(parsed["error"], str):
        raise ValueError("not {\"error\": string}: %r" % body[:200])
    return parsed["error"]


class Corpus(unittest.TestCase):
    maxDiff = None

    def run_family(self, family, cases):
        subtests = 0
        for case in cases:
            for label in case.targets:
                subtests += 1
                with self.subTest(case=case.name, gateway=label):
                    known = B.KNOWN.get((case.name, label))
                    if known is None:
                        self.run_case(case, label)
                        continue
                    # A known finding must still fail; once fixed it must leave the list.
                    with self.assertRaises(AssertionError, msg="%s on %s now passes: take it "
                                           "off bad_inputs.KNOWN (%s)" % (case.name, label, known)):
                        self.run_case(case, label)
                    KNOWN_SEEN.add((case.name, label))
        COUNTS[family] = [len(cases), subtests]
        self.assertStillServing(sorted({t for c in cases for t in c.targets}))
        if os.environ.get("BAD_INPUTS_TRACE"):
            sys.stderr.write("\n  [%s] %s\n" % (family, ", ".join(
                "%s %d kB %d fds" % (label, rss_kb(label), len(fds(label))) for label in GW)))

    def assertStillServing(self, labels):
        for label in labels:
            self.assertTrue(GW[label].alive(), "%s exited" % label)
            status, _, body = http_request(label, "GET", "/v2/health/live", timeout=10)
            self.assertEqual(status, 200, (label, body))

    def run_case(self, case, label):
        if isinstance(case, B.Raw):
            return self.run_raw(case, label)
        if isinstance(case, B.Http):
            return self.run_http(case, label)
        if isinstance(case, B.Grpc):
            return self.run_grpc(case, label)
        if isinstance(case, B.Stream):
            return self.run_stream(case, label)
        if isinstance(case, B.H2):
            return self.run_h2(case, label)
        raise TypeError(case)

    # ---- HTTP
    def run_raw(self, case, label):
        reply = raw_exchange(label, case.data, shut=case.shut)
        why = "%s\nwhy: %s" % (case.name, case.why)
        if case.status == B.CLOSED:
            if hasattr(reply, "sock"):
                reply.sock.close()
            self.assertTrue(reply.closed and not reply.raw,
                            "%s\nexpected the connection closed without an answer; got %r"
                            % (why, reply.error or reply.raw[:200]))
            return
        if reply.status is None:
            self.fail("%s\nexpected %s; got %s" % (why, case.status, reply.error or "the connection closed: %r"
                                                   % reply.raw[:200]))
        try:
            self.assertEqual(reply.status, case.status, "%s\nanswer: %r" % (why, reply.raw[:300] + reply.body[:300]))
            if case.status >= 400:
                self.assertIn(case.fragment, self.error_of(reply.body, why))
            if case.close:
                self.assertEqual(reply.headers.get("connection", "").lower(), "close",
                                 "%s\nthe answer does not say Connection: close" % why)
        finally:
            closed = peer_closes(reply, timeout=5 if case.close and reply.status == case.status else 0.05)
        if case.close:
            self.assertTrue(closed, "%s\nthe connection stayed open after the answer" % why)

    def error_of(self, body, why):
        try:
            return error_text(body)
        except ValueError as e:
            self.fail("%s\nthe error body is not the JSON {\"error\": ...} of PROTOCOL.md 3: %s; body %r"
                      % (why, e, body[:300]))

    def run_http(self, case, label):
        answers = []
        for _ in range(case.repeat):
            status, headers, body = http_request(label, case.method, case.path, case.body, case.headers)
            answers.append((status, body))
            why = "%s %s\nwhy: %s\nanswer: %s %r" % (case.method, case.path[:80], case.why, status, body[:300])
            self.assertEqual(status, case.status, why)
            if status >= 400 and case.method != "HEAD":
                self.assertIn(case.fragment, self.error_of(body, why), why)
            if status == 200 and case.check is not None:
                ctype = headers.get("content-type", "")
                self.assertIn("json", ctype, why)
                case.check(json.loads(body))
        if case.repeat > 1:
            self.assertEqual(len(set(answers)), 1, "the same request got different answers: %s"
                             % sorted({a[1][:120] for a in answers}))

    # ---- gRPC
    def run_grpc(self, case, label):
        data = case.request if isinstance(case.request, bytes) else case.request.SerializeToString()
        code, detail = grpc_unary(label, case.rpc, data, case.metadata, case.fresh_channel)
        why = "%s\nwhy: %s\nanswer: %s %r" % (case.name, case.why, code,
                                               detail[:300] if code != B.OK else detail[:100])
        self.assertEqual(code, case.code, why)
        if code == B.OK:
            if case.check is not None:
                case.check(detail, pb)
        else:
            self.assertIn(case.fragment, detail, why)

    def run_stream(self, case, label):
        code, detail, got = grpc_stream(label, case.messages, case.metadata)
        why = "%s\nwhy: %s\nanswer: %s %r, responses %r" % (case.name, case.why, code, detail[:200], got)
        self.assertEqual(code, case.code, why)
        self.assertIn(case.fragment, detail, why)
        if case.code != B.OK:
            return
        expected_counts = {}
        for raw in case.messages:
            try:
                rid = pb.ModelInferRequest.FromString(raw).id
            except Exception:  # noqa: BLE001 - not protobuf: its error has no id
                rid = ""
            expected_counts[rid] = expected_counts.get(rid, 0) + 1
        seen = {}
        for rid, error in got:
            seen.setdefault(rid, []).append(error)
        self.assertEqual(sorted(seen), sorted(case.answers), why)
        for rid, fragment in case.answers.items():
            errors = seen[rid]
            self.assertEqual(len(errors), expected_counts.get(rid, 0), why)
            for error in errors:
                if fragment:
                    self.assertIn(fragment, error, why)
                else:
                    self.assertEqual(error, "", why)

    def run_h2(self, case, label):
        message = grpc_stubs.simple_infer_request().SerializeToString()
        conn = H2Conn(label)
        why = "%s\nwhy: %s" % (case.name, case.why)
        try:
            conn.send(PREFACE + h2_headers(case.path))
            conn.pump(0.05)
            if case.flood:
                self.h2_flood(conn, case, why)
                return
            conn.send(case.tail(message))
            if case.close_socket:
                return  # nothing to observe: the gateway must survive it (checked after the family)
            conn.collect(3 if case.expect is not None else 1.0)
        finally:
            conn.close()
        events = conn.events
        data = [e for e in events if e[0] == "DATA"]
        trailers = [e for e in events if e[0] == "HEADERS" and e[2]]
        desc = "%s\nframes on the stream: %r" % (why, events)
        if not case.data:
            self.assertEqual(data, [], desc)
        if case.expect is None:
            for e in trailers:  # a status written as the reset crossed it: only CANCELLED
                self.assertEqual(e[1].get("grpc-status"), "1", desc)
            return
        self.assertTrue(trailers, desc)
        self.assertEqual(trailers[-1][1].get("grpc-status"), case.expect, desc)

    def h2_flood(self, conn, case, why):
        """A 4 GiB length prefix, then `case.flood` bytes within the flow-control windows;
        the gateway must refuse before taking them all."""
        conn.send(B.h2_frame(0, 0, 1, b"\x00\xff\xff\xff\xff"))
        conn.stream_window -= 5
        conn.conn_window -= 5
        sent, deadline = 0, time.time() + 20
        while sent < case.flood and time.time() < deadline and not conn.ended():
            n = min(16384, conn.conn_window, conn.stream_window, case.flood - sent)
            if n <= 0:
                conn.pump(0.5)
                continue
            conn.send(B.h2_frame(0, 0, 1, bytes(n)))
            sent += n
            conn.conn_window -= n
            conn.stream_window -= n
            conn.pump(0)
        conn.collect(1.0)
        trailers = [e for e in conn.events if e[0] == "HEADERS" and e[2]]
        refused = [e for e in conn.events if e[0] == "RST"] or [
            e for e in trailers if e[1].get("grpc-status") == case.expect]
        self.assertTrue(refused, "%s\nthe gateway took %d bytes of a message announced as 4 GiB without "
                                 "refusing it; frames: %r" % (why, sent, conn.events))

    # ---- the families, in order
    def run_named(self, family):
        self.run_family(family, dict(families())[family])

    def test_01_http_framing(self):
        self.run_named("HTTP framing")

    def test_02_http_cut_off(self):
        self.run_named("HTTP cut off mid-message")

    def test_03_header_floods_and_huge_lengths(self):
        self.run_named("header floods, huge lengths")

    def test_04_json_syntax(self):
        self.run_named("JSON syntax")

    def test_05_json_structure(self):
        self.run_named("JSON structure, duplicates")

    def test_06_datatypes_and_shapes(self):
        self.run_named("datatypes, shapes, limits")

    def test_07_nan_and_infinity(self):
        self.run_named("NaN / Infinity")

    def test_08_binary_extension(self):
        self.run_named("binary tensor extension")

    def test_09_bytes_elements(self):
        self.run_named("BYTES elements (HTTP)")

    def test_10_compression(self):
        self.run_named("compression")

    def test_11_http_parameters(self):
        self.run_named("HTTP parameter kinds")

    def test_12_routes_and_models(self):
        self.run_named("routes, models, versions")

    def test_13_invalid_utf8_http(self):
        self.run_named("invalid UTF-8 (HTTP)")

    def test_14_deep_json(self):
        self.run_named("deeply nested JSON")

    def test_15_grpc_tensors(self):
        self.run_named("gRPC tensors")

    def test_16_grpc_parameters(self):
        self.run_named("gRPC parameter kinds")

    def test_17_protobuf_wire(self):
        self.run_named("protobuf wire, UTF-8")

    def test_18_grpc_metadata(self):
        self.run_named("gRPC metadata floods")

    def test_19_shared_memory(self):
        self.run_named("shared memory")

    def test_20_streams(self):
        self.run_named("ModelStreamInfer in-band")

    def test_21_cancelled_calls(self):
        """Streams and calls the client abandons while the model works: the client sees
        CANCELLED / DEADLINE_EXCEEDED / the iterator's failure, the gateway lets go
        (checked by the next call and by the descriptor count at the end)."""
        subtests = 0
        cases = self.cancel_cases()
        for name, run, targets in cases:
            for label in targets:
                subtests += 1
                with self.subTest(case=name, gateway=label):
                    run(label)
        COUNTS["cancelled calls"] = [len(cases), subtests]
        self.assertStillServing(B.ALL)

    def test_22_http2_cut_off(self):
        self.run_named("gRPC cut off (raw HTTP/2)")

    def cancel_cases(self):
        return [("stream cancelled while the model sleeps", self.cancel_sleeping_stream, B.ALL),
                # Not through G_http: a decoupled model needs a gRPC or builtin upstream
                # (HTTP /infer refuses decoupled models, PROTOCOL 15.17).
                ("stream cancelled between decoupled responses", self.cancel_decoupled_stream, (B.L, B.G)),
                ("stream whose request iterator fails", self.failing_iterator, B.ALL),
                ("unary deadline while the model sleeps", self.deadline_unary, B.ALL),
                ("HTTP client gone while the model sleeps", self.http_gone, B.ALL)]

    def sleep_request(self, ms, rid="s"):
        req = pb.ModelInferRequest(model_name="sleep", id=rid)
        t = req.inputs.add()
        t.name, t.datatype = "INPUT0", "INT32"
        t.shape.append(1)
        req.raw_input_contents.append(struct.pack("<i", ms))
        return req.SerializeToString()

    def cancel_sleeping_stream(self, label):
        call = channel(label).stream_stream(SERVICE + "ModelStreamInfer", request_serializer=None,
                                            response_deserializer=None)
        gate = threading.Event()

        def requests():
            yield self.sleep_request(3000)
            gate.wait(10)
        responses = call(requests(), timeout=30)
        time.sleep(0.3)
        responses.cancel()
        gate.set()
        self.assertEqual(responses.code(), grpc.StatusCode.CANCELLED)
        started = time.time()
        code, _ = grpc_unary(label, "ModelInfer", grpc_stubs.simple_infer_request().SerializeToString())
        self.assertEqual(code, B.OK)
        self.assertLess(time.time() - started, 2.5, "the next call waited for the cancelled one")

    def cancel_decoupled_stream(self, label):
        req = pb.ModelInferRequest(model_name="repeat_int32", id="r")
        for name, dtype, data in (("IN", "INT32", np.arange(5, dtype=np.int32)),
                                  ("DELAY", "UINT32", np.full(5, 300, np.uint32)),
                                  ("WAIT", "UINT32", np.zeros(1, np.uint32))):
            t = req.inputs.add()
            t.name, t.datatype = name, dtype
            t.shape.append(data.size)
            req.raw_input_contents.append(data.tobytes())
        call = channel(label).stream_stream(SERVICE + "ModelStreamInfer", request_serializer=None,
                                            response_deserializer=None)
        gate = threading.Event()

        def requests():
            yield req.SerializeToString()
            gate.wait(10)
        responses = call(requests(), timeout=30)
        first = pb.ModelStreamInferResponse.FromString(next(responses))
        self.assertEqual(first.error_message, "")
        responses.cancel()
        gate.set()
        self.assertEqual(responses.code(), grpc.StatusCode.CANCELLED)

    def failing_iterator(self, label):
        good = grpc_stubs.simple_infer_request().SerializeToString()

        def requests():
            yield good
            time.sleep(0.2)
            raise RuntimeError("the client fails mid-stream")
        call = channel(label).stream_stream(SERVICE + "ModelStreamInfer", request_serializer=None,
                                            response_deserializer=None)
        with self.assertRaises(grpc.RpcError) as ctx:
            list(call(requests(), timeout=30))
        self.assertEqual(ctx.exception.code(), grpc.StatusCode.UNKNOWN)  # grpc: "Exception iterating requests!"

    def deadline_unary(self, label):
        code, _ = grpc_unary(label, "ModelInfer", self.sleep_request(3000), timeout=0.3)
        self.assertEqual(code, "DEADLINE_EXCEEDED")

    def http_gone(self, label):
        body = B.json_infer("INT32", [3000], shape=(1,))
        s = socket.create_connection(("127.0.0.1", GW[label].port("http")))
        s.sendall(b"POST /v2/models/sleep/infer HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        time.sleep(0.2)
        s.close()
        started = time.time()
        status, _, _ = http_request(label, "POST", "/v2/models/simple/infer", B.SIMPLE_JSON)
        self.assertEqual(status, 200)
        self.assertLess(time.time() - started, 2.5)

    # ---- after the corpus
    def test_zz_after_the_corpus(self):
        """Every process answers a correct inference over HTTP and gRPC exactly; then, with
        every connection of the test closed, RSS is within 10% of the warm figure and the
        descriptors are back to it."""
        want0, want1 = [i + 1 for i in range(16)], [i - 1 for i in range(16)]
        for label in GW:
            status, _, body = http_request(label, "POST", "/v2/models/simple/infer", B.SIMPLE_JSON)
            self.assertEqual(status, 200, (label, body))
            outputs = {o["name"]: o["data"] for o in json.loads(body)["outputs"]}
            self.assertEqual((outputs["OUTPUT0"], outputs["OUTPUT1"]), (want0, want1), label)
            code, raw = grpc_unary(label, "ModelInfer", grpc_stubs.simple_infer_request().SerializeToString())
            self.assertEqual(code, B.OK, (label, raw))
            resp = pb.ModelInferResponse.FromString(raw)
            got = {o.name: np.frombuffer(resp.raw_output_contents[i], np.int32).tolist()
                   for i, o in enumerate(resp.outputs)}
            self.assertEqual((got["OUTPUT0"], got["OUTPUT1"]), (want0, want1), label)
        close_channels()
        for label in GW:
            base = BASELINE[label]

            def back():
                d = descriptor_figures(label)
                return (d["own"] <= base["own"] and d["pool"] <= base["pool"] + POOL_SLACK
                        and rss_kb(label) <= base["rss"] * 1.10)
            wait_until(back, timeout=10, interval=0.2)
            after = {"rss": rss_kb(label), **descriptor_figures(label)}
            FIGURES[label] = after
            extra = {k: v - base["fd_list"].get(k, 0) for k, v in after["fd_list"].items()
                     if v > base["fd_list"].get(k, 0)}
            with self.subTest(check="descriptors", gateway=label):
                self.assertLessEqual(after["own"], base["own"], "%s holds %d descriptors (not counting "
                                     "its pooled connections with U), %d before the corpus; more than "
                                     "before: %r" % (label, after["own"], base["own"], extra))
            with self.subTest(check="pooled connections", gateway=label):
                self.assertLessEqual(after["pool"], base["pool"] + POOL_SLACK, "%s holds %d pooled "
                                     "connections with U, %d before the corpus: %r"
                                     % (label, after["pool"], base["pool"], extra))
            with self.subTest(check="RSS", gateway=label):
                self.assertLessEqual(after["rss"], base["rss"] * 1.10, "%s RSS %d kB, %d kB before the corpus"
                                     % (label, after["rss"], base["rss"]))

if __name__ == "__main__":
    unittest.main()
