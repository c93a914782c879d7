"""End-to-end: the infergate process itself: configuration errors refuse to start with
file:line messages, `infergate validate`, Unix-socket listeners, the ready file, and a
graceful drain on SIGTERM with requests in flight on both frontends."""
import http.client
import json
import os
import signal
import socket
import subprocess
import tempfile
import threading
import time
import unittest

from harness import Gateway, binary, wait_until


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost", timeout=30)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self.path)


def slow_http_request(gw, ms, results, key="status"):
    """A thread, started, that asks the demo model `sleep` for `ms` ms over HTTP and puts
    the status it gets in results[key]."""
    body = json.dumps({"inputs": [{"name": "INPUT0", "shape": [1], "datatype": "INT32",
                                   "data": [ms]}]}).encode()

    def run():
        results[key] = gw.request("POST", "/v2/models/sleep/infer", body)[0]
    t = threading.Thread(target=run)
    t.start()
    return t


class ProcessE2E(unittest.TestCase):
    def test_validate_accepts_the_demo_config(self):
        demo = os.path.join(os.path.dirname(__file__), "..", "..", "deploy", "examples", "demo.yaml")
        out = subprocess.run([binary(), "validate", demo], capture_output=True, text=True)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("OK", out.stdout)

    def test_bad_config_refuses_to_start_naming_file_and_line(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "bad.yaml")
            with open(path, "w") as f:
                f.write('listeners:\n  http: { address: "127.0.0.1:99999" }\n'
                        'upstreams:\n  - name: demo\n    protocol: builtin\n'
                        'routes:\n  - match: { model: "*" }\n    upstream: missing\n')
            for args in (["validate", path], ["--config", path]):
                out = subprocess.run([binary()] + args, capture_output=True, text=True, timeout=60)
                self.assertNotEqual(out.returncode, 0)
                self.assertIn(path + ":2:", out.stderr + out.stdout)
                self.assertIn(path + ":8:", out.stderr + out.stdout)

    def test_unix_socket_listener_and_ready_file(self):
        with tempfile.TemporaryDirectory() as d:
            sock = os.path.join(d, "gw.sock")
            config = ('listeners:\n  http: { address: "unix:%s" }\n'
                      'upstreams:\n  - name: demo\n    protocol: builtin\n    models: [simple]\n'
                      'routes:\n  - match: { model: "*" }\n    upstream: demo\n' % sock)
            gw = Gateway(config=config).start()
            try:
                self.assertEqual(gw.addresses["http"], "unix:" + sock)
                with open(gw.ready_file) as f:
                    self.assertEqual(json.loads(f.read())["http"], "unix:" + sock)
                conn = UnixHTTPConnection(sock)
                conn.request("GET", "/v2/models/simple")
                resp = conn.getresponse()
                self.assertEqual(resp.status, 200)
                self.assertEqual(json.loads(resp.read())["name"], "simple")
                conn.request("GET", "/v2/models/identity_fp32")  # not served by this config
                self.assertEqual(conn.getresponse().status, 404)
            finally:
                self.assertEqual(gw.stop(), 0)

    def test_sigterm_drains_a_request_in_flight(self):
        gw = Gateway().start()
        result = {}
        t = slow_http_request(gw, 300, result)
        time.sleep(0.1)
        code = gw.stop()
        t.join()
        self.assertEqual(code, 0)
        self.assertEqual(result.get("status"), 200)
        self.assertFalse(gw.sanitizer_reports())


    def test_sigterm_closes_both_listeners_at_once_and_drains_both_together(self):
        """A slow call in flight on each frontend: after SIGTERM neither listener takes a
        new connection (a client is refused and can go to another replica), both calls
        finish, and the process exits 0 (before, HTTP went on accepting while gRPC
        drained, and the two drains ran one after the other)."""
        import grpc
        import grpc_stubs
        gw = Gateway().start()
        pb, service, _, _ = grpc_stubs.load()
        results = {}

        def slow_grpc():
            with grpc.insecure_channel(gw.address("grpc")) as channel:
                request = pb.ModelInferRequest(model_name="sleep")
                request.inputs.add(name="INPUT0", datatype="INT32", shape=[1])
                request.raw_input_contents.append((2000).to_bytes(4, "little"))
                try:
                    service.GRPCInferenceServiceStub(channel).ModelInfer(request, timeout=30)
                    results["grpc"] = "OK"
                except grpc.RpcError as e:
                    results["grpc"] = e.code()
        threads = [slow_http_request(gw, 2000, results, key="http"),
                   threading.Thread(target=slow_grpc)]
        threads[1].start()
        time.sleep(0.3)
        gw.proc.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        try:
            with self.assertRaises(ConnectionRefusedError):
                socket.create_connection(("127.0.0.1", gw.port("http")), timeout=5).close()
            with grpc.insecure_channel(gw.address("grpc")) as channel:
                with self.assertRaises(grpc.RpcError) as refused:
                    service.GRPCInferenceServiceStub(channel).ServerLive(
                        pb.ServerLiveRequest(), timeout=2)
            self.assertIn(refused.exception.code(), (grpc.StatusCode.UNAVAILABLE,
                                                     grpc.StatusCode.DEADLINE_EXCEEDED))
        finally:
            for t in threads:
                t.join()
            code = gw.stop()
        self.assertEqual(results, {"http": 200, "grpc": "OK"})
        self.assertEqual(code, 0)
        self.assertFalse(gw.sanitizer_reports())


    def test_a_reloaded_drain_timeout_is_the_one_sigterm_uses(self):
        """Started with a 100 ms drain, reloaded (SIGHUP) to 10 s: a 1.5 s request in
        flight at SIGTERM finishes. Before, the drain read at start stayed."""
        config = """
listeners:
  http:    { address: "127.0.0.1:0" }
  metrics: { address: "127.0.0.1:0" }
lifecycle: { drain_timeout_ms: %d }
upstreams:
  - { name: demo, protocol: builtin }
routes:
  - { match: { model: "*" }, upstream: demo }
"""
        gw = Gateway(config=config % 100).start()
        path = os.path.join(gw.dir.name, "infergate.yaml")

        def reloads():
            status, _, body = gw.request("GET", "/metrics", listener="metrics")
            line = [l for l in body.decode().splitlines()
                    if l.startswith('infergate_config_reloads_total{result="success"}')]
            return float(line[0].split()[-1]) if line else 0.0
        with open(path, "w") as f:
            f.write(config % 10000)
        gw.proc.send_signal(signal.SIGHUP)
        self.assertTrue(wait_until(lambda: reloads() >= 1, timeout=30), "the reload never happened")
        result = {}
        t = slow_http_request(gw, 1500, result)
        time.sleep(0.3)
        code = gw.stop()
        t.join()
        self.assertEqual((code, result.get("status")), (0, 200))
        self.assertFalse(gw.sanitizer_reports())

    def test_a_busy_polling_gateway_serves_drains_and_keeps_its_window_until_a_restart(self):
        """busy_poll_us: the loops serve sequential and concurrent requests, a reload that
        changes the window is refused naming the key (it takes a restart), and SIGTERM
        drains a request in flight and exits while the loops poll."""
        config = """
listeners:
  http:    { address: "127.0.0.1:0" }
  metrics: { address: "127.0.0.1:0" }
workers: 2
busy_poll_us: %d
upstreams:
  - { name: demo, protocol: builtin }
routes:
  - { match: { model: "*" }, upstream: demo }
"""
        gw = Gateway(config=config % 200).start()
        body = json.dumps({"inputs": [
            {"name": "INPUT0", "shape": [1, 16], "datatype": "INT32", "data": list(range(16))},
            {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32", "data": [1] * 16}]}).encode()
        for _ in range(20):
            status, _, answer = gw.request("POST", "/v2/models/simple/infer", body)
            self.assertEqual(status, 200, answer)
            outputs = {o["name"]: o["data"] for o in json.loads(answer)["outputs"]}
            self.assertEqual(outputs["OUTPUT0"], [i + 1 for i in range(16)])
        statuses = []

        def client():
            for _ in range(20):
                statuses.append(gw.request("POST", "/v2/models/simple/infer", body)[0])
        threads = [threading.Thread(target=client) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(statuses, [200] * 80)

        path = os.path.join(gw.dir.name, "infergate.yaml")
        with open(path, "w") as f:
            f.write(config % 0)
        status, _, answer = gw.request("POST", "/admin/reload", listener="metrics")
        self.assertEqual(status, 400, answer)
        self.assertIn("busy_poll_us", json.loads(answer)["error"])

        result = {}
        t = slow_http_request(gw, 300, result)
        time.sleep(0.1)
        code = gw.stop()
        t.join()
        self.assertEqual((code, result.get("status")), (0, 200))
        self.assertFalse(gw.sanitizer_reports())


if __name__ == "__main__":
    unittest.main()
