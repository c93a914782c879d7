"""Python stubs for the project's own .proto files, generated at test time with protoc
and Debian's grpc_python_plugin (nothing generated is committed)."""
import importlib
import os
import subprocess
import sys
import tempfile

_HERE = os.path.dirname(os.path.abspath(__file__))
_PROTO_DIR = os.path.join(_HERE, "..", "..", "codecs", "proto")
_cache = {}


def load():
    if _cache:
        return _cache["pb"], _cache["grpc"], _cache["health_pb"], _cache["health_grpc"]
    out = tempfile.mkdtemp(prefix="infergate-stubs-")
    protos = ["grpc_service.proto", "model_config.proto", "health.proto"]
    subprocess.run(["protoc", "-I", _PROTO_DIR, "--python_out", out, "--grpc_out", out,
                    "--plugin=protoc-gen-grpc=/usr/bin/grpc_python_plugin"] + protos,
                   check=True)
    sys.path.insert(0, out)
    _cache["pb"] = importlib.import_module("grpc_service_pb2")
    _cache["grpc"] = importlib.import_module("grpc_service_pb2_grpc")
    _cache["health_pb"] = importlib.import_module("health_pb2")
    _cache["health_grpc"] = importlib.import_module("health_pb2_grpc")
    return load()
