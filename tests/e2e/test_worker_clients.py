"""End-to-end: what the workers' own clients (gateway/upstream/*_native) carry toward an
upstream: endpoints written as a host name ("localhost:8001", "triton:8001", the way a
sidecar or a docker-compose file names its inference server), and gRPC health probes.

  U         a builtin-only infergate on 127.0.0.1 (gRPC and HTTP listeners)
  recorder  a Python gRPC upstream that keeps each call's method and user-agent (which
            client sent it: the workers' own say "infergate", grpc++ "grpc-c++/...")

Each test starts its own gateway. For a host name, the gateway's discovery resolves it
(system resolver) and the workers' clients connect to what it resolved to; the name stays
one endpoint, shown as written in the admin API. A name that resolves to nothing fails each
request with the upstream's UNAVAILABLE naming the name, is logged once, and the gateway
keeps serving.

Every process must exit 0 on SIGTERM without a sanitizer report.
"""
import json
import string
import struct
import threading
import unittest
from concurrent import futures

import grpc

import grpc_stubs
from harness import LOOPBACK_HEAD, Gateway, wait_until

pb = pb_grpc = None
U = None

TEMPLATE = LOOPBACK_HEAD + """readiness: { policy: always }
discovery: { dns_refresh_ms: 200 }
upstreams:
  - name: named
    protocol: $protocol
    endpoints: ["$endpoint"]
    health_check: $health_check
    outlier: { consecutive_failures: 1000 }
routes:
  - match: { model: "*" }
    upstream: named
"""


def setUpModule():
    global pb, pb_grpc, U
    pb, pb_grpc = grpc_stubs.load()[:2]
    U = Gateway.builtin_upstream().start()


class UserAgentRecorder:
    """A Python gRPC upstream on 127.0.0.1 that keeps (method, user-agent) of every call;
    ModelInfer answers OUTPUT0 = [7], ServerReady ready."""

    def __init__(self):
        self.calls = []
        self.lock = threading.Lock()
        recorder = self

        def keep(method, context):
            with recorder.lock:
                recorder.calls.append((method, dict(context.invocation_metadata()).get("user-agent", "")))

        class Servicer(pb_grpc.GRPCInferenceServiceServicer):
            def ServerReady(self, request, context):
                keep("ServerReady", context)
                return pb.ServerReadyResponse(ready=True)

            def ModelMetadata(self, request, context):
                keep("ModelMetadata", context)
                return pb.ModelMetadataResponse(name=request.name, versions=["1"], platform="recorded")

            def RepositoryIndex(self, request, context):
                keep("RepositoryIndex", context)
                return pb.RepositoryIndexResponse(models=[pb.RepositoryIndexResponse.ModelIndex(
                    name="recorded", version="1", state="READY")])

            def ModelInfer(self, request, context):
                keep("ModelInfer", context)
                resp = pb.ModelInferResponse(model_name=request.model_name, model_version="1")
                out = resp.outputs.add()
                out.name, out.datatype = "OUTPUT0", "INT32"
                out.shape.append(1)
                resp.raw_output_contents.append(struct.pack("<i", 7))
                return resp

        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        pb_grpc.add_GRPCInferenceServiceServicer_to_server(Servicer(), self.server)
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()

    def agents(self, method):
        with self.lock:
            return [agent for m, agent in self.calls if m == method]

    def stop(self):
        self.server.stop(grace=None)


def tearDownModule():
    grpc_stubs.close_channels()
    if U is not None:
        problems = U.stop_and_check()
        if problems:
            raise AssertionError("U: %s" % problems)


def simple_request(seed):
    req = pb.ModelInferRequest(model_name="simple")
    for name, values in (("INPUT0", [seed + i for i in range(16)]), ("INPUT1", [1] * 16)):
        t = req.inputs.add()
        t.name, t.datatype = name, "INT32"
        t.shape.extend([1, 16])
        req.raw_input_contents.append(struct.pack("<16i", *values))
    return req


def http_infer(g, seed):
    body = json.dumps({"inputs": [
        {"name": "INPUT0", "shape": [1, 16], "datatype": "INT32", "data": [seed + i for i in range(16)]},
        {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32", "data": [1] * 16}]}).encode()
    return g.request("POST", "/v2/models/simple/infer", body)


def admin_endpoints(g):
    status, _, body = g.request("GET", "/admin/upstreams", listener="metrics")
    assert status == 200, body
    (upstream,) = [u for u in json.loads(body)["upstreams"] if u["name"] == "named"]
    return {e["address"]: e for e in upstream["endpoints"]}


class HostNameEndpointTest(unittest.TestCase):
    def gateway(self, protocol, endpoint, health_check="{ enabled: false }"):
        g = Gateway(config=string.Template(TEMPLATE).substitute(
            protocol=protocol, endpoint=endpoint, health_check=health_check))
        g.start()
        self.addCleanup(self.stop, g)
        return g

    def stop(self, g):
        grpc_stubs.close_channels()
        problems = g.stop_and_check()
        self.assertEqual(problems, [], "gateway: %s" % problems)

    def test_a_host_name_endpoint_carries_grpc_and_http_clients_to_either_protocol(self):
        for protocol in ("grpc", "http"):
            with self.subTest(protocol=protocol):
                endpoint = "localhost:%d" % U.port(protocol)
                g = self.gateway(protocol, endpoint)
                for seed in (0, 40, -9):
                    answer = grpc_stubs.stub_of(g).ModelInfer(simple_request(seed), timeout=30)
                    self.assertEqual(list(struct.unpack("<16i", answer.raw_output_contents[0])),
                                     [seed + i + 1 for i in range(16)])
                    status, _, body = http_infer(g, seed)
                    self.assertEqual(status, 200, body)
                    self.assertEqual(json.loads(body)["outputs"][0]["data"], [seed + i + 1 for i in range(16)])
                # One endpoint, named as written, that carried all six.
                seen = admin_endpoints(g)
                self.assertEqual(list(seen), [endpoint])
                self.assertEqual(seen[endpoint]["requests"], 6, seen)
                self.assertEqual(seen[endpoint]["failures"], 0, seen)

    def test_a_host_name_endpoint_is_called_by_the_workers_own_client(self):
        # The worker's own gRPC client says "infergate"; grpc++, which carried host names
        # and the gRPC frontend's other RPCs before, says "grpc-c++/...".
        recorder = UserAgentRecorder()
        self.addCleanup(recorder.stop)
        g = self.gateway("grpc", "localhost:%d" % recorder.port)
        for client in ("grpc", "http"):
            if client == "grpc":
                answer = grpc_stubs.stub_of(g).ModelInfer(simple_request(0), timeout=30)
                self.assertEqual(struct.unpack("<i", answer.raw_output_contents[0]), (7,))
            else:
                status, _, body = http_infer(g, 0)
                self.assertEqual(status, 200, body)
                self.assertEqual(json.loads(body)["outputs"][0]["data"], [7])
        agents = recorder.agents("ModelInfer")
        self.assertEqual(len(agents), 2, agents)
        for agent in agents:
            self.assertTrue(agent.startswith("infergate"), agents)
        # The gRPC frontend's other RPCs: one routed by model, one merged over upstreams.
        stub = grpc_stubs.stub_of(g)
        metadata = stub.ModelMetadata(pb.ModelMetadataRequest(name="simple"), timeout=30)
        self.assertEqual((metadata.name, metadata.platform), ("simple", "recorded"))
        index = stub.RepositoryIndex(pb.RepositoryIndexRequest(), timeout=30)
        self.assertEqual([m.name for m in index.models], ["recorded"])
        for method in ("ModelMetadata", "RepositoryIndex"):
            agents = recorder.agents(method)
            self.assertEqual(len(agents), 1, (method, agents))
            self.assertTrue(agents[0].startswith("infergate"), (method, agents))

    def test_grpc_health_probes_go_through_the_workers_own_client(self):
        # Before, grpc++ carried every gRPC probe: ~200k instructions on the worker's loop
        # each, and a connection of its own beside the one ModelInfer takes.
        recorder = UserAgentRecorder()
        self.addCleanup(recorder.stop)
        for host in ("127.0.0.1", "localhost"):
            with self.subTest(endpoint=host):
                endpoint = "%s:%d" % (host, recorder.port)
                g = self.gateway("grpc", endpoint, health_check="{ interval_ms: 50, timeout_ms: 5000 }")
                self.assertTrue(wait_until(lambda: admin_endpoints(g)[endpoint]["probes_good"] >= 3),
                                admin_endpoints(g))
                seen = admin_endpoints(g)[endpoint]
                self.assertEqual(seen["health"], "healthy", seen)
                self.assertEqual(seen["probes_bad"], 0, seen)
                agents = recorder.agents("ServerReady")
                self.assertGreaterEqual(len(agents), 3, agents)
                self.assertTrue(all(a.startswith("infergate") for a in agents), agents)
                self.stop(g)
                with recorder.lock:
                    recorder.calls.clear()

    def test_a_name_that_does_not_resolve_fails_each_request_naming_it_and_is_logged(self):
        endpoint = "no-such-host.invalid:8001"
        for protocol in ("grpc", "http"):
            with self.subTest(protocol=protocol):
                g = self.gateway(protocol, endpoint)
                for _ in range(2):
                    status, _, body = http_infer(g, 1)
                    self.assertEqual(status, 503, body)
                    error = json.loads(body)["error"]
                    self.assertIn("upstream 'named' (%s)" % endpoint, error)
                    self.assertIn("cannot resolve 'no-such-host.invalid'", error)
                    code, details = grpc_stubs.grpc_outcome(
                        lambda: grpc_stubs.stub_of(g).ModelInfer(simple_request(1), timeout=30))
                    self.assertEqual(code, grpc.StatusCode.UNAVAILABLE, details)
                    self.assertIn("cannot resolve 'no-such-host.invalid'", details)
                logged = [json.loads(l) for l in g.stderr_lines if '"dns_error"' in l]
                self.assertTrue(any(e.get("name") == "no-such-host.invalid" for e in logged), g.stderr_lines)
                # Still serving: its own endpoints answer.
                self.assertEqual(g.request("GET", "/v2/health/live")[0], 200)


if __name__ == "__main__":
    unittest.main()
