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
import h2.errors
import h2.events

_HERE = os.path.dirname(os.path.abspath(__file__))
_PROTO_DIR = os.path.join(_HERE, "..", "..", "codecs", "proto")
_cache = {}

MODEL_INFER = "/inference.GRPCInferenceService/ModelInfer"
MODEL_STREAM_INFER = "/inference.GRPCInferenceService/ModelStreamInfer"


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


class _RawModelInfer:
    """One ModelInfer on a raw HTTP/2 connection (python h2), for what grpcio cannot show or
    do: the answer frame by frame, an upload paused or cut short. send(upto) sends the
    framed message (the 5-byte prefix, then the message) up to byte `upto` as the server's
    windows let it; pump() reads what the server sent once. `headers`, `data`, `trailers`,
    `reset` (the RST_STREAM code) and `ended` hold the answer so far."""

    def __init__(self, address, message, metadata=(), timeout=30, on_first_data=None):
        host, port = address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.conn = h2.connection.H2Connection(
            h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
        self.conn.initiate_connection()
        self.sid = self.conn.get_next_available_stream_id()
        self.conn.send_headers(self.sid, [(":method", "POST"), (":scheme", "http"), (":path", MODEL_INFER),
                                          (":authority", address), ("content-type", "application/grpc"),
                                          ("te", "trailers")] + list(metadata))
        self.framed = b"\0" + struct.pack(">I", len(message)) + message
        self.sent = 0
        self.half_closed = False  # END_STREAM sent
        self.on_first_data = on_first_data
        self.headers, self.trailers, self.reset, self.ended = {}, {}, None, False
        self.data = bytearray()

    def pump(self):
        self.sock.sendall(self.conn.data_to_send())
        chunk = self.sock.recv(1 << 20)
        if not chunk:
            raise ConnectionError("the gateway closed the connection")
        for event in self.conn.receive_data(chunk):
            if isinstance(event, h2.events.ResponseReceived):
                self.headers.update(dict(event.headers))
            elif isinstance(event, h2.events.DataReceived):
                first = not self.data
                self.data.extend(event.data)
                self.conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                if first and self.on_first_data is not None:
                    self.on_first_data(self.conn, self.sock, self.sid)
            elif isinstance(event, h2.events.TrailersReceived):
                self.trailers.update(dict(event.headers))
            elif isinstance(event, h2.events.StreamReset):
                self.reset, self.ended = event.error_code, True
            elif isinstance(event, h2.events.StreamEnded):
                self.ended = True

    def send(self, upto, end=False):
        """`end`: the stream ends with the last byte (END_STREAM on its DATA frame, in the
        same write), as grpc's clients end a unary call."""
        while self.sent < upto and not self.ended:
            room = min(self.conn.local_flow_control_window(self.sid), self.conn.max_outbound_frame_size,
                       upto - self.sent)
            if room == 0:
                self.pump()
                continue
            last = end and self.sent + room == len(self.framed)
            self.conn.send_data(self.sid, self.framed[self.sent:self.sent + room], end_stream=last)
            self.sent += room
            self.half_closed = self.half_closed or last
        self.sock.sendall(self.conn.data_to_send())

    def finish(self):
        """Ends the stream (unless it or the server did) and reads until the answer is over."""
        if not self.ended and not self.half_closed:
            self.conn.end_stream(self.sid)
            self.half_closed = True
        while not self.ended:
            self.pump()
        return self.headers, bytes(self.data), self.trailers, self.reset

    def close(self):
        self.sock.close()


def h2_model_infer(address, message, on_first_data=None, metadata=(), timeout=30):
    """One ModelInfer on a raw HTTP/2 connection to the gateway's gRPC listener, seen frame
    by frame as grpcio cannot show it: `on_first_data(conn, sock, stream_id)` runs once the
    first DATA bytes of the answer are in. Returns (response headers, the DATA bytes, the
    trailers, the RST_STREAM code or None), header names and values as str."""
    call = _RawModelInfer(address, message, metadata, timeout, on_first_data)
    try:
        call.send(len(call.framed), end=True)
        return call.finish()
    finally:
        call.close()


def h2_model_infer_paused(address, message, pause_at, at_pause, then="send", timeout=30):
    """One ModelInfer on a raw HTTP/2 connection whose framed message (the 5-byte prefix,
    then `message`) is sent up to byte `pause_at`, then `at_pause()` runs while the rest
    waits, as a slow client's upload would. `then` says what follows: "send" the rest and
    end the stream, "end" the stream there (the message cut short), or "reset" it
    (RST_STREAM CANCEL, then the connection closed: nothing is read). Returns as
    h2_model_infer; "reset" returns nothing."""
    call = _RawModelInfer(address, message, timeout=timeout)
    try:
        call.send(pause_at)
        at_pause()
        if then == "reset":
            call.conn.reset_stream(call.sid, error_code=h2.errors.ErrorCodes.CANCEL)
            call.sock.sendall(call.conn.data_to_send())
            return None
        if then == "send":
            call.send(len(call.framed), end=True)
        return call.finish()
    finally:
        call.close()
