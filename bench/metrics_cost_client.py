"""The client of bench/metrics_cost.sh: W warm-up requests of `simple` on one connection,
the gateway's callgrind counters zeroed, N requests, a dump.

    metrics_cost_client.py http|grpc N W GATEWAY_PID HTTP_PORT GRPC_PORT
"""
import http.client
import json
import os
import subprocess
import sys

path, n, w, gpid, http_port, grpc_port = (sys.argv[1], int(sys.argv[2]), int(sys.argv[3]),
                                          sys.argv[4], int(sys.argv[5]), int(sys.argv[6]))
if path == "http":
    body = json.dumps({"inputs": [
        {"name": "INPUT0", "shape": [1, 16], "datatype": "INT32", "data": list(range(16))},
        {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32", "data": [1] * 16}]})
    conn = http.client.HTTPConnection("127.0.0.1", http_port, timeout=600)

    def one():
        conn.request("POST", "/v2/models/simple/infer", body=body, headers={"x-path": "http"})
        r = conn.getresponse()
        r.read()
        assert r.status == 200, r.status
else:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "e2e"))
    import grpc
    import grpc_stubs
    _, pb_grpc, _, _ = grpc_stubs.load()
    stub = pb_grpc.GRPCInferenceServiceStub(grpc.insecure_channel("127.0.0.1:%d" % grpc_port))
    req = grpc_stubs.simple_infer_request()

    def one():
        stub.ModelInfer(req, timeout=600)

for _ in range(w):
    one()
subprocess.run(["callgrind_control", "--zero", gpid], check=True, stdout=subprocess.DEVNULL)
for _ in range(n):
    one()
subprocess.run(["callgrind_control", "--dump", gpid], check=True, stdout=subprocess.DEVNULL)
