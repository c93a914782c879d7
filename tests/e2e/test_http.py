"""End-to-end: the HTTP/REST surface of a real infergate serving builtin models, driven
over loopback as tritonclient, curl and misbehaving clients would. Every bad input is
followed by a request that must still succeed on the same server."""
import gzip
import json
import socket
import struct
import time
import unittest
import zlib

import numpy as np

from harness import Gateway

gw = None


def setUpModule():
    global gw
    gw = Gateway(header_timeout_ms=500).start()


def tearDownModule():
    code = gw.stop()
    assert code == 0, "infergate exited with %d:\n%s" % (code, "".join(gw.stderr_lines))
    reports = gw.sanitizer_reports()
    assert not reports, "\n".join(reports)


def simple_json(a=None, b=None, outputs=None, binary_output=None):
    a = list(range(16)) if a is None else a
    b = [1] * 16 if b is None else b
    body = {"inputs": [
        {"name": "INPUT0", "shape": [1, 16], "datatype": "INT32", "data": a},
        {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32", "data": b}]}
    if outputs is not None:
        body["outputs"] = outputs
    if binary_output is not None:
        body["parameters"] = {"binary_data_output": binary_output}
    return json.dumps(body).encode()


def binary_body(tensors, outputs=None, params=None):
    """tensors: [(name, datatype, shape, raw bytes)] -> (body, json length)."""
    inputs = [{"name": n, "shape": s, "datatype": d, "parameters": {"binary_data_size": len(r)}}
              for n, d, s, r in tensors]
    header = {"inputs": inputs}
    if outputs is not None:
        header["outputs"] = outputs
    if params:
        header["parameters"] = params
    js = json.dumps(header, separators=(",", ":")).encode()
    return js + b"".join(r for _, _, _, r in tensors), len(js)


def split_binary(headers, body):
    n = int(headers["inference-header-content-length"])
    return json.loads(body[:n]), body[n:]


class HttpE2E(unittest.TestCase):
    def assertStillServing(self):
        status, _, body = gw.request("POST", "/v2/models/simple/infer", simple_json())
        self.assertEqual(status, 200, body)
        self.assertTrue(gw.alive())

    def assertError(self, status, body, want_status, fragment):
        self.assertEqual(status, want_status, body)
        message = json.loads(body)["error"]
        self.assertIn(fragment, message)

    # ---- health, metadata ---------------------------------------------------------
    def test_health_endpoints_answer_with_empty_bodies(self):
        for path in ("/v2/health/live", "/v2/health/ready"):
            status, headers, body = gw.request("GET", path)
            self.assertEqual((status, body), (200, b""), path)
            self.assertEqual(headers["content-length"], "0")

    def test_server_metadata_lists_extensions(self):
        status, headers, body = gw.request("GET", "/v2")
        self.assertEqual(status, 200)
        meta = json.loads(body)
        self.assertEqual(meta["name"], "infergate")
        for ext in ("binary_tensor_data", "classification", "sequence", "model_repository",
                    "system_shared_memory", "statistics"):
            self.assertIn(ext, meta["extensions"])
        self.assertEqual(headers["content-type"], "application/json")

    def test_model_metadata_matches_triton_shape(self):
        status, _, body = gw.request("GET", "/v2/models/simple")
        self.assertEqual(status, 200)
        meta = json.loads(body)
        self.assertEqual(meta["name"], "simple")
        self.assertEqual(meta["versions"], ["1"])
        self.assertEqual(meta["inputs"][0], {"name": "INPUT0", "datatype": "INT32", "shape": [-1, 16]})
        status, _, body = gw.request("GET", "/v2/models/simple/versions/1")
        self.assertEqual(json.loads(body)["versions"], ["1"])

    def test_model_ready_and_unknown_models(self):
        self.assertEqual(gw.request("GET", "/v2/models/simple/ready")[:1], (200,))
        status, _, body = gw.request("GET", "/v2/models/nope/ready")
        self.assertError(status, body, 404, "nope")
        status, _, body = gw.request("GET", "/v2/models/nope")
        self.assertError(status, body, 404, "Request for unknown model: 'nope'")
        status, _, body = gw.request("GET", "/v2/models/simple/versions/7")
        self.assertEqual(status, 404, body)

    def test_model_config_is_triton_json(self):
        status, _, body = gw.request("GET", "/v2/models/simple/config")
        self.assertEqual(status, 200)
        config = json.loads(body)
        self.assertEqual(config["name"], "simple")
        self.assertEqual(config["max_batch_size"], 8)
        self.assertEqual(config["input"][0]["data_type"], "TYPE_INT32")
        self.assertEqual(config["input"][0]["dims"], [16])
        self.assertIn("model_transaction_policy", config)

    def test_statistics_count_inferences(self):
        gw.request("POST", "/v2/models/simple/infer", simple_json())
        status, _, body = gw.request("GET", "/v2/models/simple/stats")
        self.assertEqual(status, 200)
        stats = json.loads(body)["model_stats"][0]
        self.assertEqual(stats["name"], "simple")
        self.assertGreaterEqual(stats["inference_count"], 1)
        self.assertIn("success", stats["inference_stats"])
        status, _, body = gw.request("GET", "/v2/models/stats")
        self.assertGreater(len(json.loads(body)["model_stats"]), 5)
        status, _, body = gw.request("GET", "/v2/models/nope/stats")
        self.assertEqual(status, 400)

    def test_unrouted_paths_and_wrong_methods(self):
        status, headers, body = gw.request("GET", "/v2/")
        self.assertEqual((status, json.loads(body)), (404, {"error": "Not Found"}))
        status, _, body = gw.request("GET", "/v2/models/simple/infer")
        self.assertEqual((status, json.loads(body)), (405, {"error": "Method Not Allowed"}))
        status, _, _ = gw.request("GET", "/v2/models/simple/versions/v1")
        self.assertEqual(status, 404)

    # ---- infer --------------------------------------------------------------------
    def test_json_infer_on_simple(self):
        status, headers, body = gw.request("POST", "/v2/models/simple/infer",
                                           simple_json(outputs=[{"name": "OUTPUT0"}, {"name": "OUTPUT1"}]))
        self.assertEqual(status, 200, body)
        self.assertEqual(headers["content-type"], "application/json")
        resp = json.loads(body)
        self.assertEqual(resp["model_name"], "simple")
        self.assertEqual(resp["model_version"], "1")
        out = {o["name"]: o for o in resp["outputs"]}
        self.assertEqual(out["OUTPUT0"]["data"], [i + 1 for i in range(16)])
        self.assertEqual(out["OUTPUT1"]["data"], [i - 1 for i in range(16)])
        self.assertEqual(out["OUTPUT0"]["shape"], [1, 16])

    def test_binary_infer_as_the_python_client_sends_it(self):
        a = np.arange(16, dtype=np.int32).reshape(1, 16)
        b = np.full((1, 16), 3, dtype=np.int32)
        body, hl = binary_body([("INPUT0", "INT32", [1, 16], a.tobytes()),
                                ("INPUT1", "INT32", [1, 16], b.tobytes())],
                               outputs=[{"name": "OUTPUT0", "parameters": {"binary_data": True}},
                                        {"name": "OUTPUT1", "parameters": {"binary_data": True}}])
        status, headers, data = gw.request("POST", "/v2/models/simple/infer", body,
                                           {"Inference-Header-Content-Length": str(hl)})
        self.assertEqual(status, 200, data)
        self.assertEqual(headers["content-type"], "application/octet-stream")
        header, blobs = split_binary(headers, data)
        sizes = [o["parameters"]["binary_data_size"] for o in header["outputs"]]
        self.assertEqual(sizes, [64, 64])
        out0 = np.frombuffer(blobs[:64], dtype=np.int32)
        out1 = np.frombuffer(blobs[64:], dtype=np.int32)
        self.assertTrue((out0 == (a + b).ravel()).all())
        self.assertTrue((out1 == (a - b).ravel()).all())

    def test_large_identity_round_trip_is_exact(self):
        x = np.random.default_rng(7).standard_normal((1, 1 << 20)).astype(np.float32)
        body, hl = binary_body([("INPUT0", "FP32", [1, 1 << 20], x.tobytes())],
                               params={"binary_data_output": True})
        status, headers, data = gw.request("POST", "/v2/models/identity_fp32/infer", body,
                                           {"Inference-Header-Content-Length": str(hl)})
        self.assertEqual(status, 200, data[:200])
        header, blobs = split_binary(headers, data)
        self.assertEqual(blobs, x.tobytes())

    def test_every_datatype_through_identity(self):
        cases = [("BOOL", np.bool_), ("UINT8", np.uint8), ("UINT16", np.uint16),
                 ("UINT32", np.uint32), ("UINT64", np.uint64), ("INT8", np.int8),
                 ("INT16", np.int16), ("INT32", np.int32), ("INT64", np.int64),
                 ("FP16", np.float16), ("FP32", np.float32), ("FP64", np.float64)]
        for name, dtype in cases:
            x = (np.arange(6) % 2).astype(dtype).reshape(1, 6)
            body, hl = binary_body([("INPUT0", name, [1, 6], x.tobytes())],
                                   params={"binary_data_output": True})
            status, headers, data = gw.request("POST", "/v2/models/identity_%s/infer" % name.lower(),
                                               body, {"Inference-Header-Content-Length": str(hl)})
            self.assertEqual(status, 200, (name, data[:300]))
            _, blobs = split_binary(headers, data)
            self.assertEqual(blobs, x.tobytes(), name)
        strings = [b"ab", b"", b"\xff\x00z"]
        raw = b"".join(struct.pack("<I", len(s)) + s for s in strings)
        body, hl = binary_body([("INPUT0", "BYTES", [1, 3], raw)], params={"binary_data_output": True})
        status, headers, data = gw.request("POST", "/v2/models/identity_bytes/infer", body,
                                           {"Inference-Header-Content-Length": str(hl)})
        self.assertEqual(status, 200, data)
        self.assertEqual(split_binary(headers, data)[1], raw)

    def test_int64_values_stay_exact_in_json(self):
        big = [9007199254740993, -9223372036854775808, 9223372036854775807]
        req = {"inputs": [{"name": "INPUT0", "shape": [1, 3], "datatype": "INT64", "data": big}]}
        status, _, body = gw.request("POST", "/v2/models/identity_int64/infer", json.dumps(req).encode())
        self.assertEqual(status, 200, body)
        self.assertIn(b"[9007199254740993,-9223372036854775808,9223372036854775807]", body)

    def test_raw_binary_request(self):
        x = np.arange(8, dtype=np.float32)
        status, headers, data = gw.request("POST", "/v2/models/identity_fp32/infer", x.tobytes(),
                                           {"Inference-Header-Content-Length": "0"})
        self.assertEqual(status, 200, data)
        header, blobs = split_binary(headers, data)
        self.assertEqual(header["outputs"][0]["shape"], [1, 8])
        self.assertEqual(blobs, x.tobytes())

    def test_gzip_and_deflate_both_ways(self):
        plain = simple_json()
        for name, packed in (("gzip", gzip.compress(plain)), ("deflate", zlib.compress(plain))):
            status, headers, body = gw.request("POST", "/v2/models/simple/infer", packed,
                                               {"Content-Encoding": name, "Accept-Encoding": name})
            self.assertEqual(status, 200, body)
            self.assertEqual(headers.get("content-encoding"), name)
            text = gzip.decompress(body) if name == "gzip" else zlib.decompress(body)
            self.assertEqual(json.loads(text)["model_name"], "simple")

    def test_unsupported_content_encoding_is_501(self):
        status, headers, body = gw.request("POST", "/v2/models/simple/infer", simple_json(),
                                           {"Content-Encoding": "br"})
        self.assertError(status, body, 501, "br")
        self.assertEqual(headers.get("accept-encoding"), "gzip, deflate")

    def test_chunked_request_body(self):
        body = simple_json()
        chunked = b"".join(b"%x\r\n%s\r\n" % (len(body[i:i + 50]), body[i:i + 50])
                           for i in range(0, len(body), 50)) + b"0\r\n\r\n"
        reply = gw.raw(b"POST /v2/models/simple/infer HTTP/1.1\r\nHost: x\r\n"
                       b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n" + chunked)
        self.assertTrue(reply.startswith(b"HTTP/1.1 200 OK"), reply[:200])

    def test_pipelined_requests_on_one_connection(self):
        body = simple_json()
        one = (b"POST /v2/models/simple/infer HTTP/1.1\r\nContent-Length: %d\r\n\r\n" % len(body)) + body
        reply = gw.raw(one * 3 + b"GET /v2/health/live HTTP/1.1\r\nConnection: close\r\n\r\n")
        self.assertEqual(reply.count(b"HTTP/1.1 200 OK"), 4)

    def test_classification(self):
        req = {"inputs": [{"name": "INPUT0", "shape": [1, 4], "datatype": "FP32",
                           "data": [0.5, 3.3, 1.0, 2.0]}],
               "outputs": [{"name": "OUTPUT0", "parameters": {"classification": 2}}]}
        status, _, body = gw.request("POST", "/v2/models/identity_fp32/infer", json.dumps(req).encode())
        self.assertEqual(status, 200, body)
        out = json.loads(body)["outputs"][0]
        self.assertEqual(out["datatype"], "BYTES")
        self.assertEqual(out["data"], ["3.300000:1", "2.000000:3"])

    def test_sequence_model_accumulates_per_sequence(self):
        def send(value, seq, start=False, end=False):
            req = {"parameters": {"sequence_id": seq, "sequence_start": start, "sequence_end": end},
                   "inputs": [{"name": "INPUT", "shape": [1, 1], "datatype": "INT32", "data": [value]}]}
            status, _, body = gw.request("POST", "/v2/models/simple_sequence/infer", json.dumps(req).encode())
            self.assertEqual(status, 200, body)
            return json.loads(body)["outputs"][0]["data"][0]
        self.assertEqual(send(5, 1001, start=True), 5)
        self.assertEqual(send(7, "s-2", start=True), 7)
        self.assertEqual(send(10, 1001), 15)
        self.assertEqual(send(1, "s-2", end=True), 8)
        status, _, body = gw.request("POST", "/v2/models/simple_sequence/infer", json.dumps(
            {"inputs": [{"name": "INPUT", "shape": [1, 1], "datatype": "INT32", "data": [1]}]}).encode())
        self.assertError(status, body, 400, "correlation ID")

    def test_decoupled_model_is_refused_on_infer(self):
        req = {"inputs": [{"name": "IN", "shape": [1], "datatype": "INT32", "data": [1]},
                          {"name": "DELAY", "shape": [1], "datatype": "UINT32", "data": [0]},
                          {"name": "WAIT", "shape": [1], "datatype": "UINT32", "data": [0]}]}
        status, _, body = gw.request("POST", "/v2/models/repeat_int32/infer", json.dumps(req).encode())
        self.assertEqual(status, 501, body)

    def test_generate_and_generate_stream(self):
        status, headers, body = gw.request("POST", "/v2/models/identity_bytes/generate",
                                           json.dumps({"INPUT0": ["hello"], "id": "g1"}).encode())
        self.assertEqual(status, 200, body)
        self.assertEqual(json.loads(body), {"id": "g1", "model_name": "identity_bytes",
                                            "model_version": "1", "OUTPUT0": "hello"})
        req = {"IN": [4, 5, 6], "DELAY": [1, 1, 1], "WAIT": [0]}
        status, headers, body = gw.request("POST", "/v2/models/repeat_int32/generate_stream",
                                           json.dumps(req).encode())
        self.assertEqual(status, 200, body)
        self.assertEqual(headers["content-type"], "text/event-stream; charset=utf-8")
        events = [json.loads(e[len(b"data: "):]) for e in body.split(b"\n\n") if e]
        self.assertEqual([e["OUT"] for e in events], [4, 5, 6])
        self.assertEqual([e["IDX"] for e in events], [0, 1, 2])

    # ---- repository, shm, settings -----------------------------------------------
    def test_repository_index_unload_load(self):
        status, _, body = gw.request("POST", "/v2/repository/index", b"")
        self.assertEqual(status, 200)
        names = {m["name"] for m in json.loads(body)}
        self.assertIn("simple_string", names)
        self.assertEqual(gw.request("POST", "/v2/repository/models/simple_string/unload",
                                    json.dumps({"parameters": {"unload_dependents": False}}).encode())[0], 200)
        status, _, body = gw.request("GET", "/v2/models/simple_string/ready")
        self.assertEqual(status, 400)
        status, _, body = gw.request("POST", "/v2/repository/index", json.dumps({"ready": True}).encode())
        self.assertNotIn("simple_string", {m["name"] for m in json.loads(body)})
        self.assertEqual(gw.request("POST", "/v2/repository/models/simple_string/load", b"{}")[0], 200)
        self.assertEqual(gw.request("GET", "/v2/models/simple_string/ready")[0], 200)

    def test_shared_memory_is_off_as_triton_without_allow_client_shm(self):
        status, _, body = gw.request("GET", "/v2/systemsharedmemory/status")
        self.assertEqual((status, json.loads(body)), (200, []))
        status, _, body = gw.request("POST", "/v2/systemsharedmemory/region/r/register",
                                     json.dumps({"key": "/k", "byte_size": 64}).encode())
        self.assertError(status, body, 501, "shared memory is disabled")
        req = {"inputs": [{"name": "INPUT0", "shape": [1, 4], "datatype": "FP32",
                           "parameters": {"shared_memory_region": "r", "shared_memory_byte_size": 16}}]}
        status, _, body = gw.request("POST", "/v2/models/identity_fp32/infer", json.dumps(req).encode())
        self.assertError(status, body, 501, "shm.enabled")

    def test_trace_and_log_settings(self):
        status, _, body = gw.request("GET", "/v2/trace/setting")
        self.assertEqual(status, 200)
        self.assertEqual(json.loads(body)["trace_level"], ["OFF"])
        status, _, body = gw.request("POST", "/v2/trace/setting",
                                     json.dumps({"trace_level": ["TIMESTAMPS"], "trace_rate": "5"}).encode())
        self.assertEqual(status, 200, body)
        self.assertEqual(json.loads(body)["trace_rate"], "5")
        status, _, body = gw.request("POST", "/v2/trace/setting", json.dumps({"trace_file": "/x"}).encode())
        self.assertEqual(status, 501)
        status, _, body = gw.request("GET", "/v2/logging")
        self.assertEqual(json.loads(body)["log_info"], True)

    def test_model_trace_settings_and_logging_updates(self):
        status, _, body = gw.request("POST", "/v2/models/simple/trace/setting",
                                     json.dumps({"trace_level": ["TENSORS"]}).encode())
        self.assertEqual(status, 200, body)
        self.assertEqual(json.loads(body)["trace_level"], ["TENSORS"])
        status, _, body = gw.request("GET", "/v2/models/nope/trace/setting")
        self.assertEqual(status, 404, body)
        status, _, body = gw.request("POST", "/v2/trace/setting",
                                     json.dumps({"trace_level": ["OFF", "TENSORS"]}).encode())
        self.assertEqual(status, 400, body)
        status, _, body = gw.request("POST", "/v2/logging", json.dumps({"log_verbose_level": 2}).encode())
        self.assertEqual(status, 200, body)
        self.assertEqual(json.loads(body)["log_verbose_level"], 2)
        status, _, body = gw.request("POST", "/v2/logging", json.dumps({"log_file": "/tmp/x"}).encode())
        self.assertEqual(status, 501, body)
        status, _, body = gw.request("POST", "/v2/logging", b"not json")
        self.assertEqual(status, 400, body)

    def test_cuda_shared_memory_endpoints(self):
        status, _, body = gw.request("GET", "/v2/cudasharedmemory/status")
        self.assertEqual((status, json.loads(body)), (200, []))
        status, _, body = gw.request("GET", "/v2/cudasharedmemory/region/c/status")
        self.assertEqual(status, 404, body)
        status, _, body = gw.request("POST", "/v2/cudasharedmemory/region/c/register",
                                     json.dumps({"raw_handle": {"b64": ""}, "device_id": 0,
                                                 "byte_size": 8}).encode())
        self.assertEqual(status, 501, body)
        self.assertEqual(gw.request("POST", "/v2/systemsharedmemory/unregister", b"")[0], 501)

    def test_repository_refuses_named_repositories_and_unknown_models(self):
        status, _, body = gw.request("POST", "/v2/repository/other/models/simple/load", b"{}")
        self.assertError(status, body, 501, "repository_name")
        status, _, body = gw.request("POST", "/v2/repository/models/nope/load", b"{}")
        self.assertEqual(status, 500, body)  # Triton's own code for an unknown model on load
        status, _, body = gw.request("POST", "/v2/repository/models/simple/load",
                                     json.dumps({"parameters": {"config": 7}}).encode())
        self.assertEqual(status, 400, body)

    # ---- bad input ---------------------------------------------------------------
    def test_malformed_json_is_400_and_server_keeps_serving(self):
        status, _, body = gw.request("POST", "/v2/models/simple/infer", b'{"inputs":[')
        self.assertError(status, body, 400, "JSON")
        self.assertStillServing()

    def test_wrong_shape_and_datatype(self):
        bad = simple_json().replace(b'"shape": [1, 16]', b'"shape": [1, 15]', 1)
        status, _, body = gw.request("POST", "/v2/models/simple/infer", bad)
        self.assertEqual(status, 400, body)
        bad = simple_json().replace(b'"INT32"', b'"FP32"', 1)
        status, _, body = gw.request("POST", "/v2/models/simple/infer", bad)
        self.assertEqual(status, 400, body)
        self.assertStillServing()

    def test_unknown_model_and_version(self):
        status, _, body = gw.request("POST", "/v2/models/nope/infer", simple_json())
        self.assertError(status, body, 404, "nope")
        status, _, body = gw.request("POST", "/v2/models/simple/versions/2/infer", simple_json())
        self.assertEqual(status, 404, body)
        self.assertStillServing()

    def test_truncated_binary_body(self):
        body, hl = binary_body([("INPUT0", "INT32", [1, 16], bytes(64)),
                                ("INPUT1", "INT32", [1, 16], bytes(64))])
        status, _, data = gw.request("POST", "/v2/models/simple/infer", body[:-10],
                                     {"Inference-Header-Content-Length": str(hl)})
        self.assertError(status, data, 400, "INPUT1")
        status, _, data = gw.request("POST", "/v2/models/simple/infer", body,
                                     {"Inference-Header-Content-Length": str(len(body) + 5)})
        self.assertEqual(status, 400, data)
        self.assertStillServing()

    def test_oversize_json_is_413(self):
        big = json.dumps({"inputs": [{"name": "INPUT0", "shape": [1, 16], "datatype": "INT32",
                                      "data": [1] * 16}], "pad": "x" * (70 << 20)}).encode()
        status, _, body = gw.request("POST", "/v2/models/simple/infer", big)
        self.assertEqual(status, 413, body[:200])
        self.assertStillServing()

    def test_garbage_bytes_on_the_socket(self):
        reply = gw.raw(b"\x00\x01\x02garbage\r\n\r\n")
        self.assertTrue(reply.startswith(b"HTTP/1.1 400"), reply[:100])
        self.assertStillServing()

    def test_client_disconnecting_mid_request(self):
        s = socket.create_connection(("127.0.0.1", gw.port("http")))
        s.sendall(b"POST /v2/models/simple/infer HTTP/1.1\r\nContent-Length: 1000\r\n\r\n{\"inp")
        s.close()
        s = socket.create_connection(("127.0.0.1", gw.port("http")))
        body = json.dumps({"inputs": [{"name": "INPUT0", "shape": [1], "datatype": "INT32", "data": [500]}]}).encode()
        s.sendall(b"POST /v2/models/sleep/infer HTTP/1.1\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        s.close()  # gone while the model sleeps: the request is cancelled, nothing leaks
        self.assertStillServing()

    def test_slow_headers_time_out(self):
        reply = gw.raw(b"GET /v2/health/live HTTP/1.1\r\nHost: slow")
        self.assertTrue(reply.startswith(b"HTTP/1.1 408"), reply[:100])
        self.assertStillServing()

    # ---- metrics -----------------------------------------------------------------
    def test_metrics_endpoint(self):
        gw.request("GET", "/v2/health/live")
        status, headers, body = gw.request("GET", "/metrics", listener="metrics")
        self.assertEqual(status, 200)
        self.assertIn("text/plain", headers["content-type"])
        self.assertIn(b'infergate_http_requests_total{endpoint="health_live",code="200"}', body)
        self.assertIn(b"infergate_build_info", body)
        self.assertEqual(gw.request("GET", "/other", listener="metrics")[:1], (200,))
        self.assertEqual(gw.request("POST", "/metrics", b"", listener="metrics")[0], 405)


if __name__ == "__main__":
    unittest.main()
