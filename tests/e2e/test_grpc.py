"""End-to-end: the gRPC surface of a real infergate, driven with Debian's python3-grpcio
and stubs generated at test time from the project's own .proto files, as tritonclient's
gRPC client drives Triton."""
import queue
import struct
import threading
import unittest

import grpc
import numpy as np

import grpc_stubs
from harness import Gateway

gw = None
pb = pb_grpc = health_pb = health_grpc = None
channel = stub = None

MAX = 2 ** 31 - 1


def setUpModule():
    global gw, pb, pb_grpc, health_pb, health_grpc, channel, stub
    pb, pb_grpc, health_pb, health_grpc = grpc_stubs.load()
    gw = Gateway().start()
    channel = grpc.insecure_channel(gw.addresses["grpc"], options=[
        ("grpc.max_send_message_length", MAX), ("grpc.max_receive_message_length", MAX)])
    stub = pb_grpc.GRPCInferenceServiceStub(channel)


def tearDownModule():
    channel.close()
    code = gw.stop()
    assert code == 0, "infergate exited with %d:\n%s" % (code, "".join(gw.stderr_lines))
    reports = gw.sanitizer_reports()
    assert not reports, "\n".join(reports)


def simple_request(a=None, b=None, request_id=""):
    a = np.arange(16, dtype=np.int32) if a is None else a
    b = np.ones(16, dtype=np.int32) if b is None else b
    req = pb.ModelInferRequest(model_name="simple", id=request_id)
    for name in ("INPUT0", "INPUT1"):
        t = req.inputs.add()
        t.name, t.datatype = name, "INT32"
        t.shape.extend([1, 16])
    req.raw_input_contents.extend([a.tobytes(), b.tobytes()])
    # What the Python client sends for priority (uint64) and the C++ client on every call.
    req.parameters["priority"].uint64_param = 1
    req.parameters["triton_enable_empty_final_response"].bool_param = False
    return req


def outputs_of(resp):
    return {o.name: (o, resp.raw_output_contents[i]) for i, o in enumerate(resp.outputs)}


class GrpcE2E(unittest.TestCase):
    def assertCode(self, call, code, fragment=""):
        with self.assertRaises(grpc.RpcError) as ctx:
            call()
        self.assertEqual(ctx.exception.code(), code, ctx.exception.details())
        self.assertIn(fragment, ctx.exception.details())

    def test_health_and_metadata(self):
        self.assertTrue(stub.ServerLive(pb.ServerLiveRequest()).live)
        self.assertTrue(stub.ServerReady(pb.ServerReadyRequest()).ready)
        self.assertTrue(stub.ModelReady(pb.ModelReadyRequest(name="simple")).ready)
        meta = stub.ServerMetadata(pb.ServerMetadataRequest())
        self.assertIn("binary_tensor_data", meta.extensions)
        mm = stub.ModelMetadata(pb.ModelMetadataRequest(name="simple"))
        self.assertEqual(mm.inputs[0].name, "INPUT0")
        self.assertEqual(list(mm.inputs[0].shape), [-1, 16])
        health = health_grpc.HealthStub(channel).Check(health_pb.HealthCheckRequest())
        self.assertEqual(health.status, health_pb.HealthCheckResponse.SERVING)

    def test_model_config_and_statistics(self):
        cfg = stub.ModelConfig(pb.ModelConfigRequest(name="simple")).config
        self.assertEqual(cfg.max_batch_size, 8)
        self.assertEqual(list(cfg.input[0].dims), [16])
        stub.ModelInfer(simple_request())
        stats = stub.ModelStatistics(pb.ModelStatisticsRequest(name="simple"))
        self.assertGreaterEqual(stats.model_stats[0].inference_count, 1)

    def test_model_infer_simple(self):
        resp = stub.ModelInfer(simple_request(request_id="r-1"))
        self.assertEqual(resp.id, "r-1")
        self.assertEqual(resp.model_name, "simple")
        out = outputs_of(resp)
        self.assertEqual(np.frombuffer(out["OUTPUT0"][1], np.int32).tolist(), list(range(1, 17)))
        self.assertEqual(np.frombuffer(out["OUTPUT1"][1], np.int32).tolist(), list(range(-1, 15)))

    def test_large_tensor_identity_with_gzip(self):
        x = np.random.default_rng(3).standard_normal(1 << 20).astype(np.float32)
        req = pb.ModelInferRequest(model_name="identity_fp32")
        t = req.inputs.add()
        t.name, t.datatype = "INPUT0", "FP32"
        t.shape.extend([1, x.size])
        req.raw_input_contents.append(x.tobytes())
        resp = stub.ModelInfer(req, compression=grpc.Compression.Gzip)
        self.assertEqual(resp.raw_output_contents[0], x.tobytes())

    def test_errors_have_tritons_codes(self):
        self.assertCode(lambda: stub.ModelInfer(pb.ModelInferRequest(model_name="nope")),
                        grpc.StatusCode.NOT_FOUND, "nope")
        self.assertCode(lambda: stub.ModelReady(pb.ModelReadyRequest(name="nope")),
                        grpc.StatusCode.NOT_FOUND)
        bad = simple_request()
        bad.inputs[0].shape[1] = 15
        self.assertCode(lambda: stub.ModelInfer(bad), grpc.StatusCode.INVALID_ARGUMENT)
        rep = pb.ModelInferRequest(model_name="repeat_int32")
        self.assertCode(lambda: stub.ModelInfer(rep), grpc.StatusCode.UNIMPLEMENTED, "decoupled")
        self.assertCode(lambda: stub.SystemSharedMemoryRegister(
            pb.SystemSharedMemoryRegisterRequest(name="r", key="/k", byte_size=8)),
            grpc.StatusCode.UNIMPLEMENTED)
        self.assertEqual(len(stub.SystemSharedMemoryStatus(pb.SystemSharedMemoryStatusRequest()).regions), 0)
        # The server keeps serving after every error.
        self.assertEqual(stub.ModelInfer(simple_request()).model_name, "simple")

    def test_deadline_on_the_sleep_model(self):
        req = pb.ModelInferRequest(model_name="sleep")
        t = req.inputs.add()
        t.name, t.datatype = "INPUT0", "INT32"
        t.shape.append(1)
        req.raw_input_contents.append(struct.pack("<i", 2000))
        self.assertCode(lambda: stub.ModelInfer(req, timeout=0.2), grpc.StatusCode.DEADLINE_EXCEEDED)
        self.assertEqual(stub.ModelInfer(simple_request()).model_name, "simple")

    def repeat_request(self, values, request_id="s"):
        req = pb.ModelInferRequest(model_name="repeat_int32", id=request_id)
        for name, dtype, data in (("IN", "INT32", np.array(values, np.int32)),
                                  ("DELAY", "UINT32", np.ones(len(values), np.uint32)),
                                  ("WAIT", "UINT32", np.zeros(1, np.uint32))):
            t = req.inputs.add()
            t.name, t.datatype = name, dtype
            t.shape.append(data.size)
            req.raw_input_contents.append(data.tobytes())
        return req

    def test_stream_infer_decoupled_and_in_band_errors(self):
        requests = [self.repeat_request([7, 8, 9], "a"), pb.ModelInferRequest(model_name="nope", id="b"),
                    simple_request(request_id="c")]
        responses = list(stub.ModelStreamInfer(iter(requests)))
        repeats = [r.infer_response for r in responses if r.infer_response.id == "a"]
        self.assertEqual([np.frombuffer(outputs_of(r)["OUT"][1], np.int32)[0] for r in repeats], [7, 8, 9])
        errors = [r for r in responses if r.error_message]
        self.assertEqual(len(errors), 1)
        self.assertEqual(errors[0].infer_response.id, "b")
        self.assertIn("nope", errors[0].error_message)
        simple = [r.infer_response for r in responses if r.infer_response.id == "c" and not r.error_message]
        self.assertEqual(len(simple), 1)
        self.assertTrue(simple[0].parameters["triton_final_response"].bool_param)

    def test_stream_with_triton_grpc_error_ends_with_a_status(self):
        requests = [pb.ModelInferRequest(model_name="nope", id="x")]
        with self.assertRaises(grpc.RpcError) as ctx:
            list(stub.ModelStreamInfer(iter(requests), metadata=(("triton_grpc_error", "true"),)))
        self.assertEqual(ctx.exception.code(), grpc.StatusCode.NOT_FOUND)

    def test_repository_and_settings(self):
        names = {m.name for m in stub.RepositoryIndex(pb.RepositoryIndexRequest()).models}
        self.assertIn("simple", names)
        stub.RepositoryModelUnload(pb.RepositoryModelUnloadRequest(model_name="identity_int8"))
        self.assertFalse(stub.ModelReady(pb.ModelReadyRequest(name="identity_int8")).ready)
        stub.RepositoryModelLoad(pb.RepositoryModelLoadRequest(model_name="identity_int8"))
        self.assertTrue(stub.ModelReady(pb.ModelReadyRequest(name="identity_int8")).ready)
        self.assertCode(lambda: stub.RepositoryIndex(pb.RepositoryIndexRequest(repository_name="x")),
                        grpc.StatusCode.UNIMPLEMENTED)
        trace = stub.TraceSetting(pb.TraceSettingRequest())
        self.assertEqual(list(trace.settings["trace_level"].value), ["OFF"])
        logs = stub.LogSettings(pb.LogSettingsRequest())
        self.assertTrue(logs.settings["log_info"].bool_param)

    def test_concurrent_calls(self):
        errors = []

        def worker():
            try:
                for _ in range(20):
                    stub.ModelInfer(simple_request())
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(e)
        threads = [threading.Thread(target=worker) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])


if __name__ == "__main__":
    unittest.main()
