"""End-to-end: what an operator sees of a known mix of requests.

U is a builtin upstream (shared memory on, its own access log); G routes to U over gRPC
(colocated, with the handoff pool) and over HTTP, and writes an access log. After a known
mix of successes, routing 404s, upstream errors and shared-memory handoffs, one scrape of
G's /metrics must show exactly those counts, and parse as Prometheus text. Trace context
and request ids must arrive at U as G forwarded them; every access log line is JSON.
The mix also carries one ModelStreamInfer stream (each message a request of its own) and
a few gRPC admin calls (API counters and access lines, no model series). A second gateway
checks that the v2 logging endpoint changes the log at run time, and a model's trace
settings reach its upstream over both protocols.
"""
import json
import os
import subprocess
import tempfile
import unittest

import numpy as np
from prometheus_client.parser import text_string_to_metric_families

import grpc_stubs
from harness import LOOPBACK_HEAD, Gateway, Processes, binary, wait_until

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_SPAN = "00f067aa0ba902b7"

GATEWAY = LOOPBACK_HEAD + """
upstreams:
  - name: u-grpc
    protocol: grpc
    endpoints: ["$u_grpc"]
    colocated: true
    timeout_ms: 30000
    handoff: { min_bytes: 65536, pool_bytes: 4194304, kind: system }
  - name: u-http
    protocol: http
    endpoints: ["$u_http"]
    timeout_ms: 30000
routes:
  - name: via-http
    match: { model_prefix: "s", headers: { x-upstream: http } }
    upstream: u-http
  - name: main
    match: { model: simple }
    upstream: u-grpc
  - name: ghost
    match: { model: ghost }
    upstream: u-grpc
  - name: big
    match: { model: identity_fp32 }
    upstream: u-grpc
observability:
  access_log: { enabled: true, format: json, path: "$access_log" }
"""

UPSTREAM_EXTRA = """shm:
  enabled: true
  allowed_key_prefixes: ["/infergate_"]
observability:
  access_log: { enabled: true, format: json, path: "$access_log" }
"""

SIMPLE_JSON = json.dumps({"inputs": [
    {"name": "INPUT0", "shape": [1, 16], "datatype": "INT32", "data": list(range(16))},
    {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32", "data": [1] * 16}]})

BIG_FLOATS = 32768  # 128 KiB: above the handoff's min_bytes

# (id, model) of the stream's messages.
STREAM = [("s0", "simple"), ("s1", "simple"), ("sg", "ghost"), ("s2", "simple"),
          ("sn", "no_such_model")]

P = None  # the processes
LOGS = tempfile.TemporaryDirectory(prefix="infergate-logs-")
U = G = None
U_LOG = G_LOG = None
SENT = {}  # what the mix sent, for the assertions


def big_request(pb):
    req = pb.ModelInferRequest(model_name="identity_fp32")
    t = req.inputs.add()
    t.name, t.datatype = "INPUT0", "FP32"
    t.shape.extend([1, BIG_FLOATS])
    req.raw_input_contents.append(np.arange(BIG_FLOATS, dtype=np.float32).tobytes())
    return req



def pool_ready():
    status, _, body = G.request("GET", "/admin/upstreams", listener="metrics")
    if status != 200:
        return False
    for u in json.loads(body)["upstreams"]:
        if u["name"] == "u-grpc":
            return all(e.get("handoff", {}).get("pool_ready") for e in u["endpoints"])
    return False


def read_lines(path, at_least=1):
    """The file's lines once it has `at_least` of them (the access log is written out by a
    background thread every 100 ms)."""
    def lines():
        with open(path) as f:
            return [line for line in f.read().splitlines() if line]
    wait_until(lambda: len(lines()) >= at_least, timeout=10)
    return lines()


def setUpModule():
    global P, U, G, U_LOG, G_LOG
    P = Processes()
    pb, _, _, _ = grpc_stubs.load()
    try:
        U_LOG = os.path.join(LOGS.name, "upstream.log")
        G_LOG = os.path.join(LOGS.name, "gateway.log")
        U = P.start("U", Gateway.builtin_upstream(
            extra=UPSTREAM_EXTRA.replace("$access_log", U_LOG)))
        G = P.start("G", Gateway.from_template(GATEWAY, u_grpc=U.address("grpc"),
                                               u_http=U.address("http"), access_log=G_LOG))
        assert wait_until(pool_ready), "the handoff pool never became ready"
        run_mix(pb)
    except BaseException:
        grpc_stubs.close_channels()
        P.stop_all()
        raise


def run_mix(pb):
    stub = grpc_stubs.stub_of(G)
    http = lambda path, headers=None: G.request("POST", path, SIMPLE_JSON, headers)  # noqa: E731
    results = []
    for i in range(4):  # HTTP -> gRPC upstream, route "main"
        headers = {"x-request-id": "req-http-%d" % i}
        if i == 0:
            headers["traceparent"] = "00-%s-%s-01" % (TRACE_ID, CLIENT_SPAN)
        status, response_headers, _ = http("/v2/models/simple/infer", headers)
        results.append(("http simple", status))
        if i == 0:
            SENT["echoed_id"] = response_headers.get("x-request-id")
    for _ in range(3):  # gRPC -> HTTP upstream, route "via-http"
        response, call = stub.ModelInfer.with_call(
            grpc_stubs.simple_infer_request(), metadata=(("x-upstream", "http"), ("x-request-id", "req-grpc")))
        SENT["grpc_initial"] = dict(call.initial_metadata())
        results.append(("grpc simple", "ok"))
    for _ in range(2):  # no route: 404 at the gateway, no model series
        results.append(("http unrouted", http("/v2/models/no_such_model/infer")[0]))
    results.append(("grpc unrouted", grpc_stubs.grpc_outcome(
        lambda: stub.ModelInfer(grpc_stubs.simple_infer_request("no_such_model")))[0]))
    for _ in range(2):  # routed, but the upstream does not have it: the upstream's 404
        results.append(("http ghost", http("/v2/models/ghost/infer")[0]))
    results.append(("grpc ghost", grpc_stubs.grpc_outcome(
        lambda: stub.ModelInfer(grpc_stubs.simple_infer_request("ghost")))[0]))
    for _ in range(2):  # the handoff pool
        results.append(("grpc big", grpc_stubs.grpc_outcome(
            lambda: stub.ModelInfer(big_request(pb)))[0]))
    # One stream: three requests on the leg to U, one U does not know (its in-band error),
    # one with no route (the gateway's in-band error). No x-request-id: each message's id.
    stream = []
    for sid, model in STREAM:
        req = grpc_stubs.simple_infer_request(model)
        req.id = sid
        stream.append(req)
    answers = list(stub.ModelStreamInfer(iter(stream), timeout=30))
    for a in answers:
        results.append(("stream", (a.infer_response.id, a.error_message != "")))
    # Admin calls: counted by method, logged, never in a model series.
    for _ in range(2):
        stub.ServerLive(pb.ServerLiveRequest())
        results.append(("grpc admin", "ok"))
    results.append(("grpc admin", grpc_stubs.grpc_outcome(
        lambda: stub.ModelMetadata(pb.ModelMetadataRequest(name="no_such_model")))[0]))
    SENT["results"] = results
    status, _, body = G.request("GET", "/metrics", listener="metrics")
    SENT["scrape_status"] = status
    SENT["scrape"] = body.decode("utf-8")


def tearDownModule():
    grpc_stubs.close_channels()
    problems = P.stop_all()
    assert not problems, "\n".join(problems)


class KnownMix(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        assert SENT["scrape_status"] == 200, SENT["scrape"][:300]
        cls.samples = []
        for family in text_string_to_metric_families(SENT["scrape"]):
            for s in family.samples:
                cls.samples.append((s.name, s.labels, s.value))

    def value(self, name, **labels):
        """The one sample of `name` whose labels include `labels`."""
        found = [v for n, l, v in self.samples
                 if n == name and all(l.get(k) == str(w) for k, w in labels.items())]
        self.assertEqual(len(found), 1, "%s %s: %s" % (name, labels, found))
        return found[0]

    def test_the_mix_went_as_planned(self):
        r = SENT["results"]
        self.assertEqual([s for what, s in r if what == "http simple"], [200] * 4, r)
        self.assertEqual([s for what, s in r if what == "http unrouted"], [404] * 2, r)
        self.assertEqual([s for what, s in r if what == "http ghost"], [404] * 2, r)
        self.assertEqual([str(s) for what, s in r if what in ("grpc unrouted", "grpc ghost")],
                         ["StatusCode.NOT_FOUND"] * 2, r)
        self.assertEqual([s for what, s in r if what == "grpc big"], ["ok"] * 2, r)
        self.assertEqual(sorted(s for what, s in r if what == "stream"),
                         [("s0", False), ("s1", False), ("s2", False), ("sg", True),
                          ("sn", True)], r)
        self.assertEqual([str(s) for what, s in r if what == "grpc admin"],
                         ["ok", "ok", "StatusCode.NOT_FOUND"], r)

    def test_every_request_is_counted_in_its_series(self):
        v = self.value
        self.assertEqual(v("infergate_requests_total", model="simple", version="", route="main",
                           upstream="u-grpc", protocol="http", upstream_protocol="grpc",
                           code=200), 4)
        self.assertEqual(v("infergate_requests_total", model="simple", route="via-http",
                           upstream="u-http", protocol="grpc", upstream_protocol="http",
                           code="OK"), 3)
        self.assertEqual(v("infergate_requests_total", model="ghost", protocol="http",
                           code=404), 2)
        self.assertEqual(v("infergate_requests_total", model="ghost", protocol="grpc",
                           code="NOT_FOUND"), 1)
        self.assertEqual(v("infergate_requests_total", model="identity_fp32", route="big",
                           code="OK"), 2)
        # The stream's messages, each in its series: a leg's in-band error has no code.
        self.assertEqual(v("infergate_requests_total", model="simple", route="main",
                           protocol="grpc", upstream_protocol="grpc", code="OK"), 3)
        self.assertEqual(v("infergate_requests_total", model="ghost", protocol="grpc",
                           code="UNKNOWN"), 1)
        # A request without a route has no model series: nothing names no_such_model.
        self.assertFalse([s for s in self.samples if s[1].get("model") == "no_such_model"])
        for name, labels, value in self.samples:
            if name == "infergate_requests_in_flight":
                self.assertEqual(value, 0, labels)

    def test_api_counters_include_the_unrouted(self):
        v = self.value
        self.assertEqual(v("infergate_http_requests_total", endpoint="infer", code=200), 4)
        self.assertEqual(v("infergate_http_requests_total", endpoint="infer", code=404), 4)
        self.assertEqual(v("infergate_grpc_requests_total", method="ModelInfer", code="OK"), 5)
        self.assertEqual(v("infergate_grpc_requests_total", method="ModelInfer",
                           code="NOT_FOUND"), 2)
        # A stream is one call, however many requests it carried.
        self.assertEqual(v("infergate_grpc_requests_total", method="ModelStreamInfer",
                           code="OK"), 1)
        self.assertEqual(v("infergate_grpc_requests_total", method="ServerLive", code="OK"), 2)
        self.assertEqual(v("infergate_grpc_requests_total", method="ModelMetadata",
                           code="NOT_FOUND"), 1)
        self.assertEqual(v("infergate_grpc_request_duration_seconds_count",
                           method="ServerLive"), 2)

    def test_histograms_count_each_request_once(self):
        v = self.value
        self.assertEqual(v("infergate_request_duration_seconds_count", model="simple",
                           route="main", protocol="http"), 4)
        self.assertEqual(v("infergate_request_duration_seconds_bucket", model="simple",
                           route="main", protocol="http", le="+Inf"), 4)
        self.assertEqual(v("infergate_request_duration_seconds_count", model="simple",
                           route="main", protocol="grpc"), 3)  # the stream's
        # Remote upstreams: the upstream time and the gateway's overhead of every request.
        self.assertEqual(v("infergate_upstream_duration_seconds_count", model="simple",
                           route="via-http"), 3)
        self.assertEqual(v("infergate_gateway_overhead_seconds_count", model="simple",
                           route="via-http"), 3)
        # gRPC -> HTTP upstream is decoded and encoded: transcoding time of each request;
        # the HTTP -> gRPC passthrough of "main" decodes nothing.
        self.assertEqual(v("infergate_transcode_duration_seconds_count", model="simple",
                           route="via-http"), 3)
        self.assertEqual(v("infergate_transcode_duration_seconds_count", model="simple",
                           route="main", protocol="http"), 4)  # HTTP JSON toward gRPC is transcoded too
        self.assertGreater(v("infergate_request_bytes_total", model="identity_fp32"),
                           2 * 4 * BIG_FLOATS)

    def test_triton_families_add_up_per_model(self):
        v = self.value
        self.assertEqual(v("nv_inference_request_success_total", model="simple", version=""),
                         4 + 3 + 3)
        self.assertEqual(v("nv_inference_request_failure_total", model="ghost",
                           reason="REJECTED"), 3)
        self.assertEqual(v("nv_inference_request_failure_total", model="ghost",
                           reason="BACKEND"), 1)  # the stream's in-band error
        self.assertEqual(v("nv_inference_count_total", model="identity_fp32"), 2)
        self.assertEqual(v("nv_inference_pending_request_count", model="simple"), 0)
        self.assertGreater(v("nv_inference_request_duration_us_total", model="simple"), 0)

    def test_upstream_endpoints_and_the_handoff(self):
        v = self.value
        u_grpc = U.address("grpc")
        self.assertEqual(v("infergate_upstream_endpoint_requests_total", upstream="u-grpc",
                           endpoint=u_grpc), 4 + 3 + 2 + 4)  # + the stream's leg
        self.assertEqual(v("infergate_upstream_endpoint_requests_total", upstream="u-http"), 3)
        self.assertEqual(v("infergate_upstream_endpoint_state", upstream="u-grpc",
                           state="ejected"), 0)
        # A stream's requests never wait in the queue (they keep their order).
        self.assertEqual(v("infergate_upstream_queue_wait_seconds_count", upstream="u-grpc"),
                         9)
        self.assertEqual(v("infergate_shm_handoff_bytes_total", upstream="u-grpc",
                           path="pool_in"), 2 * 4 * BIG_FLOATS)
        self.assertEqual(v("infergate_config_reloads_total", result="success"), 0)
        self.assertEqual(v("infergate_config_info", generation=1), 1)
        build = [l for n, l, _ in self.samples if n == "infergate_build_info"]
        self.assertEqual(len(build), 1, build)
        self.assertRegex(build[0]["git_commit"], r"^([0-9a-f]{12}|unknown)$")
        # The malloc `infergate version` names (this test build's sanitizer: "other").
        version = subprocess.run([binary(), "version"], capture_output=True, text=True, check=True).stdout
        self.assertIn("malloc: %s\n" % build[0]["allocator"], version)
        self.assertIn(build[0]["allocator"], ("mimalloc", "glibc", "other"))

    def test_request_ids_travel_end_to_end(self):
        self.assertEqual(SENT["echoed_id"], "req-http-0")
        self.assertEqual(SENT["grpc_initial"].get("x-request-id"), "req-grpc")
        # U saw every request G forwarded: 4 + 3 + 3 (ghost) + 2 (big).
        upstream = [json.loads(l) for l in read_lines(U_LOG, at_least=12)]
        ids = [l["request_id"] for l in upstream]
        for i in range(4):
            self.assertIn("req-http-%d" % i, ids)
        self.assertEqual(ids.count("req-grpc"), 3)

    def test_traceparent_reaches_the_upstream_with_the_same_trace_id(self):
        gateway = [json.loads(l) for l in read_lines(G_LOG, at_least=len(SENT["results"]))]
        upstream = [json.loads(l) for l in read_lines(U_LOG, at_least=12)]
        at_g = [l for l in gateway if l.get("trace_id") == TRACE_ID]
        at_u = [l for l in upstream if l.get("trace_id") == TRACE_ID]
        self.assertEqual(len(at_g), 1, gateway)
        self.assertEqual(len(at_u), 1, upstream)
        self.assertEqual(at_u[0]["request_id"], "req-http-0")

    def test_access_log_lines_are_json_with_every_field(self):
        lines = read_lines(G_LOG, at_least=len(SENT["results"]))
        self.assertEqual(len(lines), len(SENT["results"]),
                         [json.loads(l)["endpoint"] for l in lines])
        entries = [json.loads(l) for l in lines]
        for e in entries:
            for key in ("time", "request_id", "client", "protocol", "endpoint", "model",
                        "version", "route", "upstream", "upstream_endpoint", "status",
                        "bytes_in", "bytes_out", "total_us", "upstream_us", "queue_us",
                        "shm_handoff"):
                self.assertIn(key, e)
        streamed = {e["request_id"]: e for e in entries if e["endpoint"] == "ModelStreamInfer"}
        self.assertEqual(sorted(streamed), sorted(sid for sid, _ in STREAM))
        self.assertEqual(streamed["s0"]["status"], "OK")
        self.assertEqual(streamed["s0"]["route"], "main")
        self.assertEqual(streamed["s0"]["upstream_endpoint"], U.address("grpc"))
        self.assertEqual(streamed["sg"]["status"], "UNKNOWN")
        self.assertEqual(streamed["sn"]["status"], "NOT_FOUND")
        self.assertEqual(streamed["sn"]["route"], "")
        admin = [e["status"] for e in entries if e["endpoint"] == "ServerLive"]
        self.assertEqual(admin, ["OK", "OK"])
        big = [e for e in entries if e["model"] == "identity_fp32"]
        self.assertEqual(len(big), 2)
        self.assertTrue(all(e["shm_handoff"] for e in big), big)
        self.assertTrue(all(e["upstream_endpoint"] == U.address("grpc") for e in big))
        unrouted = [e for e in entries if e.get("target") == "/v2/models/no_such_model/infer"]
        self.assertEqual([e["status"] for e in unrouted], ["404", "404"])
        self.assertTrue(all(e["client"].startswith("127.0.0.1:") for e in entries
                            if e["protocol"] == "http"))
        # gRPC calls served on the loop and those relayed to grpc++ (streams, ServerLive)
        # alike name the client's own address.
        grpc_clients = {e["endpoint"]: e["client"] for e in entries if e["protocol"] == "grpc"}
        self.assertIn("ServerLive", grpc_clients)
        self.assertIn("ModelStreamInfer", grpc_clients)
        for endpoint, client in grpc_clients.items():
            self.assertIn("127.0.0.1:", client, endpoint)


class RuntimeLogSettings(unittest.TestCase):
    def test_the_logging_endpoint_changes_what_is_logged(self):
        g = Gateway()
        P.start("L", g)
        try:
            def reload_lines():
                return [l for l in g.stderr_lines if '"event":"reload"' in l]
            status, _, _ = g.request("POST", "/admin/reload", b"", listener="metrics")
            self.assertEqual(status, 200)
            self.assertTrue(wait_until(lambda: len(reload_lines()) == 1), g.stderr_lines)
            status, _, body = g.request("POST", "/v2/logging", json.dumps({"log_info": False}))
            self.assertEqual(status, 200, body)
            self.assertFalse(json.loads(body)["log_info"])
            g.request("POST", "/admin/reload", b"", listener="metrics")
            g.request("POST", "/v2/logging", json.dumps({"log_info": True}))
            g.request("POST", "/admin/reload", b"", listener="metrics")
            self.assertTrue(wait_until(lambda: len(reload_lines()) == 2), g.stderr_lines)
            lines = reload_lines()
            self.assertIn('"level":"info"', lines[1])
            status, _, body = g.request("GET", "/metrics", listener="metrics")
            self.assertIn('infergate_config_reloads_total{result="success"} 3', body.decode())
        finally:
            P.stop(g)


TRACE_GATEWAY = LOOPBACK_HEAD + """
upstreams:
  - name: u-grpc
    protocol: grpc
    endpoints: ["$u_grpc"]
  - name: u-http
    protocol: http
    endpoints: ["$u_http"]
routes:
  - match: { model: simple, headers: { x-upstream: http } }
    upstream: u-http
  - match: { model: simple }
    upstream: u-grpc
"""


class ModelTraceSettings(unittest.TestCase):
    """A model's trace settings belong to the server that runs it: the gateway forwards
    them, transcoded to the upstream's protocol; the global ones stay the gateway's."""

    @classmethod
    def setUpClass(cls):
        cls.g = P.start("T", Gateway.from_template(TRACE_GATEWAY, u_grpc=U.address("grpc"),
                                                   u_http=U.address("http")))

    @classmethod
    def tearDownClass(cls):
        P.stop(cls.g)

    def upstream_setting(self, key):
        status, _, body = U.request("GET", "/v2/models/simple/trace/setting")
        self.assertEqual(status, 200, body)
        return json.loads(body)[key]

    def test_http_client_to_grpc_upstream(self):
        status, _, body = self.g.request("POST", "/v2/models/simple/trace/setting",
                                         json.dumps({"trace_rate": "7"}))
        self.assertEqual(status, 200, body)
        self.assertEqual(json.loads(body)["trace_rate"], "7")
        self.assertEqual(self.upstream_setting("trace_rate"), "7")
        status, _, body = self.g.request("GET", "/v2/models/simple/trace/setting")
        self.assertEqual(json.loads(body)["trace_rate"], "7")
        # The gateway's own global settings did not move.
        status, _, body = self.g.request("GET", "/v2/trace/setting")
        self.assertNotEqual(json.loads(body)["trace_rate"], "7")

    def test_grpc_client_to_http_upstream(self):
        pb = grpc_stubs.load()[0]
        request = pb.TraceSettingRequest(model_name="simple")
        request.settings["log_frequency"].value.append("3")
        response = grpc_stubs.stub_of(self.g).TraceSetting(
            request, metadata=(("x-upstream", "http"),))
        self.assertEqual(list(response.settings["log_frequency"].value), ["3"])
        self.assertEqual(self.upstream_setting("log_frequency"), "3")

    def test_an_upstream_refusal_comes_back(self):
        status, _, body = self.g.request("POST", "/v2/models/simple/trace/setting",
                                         json.dumps({"trace_rate": "not a number"}))
        self.assertEqual(status, 400, body)
        self.assertIn("error", json.loads(body))


if __name__ == "__main__":
    unittest.main()
