"""Python stubs for the project's own .proto files, generated at test time with protoc
and Debian's grpc_python_plugin (nothing generated is committed), and the channels of a
test module to the processes it started."""
import importlib
import os
import socket
import struct
import subprocess
import sys
import tempfile

import grpc
import h2.config
import h2.connection
import h2.events

_HERE = os.path.dirname(os.path.abspath(__file__))
_PROTO_DIR = os.path.join(_HERE, "..", "..", "codecs", "proto")
_cache = {}

MODEL_INFER = "/inference.GRPCInferenceService/ModelInfer"


def load():
    if _cache:
        return _cache["pb"], _cache["grpc"], _cache["health_pb"], _cache["health_grpc"]
    # INFERGATE_PY_STUBS: stubs generated beforehand (scripts/gpu-check carries them to a
    # machine without protoc).
    out = os.environ.get("INFERGATE_PY_STUBS")
    if not out:
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


# ---- channels ----------------------------------------------------------------------------

MAX_MESSAGE = 2 ** 31 - 1
_channels = {}  # address -> (channel, GRPCInferenceService stub, the process it was made for)


def stub_of(process):
    """The GRPCInferenceService stub of `process`'s gRPC listener: one channel per address
    (no message size limit), kept until close_channels() (a module's tear-down). A channel
    made for another process at the same address (a stopped one whose port the kernel gave
    again) is closed and made anew: its connection state is the old process's."""
    address = process.address("grpc")
    cached = _channels.get(address)
    if cached is not None and cached[2] is not process:
        cached[0].close()
        cached = None
    if cached is None:
        channel = grpc.insecure_channel(address, options=[
            ("grpc.max_send_message_length", MAX_MESSAGE),
            ("grpc.max_receive_message_length", MAX_MESSAGE)])
        _channels[address] = (channel, load()[1].GRPCInferenceServiceStub(channel), process)
    return _channels[address][1]


def close_channels():
    for entry in list(_channels.values()):
        entry[0].close()
    _channels.clear()


def grpc_outcome(call):
    """("ok", response) or (code, details) of a gRPC call."""
    try:
        return ("ok", call())
    except grpc.RpcError as e:
        return (e.code(), e.details())


def simple_infer_request(model="simple"):
    """A ModelInferRequest of the demo `simple` model (INPUT0 = 0..15, INPUT1 = sixteen 1s,
    INT32 [1, 16], raw contents), for `model` (another name routes it elsewhere)."""
    import numpy as np
    pb = load()[0]
    req = pb.ModelInferRequest(model_name=model)
    for name in ("INPUT0", "INPUT1"):
        t = req.inputs.add()
        t.name, t.datatype = name, "INT32"
        t.shape.extend([1, 16])
    req.raw_input_contents.extend([np.arange(16, dtype=np.int32).tobytes(),
                                   np.ones(16, dtype=np.int32).tobytes()])
    return req


def h2_model_infer(address, message, on_first_data=None, metadata=(), timeout=30):
    """One ModelInfer on a raw HTTP/2 connection to the gateway's gRPC listener, seen frame
    by frame as grpcio cannot show it: `on_first_data(conn, sock, stream_id)` runs once the
    first DATA bytes of the answer are in. Returns (response headers, the DATA bytes, the
    trailers, the RST_STREAM code or None), header names and values as str."""
    host, port = address.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=timeout)
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
    conn.initiate_connection()
    sid = conn.get_next_available_stream_id()
    conn.send_headers(sid, [(":method", "POST"), (":scheme", "http"), (":path", MODEL_INFER),
                            (":authority", address), ("content-type", "application/grpc"),
                            ("te", "trailers")] + list(metadata))
    framed = b"\0" + struct.pack(">I", len(message)) + message
    headers, trailers, reset = {}, {}, None
    data = bytearray()
    ended = False

    def pump():
        nonlocal reset, ended
        sock.sendall(conn.data_to_send())
        chunk = sock.recv(1 << 20)
        if not chunk:
            raise ConnectionError("the gateway closed the connection")
        for event in conn.receive_data(chunk):
            if isinstance(event, h2.events.ResponseReceived):
                headers.update(dict(event.headers))
            elif isinstance(event, h2.events.DataReceived):
                first = not data
                data.extend(event.data)
                conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                if first and on_first_data is not None:
                    on_first_data(conn, sock, sid)
            elif isinstance(event, h2.events.TrailersReceived):
                trailers.update(dict(event.headers))
            elif isinstance(event, h2.events.StreamReset):
                reset, ended = event.error_code, True
            elif isinstance(event, h2.events.StreamEnded):
                ended = True

    try:
        sent = 0
        while sent < len(framed):
            room = min(conn.local_flow_control_window(sid), conn.max_outbound_frame_size)
            if room == 0:
                pump()
                continue
            conn.send_data(sid, framed[sent:sent + room])
            sent += room
        conn.end_stream(sid)
        while not ended:
            pump()
    finally:
        sock.close()
    return headers, bytes(data), trailers, reset
