"""The suite's request files (bench/suite.py): the `identity_fp32` request of a given
tensor size in the three client forms (HTTP JSON, HTTP binary extension, gRPC
ModelInferRequest), written once into a scratch directory, with the headers, the loadgen
arguments and one checked request each. bench/cpu_split.py, paired.py and busy_poll.py use
them through suite.Requests."""
import http.client
import json
import os
import struct

import forwarding_report

MODEL = "identity_fp32"


class GuardError(Exception):
    """The correctness guard's failure: an answer that is not the request's tensor."""


class Requests:
    """The identity_fp32 request of a given tensor size in the three client forms, written
    once into the scratch directory; `expected(size)` is what the model must answer."""

    def __init__(self, scratch, pb):
        self.scratch = scratch
        self.pb = pb
        self.hlen = {}

    @staticmethod
    def tensor(size):
        count = size // 4
        # Distinct finite values that survive JSON (float32 -> shortest double -> float32).
        return struct.pack(f"<{count}f", *((i % 4099) * 0.25 - 512.0 for i in range(count)))

    def path(self, kind, size):
        return os.path.join(self.scratch, f"{size}.{kind}")

    def write(self, kinds, size):
        raw = self.tensor(size)
        count = size // 4
        shape = [1, count]
        if "json" in kinds:
            values = struct.unpack(f"<{count}f", raw)
            with open(self.path("json", size), "w") as f:
                json.dump({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": shape,
                                       "data": list(values)}]}, f, separators=(",", ":"))
        if "bin" in kinds:
            header = json.dumps({
                "inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": shape,
                            "parameters": {"binary_data_size": size}}],
                "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": True}}]},
                separators=(",", ":")).encode()
            with open(self.path("bin", size), "wb") as f:
                f.write(header + raw)
            self.hlen[size] = len(header)
        if "grpc" in kinds:
            request = self.pb.ModelInferRequest(model_name=MODEL)
            t = request.inputs.add()
            t.name, t.datatype = "INPUT0", "FP32"
            t.shape.extend(shape)
            request.raw_input_contents.append(raw)
            with open(self.path("grpc", size), "wb") as f:
                f.write(request.SerializeToString())

    def headers(self, kind, size):
        """The HTTP headers of request `kind` (json or bin) of `size`."""
        if kind == "json":
            return {"Content-Type": "application/json"}
        return {"Content-Type": "application/octet-stream",
                "Inference-Header-Content-Length": str(self.hlen[size])}

    def body(self, kind, size):
        with open(self.path(kind, size), "rb") as f:
            return f.read()

    def loadgen_args(self, kind, size, http_port, grpc_port):
        if kind == "grpc":
            return [f"grpc://127.0.0.1:{grpc_port}", "--grpc-request", self.path("grpc", size)]
        args = [f"http://127.0.0.1:{http_port}/v2/models/{MODEL}/infer", "--body", self.path(kind, size)]
        for name, value in self.headers(kind, size).items():
            args += ["--header", f"{name}: {value}"]
        return args

    def ask(self, kind, size, http_port, grpc_port):
        """One request; the output tensor's bytes (raises GuardError on any failure)."""
        try:
            if kind == "grpc":
                _, outputs = forwarding_report.infer_grpc(self.pb, grpc_port, self.body(kind, size), timeout=120)
            else:
                _, outputs = forwarding_report.infer_http(http_port, MODEL, self.body(kind, size),
                                                          self.headers(kind, size), timeout=120)
        except forwarding_report.Mismatch as e:
            raise GuardError(str(e)) from None
        except (OSError, http.client.HTTPException, ValueError) as e:
            raise GuardError(f"{type(e).__name__}: {e}") from None
        if "OUTPUT0" not in outputs:
            raise GuardError(f"no OUTPUT0 in the answer ({sorted(outputs)})")
        return outputs["OUTPUT0"]

    def expected(self, size):
        return ("FP32", (1, size // 4), self.tensor(size))
