"""End-to-end: routing and forwarding, with real processes on loopback (all port 0).

  U, V        builtin-only infergates, the upstreams (V serves a subset of the models)
  G_grpc      every model -> U over gRPC          \\  the forwarders: every answer is compared
  G_http      every model -> U over HTTP          /  with the same request sent to U directly
  G_rules     the routing rules (exact, prefix, wildcard, header, version, split, rewrite,
              mirror, timeouts) over U and V in both protocols, a builtin upstream, and two
              recorders: a Python gRPC and a Python HTTP server standing for an upstream,
              which keep what reached them (metadata, headers, deadlines, bodies)
  G_err       no catch-all route; two upstreams with nothing listening (readiness all_routes)
  G_always    G_err's config with readiness: always
  G_ready     one HTTP upstream on a port where an upstream is started and stopped later

Comparisons are exact: HTTP status, body bytes and the headers a client reads
(Content-Type, Content-Encoding, Inference-Header-Content-Length); gRPC messages compared
as parsed protobuf messages (so also byte for byte under deterministic serialization).
Every process must exit 0 on SIGTERM without a sanitizer report.
"""
import gzip
import http.client
import http.server
import json
import os
import socket
import string
import struct
import subprocess
import tempfile
import threading
import time
import unittest
import zlib
from concurrent import futures

import grpc
import numpy as np

import grpc_stubs
from grpc_stubs import grpc_outcome, stub_of
from harness import Gateway, binary, free_port, wait_until

pb = pb_grpc = health_pb = health_grpc = None
U = V = G_GRPC = G_HTTP = RULES = ERR = ALWAYS = READY = None
REC = RECH = None
FORWARDERS = []  # [(name, gateway)]: G_grpc, G_http
_started = []

RELAYED = ("content-type", "content-encoding", "inference-header-content-length")
V_MODELS = ["simple_string", "identity_int8", "identity_int16", "identity_int32",
            "identity_uint8", "identity_uint16", "identity_fp64", "sleep"]

FORWARDER_TEMPLATE = """
listeners:
  http:    { address: "127.0.0.1:0" }
  grpc:    { address: "127.0.0.1:0" }
  metrics: { address: "127.0.0.1:0" }
workers: 2
readiness: { policy: all_routes, probe_interval_ms: 200 }
upstreams:
  - { name: $name, protocol: $protocol, endpoints: ["$endpoint"], timeout_ms: 30000, stream_requests: true }
routes:
  - match: { model: "*" }
    upstream: $name
"""

RULES_TEMPLATE = """
listeners:
  http:    { address: "127.0.0.1:0" }
  grpc:    { address: "127.0.0.1:0" }
  metrics: { address: "127.0.0.1:0" }
workers: 2
forward: { headers: [traceparent, tracestate, "triton-grpc-protocol-*", x-tenant] }
readiness: { policy: all_routes, probe_interval_ms: 200 }
upstreams:
  - { name: u-grpc, protocol: grpc, endpoints: ["$u_grpc"], timeout_ms: 30000 }
  - { name: u-http, protocol: http, endpoints: ["$u_http"], timeout_ms: 30000 }
  - { name: v-grpc, protocol: grpc, endpoints: ["$v_grpc"], timeout_ms: 30000 }
  - { name: v-http, protocol: http, endpoints: ["$v_http"], http_format: binary, timeout_ms: 30000 }
  - { name: rec, protocol: grpc, endpoints: ["$rec_grpc"] }
  - { name: rech, protocol: http, endpoints: ["$rec_http"] }
  - { name: local, protocol: builtin, models: [identity_bool] }
routes:
  - match: { model: simple_string }
    upstream: v-grpc
  - match: { model: identity_int32, headers: { x-tenant: beta } }
    upstream: v-http
  - match: { model: identity_fp64, version: "1" }
    upstream: v-grpc
  - match: { model: split }
    split: [ { upstream: u-grpc, weight: 80 }, { upstream: v-http, weight: 20 } ]
    rewrite: { model: identity_int16 }
  - match: { model: public }
    upstream: u-http
    rewrite: { model: simple, version: "1" }
  - match: { model: public_g }
    upstream: u-grpc
    rewrite: { model: simple, version: "1" }
  - match: { model: mirrored }
    upstream: u-grpc
    rewrite: { model: identity_int8 }
    mirror: v-grpc
  - match: { model: mirrored_h }
    upstream: u-http
    rewrite: { model: identity_int8 }
    mirror: v-grpc
  - match: { model: mirrored_rec }
    upstream: u-grpc
    rewrite: { model: identity_fp32 }
    mirror: rec
  - match: { model: slow }
    upstream: u-grpc
    rewrite: { model: sleep }
    timeout_ms: 300
  - match: { model: slow_h }
    upstream: u-http
    rewrite: { model: sleep }
    timeout_ms: 300
  - match: { model: recorded }
    upstream: rec
  - match: { model: recorded_t }
    upstream: rec
    timeout_ms: 4000
  - match: { model: recorded_h }
    upstream: rech
  - match: { model: identity_bool }
    upstream: local
  - match: { model_prefix: "identity_u" }
    upstream: v-http
  - match: { model: "*" }
    upstream: u-grpc
"""

ERR_TEMPLATE = """
listeners:
  http:    { address: "127.0.0.1:0" }
  grpc:    { address: "127.0.0.1:0" }
  metrics: { address: "127.0.0.1:0" }
workers: 2
readiness: { policy: $policy, probe_interval_ms: 200 }
upstreams:
  - { name: u-http, protocol: http, endpoints: ["$u_http"] }
  - { name: down-grpc, protocol: grpc, endpoints: ["127.0.0.1:$down_grpc"] }
  - { name: down-http, protocol: http, endpoints: ["127.0.0.1:$down_http"] }
routes:
  - match: { model: simple }
    upstream: u-http
  - match: { model: identity_fp32 }
    upstream: down-grpc
  - match: { model: identity_int32 }
    upstream: down-http
"""

READY_TEMPLATE = """
listeners:
  http:    { address: "127.0.0.1:0" }
  grpc:    { address: "127.0.0.1:0" }
workers: 2
readiness: { policy: all_routes, probe_interval_ms: 200 }
upstreams:
  - { name: late, protocol: http, endpoints: ["127.0.0.1:$port"] }
routes:
  - match: { model: "*" }
    upstream: late
"""


# ---- recorders: upstreams that show what reached them --------------------------------

class GrpcRecorder:
    """A Python gRPC server speaking inference.GRPCInferenceService: keeps every ModelInfer
    (request, metadata, time left before the deadline) and answers OUTPUT0 = [42]."""

    def __init__(self):
        self.calls = []
        self.lock = threading.Lock()
        recorder = self

        class Servicer(pb_grpc.GRPCInferenceServiceServicer):
            def ServerLive(self, request, context):
                return pb.ServerLiveResponse(live=True)

            def ServerReady(self, request, context):
                return pb.ServerReadyResponse(ready=True)

            def ModelInfer(self, request, context):
                with recorder.lock:
                    recorder.calls.append({"request": request,
                                           "metadata": dict(context.invocation_metadata()),
                                           "time_remaining": context.time_remaining()})
                resp = pb.ModelInferResponse(model_name=request.model_name, model_version="1",
                                             id=request.id)
                out = resp.outputs.add()
                out.name, out.datatype = "OUTPUT0", "INT32"
                out.shape.append(1)
                resp.raw_output_contents.append(struct.pack("<i", 42))
                return resp

            def RepositoryIndex(self, request, context):
                return pb.RepositoryIndexResponse(models=[pb.RepositoryIndexResponse.ModelIndex(
                    name="recorded", version="1", state="READY")])

            def ModelStatistics(self, request, context):
                return pb.ModelStatisticsResponse()

        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        pb_grpc.add_GRPCInferenceServiceServicer_to_server(Servicer(), self.server)
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()

    def address(self):
        return "127.0.0.1:%d" % self.port

    def take(self):
        with self.lock:
            calls, self.calls = self.calls, []
        return calls

    def stop(self):
        self.server.stop(grace=None)


class HttpRecorder:
    """A Python HTTP/1.1 server standing for a KServe v2 upstream: keeps every request
    (method, path, lower-cased headers, body) and answers /infer with OUTPUT0 = [42]."""

    INFER_ANSWER = json.dumps({"model_name": "recorded_h", "model_version": "1", "outputs": [
        {"name": "OUTPUT0", "datatype": "INT32", "shape": [1], "data": [42]}]}).encode()

    def __init__(self):
        self.calls = []
        self.lock = threading.Lock()
        recorder = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _body(self):
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    parts = []
                    while True:
                        size = int(self.rfile.readline().split(b";")[0], 16)
                        if size == 0:
                            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                                pass
                            return b"".join(parts)
                        parts.append(self.rfile.read(size))
                        self.rfile.readline()
                return self.rfile.read(int(self.headers.get("Content-Length") or 0))

            def _reply(self, status, body=b""):
                self.send_response(status)
                if body:
                    self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _handle(self):
                body = self._body()
                with recorder.lock:
                    recorder.calls.append({"method": self.command, "path": self.path,
                                           "headers": {k.lower(): v for k, v in self.headers.items()},
                                           "body": body})
                if self.path == "/v2/health/ready":
                    return self._reply(200)
                if self.path == "/v2/repository/index":
                    return self._reply(200, json.dumps([{"name": "recorded_h", "version": "1",
                                                         "state": "READY"}]).encode())
                if self.path == "/v2/models/stats":
                    return self._reply(200, b'{"model_stats":[]}')
                if self.path.endswith("/infer"):
                    return self._reply(200, HttpRecorder.INFER_ANSWER)
                return self._reply(404, b'{"error":"Not Found"}')

            do_GET = do_POST = _handle

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def address(self):
        return "127.0.0.1:%d" % self.server.server_address[1]

    def take(self, path_suffix=""):
        """The requests kept so far whose path ends with `path_suffix` (the readiness probes
        are dropped), forgetting all."""
        with self.lock:
            calls, self.calls = self.calls, []
        return [c for c in calls if c["path"] != "/v2/health/ready" and c["path"].endswith(path_suffix)]

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


# ---- module set-up -----------------------------------------------------------------------

def _start(label, gateway):
    gateway.label = label
    gateway.start()
    _started.append(gateway)
    return gateway


def setUpModule():
    global pb, pb_grpc, health_pb, health_grpc, U, V, G_GRPC, G_HTTP, RULES, ERR, ALWAYS, READY
    global REC, RECH, FORWARDERS
    pb, pb_grpc, health_pb, health_grpc = grpc_stubs.load()
    try:
        U = _start("U", Gateway.builtin_upstream())
        V = _start("V", Gateway.builtin_upstream(models=V_MODELS))
        REC, RECH = GrpcRecorder(), HttpRecorder()
        G_GRPC = _start("G_grpc", Gateway.from_template(FORWARDER_TEMPLATE, name="u-grpc", protocol="grpc",
                                              endpoint=U.address("grpc")))
        G_HTTP = _start("G_http", Gateway.from_template(FORWARDER_TEMPLATE, name="u-http", protocol="http",
                                              endpoint=U.address("http")))
        RULES = _start("G_rules", Gateway.from_template(
            RULES_TEMPLATE, u_grpc=U.address("grpc"), u_http=U.address("http"),
            v_grpc=V.address("grpc"), v_http=V.address("http"),
            rec_grpc=REC.address(), rec_http=RECH.address()))
        down = {"down_grpc": free_port(), "down_http": free_port()}
        ERR = _start("G_err", Gateway.from_template(ERR_TEMPLATE, policy="all_routes",
                                           u_http=U.address("http"), **down))
        ALWAYS = _start("G_always", Gateway.from_template(ERR_TEMPLATE, policy="always",
                                              u_http=U.address("http"), **down))
        FORWARDERS = [("G_grpc", G_GRPC), ("G_http", G_HTTP)]
    except BaseException:
        _stop_everything()
        raise


def _stop_everything():
    problems = []
    grpc_stubs.close_channels()
    # Gateways first (they hold connections to the upstreams), then the upstreams.
    for gateway in reversed(_started):
        for p in gateway.stop_and_check():
            problems.append("%s: %s" % (gateway.label, p))
    _started.clear()
    for recorder in (REC, RECH):
        if recorder is not None:
            recorder.stop()
    return problems


def tearDownModule():
    problems = _stop_everything()
    assert not problems, "\n".join(problems)


# ---- helpers -----------------------------------------------------------------------------

DATATYPES = ["BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64",
             "FP16", "FP32", "FP64", "BF16", "BYTES"]
NUMPY = {"BOOL": np.bool_, "UINT8": np.uint8, "UINT16": np.uint16, "UINT32": np.uint32,
         "UINT64": np.uint64, "INT8": np.int8, "INT16": np.int16, "INT32": np.int32,
         "INT64": np.int64, "FP16": np.float16, "FP32": np.float32, "FP64": np.float64}
VALUES = {
    "BOOL": [True, False, True, True, False, False],
    "UINT8": [0, 1, 127, 128, 255, 7],
    "UINT16": [0, 1, 65535, 256, 3, 9],
    "UINT32": [0, 1, 2 ** 32 - 1, 65536, 3, 9],
    "UINT64": [0, 1, 2 ** 64 - 1, 9007199254740993, 3, 9],
    "INT8": [0, -1, 127, -128, 5, -7],
    "INT16": [0, -1, 32767, -32768, 5, -7],
    "INT32": [0, -1, 2 ** 31 - 1, -2 ** 31, 5, -7],
    "INT64": [0, -1, 2 ** 63 - 1, -2 ** 63, 9007199254740993, -7],
    "FP16": [0.5, -1.25, 65504.0, -0.0, 0.001, 3.0],
    "FP32": [0.5, -1.25, 3.4e38, -0.0, 1e-30, 0.1],
    "FP64": [0.5, -1.25, 1.7e308, -0.0, 1e-300, 0.1],
    "BF16": [0.5, -1.25, 3.0e38, -0.0, 1e-30, 3.0],
    "BYTES": [b"ab", b"", b"\xff\x00z", "\u00e9".encode(), b"x" * 300, b"q"],
}


def raw_of(datatype, values=None):
    """Binary-extension / raw_input_contents bytes of `values` (default VALUES[datatype])."""
    values = VALUES[datatype] if values is None else values
    if datatype == "BYTES":
        return b"".join(struct.pack("<I", len(v)) + v for v in values)
    if datatype == "BF16":  # upper halves of float32, truncated as tritonclient does
        return (np.array(values, np.float32).view(np.uint32) >> 16).astype(np.uint16).tobytes()
    return np.array(values, dtype=NUMPY[datatype]).tobytes()


def json_data_of(datatype):
    if datatype == "BYTES":
        return [v.decode("utf-8", "replace").replace("\ufffd", "?") for v in VALUES[datatype]]
    return VALUES[datatype]


def identity_json(datatype, request_id=""):
    body = {"inputs": [{"name": "INPUT0", "shape": [1, 6], "datatype": datatype,
                        "data": json_data_of(datatype)}]}
    if request_id:
        body = {"id": request_id, **body}
    return json.dumps(body).encode()


def binary_body(tensors, outputs=None, params=None, json_inputs=(), request_id=""):
    """tensors: [(name, datatype, shape, raw)] sent as binary; json_inputs: input dicts
    sent with JSON data -> (body, {"Inference-Header-Content-Length": n})."""
    inputs = list(json_inputs) + [
        {"name": n, "shape": s, "datatype": d, "parameters": {"binary_data_size": len(r)}}
        for n, d, s, r in tensors]
    header = {"id": request_id} if request_id else {}
    header["inputs"] = inputs
    if outputs is not None:
        header["outputs"] = outputs
    if params:
        header["parameters"] = params
    js = json.dumps(header, separators=(",", ":")).encode()
    return js + b"".join(r for _, _, _, r in tensors), {"Inference-Header-Content-Length": str(len(js))}


def simple_json(a=None, b=None, outputs=None, request_id=""):
    body = {"inputs": [
        {"name": "INPUT0", "shape": [1, 16], "datatype": "INT32", "data": a or list(range(16))},
        {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32", "data": b or [1] * 16}]}
    if request_id:
        body["id"] = request_id
    if outputs is not None:
        body["outputs"] = outputs
    return json.dumps(body).encode()


def infer_request(model, tensors, request_id="", version="", outputs=(), params=None):
    """A ModelInferRequest as tritonclient's gRPC clients build it: raw contents; the
    C++ client's triton_enable_empty_final_response on every call."""
    req = pb.ModelInferRequest(model_name=model, model_version=version, id=request_id)
    for name, datatype, shape, raw in tensors:
        t = req.inputs.add()
        t.name, t.datatype = name, datatype
        t.shape.extend(shape)
        req.raw_input_contents.append(raw)
    for name, classification in outputs:
        o = req.outputs.add()
        o.name = name
        if classification:
            o.parameters["classification"].int64_param = classification
    req.parameters["triton_enable_empty_final_response"].bool_param = False
    for key, value in (params or {}).items():
        if isinstance(value, bool):
            req.parameters[key].bool_param = value
        elif isinstance(value, int):
            req.parameters[key].int64_param = value
        else:
            req.parameters[key].string_param = value
    return req


# INPUT0 of shape [1, 15] (simple wants [-1, 16]): refused by the model's validation, with
# a message naming the model.
BAD_SHAPE_JSON = json.dumps({"inputs": [
    {"name": "INPUT0", "shape": [1, 15], "datatype": "INT32", "data": list(range(15))},
    {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32", "data": [1] * 16}]}).encode()


def simple_request(request_id="", model="simple", version=""):
    a = np.arange(16, dtype=np.int32).reshape(1, 16)
    b = np.full((1, 16), 3, dtype=np.int32)
    req = infer_request(model, [("INPUT0", "INT32", [1, 16], a.tobytes()),
                                ("INPUT1", "INT32", [1, 16], b.tobytes())],
                        request_id=request_id, version=version)
    req.parameters["priority"].uint64_param = 1  # as tritonclient sends priority
    return req


def identity_request(datatype, request_id="", model=None):
    count = len(VALUES[datatype])
    return infer_request(model or "identity_" + datatype.lower(),
                         [("INPUT0", datatype, [1, count], raw_of(datatype))], request_id=request_id)


def repeat_request(values, request_id, delays=None, wait=0, empty_final=False):
    delays = delays or [1] * len(values)
    req = infer_request("repeat_int32", [
        ("IN", "INT32", [len(values)], np.array(values, np.int32).tobytes()),
        ("DELAY", "UINT32", [len(values)], np.array(delays, np.uint32).tobytes()),
        ("WAIT", "UINT32", [1], np.array([wait], np.uint32).tobytes())], request_id=request_id)
    req.parameters["triton_enable_empty_final_response"].bool_param = empty_final
    return req


def sleep_json(ms):
    return json.dumps({"inputs": [{"name": "INPUT0", "shape": [1], "datatype": "INT32",
                                   "data": [ms]}]}).encode()


def sleep_request(ms, model="sleep"):
    return infer_request(model, [("INPUT0", "INT32", [1], struct.pack("<i", ms))])


def stream(process, requests, metadata=None, timeout=60):
    return list(stub_of(process).ModelStreamInfer(iter(requests), metadata=metadata, timeout=timeout))


def outputs_of(resp):
    return {o.name: (o, resp.raw_output_contents[i]) for i, o in enumerate(resp.outputs)}


def inference_count(process, model):
    status, _, body = process.request("GET", "/v2/models/%s/stats" % model)
    assert status == 200, (model, body)
    return json.loads(body)["model_stats"][0]["inference_count"]


def requests_in_flight(gateway, model):
    """infergate_requests_in_flight of `model` on the gateway's /metrics (0 when absent)."""
    _, _, text = gateway.request("GET", "/metrics", listener="metrics")
    for line in text.decode().splitlines():
        sample, _, value = line.rpartition(" ")
        if sample.startswith("infergate_requests_in_flight{") and 'model="%s"' % model in sample:
            return float(value)
    return 0.0


def requests_total(gateway, model):
    """infergate_requests_total of `model` on the gateway's /metrics, over every code and path."""
    _, _, text = gateway.request("GET", "/metrics", listener="metrics")
    total = 0.0
    for line in text.decode().splitlines():
        sample, _, value = line.rpartition(" ")
        if sample.startswith("infergate_requests_total{") and 'model="%s"' % model in sample:
            total += float(value)
    return total


def error_of(body):
    return json.loads(body)["error"]


class Base(unittest.TestCase):
    maxDiff = 4000

    def assertBytesEqual(self, got, want, what=""):
        if got == want:
            return
        at = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
        self.fail("%s: %d bytes vs %d expected, first difference at %d:\n got  %r\n want %r"
                  % (what, len(got), len(want), at, got[max(0, at - 80):at + 120],
                     want[max(0, at - 80):at + 120]))

    def assertSameHttp(self, method, path, body=None, headers=None, gateways=None, compare_body=True):
        """The request through each forwarder answers exactly as U answers it directly."""
        want = U.request(method, path, body, headers)
        for name, gateway in gateways or FORWARDERS:
            with self.subTest(gateway=name, path=path):
                got = gateway.request(method, path, body, headers)
                self.assertEqual(got[0], want[0], got[2][:600])
                self.assertEqual({k: got[1].get(k) for k in RELAYED},
                                 {k: want[1].get(k) for k in RELAYED})
                if compare_body:
                    self.assertBytesEqual(got[2], want[2], "%s %s via %s" % (method, path, name))
        return want

    def assertSameGrpc(self, call, gateways=None):
        """call(stub) through each forwarder: the same response message, or the same error
        code and details, as from U directly."""
        want = grpc_outcome(lambda: call(stub_of(U)))
        for name, gateway in gateways or FORWARDERS:
            with self.subTest(gateway=name):
                got = grpc_outcome(lambda: call(stub_of(gateway)))
                self.assertEqual(got, want)
                if got[0] == "ok" and hasattr(got[1], "SerializeToString"):
                    self.assertEqual(got[1].SerializeToString(deterministic=True),
                                     want[1].SerializeToString(deterministic=True))
        return want

    def assertGrpcError(self, call, code, fragments=()):
        with self.assertRaises(grpc.RpcError) as ctx:
            call()
        self.assertEqual(ctx.exception.code(), code, ctx.exception.details())
        for fragment in fragments:
            self.assertIn(fragment, ctx.exception.details())
        return ctx.exception.details()

    def assertHttpError(self, response, status, fragments=()):
        self.assertEqual(response[0], status, response[2][:500])
        message = error_of(response[2])
        for fragment in fragments:
            self.assertIn(fragment, message)
        return message


# ---- forwarding: every client form x both upstream protocols, compared with U --------------

class ForwardingE2E(Base):
    def test_http_json_every_datatype(self):
        for datatype in DATATYPES:
            with self.subTest(datatype=datatype):
                want = self.assertSameHttp("POST", "/v2/models/identity_%s/infer" % datatype.lower(),
                                           identity_json(datatype, "j-" + datatype))
                # FP16 / BF16 cannot travel as JSON (PROTOCOL 5.2): the same 400 everywhere.
                self.assertEqual(want[0], 400 if datatype in ("FP16", "BF16") else 200, want[2])

    def test_http_binary_every_datatype(self):
        for datatype in DATATYPES:
            with self.subTest(datatype=datatype):
                body, headers = binary_body([("INPUT0", datatype, [1, 6], raw_of(datatype))],
                                            outputs=[{"name": "OUTPUT0", "parameters": {"binary_data": True}}])
                status, resp_headers, data = self.assertSameHttp(
                    "POST", "/v2/models/identity_%s/infer" % datatype.lower(), body, headers)
                self.assertEqual(status, 200, data)
                n = int(resp_headers["inference-header-content-length"])
                self.assertEqual(data[n:], raw_of(datatype))

    def test_http_mixed_json_and_binary_on_simple(self):
        a = np.arange(16, dtype=np.int32).reshape(1, 16) * 1000
        body, headers = binary_body(
            [("INPUT1", "INT32", [1, 16], np.full((1, 16), -7, np.int32).tobytes())],
            outputs=[{"name": "OUTPUT1", "parameters": {"binary_data": True}}, {"name": "OUTPUT0"}],
            json_inputs=[{"name": "INPUT0", "shape": [1, 16], "datatype": "INT32",
                          "data": a.ravel().tolist()}])
        status, _, data = self.assertSameHttp("POST", "/v2/models/simple/infer", body, headers)
        self.assertEqual(status, 200, data)
        # binary_data_output with no outputs named; a request id; a version in the path.
        body, headers = binary_body([("INPUT0", "INT32", [1, 16], a.tobytes()),
                                     ("INPUT1", "INT32", [1, 16], a.tobytes())],
                                    params={"binary_data_output": True}, request_id="mixed-2")
        status, _, data = self.assertSameHttp("POST", "/v2/models/simple/versions/1/infer", body, headers)
        self.assertEqual(status, 200, data)
        self.assertIn(b'"id":"mixed-2"', data)
        # Only OUTPUT1, as JSON.
        status, _, data = self.assertSameHttp("POST", "/v2/models/simple/infer",
                                              simple_json(outputs=[{"name": "OUTPUT1"}], request_id="o1"))
        self.assertEqual([o["name"] for o in json.loads(data)["outputs"]], ["OUTPUT1"])

    def test_http_gzip_and_deflate(self):
        plain = simple_json(request_id="gz")
        status, headers, data = self.assertSameHttp(
            "POST", "/v2/models/simple/infer", gzip.compress(plain),
            {"Content-Encoding": "gzip", "Accept-Encoding": "gzip"})
        self.assertEqual((status, headers.get("content-encoding")), (200, "gzip"), data)
        self.assertEqual(json.loads(gzip.decompress(data))["id"], "gz")
        x = np.random.default_rng(5).standard_normal((1, 4096)).astype(np.float32)
        body, hdrs = binary_body([("INPUT0", "FP32", [1, 4096], x.tobytes())],
                                 params={"binary_data_output": True})
        hdrs.update({"Content-Encoding": "deflate", "Accept-Encoding": "deflate"})
        status, headers, data = self.assertSameHttp("POST", "/v2/models/identity_fp32/infer",
                                                    zlib.compress(body), hdrs)
        self.assertEqual((status, headers.get("content-encoding")), (200, "deflate"), data)
        inflated = zlib.decompress(data)
        self.assertEqual(inflated[int(headers["inference-header-content-length"]):], x.tobytes())
        # Uncompressed requests asking for a compressed answer; q-values pick deflate.
        for accept, encoding in (("gzip", "gzip"), ("gzip;q=0.5, deflate;q=0.9", "deflate")):
            status, headers, data = self.assertSameHttp("POST", "/v2/models/identity_bytes/infer",
                                                        identity_json("BYTES"), {"Accept-Encoding": accept})
            self.assertEqual((status, headers.get("content-encoding")), (200, encoding), data)

    def test_http_raw_binary_request_through_the_http_upstream(self):
        x = np.arange(8, dtype=np.float32)
        status, _, data = self.assertSameHttp("POST", "/v2/models/identity_fp32/infer", x.tobytes(),
                                              {"Inference-Header-Content-Length": "0"},
                                              gateways=[("G_http", G_HTTP)])
        self.assertEqual(status, 200, data)

    def test_grpc_every_datatype(self):
        for datatype in DATATYPES:
            with self.subTest(datatype=datatype):
                status, resp = self.assertSameGrpc(
                    lambda s: s.ModelInfer(identity_request(datatype, "g-" + datatype)))
                self.assertEqual(status, "ok", resp)
                self.assertEqual(resp.raw_output_contents[0], raw_of(datatype))
                self.assertEqual(resp.id, "g-" + datatype)

    def test_grpc_simple_multi_input_output(self):
        status, resp = self.assertSameGrpc(lambda s: s.ModelInfer(simple_request("s-1")))
        self.assertEqual(status, "ok", resp)
        out = outputs_of(resp)
        self.assertEqual(np.frombuffer(out["OUTPUT0"][1], np.int32).tolist(), [i + 3 for i in range(16)])
        self.assertEqual(np.frombuffer(out["OUTPUT1"][1], np.int32).tolist(), [i - 3 for i in range(16)])
        req = simple_request("s-2", version="1")
        req.outputs.add().name = "OUTPUT1"
        status, resp = self.assertSameGrpc(lambda s: s.ModelInfer(req))
        self.assertEqual([o.name for o in resp.outputs], ["OUTPUT1"])
        # Large tensor, gzip on the client's call.
        x = np.random.default_rng(3).standard_normal(1 << 18).astype(np.float32)
        big = infer_request("identity_fp32", [("INPUT0", "FP32", [1, x.size], x.tobytes())])
        status, resp = self.assertSameGrpc(lambda s: s.ModelInfer(big, compression=grpc.Compression.Gzip))
        self.assertEqual(resp.raw_output_contents[0], x.tobytes())

    def test_classification_http_and_grpc(self):
        req = {"inputs": [{"name": "INPUT0", "shape": [1, 4], "datatype": "FP32",
                           "data": [0.5, 3.3, 1.0, 2.0]}],
               "outputs": [{"name": "OUTPUT0", "parameters": {"classification": 2}}]}
        status, _, data = self.assertSameHttp("POST", "/v2/models/identity_fp32/infer",
                                              json.dumps(req).encode())
        self.assertEqual(json.loads(data)["outputs"][0]["data"], ["3.300000:1", "2.000000:3"])
        req["outputs"][0]["parameters"]["binary_data"] = True
        status, _, data = self.assertSameHttp("POST", "/v2/models/identity_fp32/infer",
                                              json.dumps(req).encode())
        self.assertEqual(status, 200, data)
        status, _, data = self.assertSameHttp(
            "POST", "/v2/models/simple/infer",
            simple_json(outputs=[{"name": "OUTPUT0", "parameters": {"classification": 3}}]))
        self.assertEqual(json.loads(data)["outputs"][0]["data"], ["16:15", "15:14", "14:13"])
        x = np.array([[0.5, 3.3, 1.0, 2.0]], np.float32)
        greq = infer_request("identity_fp32", [("INPUT0", "FP32", [1, 4], x.tobytes())],
                             outputs=[("OUTPUT0", 2)])
        status, resp = self.assertSameGrpc(lambda s: s.ModelInfer(greq))
        self.assertEqual(status, "ok", resp)
        self.assertEqual(resp.outputs[0].datatype, "BYTES")
        self.assertEqual(resp.raw_output_contents[0], raw_of("BYTES", [b"3.300000:1", b"2.000000:3"]))

    def test_grpc_stream_non_decoupled(self):
        requests = [simple_request("a"), identity_request("BYTES", "b"), identity_request("FP16", "c"),
                    identity_request("BF16", "d")]
        want = {r.infer_response.id: r for r in stream(U, requests)}
        self.assertEqual(sorted(want), ["a", "b", "c", "d"])
        for name, gateway in FORWARDERS:
            with self.subTest(gateway=name):
                got = stream(gateway, requests)
                self.assertEqual(len(got), 4)
                self.assertEqual({r.infer_response.id: r for r in got}, want)
                if gateway is G_GRPC:  # one upstream stream: U's order
                    self.assertEqual([r.infer_response.id for r in got], ["a", "b", "c", "d"])

    def test_grpc_stream_decoupled_through_the_grpc_upstream(self):
        requests = [repeat_request([7, 8, 9], "r1"), repeat_request([1], "r2", empty_final=True),
                    simple_request("s")]
        def by_id(responses):  # requests run concurrently: their interleaving is timing
            out = {}
            for r in responses:
                out.setdefault(r.infer_response.id, []).append(r)
            return out
        want = by_id(stream(U, requests))
        got = stream(G_GRPC, requests)
        self.assertEqual(by_id(got), want)
        r1 = [r.infer_response for r in got if r.infer_response.id == "r1"]
        self.assertEqual([np.frombuffer(outputs_of(r)["OUT"][1], np.int32)[0] for r in r1], [7, 8, 9])
        r2 = [r.infer_response for r in got if r.infer_response.id == "r2"]
        self.assertEqual([r.parameters["triton_final_response"].bool_param for r in r2], [False, True])

    def test_grpc_stream_decoupled_through_the_http_upstream_is_an_in_band_error(self):
        # An HTTP upstream answers a decoupled model's /infer with 501: the error comes
        # back on the stream, which keeps serving.
        got = stream(G_HTTP, [repeat_request([7, 8], "r"), simple_request("after")])
        errors = [r for r in got if r.error_message]
        self.assertEqual(len(errors), 1, got)
        self.assertEqual(errors[0].infer_response.id, "r")
        self.assertIn("decoupled", errors[0].error_message)
        ok = [r.infer_response for r in got if not r.error_message]
        self.assertEqual([r.id for r in ok], ["after"])
        self.assertEqual(ok[0], [r for r in stream(U, [simple_request("after")])][0].infer_response)

    def test_decoupled_model_on_unary_paths(self):
        for name, gateway in FORWARDERS:
            with self.subTest(gateway=name):
                self.assertGrpcError(lambda: stub_of(gateway).ModelInfer(repeat_request([1], "u")),
                                     grpc.StatusCode.UNIMPLEMENTED, ["decoupled"])
        req = {"inputs": [{"name": "IN", "shape": [1], "datatype": "INT32", "data": [1]},
                          {"name": "DELAY", "shape": [1], "datatype": "UINT32", "data": [0]},
                          {"name": "WAIT", "shape": [1], "datatype": "UINT32", "data": [0]}]}
        self.assertSameHttp("POST", "/v2/models/repeat_int32/infer", json.dumps(req).encode(),
                            gateways=[("G_http", G_HTTP)])
        self.assertHttpError(G_GRPC.request("POST", "/v2/models/repeat_int32/infer",
                                            json.dumps(req).encode()), 501, ["decoupled"])

    def test_sequence_state_lives_upstream(self):
        def http_step(gateway, seq, value, start=False, end=False):
            req = {"parameters": {"sequence_id": seq, "sequence_start": start, "sequence_end": end},
                   "inputs": [{"name": "INPUT", "shape": [1, 1], "datatype": "INT32", "data": [value]}]}
            return gateway.request("POST", "/v2/models/simple_sequence/infer", json.dumps(req).encode())

        def grpc_step(gateway, seq, value, start=False, end=False):
            req = infer_request("simple_sequence", [("INPUT", "INT32", [1, 1], struct.pack("<i", value))],
                                params={"sequence_id": seq, "sequence_start": start, "sequence_end": end})
            return stub_of(gateway).ModelInfer(req)

        def http_value(r):
            self.assertEqual(r[0], 200, r[2])
            return json.loads(r[2])["outputs"][0]["data"][0]

        def grpc_value(r):
            return struct.unpack("<i", r.raw_output_contents[0])[0]

        # One sequence, its requests spread over both gateways and both client forms.
        self.assertEqual(http_value(http_step(G_GRPC, 7001, 5, start=True)), 5)
        self.assertEqual(http_value(http_step(G_HTTP, 7001, 10)), 15)
        self.assertEqual(grpc_value(grpc_step(G_HTTP, 7001, 1)), 16)
        self.assertEqual(grpc_value(grpc_step(G_GRPC, 7001, 2, end=True)), 18)
        self.assertHttpError(http_step(G_HTTP, 7001, 1), 400, ["START"])
        self.assertGrpcError(lambda: grpc_step(G_GRPC, 7001, 1), grpc.StatusCode.INVALID_ARGUMENT, ["START"])
        # A string correlation ID.
        self.assertEqual(grpc_value(grpc_step(G_HTTP, "route-s", 3, start=True)), 3)
        self.assertEqual(http_value(http_step(G_GRPC, "route-s", 4)), 7)
        self.assertEqual(grpc_value(grpc_step(G_GRPC, "route-s", 4, end=True)), 11)

    def test_sequences_on_one_stream_reach_the_upstream_in_order(self):
        # A stream's requests are processed in order (a sequence's state depends on it):
        # 40 sequences of 5 requests each, back to back on one stream, twice per gateway.
        steps = (1, 2, 3, 4, 5)
        sums = [sum(steps[:i + 1]) for i in range(len(steps))]
        for base, (name, gateway) in ((72000, FORWARDERS[0]), (74000, FORWARDERS[1])):
            with self.subTest(gateway=name):
                wrong = []
                for attempt in range(2):
                    reqs = [infer_request("simple_sequence", [("INPUT", "INT32", [1, 1], struct.pack("<i", v))],
                                          request_id="%d-%d" % (seq, i),
                                          params={"sequence_id": base + attempt * 100 + seq,
                                                  "sequence_start": i == 0, "sequence_end": i == len(steps) - 1})
                            for seq in range(40) for i, v in enumerate(steps)]
                    got = stream(gateway, reqs)
                    self.assertEqual(len(got), len(reqs))
                    for r in got:
                        seq, i = map(int, r.infer_response.id.split("-"))
                        value = (r.error_message or
                                 struct.unpack("<i", r.infer_response.raw_output_contents[0])[0])
                        if value != sums[i]:
                            wrong.append((attempt, seq, i, value))
                self.assertEqual(wrong[:5], [], "%d of %d answers wrong" % (len(wrong), 2 * len(reqs)))

    def test_generate_through_the_http_upstream(self):
        self.assertSameHttp("POST", "/v2/models/identity_bytes/generate",
                            json.dumps({"INPUT0": ["hello"], "id": "g1"}).encode(),
                            gateways=[("G_http", G_HTTP)])
        status, headers, body = self.assertSameHttp(
            "POST", "/v2/models/repeat_int32/generate_stream",
            json.dumps({"IN": [4, 5, 6], "DELAY": [1, 1, 1], "WAIT": [0]}).encode(),
            gateways=[("G_http", G_HTTP)])
        self.assertEqual(headers["content-type"], "text/event-stream; charset=utf-8")
        events = [json.loads(e[len(b"data: "):]) for e in body.split(b"\n\n") if e]
        self.assertEqual([e["OUT"] for e in events], [4, 5, 6])
        # Events are relayed as they arrive: the first is read long before the second exists.
        conn = G_HTTP.connection(timeout=30)
        try:
            conn.request("POST", "/v2/models/repeat_int32/generate_stream",
                         json.dumps({"IN": [1, 2], "DELAY": [0, 2000], "WAIT": [0]}).encode())
            resp = conn.getresponse()
            self.assertEqual(resp.status, 200)
            first = resp.readline()
            first_at = time.monotonic()
            rest = resp.read()
            gap = time.monotonic() - first_at
        finally:
            conn.close()
        self.assertTrue(first.startswith(b"data: {"), first)
        self.assertIn(b'"OUT":2', rest)
        self.assertGreater(gap, 1.0, "the first event was held back until the stream ended")

    def test_generate_through_the_grpc_upstream_is_refused(self):
        status, _, body = G_GRPC.request("POST", "/v2/models/identity_bytes/generate",
                                         json.dumps({"INPUT0": ["hello"]}).encode())
        self.assertHttpError((status, None, body), 501, ["identity_bytes", "u-grpc"])

    def test_model_metadata_ready_config_over_http(self):
        for path in ("/v2/models/simple", "/v2/models/simple/versions/1", "/v2/models/identity_bf16",
                     "/v2/models/simple/ready", "/v2/models/simple/config",
                     "/v2/models/simple_sequence/config", "/v2/models/repeat_int32/config"):
            with self.subTest(path=path):
                # Passed through by G_http; rebuilt from the typed RPC by G_grpc.
                status, _, want = self.assertSameHttp("GET", path, gateways=[("G_http", G_HTTP)])
                self.assertEqual(status, 200, want)
                got = G_GRPC.request("GET", path)
                self.assertEqual(got[0], 200, got[2])
                if want:
                    self.assertEqual(json.loads(got[2]), json.loads(want))
                else:
                    self.assertEqual(got[2], b"")
        for path, status in (("/v2/models/nope", 404), ("/v2/models/nope/ready", 404),
                             ("/v2/models/simple/versions/9/ready", 400)):
            with self.subTest(path=path):
                want = self.assertSameHttp("GET", path, gateways=[("G_http", G_HTTP)])
                self.assertEqual(want[0], status, want[2])
        for path in ("/v2/models/nope", "/v2/models/nope/ready"):
            with self.subTest(path=path, gateway="G_grpc"):
                self.assertHttpError(G_GRPC.request("GET", path), 404, ["nope"])

    def test_model_metadata_ready_config_over_grpc(self):
        for model in ("simple", "identity_bf16", "simple_sequence", "repeat_int32"):
            with self.subTest(model=model):
                self.assertSameGrpc(lambda s: s.ModelMetadata(pb.ModelMetadataRequest(name=model)))
                self.assertSameGrpc(lambda s: s.ModelConfig(pb.ModelConfigRequest(name=model)))
                status, resp = self.assertSameGrpc(lambda s: s.ModelReady(pb.ModelReadyRequest(name=model)))
                self.assertTrue(resp.ready)
        code, _ = self.assertSameGrpc(lambda s: s.ModelMetadata(pb.ModelMetadataRequest(name="nope")))
        self.assertEqual(code, grpc.StatusCode.NOT_FOUND)
        for name, gateway in FORWARDERS:
            with self.subTest(gateway=name):
                self.assertGrpcError(lambda: stub_of(gateway).ModelReady(pb.ModelReadyRequest(name="nope")),
                                     grpc.StatusCode.NOT_FOUND)

    def test_statistics_over_http_and_grpc(self):
        stub_of(G_GRPC).ModelInfer(simple_request())
        G_HTTP.request("POST", "/v2/models/simple/infer", simple_json())
        def settled(body):  # `sleep` may still finish a request cancelled by an earlier test
            stats = json.loads(body)
            stats["model_stats"] = [m for m in stats["model_stats"] if m["name"] != "sleep"]
            return stats
        for path in ("/v2/models/simple/stats", "/v2/models/stats"):
            want = U.request("GET", path)
            self.assertEqual(want[0], 200)
            for name, gateway in FORWARDERS:
                with self.subTest(gateway=name, path=path):
                    got = gateway.request("GET", path)
                    self.assertEqual(got[0], 200, got[2])
                    self.assertEqual(settled(got[2]), settled(want[2]))
        status, resp = self.assertSameGrpc(lambda s: s.ModelStatistics(pb.ModelStatisticsRequest(name="simple")))
        self.assertEqual(resp.model_stats[0].name, "simple")
        self.assertGreaterEqual(resp.model_stats[0].inference_count, 2)
        want = stub_of(U).ModelStatistics(pb.ModelStatisticsRequest())
        for name, gateway in FORWARDERS:
            with self.subTest(gateway=name):
                got = stub_of(gateway).ModelStatistics(pb.ModelStatisticsRequest())
                self.assertEqual([m for m in got.model_stats if m.name != "sleep"],
                                 [m for m in want.model_stats if m.name != "sleep"])
        want = U.request("GET", "/v2/models/nope/stats")
        self.assertEqual(want[0], 400)
        self.assertSameHttp("GET", "/v2/models/nope/stats", gateways=[("G_http", G_HTTP)])

    def test_load_and_unload_through_each_gateway_and_client(self):
        model = "identity_uint64"
        try:
            for name, gateway in FORWARDERS:
                with self.subTest(gateway=name, client="http"):
                    status, _, body = gateway.request(
                        "POST", "/v2/repository/models/%s/unload" % model,
                        json.dumps({"parameters": {"unload_dependents": False}}).encode())
                    self.assertEqual(status, 200, body)
                    self.assertEqual(U.request("GET", "/v2/models/%s/ready" % model)[0], 400)
                    status, _, body = gateway.request("POST", "/v2/repository/models/%s/load" % model, b"{}")
                    self.assertEqual(status, 200, body)
                    self.assertEqual(U.request("GET", "/v2/models/%s/ready" % model)[0], 200)
                with self.subTest(gateway=name, client="grpc"):
                    s = stub_of(gateway)
                    s.RepositoryModelUnload(pb.RepositoryModelUnloadRequest(model_name=model))
                    self.assertFalse(stub_of(U).ModelReady(pb.ModelReadyRequest(name=model)).ready)
                    s.RepositoryModelLoad(pb.RepositoryModelLoadRequest(model_name=model))
                    self.assertTrue(stub_of(U).ModelReady(pb.ModelReadyRequest(name=model)).ready)
        finally:
            U.request("POST", "/v2/repository/models/%s/load" % model, b"{}")
        # U's refusal to load an unknown model passes through with its code (500 / INTERNAL).
        self.assertSameHttp("POST", "/v2/repository/models/nope/load", b"{}", gateways=[("G_http", G_HTTP)])
        self.assertHttpError(G_GRPC.request("POST", "/v2/repository/models/nope/load", b"{}"), 500, ["nope"])
        self.assertSameGrpc(lambda s: s.RepositoryModelLoad(pb.RepositoryModelLoadRequest(model_name="nope")))

    def test_repository_index_of_one_upstream(self):
        for body in (b"", json.dumps({"ready": True}).encode()):
            want = U.request("POST", "/v2/repository/index", body)
            self.assertEqual(want[0], 200)
            for name, gateway in FORWARDERS:
                with self.subTest(gateway=name, body=body):
                    got = gateway.request("POST", "/v2/repository/index", body)
                    self.assertEqual(got[0], 200, got[2])
                    self.assertEqual(json.loads(got[2]), json.loads(want[2]))
        status, resp = self.assertSameGrpc(lambda s: s.RepositoryIndex(pb.RepositoryIndexRequest()))
        self.assertIn("simple", {m.name for m in resp.models})

    def test_upstream_errors_pass_through(self):
        bad_shape = BAD_SHAPE_JSON
        bad_string = json.dumps({"inputs": [
            {"name": "INPUT0", "shape": [1, 16], "datatype": "BYTES", "data": ["1"] * 15 + ["abc"]},
            {"name": "INPUT1", "shape": [1, 16], "datatype": "BYTES", "data": ["2"] * 16}]}).encode()
        for path, body, status in (("/v2/models/nope/infer", simple_json(), 404),
                                   ("/v2/models/simple/versions/7/infer", simple_json(), 404),
                                   ("/v2/models/simple/infer", bad_shape, 400),
                                   ("/v2/models/simple_string/infer", bad_string, 400)):
            with self.subTest(path=path):
                want = self.assertSameHttp("POST", path, body)
                self.assertEqual(want[0], status, want[2])
        self.assertIn(b"Request for unknown model: 'nope'", U.request("POST", "/v2/models/nope/infer",
                                                                       simple_json())[2])
        bad = simple_request()
        bad.inputs[0].shape[1] = 15
        for req, code in ((pb.ModelInferRequest(model_name="nope"), grpc.StatusCode.NOT_FOUND),
                          (bad, grpc.StatusCode.INVALID_ARGUMENT),
                          (simple_request(version="7"), grpc.StatusCode.NOT_FOUND)):
            with self.subTest(model=req.model_name, version=req.model_version):
                got = self.assertSameGrpc(lambda s: s.ModelInfer(req))
                self.assertEqual(got[0], code)

    def test_client_deadline_through_each_upstream(self):
        for name, gateway in FORWARDERS:
            with self.subTest(gateway=name):
                started = time.monotonic()
                self.assertGrpcError(lambda: stub_of(gateway).ModelInfer(sleep_request(3000), timeout=0.5),
                                     grpc.StatusCode.DEADLINE_EXCEEDED)
                self.assertLess(time.monotonic() - started, 2.5)
                self.assertEqual(stub_of(gateway).ModelInfer(sleep_request(1), timeout=30).model_name, "sleep")

    def test_large_binary_bodies_sent_in_pieces(self):
        """A binary body sent in pieces with pauses: the request is handed over once its JSON
        header is in (it is in flight while half its tensor is still unsent) and goes on as
        it arrives, passed through to the HTTP upstream, transcoded to the gRPC one; but a
        BYTES tensor toward gRPC (counted when decoded) waits for the rest. Either way the
        answer is U's, byte for byte."""
        values = np.arange(2 << 20, dtype=np.float32) * 0.5  # 8 MiB
        strings = [bytes([i % 251]) * (i % 1500) for i in range(1500)]
        cases = [("identity_fp32", "FP32", [1, values.size], values.tobytes()),
                 ("identity_bytes", "BYTES", [1, len(strings)],
                  b"".join(struct.pack("<I", len(x)) + x for x in strings))]
        for model, datatype, shape, raw in cases:
            body, headers = binary_body([("INPUT0", datatype, shape, raw)],
                                        outputs=[{"name": "OUTPUT0", "parameters": {"binary_data": True}}])
            path = "/v2/models/%s/infer" % model
            want = U.request("POST", path, body, headers)
            self.assertEqual(want[0], 200, want[2][:300])
            for name, gateway in FORWARDERS:
                with self.subTest(model=model, gateway=name):
                    in_flight = []

                    def pieces():
                        half = len(body) // 2
                        for at in range(0, half, 1 << 20):
                            yield body[at:min(at + (1 << 20), half)]
                        # Handed over early (a BYTES one toward gRPC then waits there).
                        in_flight.append(wait_until(
                            lambda: requests_in_flight(gateway, model) == 1, timeout=5))
                        yield body[half:]

                    conn = gateway.connection()
                    try:
                        conn.request("POST", path, body=pieces(),
                                     headers=dict(headers, **{"Content-Length": str(len(body))}))
                        resp = conn.getresponse()
                        got = (resp.status, resp.read())
                    finally:
                        conn.close()
                    self.assertEqual(in_flight, [True])
                    self.assertEqual(got[0], 200, got[1][:300])
                    self.assertBytesEqual(got[1], want[2], "%s via %s" % (model, name))

    def test_stream_requests_false_reads_bodies_whole_first(self):
        """An upstream configured `stream_requests: false` (the default): the request waits
        for its whole body (not in flight while half of it is unsent), then is answered as U
        answers."""
        whole = _start("G_whole", Gateway.from_template(
            FORWARDER_TEMPLATE.replace("stream_requests: true", "stream_requests: false"),
            name="u-grpc", protocol="grpc", endpoint=U.address("grpc")))
        values = np.arange(1 << 20, dtype=np.float32)
        body, headers = binary_body([("INPUT0", "FP32", [1, values.size], values.tobytes())],
                                    outputs=[{"name": "OUTPUT0", "parameters": {"binary_data": True}}])
        want = U.request("POST", "/v2/models/identity_fp32/infer", body, headers)
        seen = []

        def pieces():
            yield body[:len(body) // 2]
            time.sleep(0.3)  # a pause in the upload, long enough for an early hand-over to show
            seen.append(requests_in_flight(whole, "identity_fp32"))
            yield body[len(body) // 2:]

        conn = whole.connection()
        try:
            conn.request("POST", "/v2/models/identity_fp32/infer", body=pieces(),
                         headers=dict(headers, **{"Content-Length": str(len(body))}))
            resp = conn.getresponse()
            got = (resp.status, resp.read())
        finally:
            conn.close()
        self.assertEqual(seen, [0.0])
        self.assertEqual(got[0], 200, got[1][:300])
        self.assertBytesEqual(got[1], want[2], "via G_whole")

    def test_a_client_that_leaves_mid_body_leaves_the_gateway_serving(self):
        """A client that sends half a large binary body and goes away: the upstream call the
        gateway started with it is cancelled, nothing stays in flight, and the next request
        is answered."""
        values = np.arange(1 << 20, dtype=np.float32)
        body, headers = binary_body([("INPUT0", "FP32", [1, values.size], values.tobytes())])
        for name, gateway in FORWARDERS:
            with self.subTest(gateway=name):
                s = socket.create_connection(("127.0.0.1", gateway.port("http")), timeout=10)
                s.sendall(("POST /v2/models/identity_fp32/infer HTTP/1.1\r\nHost: x\r\n"
                           "Inference-Header-Content-Length: %s\r\nContent-Length: %d\r\n\r\n"
                           % (headers["Inference-Header-Content-Length"], len(body))).encode()
                          + body[:len(body) // 2])
                self.assertTrue(wait_until(lambda: requests_in_flight(gateway, "identity_fp32") == 1,
                                           timeout=5))
                s.close()
                self.assertTrue(wait_until(lambda: requests_in_flight(gateway, "identity_fp32") == 0,
                                           timeout=10))
                status, _, data = gateway.request("POST", "/v2/models/identity_fp32/infer", body, headers)
                self.assertEqual(status, 200, data[:300])

    # ---- a gRPC client's large message, forwarded as it arrives ----

    def _large_grpc_request(self, values=1 << 21):
        """An identity_fp32 ModelInfer of `values` FP32 (8 MiB by default), and its serialized form."""
        raw = (np.arange(values, dtype=np.float32) * 0.25).tobytes()
        req = pb.ModelInferRequest(model_name="identity_fp32")
        t = req.inputs.add()
        t.name, t.datatype = "INPUT0", "FP32"
        t.shape.extend([1, values])
        req.raw_input_contents.append(raw)
        return req, req.SerializeToString()

    def _paused(self, gateway, message, at_pause, then="send"):
        """The message sent to the gateway's gRPC listener up to its middle, `at_pause()`
        run, then `then` (grpc_stubs.h2_model_infer_paused)."""
        return grpc_stubs.h2_model_infer_paused(gateway.address("grpc"), message, len(message) // 2,
                                                at_pause, then=then)

    def test_large_grpc_message_goes_on_as_it_arrives(self):
        """A gRPC client's 8 MiB ModelInfer sent in two halves with a pause, to a gateway whose
        gRPC upstream is configured `stream_requests: true`: the upstream has the call in
        flight while half the message is still unsent (the gateway handed it over once the
        fields before the tensors were in, and sends the tensor as it comes). The answer is
        U's, field for field; through the HTTP upstream (transcoded: the gateway reads the
        whole message first) as well."""
        req, message = self._large_grpc_request()
        want = stub_of(U).ModelInfer(req, timeout=30)
        for name, gateway in FORWARDERS:
            with self.subTest(gateway=name):
                seen = []

                def at_pause():
                    if gateway is G_GRPC:
                        seen.append(wait_until(lambda: requests_in_flight(U, "identity_fp32") == 1, timeout=5))
                    else:
                        time.sleep(0.2)
                        seen.append(requests_in_flight(U, "identity_fp32") == 0)

                headers, data, trailers, reset = self._paused(gateway, message, at_pause)
                self.assertEqual(seen, [True])
                self.assertIn(reset, (None, 0))  # RST_STREAM NO_ERROR may follow the trailers
                self.assertEqual(trailers.get("grpc-status"), "0", trailers)
                got = pb.ModelInferResponse.FromString(data[5:])
                self.assertEqual(got.model_name, want.model_name)
                self.assertEqual(list(got.raw_output_contents), list(want.raw_output_contents))
                self.assertEqual(got.outputs, want.outputs)
        self.assertTrue(wait_until(lambda: requests_in_flight(U, "identity_fp32") == 0, timeout=5))

    def test_stream_requests_false_reads_grpc_messages_whole_first(self):
        """`stream_requests: false` (the default): the upstream gets nothing while half the
        gRPC message is unsent, then answers as directly."""
        whole = _start("G_whole_grpc", Gateway.from_template(
            FORWARDER_TEMPLATE.replace("stream_requests: true", "stream_requests: false"),
            name="u-grpc", protocol="grpc", endpoint=U.address("grpc")))
        req, message = self._large_grpc_request()
        want = stub_of(U).ModelInfer(req, timeout=30)
        seen = []

        def at_pause():
            time.sleep(0.3)  # long enough for an early hand-over to reach U
            seen.append(requests_in_flight(U, "identity_fp32"))

        _, data, trailers, _ = self._paused(whole, message, at_pause)
        self.assertEqual(seen, [0.0])
        self.assertEqual(trailers.get("grpc-status"), "0", trailers)
        self.assertEqual(list(pb.ModelInferResponse.FromString(data[5:]).raw_output_contents),
                         list(want.raw_output_contents))

    def test_a_grpc_client_that_resets_mid_message_cancels_the_upstream_call(self):
        """A gRPC client that resets its stream with half its message sent: the upstream
        call the gateway started with it is cancelled (U has nothing in flight), and the
        next request is answered."""
        req, message = self._large_grpc_request()
        started = []
        self._paused(G_GRPC, message, lambda: started.append(
            wait_until(lambda: requests_in_flight(U, "identity_fp32") == 1, timeout=5)), then="reset")
        self.assertEqual(started, [True])
        self.assertTrue(wait_until(lambda: requests_in_flight(U, "identity_fp32") == 0, timeout=10))
        self.assertTrue(wait_until(lambda: requests_in_flight(G_GRPC, "identity_fp32") == 0, timeout=10))
        self.assertEqual(stub_of(G_GRPC).ModelInfer(req, timeout=30).model_name, "identity_fp32")

    def test_a_grpc_message_cut_short_is_refused_and_its_upstream_call_cancelled(self):
        """A stream that ends with half its one message sent: INTERNAL, as for a message read
        whole; the upstream call already started is cancelled."""
        _, message = self._large_grpc_request()
        started = []
        headers, data, trailers, _ = self._paused(G_GRPC, message, lambda: started.append(
            wait_until(lambda: requests_in_flight(U, "identity_fp32") == 1, timeout=5)), then="end")
        self.assertEqual(started, [True])
        status = trailers or headers
        self.assertEqual(status.get("grpc-status"), "13", status)
        self.assertIn("the request ended inside a message", status.get("grpc-message", ""))
        self.assertEqual(data, b"")
        self.assertTrue(wait_until(lambda: requests_in_flight(U, "identity_fp32") == 0, timeout=10))

    def test_a_model_name_after_the_tensors_routes_the_message_where_protobuf_says(self):
        """A message whose model_name comes again after its raw_input_contents (valid protobuf:
        the last one wins). The gateway routes the early call on the fields before the
        tensors; once the message is whole it sees the later name, cancels that call before
        the upstream has the message whole, and starts over with the whole message. The
        client gets what U answers to the same message directly, and U answers the later
        model once (not a second time for the cancelled call)."""
        _, message = self._large_grpc_request()
        message += pb.ModelInferRequest(model_name="simple").SerializeToString()
        direct_headers, _, direct_trailers, _ = grpc_stubs.h2_model_infer(U.address("grpc"), message)
        direct = direct_trailers or direct_headers  # Trailers-Only: the status is in the headers
        self.assertEqual(direct.get("grpc-status"), "3", direct)  # "simple" wants two inputs
        before = requests_total(U, "simple")
        started = []
        headers, data, trailers, _ = self._paused(G_GRPC, message, lambda: started.append(
            wait_until(lambda: requests_in_flight(U, "identity_fp32") == 1, timeout=5)))
        self.assertEqual(started, [True])  # the early call reached U
        status = trailers or headers
        self.assertEqual((status.get("grpc-status"), status.get("grpc-message")),
                         (direct.get("grpc-status"), direct.get("grpc-message")))
        self.assertEqual(data, b"")
        self.assertTrue(wait_until(lambda: requests_in_flight(U, "identity_fp32") == 0, timeout=10))
        self.assertTrue(wait_until(lambda: requests_total(U, "simple") >= before + 1, timeout=5))
        time.sleep(0.2)  # a second answer of "simple", were there one, would be counted by now
        self.assertEqual(requests_total(U, "simple"), before + 1)

    def test_a_large_message_whose_head_routes_nowhere_is_routed_by_the_whole(self):
        """The fields before the tensors name a model no route takes; a model_name after them
        (protobuf's last one wins) names one routed to an upstream that is down. The call is
        not answered on the head (NOT_FOUND): it waits for the whole message, which routes
        it, and the client gets what a small message of the same form gets (read whole, it
        is never handed over early): UNAVAILABLE naming that upstream."""
        def merged(values):
            req, message = self._large_grpc_request(values)
            req.model_name = "no_such_model"
            return (req.SerializeToString()
                    + pb.ModelInferRequest(model_name="identity_fp32").SerializeToString())

        small_headers, _, small_trailers, _ = grpc_stubs.h2_model_infer(ERR.address("grpc"), merged(16))
        want = small_trailers or small_headers
        self.assertEqual(want.get("grpc-status"), "14", want)
        self.assertIn("down-grpc", want.get("grpc-message", ""))
        headers, data, trailers, _ = self._paused(ERR, merged(1 << 21), lambda: time.sleep(0.2))
        got = trailers or headers
        self.assertEqual((got.get("grpc-status"), got.get("grpc-message")),
                         (want.get("grpc-status"), want.get("grpc-message")))
        self.assertEqual(data, b"")

    def test_readiness_and_health_of_the_forwarders(self):
        for name, gateway in FORWARDERS:
            with self.subTest(gateway=name):
                ready = wait_until(lambda: gateway.request("GET", "/v2/health/ready")[0] == 200, timeout=30)
                self.assertTrue(ready, "not ready although its upstream is")
                self.assertTrue(stub_of(gateway).ServerReady(pb.ServerReadyRequest()).ready)
                self.assertEqual(gateway.request("GET", "/v2/health/live")[0], 200)


# ---- routing rules ----------------------------------------------------------------------

class RoutingRulesE2E(Base):
    def assertRoutedTo(self, send, model, upstream_expected, times=1):
        """send() `times` requests; U's or V's count for `model` grows by `times`, the
        other's not at all."""
        before = {"U": inference_count(U, model), "V": inference_count(V, model) if model in V_MODELS else 0}
        for _ in range(times):
            send()
        after = {"U": inference_count(U, model), "V": inference_count(V, model) if model in V_MODELS else 0}
        delta = {k: after[k] - before[k] for k in after}
        self.assertEqual(delta, {"U": times if upstream_expected == "U" else 0,
                                 "V": times if upstream_expected == "V" else 0})

    def http_ok(self, path, body, headers=None):
        status, _, data = RULES.request("POST", path, body, headers)
        self.assertEqual(status, 200, data)
        return data

    def test_exact_route(self):
        body = json.dumps({"inputs": [
            {"name": "INPUT0", "shape": [1, 16], "datatype": "BYTES", "data": [str(i) for i in range(16)]},
            {"name": "INPUT1", "shape": [1, 16], "datatype": "BYTES", "data": ["1"] * 16}]}).encode()
        self.assertRoutedTo(lambda: self.http_ok("/v2/models/simple_string/infer", body), "simple_string", "V")
        req = infer_request("simple_string", [("INPUT0", "BYTES", [1, 16], raw_of("BYTES", [b"5"] * 16)),
                                              ("INPUT1", "BYTES", [1, 16], raw_of("BYTES", [b"2"] * 16))])
        self.assertRoutedTo(lambda: stub_of(RULES).ModelInfer(req), "simple_string", "V")
        # The builtin upstream of the same gateway.
        status, _, data = RULES.request("POST", "/v2/models/identity_bool/infer", identity_json("BOOL"))
        self.assertEqual(status, 200, data)
        self.assertEqual(json.loads(data)["outputs"][0]["data"], VALUES["BOOL"])

    def test_prefix_route(self):
        self.assertRoutedTo(lambda: self.http_ok("/v2/models/identity_uint8/infer", identity_json("UINT8")),
                            "identity_uint8", "V")
        self.assertRoutedTo(lambda: stub_of(RULES).ModelInfer(identity_request("UINT16")), "identity_uint16", "V")
        # identity_int8 does not start with "identity_u": the catch-all (U).
        self.assertRoutedTo(lambda: self.http_ok("/v2/models/identity_int8/infer", identity_json("INT8")),
                            "identity_int8", "U")
        # V does not serve identity_uint32: the prefix still sends it there, V says 404.
        status, _, body = RULES.request("POST", "/v2/models/identity_uint32/infer", identity_json("UINT32"))
        self.assertHttpError((status, None, body), 404, ["identity_uint32"])

    def test_wildcard_route(self):
        self.assertRoutedTo(lambda: self.http_ok("/v2/models/identity_int64/infer", identity_json("INT64")),
                            "identity_int64", "U")
        self.assertRoutedTo(lambda: stub_of(RULES).ModelInfer(identity_request("FP32")), "identity_fp32", "U")
        # An unknown model goes to U too, which answers for it.
        self.assertSameHttp("POST", "/v2/models/nope/infer", simple_json(), gateways=[("G_rules", RULES)])

    def test_header_route(self):
        path, body = "/v2/models/identity_int32/infer", identity_json("INT32")
        self.assertRoutedTo(lambda: self.http_ok(path, body, {"X-Tenant": "beta"}), "identity_int32", "V")
        self.assertRoutedTo(lambda: self.http_ok(path, body, {"x-tenant": "alpha"}), "identity_int32", "U")
        self.assertRoutedTo(lambda: self.http_ok(path, body), "identity_int32", "U")
        req = identity_request("INT32")
        s = stub_of(RULES)
        self.assertRoutedTo(lambda: s.ModelInfer(req, metadata=(("x-tenant", "beta"),)), "identity_int32", "V")
        self.assertRoutedTo(lambda: s.ModelInfer(req, metadata=(("x-tenant", "gamma"),)), "identity_int32", "U")
        self.assertRoutedTo(lambda: s.ModelInfer(req), "identity_int32", "U")
        # On a stream the metadata is the stream's.
        self.assertRoutedTo(lambda: stream(RULES, [req], metadata=(("x-tenant", "beta"),)), "identity_int32", "V")
        self.assertRoutedTo(lambda: stream(RULES, [req]), "identity_int32", "U")

    def test_version_route(self):
        body = identity_json("FP64")
        self.assertRoutedTo(lambda: self.http_ok("/v2/models/identity_fp64/versions/1/infer", body),
                            "identity_fp64", "V")
        self.assertRoutedTo(lambda: self.http_ok("/v2/models/identity_fp64/infer", body), "identity_fp64", "U")
        s = stub_of(RULES)
        self.assertRoutedTo(lambda: s.ModelInfer(identity_request("FP64")), "identity_fp64", "U")
        req = identity_request("FP64")
        req.model_version = "1"
        self.assertRoutedTo(lambda: s.ModelInfer(req), "identity_fp64", "V")
        # Non-infer endpoints follow the same rule.
        self.assertEqual(RULES.request("GET", "/v2/models/identity_fp64/versions/1/ready")[0], 200)

    def test_split_80_20(self):
        model = "identity_int16"
        before = (inference_count(U, model), inference_count(V, model))
        n_http = n_grpc = 200
        body = identity_json("INT16")
        conn = RULES.connection()
        try:
            for _ in range(n_http):
                conn.request("POST", "/v2/models/split/infer", body)
                resp = conn.getresponse()
                data = resp.read()
                self.assertEqual(resp.status, 200, data)
                self.assertEqual(json.loads(data)["model_name"], "split")
        finally:
            conn.close()
        req = identity_request("INT16", model="split")
        s = stub_of(RULES)
        for _ in range(n_grpc):
            self.assertEqual(s.ModelInfer(req).model_name, "split")
        to_u = inference_count(U, model) - before[0]
        to_v = inference_count(V, model) - before[1]
        self.assertEqual(to_u + to_v, n_http + n_grpc, (to_u, to_v))
        share = to_u / (n_http + n_grpc)
        # 80% expected; 60-95% is over 7 standard deviations either way for 400 draws.
        self.assertTrue(0.60 <= share <= 0.95, "U got %d of %d" % (to_u, n_http + n_grpc))

    def test_rewrite_through_the_http_upstream(self):
        self.check_rewrite("public")

    def test_rewrite_through_the_grpc_upstream(self):
        self.check_rewrite("public_g")

    def check_rewrite(self, public):
        # Infer over HTTP: U's answer for `simple` with the public name, byte for byte.
        want = U.request("POST", "/v2/models/simple/infer", simple_json(request_id="rw"))
        got = RULES.request("POST", "/v2/models/%s/infer" % public, simple_json(request_id="rw"))
        self.assertEqual(got[0], 200, got[2])
        self.assertBytesEqual(got[2], want[2].replace(b'"model_name":"simple"',
                                                      b'"model_name":"%s"' % public.encode()))
        body, headers = binary_body([("INPUT0", "INT32", [1, 16], bytes(64)),
                                     ("INPUT1", "INT32", [1, 16], bytes(64))], params={"binary_data_output": True})
        want = U.request("POST", "/v2/models/simple/infer", body, headers)
        got = RULES.request("POST", "/v2/models/%s/infer" % public, body, headers)
        self.assertEqual(got[0], 200, got[2])
        n = int(got[1]["inference-header-content-length"])
        self.assertEqual(json.loads(got[2][:n])["model_name"], public)
        self.assertEqual(got[2][n:], want[2][int(want[1]["inference-header-content-length"]):])
        # Over gRPC, unary and stream.
        resp = stub_of(RULES).ModelInfer(simple_request("rw", model=public))
        direct = stub_of(U).ModelInfer(simple_request("rw"))
        direct.model_name = public
        self.assertEqual(resp, direct)
        streamed = stream(RULES, [simple_request("rw", model=public)])
        self.assertEqual([r.infer_response.model_name for r in streamed], [public])
        self.assertEqual(streamed[0].error_message, "")
        # Metadata, config, stats under the public name.
        status, _, meta = RULES.request("GET", "/v2/models/%s" % public)
        self.assertEqual(status, 200, meta)
        expected = json.loads(U.request("GET", "/v2/models/simple")[2])
        expected["name"] = public
        self.assertEqual(json.loads(meta), expected)
        self.assertEqual(stub_of(RULES).ModelMetadata(pb.ModelMetadataRequest(name=public)).name, public)
        self.assertEqual(json.loads(RULES.request("GET", "/v2/models/%s/config" % public)[2])["name"], public)
        stats = json.loads(RULES.request("GET", "/v2/models/%s/stats" % public)[2])
        self.assertEqual([m["name"] for m in stats["model_stats"]], [public])
        self.assertEqual(RULES.request("GET", "/v2/models/%s/ready" % public)[0], 200)
        # Errors name the public model, not the upstream's.
        bad = BAD_SHAPE_JSON
        want_message = error_of(U.request("POST", "/v2/models/simple/infer", bad)[2])
        self.assertIn("'simple'", want_message)
        message = self.assertHttpError(RULES.request("POST", "/v2/models/%s/infer" % public, bad), 400)
        self.assertEqual(message, want_message.replace("'simple'", "'%s'" % public))
        badreq = simple_request(model=public)
        badreq.inputs[0].shape[1] = 15
        badreq.raw_input_contents[0] = badreq.raw_input_contents[0][:60]
        details = self.assertGrpcError(lambda: stub_of(RULES).ModelInfer(badreq),
                                       grpc.StatusCode.INVALID_ARGUMENT, ["'%s'" % public])
        self.assertNotIn("'simple'", details)

    def test_mirror_counts_the_copies(self):
        model, n = "identity_int8", 10
        for route in ("mirrored", "mirrored_h"):
            for client in ("http", "grpc"):
                with self.subTest(route=route, client=client):
                    u0, v0 = inference_count(U, model), inference_count(V, model)
                    for _ in range(n):
                        if client == "http":
                            data = self.http_ok("/v2/models/%s/infer" % route, identity_json("INT8"))
                            self.assertEqual(json.loads(data)["outputs"][0]["data"], VALUES["INT8"])
                        else:
                            resp = stub_of(RULES).ModelInfer(identity_request("INT8", model=route))
                            self.assertEqual(resp.raw_output_contents[0], raw_of("INT8"))
                    self.assertEqual(inference_count(U, model) - u0, n)
                    wait_until(lambda: inference_count(V, model) - v0 >= n, timeout=15)
                    self.assertEqual(inference_count(V, model) - v0, n, "copies the mirror got")

    def test_mirror_copy_is_the_request_and_the_answer_is_the_primarys(self):
        REC.take()
        x = np.array([[1.5, -2.0, 3.25]], np.float32)
        body, headers = binary_body([("INPUT0", "FP32", [1, 3], x.tobytes())],
                                    params={"binary_data_output": True})
        status, resp_headers, data = RULES.request("POST", "/v2/models/mirrored_rec/infer", body, headers)
        self.assertEqual(status, 200, data)
        n = int(resp_headers["inference-header-content-length"])
        self.assertEqual(json.loads(data[:n])["model_name"], "mirrored_rec")
        self.assertEqual(data[n:], x.tobytes())  # U's identity, not the recorder's [42]
        req = infer_request("mirrored_rec", [("INPUT0", "FP32", [1, 3], x.tobytes())], request_id="m2")
        resp = stub_of(RULES).ModelInfer(req)
        self.assertEqual(resp.raw_output_contents[0], x.tobytes())
        calls = []
        self.assertTrue(wait_until(lambda: calls.extend(REC.take()) or len(calls) >= 2, timeout=15), calls)
        self.assertEqual(len(calls), 2)
        for call in calls:
            copy = call["request"]
            self.assertEqual(copy.model_name, "identity_fp32")
            self.assertEqual(list(copy.raw_input_contents), [x.tobytes()])
            self.assertEqual([(t.name, t.datatype, list(t.shape)) for t in copy.inputs],
                             [("INPUT0", "FP32", [1, 3])])
        grpc_copy = [c["request"] for c in calls if c["request"].id == "m2"]
        self.assertEqual(len(grpc_copy), 1)
        expected = pb.ModelInferRequest()
        expected.CopyFrom(req)
        expected.model_name = "identity_fp32"
        self.assertEqual(grpc_copy[0], expected)

    def test_route_timeout(self):
        for route in ("slow", "slow_h"):
            with self.subTest(route=route, client="http"):
                started = time.monotonic()
                status, _, body = RULES.request("POST", "/v2/models/%s/infer" % route, sleep_json(3000))
                self.assertEqual(status, 504, body)
                self.assertLess(time.monotonic() - started, 2.5)
            with self.subTest(route=route, client="grpc"):
                started = time.monotonic()
                self.assertGrpcError(lambda: stub_of(RULES).ModelInfer(sleep_request(3000, model=route)),
                                     grpc.StatusCode.DEADLINE_EXCEEDED)
                self.assertLess(time.monotonic() - started, 2.5)
            with self.subTest(route=route, within="timeout"):
                self.assertEqual(RULES.request("POST", "/v2/models/%s/infer" % route, sleep_json(10))[0], 200)

    def test_deadlines_reach_the_upstream(self):
        REC.take()
        s = stub_of(RULES)
        req = infer_request("recorded", [("INPUT0", "INT32", [1], struct.pack("<i", 1))], request_id="d")
        resp = s.ModelInfer(req)  # no deadline anywhere
        self.assertEqual(resp.raw_output_contents[0], struct.pack("<i", 42))
        s.ModelInfer(req, timeout=5)  # the client's deadline
        req_t = infer_request("recorded_t", [("INPUT0", "INT32", [1], struct.pack("<i", 1))])
        s.ModelInfer(req_t, timeout=20)  # the route's 4 s is shorter
        s.ModelInfer(req_t, timeout=2)  # the client's 2 s is shorter
        status, _, body = RULES.request("POST", "/v2/models/recorded_t/infer", sleep_json(1))
        self.assertEqual(status, 200, body)
        self.assertEqual(json.loads(body)["outputs"][0]["data"], [42])
        left = [c["time_remaining"] for c in REC.take()]
        self.assertEqual(len(left), 5, left)
        self.assertGreater(left[0], 1e6)  # grpcio's "time remaining" without a deadline
        # grpc-timeout is sent rounded up (a few significant digits): a little slack above.
        for got, limit in zip(left[1:], (5, 4, 2, 4)):
            self.assertTrue(limit - 1.5 < got <= limit + 0.25, (got, limit))

    def assertChildSpan(self, forwarded, sent):
        """The gateway's span in the client's trace: same version, trace id and flags, its
        own parent id."""
        f, c = forwarded.split("-"), sent.split("-")
        self.assertEqual((f[0], f[1], f[3]), (c[0], c[1], c[3]), forwarded)
        self.assertRegex(f[2], r"^[0-9a-f]{16}$")
        self.assertNotEqual(f[2], c[2])

    def test_client_headers_and_metadata_forwarded(self):
        REC.take()
        RECH.take()
        headers = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
                   "tracestate": "k=v", "X-Tenant": "t1", "X-Other": "no", "Authorization": "Bearer client"}
        status, _, body = RULES.request("POST", "/v2/models/recorded_h/infer", sleep_json(1), headers)
        self.assertEqual(status, 200, body)
        (call,) = RECH.take("/infer")
        self.assertEqual(call["path"], "/v2/models/recorded_h/infer")
        self.assertEqual(call["body"], sleep_json(1))
        self.assertChildSpan(call["headers"]["traceparent"], headers["traceparent"])
        self.assertEqual(call["headers"]["tracestate"], "k=v")
        self.assertEqual(call["headers"]["x-tenant"], "t1")
        self.assertNotIn("x-other", call["headers"])
        self.assertNotIn("authorization", call["headers"])
        metadata = (("traceparent", headers["traceparent"]), ("x-tenant", "t2"), ("x-other", "no"),
                    ("triton-grpc-protocol-infer-key", "secret"))
        req = infer_request("recorded", [("INPUT0", "INT32", [1], struct.pack("<i", 1))])
        stub_of(RULES).ModelInfer(req, metadata=metadata)
        (call,) = REC.take()
        self.assertChildSpan(call["metadata"]["traceparent"], headers["traceparent"])
        self.assertEqual(call["metadata"]["x-tenant"], "t2")
        self.assertEqual(call["metadata"]["triton-grpc-protocol-infer-key"], "secret")
        self.assertNotIn("x-other", call["metadata"])
        self.assertEqual(call["request"], req)  # passed through untouched
        # gRPC client -> HTTP upstream: binary-tensor /infer, the restricted-API key as its
        # HTTP header, and no triton_ parameter (Triton HTTP refuses them).
        req_h = infer_request("recorded_h", [("INPUT0", "INT32", [1, 2], np.array([[3, 4]], np.int32).tobytes())],
                              request_id="h1")
        resp = stub_of(RULES).ModelInfer(req_h, metadata=metadata)
        self.assertEqual(resp.raw_output_contents[0], struct.pack("<i", 42))
        self.assertEqual(resp.model_name, "recorded_h")
        (call,) = RECH.take("/infer")
        self.assertChildSpan(call["headers"]["traceparent"], headers["traceparent"])
        self.assertEqual(call["headers"]["infer-key"], "secret")
        self.assertNotIn("x-other", call["headers"])
        n = int(call["headers"]["inference-header-content-length"])
        header = json.loads(call["body"][:n])
        self.assertEqual(header["id"], "h1")
        self.assertNotIn(b"triton_", call["body"][:n])
        self.assertEqual(header["inputs"][0]["parameters"]["binary_data_size"], 8)
        self.assertEqual(call["body"][n:], np.array([3, 4], np.int32).tobytes())

    def test_merged_repository_index(self):
        u = json.loads(U.request("POST", "/v2/repository/index", b"")[2])
        v = json.loads(V.request("POST", "/v2/repository/index", b"")[2])
        local = [e for e in u if e["name"] == "identity_bool"]
        recorded = [{"name": "recorded", "version": "1", "state": "READY"}]
        recorded_h = [{"name": "recorded_h", "version": "1", "state": "READY"}]
        # Upstreams in file order: u-grpc, u-http, v-grpc, v-http, rec, rech, local.
        expected = u + u + v + v + recorded + recorded_h + local
        status, _, body = RULES.request("POST", "/v2/repository/index", b"")
        self.assertEqual(status, 200, body)
        self.assertEqual(json.loads(body), expected)
        resp = stub_of(RULES).RepositoryIndex(pb.RepositoryIndexRequest())
        self.assertEqual([(m.name, m.version, m.state) for m in resp.models],
                         [(e["name"], e["version"], e["state"]) for e in expected])

    def test_merged_statistics(self):
        def names(process):
            return [m["name"] for m in json.loads(process.request("GET", "/v2/models/stats")[2])["model_stats"]]
        u, v = names(U), names(V)
        status, _, body = RULES.request("GET", "/v2/models/stats")
        self.assertEqual(status, 200, body)
        self.assertEqual([m["name"] for m in json.loads(body)["model_stats"]],
                         u + u + v + v + ["identity_bool"])
        resp = stub_of(RULES).ModelStatistics(pb.ModelStatisticsRequest())
        self.assertEqual([m.name for m in resp.model_stats], u + u + v + v + ["identity_bool"])


# ---- errors and readiness -----------------------------------------------------------------

class ErrorsE2E(Base):
    def test_no_route(self):
        status, _, body = ERR.request("POST", "/v2/models/nope/infer", simple_json())
        self.assertHttpError((status, None, body), 404, ["nope"])
        self.assertHttpError(ERR.request("GET", "/v2/models/nope"), 404, ["nope"])
        self.assertGrpcError(lambda: stub_of(ERR).ModelInfer(simple_request(model="nope")),
                             grpc.StatusCode.NOT_FOUND, ["nope"])
        self.assertGrpcError(lambda: stub_of(ERR).ModelMetadata(pb.ModelMetadataRequest(name="nope")),
                             grpc.StatusCode.NOT_FOUND, ["nope"])
        got = stream(ERR, [simple_request("x", model="nope"), simple_request("y")])
        self.assertEqual([(r.infer_response.id, bool(r.error_message)) for r in got], [("x", True), ("y", False)])
        self.assertIn("nope", got[0].error_message)
        # The routed model still works.
        self.assertEqual(ERR.request("POST", "/v2/models/simple/infer", simple_json())[0], 200)

    def test_upstream_down(self):
        for model, upstream in (("identity_fp32", "down-grpc"), ("identity_int32", "down-http")):
            datatype = model.split("_")[1].upper()
            with self.subTest(upstream=upstream):
                self.assertHttpError(ERR.request("POST", "/v2/models/%s/infer" % model, identity_json(datatype)),
                                     503, ["'%s'" % upstream])
                self.assertHttpError(ERR.request("GET", "/v2/models/%s" % model), 503, ["'%s'" % upstream])
                self.assertGrpcError(lambda: stub_of(ERR).ModelInfer(identity_request(datatype)),
                                     grpc.StatusCode.UNAVAILABLE, ["'%s'" % upstream])
                self.assertGrpcError(lambda: stub_of(ERR).ModelReady(pb.ModelReadyRequest(name=model)),
                                     grpc.StatusCode.UNAVAILABLE, ["'%s'" % upstream])
        self.assertEqual(ERR.request("POST", "/v2/models/simple/infer", simple_json())[0], 200)

    def test_upstream_down_on_a_stream(self):
        # A gateway of its own: what happens to it here cannot take the other tests along.
        # Several requests per stream, several streams: every request must get its in-band
        # error naming the upstream, the stream must go on, and the gateway must live.
        gateway = Gateway.from_template(ERR_TEMPLATE, policy="always", u_http=U.address("http"),
                                        down_grpc=free_port(), down_http=free_port()).start()
        wrong = []
        try:
            for model, upstream in (("identity_fp32", "down-grpc"), ("identity_int32", "down-http")):
                datatype = model.split("_")[1].upper()
                for attempt in range(15):
                    requests = [identity_request(datatype, "down-%d" % k) for k in range(3)]
                    got = grpc_outcome(lambda: stream(gateway, requests + [simple_request("up")]))
                    if got[0] != "ok":
                        wrong.append((upstream, attempt, "the stream failed", got))
                        break
                    errors = [r.error_message for r in got[1] if r.error_message]
                    answered = [r.infer_response.id for r in got[1] if not r.error_message]
                    if (len(errors) != 3 or answered != ["up"]
                            or not all("'%s'" % upstream in e for e in errors)):
                        wrong.append((upstream, attempt, "%d in-band errors, answered %s"
                                      % (len(errors), answered), errors[:1]))
        finally:
            problems = gateway.stop_and_check()
        self.assertEqual((problems, wrong), ([], []))

    def test_server_endpoints_answered_by_the_gateway(self):
        for gateway in (ERR, ALWAYS):
            self.assertEqual(gateway.request("GET", "/v2/health/live")[:1], (200,))
            status, _, body = gateway.request("GET", "/v2")
            self.assertEqual(status, 200)
            self.assertEqual(json.loads(body)["name"], "infergate")
            self.assertTrue(stub_of(gateway).ServerLive(pb.ServerLiveRequest()).live)
            self.assertEqual(stub_of(gateway).ServerMetadata(pb.ServerMetadataRequest()).name, "infergate")

    def test_readiness_all_routes_and_always(self):
        # ALWAYS: ready although two of its upstreams are down.
        self.assertEqual(ALWAYS.request("GET", "/v2/health/ready")[0], 200)
        self.assertTrue(stub_of(ALWAYS).ServerReady(pb.ServerReadyRequest()).ready)
        self.assertEqual(self.health(ALWAYS), health_pb.HealthCheckResponse.SERVING)
        # ERR probes every 200 ms: through several rounds it never turns ready.
        self.assertFalse(wait_until(lambda: ERR.request("GET", "/v2/health/ready")[0] != 400, timeout=1.2))
        self.assertFalse(stub_of(ERR).ServerReady(pb.ServerReadyRequest()).ready)
        self.assertEqual(self.health(ERR), health_pb.HealthCheckResponse.NOT_SERVING)

    def health(self, gateway):
        with grpc.insecure_channel(gateway.address("grpc")) as channel:
            return health_grpc.HealthStub(channel).Check(health_pb.HealthCheckRequest()).status

    def test_readiness_follows_the_upstream(self):
        port = free_port()
        gateway = Gateway.from_template(READY_TEMPLATE, port=port).start()
        late = None
        try:
            self.assertEqual(gateway.request("GET", "/v2/health/ready")[0], 400)
            self.assertHttpError(gateway.request("POST", "/v2/models/simple/infer", simple_json()), 503, ["'late'"])
            late = Gateway.builtin_upstream(models=["simple"], http="127.0.0.1:%d" % port).start()
            self.assertTrue(wait_until(lambda: gateway.request("GET", "/v2/health/ready")[0] == 200, timeout=30),
                            "not ready once its upstream is up")
            self.assertEqual(gateway.request("POST", "/v2/models/simple/infer", simple_json())[0], 200)
            self.assertEqual(late.stop_and_check(), [])
            late = None
            self.assertTrue(wait_until(lambda: gateway.request("GET", "/v2/health/ready")[0] == 400, timeout=30),
                            "still ready after its upstream went away")
        finally:
            problems = (late.stop_and_check() if late else []) + gateway.stop_and_check()
        self.assertEqual(problems, [])


# ---- infergate validate --------------------------------------------------------------------

VALID_HEAD = """listeners:
  http: { address: "127.0.0.1:0" }
"""


def where(text, token, occurrence=1):
    """"line:column" (1-based) of the `occurrence`-th `token` in `text`."""
    at = -1
    for _ in range(occurrence):
        at = text.index(token, at + 1)
    line = text.count("\n", 0, at) + 1
    return "%d:%d" % (line, at - (text.rfind("\n", 0, at) + 1) + 1)


class ValidateE2E(Base):
    """`infergate validate FILE`: exit 1, one `FILE:line:col: key.path: message` line per
    mistake (config/README.md)."""

    def validate(self, text):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "routes.yaml")
            with open(path, "w") as f:
                f.write(text)
            out = subprocess.run([binary(), "validate", path], capture_output=True, text=True, timeout=60)
            lines = [l.replace(path, "FILE") for l in (out.stderr + out.stdout).splitlines() if l.strip()]
            return out.returncode, lines

    def assertInvalid(self, text, position, key, fragments):
        code, lines = self.validate(text)
        self.assertEqual(code, 1, lines)
        prefix = "FILE:%s: %s: " % (position, key)
        hits = [l for l in lines if l.startswith(prefix)]
        self.assertTrue(hits, "no line starting %r in:\n%s" % (prefix, "\n".join(lines)))
        for fragment in fragments:
            self.assertIn(fragment, hits[0])
        return lines

    def test_a_valid_routing_config(self):
        text = string_template_fill(RULES_TEMPLATE)
        code, lines = self.validate(text)
        self.assertEqual(code, 0, lines)
        self.assertTrue(any("OK" in l for l in lines), lines)

    def test_unknown_key(self):
        text = VALID_HEAD + (
            "upstreams:\n"
            "  - { name: a, protocol: grpc, endpoints: [\"127.0.0.1:1\"], timeout: 5 }\n"
            "routes:\n"
            "  - match: { model: \"*\", tenant: x }\n"
            "    upstream: a\n")
        lines = self.assertInvalid(text, where(text, "timeout"), "upstreams[0].timeout",
                                   ['unknown key "timeout"', "timeout_ms"])
        self.assertTrue(any(l.startswith("FILE:%s: routes[0].match.tenant: unknown key \"tenant\""
                                         % where(text, "tenant")) for l in lines), lines)

    def test_route_naming_a_missing_upstream(self):
        text = VALID_HEAD + (
            "upstreams:\n"
            "  - { name: a, protocol: grpc, endpoints: [\"127.0.0.1:1\"] }\n"
            "routes:\n"
            "  - match: { model: simple }\n"
            "    split: [ { upstream: a, weight: 50 }, { upstream: b, weight: 50 } ]\n"
            "  - match: { model: \"*\" }\n"
            "    upstream: c\n"
            "    mirror: d\n")
        lines = self.assertInvalid(text, where(text, "b,"), "routes[0].split[1].upstream",
                                   ['upstream "b" is not defined', "defined: a"])
        self.assertTrue(any(l.startswith("FILE:%s: routes[1].upstream: upstream \"c\" is not defined"
                                         % where(text, "c\n")) for l in lines), lines)
        self.assertTrue(any(l.startswith("FILE:%s: routes[1].mirror: upstream \"d\" is not defined"
                                         % where(text, "d\n")) for l in lines), lines)

    def test_split_weights_must_sum_to_100(self):
        text = VALID_HEAD + (
            "upstreams:\n"
            "  - { name: a, protocol: grpc, endpoints: [\"127.0.0.1:1\"] }\n"
            "  - { name: b, protocol: http, endpoints: [\"127.0.0.1:2\"] }\n"
            "routes:\n"
            "  - match: { model: \"*\" }\n"
            "    split: [ { upstream: a, weight: 80 }, { upstream: b, weight: 30 } ]\n")
        self.assertInvalid(text, where(text, "[ { upstream"), "routes[0].split", ["110", "not 100"])

    def test_shadowed_route(self):
        text = VALID_HEAD + (
            "upstreams:\n"
            "  - { name: a, protocol: grpc, endpoints: [\"127.0.0.1:1\"] }\n"
            "routes:\n"
            "  - match: { model_prefix: \"identity_\" }\n"
            "    upstream: a\n"
            "  - match: { model: identity_fp32 }\n"
            "    upstream: a\n"
            "  - match: { model: \"*\" }\n"
            "    upstream: a\n"
            "  - match: { model: simple, headers: { x-tenant: beta } }\n"
            "    upstream: a\n")
        lines = self.assertInvalid(text, where(text, "identity_fp32"), "routes[1].match.model",
                                   ["unreachable route", "routes[0]", 'model_prefix "identity_"'])
        self.assertTrue(any(l.startswith("FILE:%s: routes[3].match.model: unreachable route: comes after "
                                         "the catch-all routes[2]" % where(text, "simple")) for l in lines),
                        lines)

    def test_bad_endpoint_address(self):
        text = VALID_HEAD + (
            "upstreams:\n"
            "  - { name: a, protocol: grpc, endpoints: [\"127.0.0.1:1\", \"127.0.0.1:99999\"] }\n"
            "  - { name: b, protocol: http, endpoints: [\"::1:80\", \"127.0.0.1:0\"] }\n"
            "routes:\n"
            "  - match: { model: \"*\" }\n"
            "    split: [ { upstream: a, weight: 50 }, { upstream: b, weight: 50 } ]\n")
        lines = self.assertInvalid(text, where(text, "\"127.0.0.1:99999"), "upstreams[0].endpoints[1]",
                                   ["99999"])
        self.assertTrue(any(l.startswith("FILE:%s: upstreams[1].endpoints[0]: " % where(text, "\"::1:80"))
                            for l in lines), lines)
        self.assertTrue(any(l.startswith("FILE:%s: upstreams[1].endpoints[1]: " % where(text, "\"127.0.0.1:0", 2))
                            and "needs a port" in l for l in lines), lines)

    def test_grpc_upstream_without_endpoints(self):
        text = VALID_HEAD + (
            "upstreams:\n"
            "  - { name: a, protocol: grpc }\n"
            "  - { name: b, protocol: http, endpoints: [] }\n"
            "routes:\n"
            "  - match: { model: \"*\" }\n"
            "    split: [ { upstream: a, weight: 50 }, { upstream: b, weight: 50 } ]\n")
        lines = self.assertInvalid(text, where(text, "{ name: a"), "upstreams[0].endpoints",
                                   ['missing required key "endpoints"'])
        self.assertTrue(any(l.startswith("FILE:%s: upstreams[1].endpoints: at least one endpoint"
                                         % where(text, "[] }")) for l in lines), lines)


def string_template_fill(template):
    """`template` with every $placeholder of the routing configs set to a loopback address."""
    ports = {"u_grpc": 1, "u_http": 2, "v_grpc": 3, "v_http": 4, "rec_grpc": 5, "rec_http": 6}
    return string.Template(template).substitute({k: "127.0.0.1:%d" % p for k, p in ports.items()})


if __name__ == "__main__":
    unittest.main()
