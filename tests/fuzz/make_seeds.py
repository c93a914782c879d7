#!/usr/bin/python3
"""Writes the seed corpora of the fuzz drivers (corpus/<fuzzer>/seed_*).

Seeds are small valid (and a few nearly valid) inputs built by hand from PROTOCOL.md, so
that each fuzzer starts inside its decoder's interesting paths. Deterministic: rerunning
rewrites the same bytes. Findings that libFuzzer adds later sit beside them and are
replayed by ctest the same way.
"""
import gzip
import os
import struct
import sys
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))


def write(fuzzer, name, data):
    folder = os.path.join(HERE, "corpus", fuzzer)
    os.makedirs(folder, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(folder, "seed_" + name), "wb") as f:
        f.write(data)


# ---- protobuf wire writer: the one tests/data/make_fixtures.py builds its fixtures with --
sys.path.insert(0, os.path.join(HERE, "..", "data"))
from make_fixtures import VARINT, infer_parameter, pb_len, tag, varint  # noqa: E402


def field_varint(num, v):
    return tag(num, VARINT) + varint(v)


def field_bytes(num, data):
    return pb_len(num, data)


def param(key, kind, value):
    """One map<string, InferParameter> entry."""
    return pb_len(1, key) + pb_len(2, infer_parameter(kind, value))


def tensor(name, datatype, shape, params=b"", contents=b""):
    packed = b"".join(varint(d) for d in shape)
    msg = field_bytes(1, name) + field_bytes(2, datatype) + field_bytes(3, packed)
    msg += params
    if contents:
        msg += field_bytes(5, contents)
    return msg


def int32s(values):
    return b"".join(struct.pack("<i", v) for v in values)


def bytes_elements(elements):
    return b"".join(struct.pack("<I", len(e)) + e for e in elements)


# ---- JSON requests -----------------------------------------------------------------
simple_json = ('{"inputs":[{"name":"INPUT0","shape":[1,16],"datatype":"INT32","data":[%s]},'
               '{"name":"INPUT1","shape":[1,16],"datatype":"INT32","data":[%s]}],'
               '"outputs":[{"name":"OUTPUT0"},{"name":"OUTPUT1","parameters":{"binary_data":true}}]}'
               % (",".join(str(i) for i in range(16)), ",".join("1" for _ in range(16))))
write("json_request", "simple", simple_json)
write("json_request", "all_types",
      '{"id":"x","parameters":{"sequence_id":"s-1","sequence_start":true,"priority":3,"c":1.5},'
      '"inputs":[{"name":"b","shape":[2],"datatype":"BOOL","data":[true,false]},'
      '{"name":"u","shape":[2],"datatype":"UINT64","data":[18446744073709551615,0]},'
      '{"name":"i","shape":[2,1],"datatype":"INT8","data":[[-1],[2]]},'
      '{"name":"f","shape":[3],"datatype":"FP32","data":[NaN,-Infinity,0.5]},'
      '{"name":"d","shape":[1],"datatype":"FP64","data":[1e300]},'
      '{"name":"s","shape":[2],"datatype":"BYTES","data":["a\\u0000b","\\"q\\""]},'
      '{"data":[7],"name":"late","shape":[1],"datatype":"UINT16"}]}')
write("json_request", "shm",
      '{"inputs":[{"name":"S","shape":[4],"datatype":"FP32","parameters":{"shared_memory_region":"r",'
      '"shared_memory_byte_size":16,"shared_memory_offset":0}}],"outputs":[{"name":"o","parameters":'
      '{"shared_memory_region":"r2","shared_memory_byte_size":16}},{"name":"c","parameters":{"classification":2}}]}')
write("json_request", "bad_nesting", '{"inputs":[{"name":"x","shape":[1],"datatype":"INT32","data":[[[[1]]]]}]}')

# ---- JSON responses ----------------------------------------------------------------
write("json_response", "simple",
      '{"model_name":"simple","model_version":"1","outputs":[{"name":"OUTPUT0","datatype":"INT32",'
      '"shape":[1,2],"data":[1,2]},{"name":"OUTPUT1","datatype":"FP32","shape":[2],"data":[0.10000000149011612,NaN]}]}')
write("json_response", "params_shm",
      '{"id":"7","model_name":"m","model_version":"2","parameters":{"triton_final_response":true,"n":3},'
      '"outputs":[{"name":"s","datatype":"BYTES","shape":[1],"data":["x"]},{"name":"o","datatype":"INT8","shape":[4]}]}')

# ---- binary-extension bodies: u32 header length (0xffffffff = none), then the body ----
header = ('{"inputs":[{"name":"A","shape":[1,4],"datatype":"INT32","parameters":{"binary_data_size":16}},'
          '{"name":"S","shape":[2],"datatype":"FP32","parameters":{"shared_memory_region":"s","shared_memory_byte_size":8}},'
          '{"name":"T","shape":[2],"datatype":"BYTES","parameters":{"binary_data_size":10}}],'
          '"outputs":[{"name":"OUT","parameters":{"binary_data":true}}]}').encode()
blobs = int32s([1, 2, 3, 4]) + bytes_elements([b"ab", b""])
write("binary_tensor", "worked_example", struct.pack("<I", len(header)) + header + blobs)
write("binary_tensor", "json_only", struct.pack("<I", 0xFFFFFFFF) + simple_json.encode())
write("binary_tensor", "trailing", struct.pack("<I", len(header)) + header + blobs + b"zz")

# ---- protobuf ModelInferRequest / ModelInferResponse ---------------------------------
req = field_bytes(1, "simple") + field_bytes(2, "1") + field_bytes(3, "req-1")
req += field_bytes(4, param("priority", "uint64", 1))
req += field_bytes(4, param("sequence_id", "int64", 42))
req += field_bytes(4, param("sequence_start", "bool", True))
req += field_bytes(4, param("triton_enable_empty_final_response", "bool", False))
req += field_bytes(5, tensor("INPUT0", "INT32", [1, 16]))
req += field_bytes(5, tensor("INPUT1", "INT32", [1, 16]))
req += field_bytes(6, field_bytes(1, "OUTPUT0"))
req += field_bytes(7, int32s(range(16))) + field_bytes(7, int32s([1] * 16))
write("protobuf_request", "simple", req)

shm_params = (field_bytes(4, param("shared_memory_region", "string", "region0")) +
              field_bytes(4, param("shared_memory_byte_size", "int64", 16)))
req2 = field_bytes(1, "m")
req2 += field_bytes(5, tensor("A", "FP32", [4], shm_params))
req2 += field_bytes(5, tensor("T", "BYTES", [2]))
req2 += field_bytes(7, bytes_elements([b"ab", b""]))
write("protobuf_request", "shm_and_raw", req2)

typed = field_bytes(1, "m")
typed += field_bytes(5, tensor("I", "INT64", [2], contents=field_bytes(3, varint(5) + varint(-7))))
typed += field_bytes(5, tensor("F", "FP32", [1], contents=varint(6 << 3 | 2) + varint(4) + struct.pack("<f", 2.5)))
typed += field_bytes(5, tensor("S", "BYTES", [1], contents=field_bytes(8, b"hello")))
write("protobuf_request", "typed_contents", typed)

resp = field_bytes(1, "simple") + field_bytes(2, "1") + field_bytes(3, "req-1")
resp += field_bytes(5, tensor("OUTPUT0", "INT32", [1, 2]))
resp += field_bytes(5, tensor("OUTPUT1", "FP32", [1]))
resp += field_bytes(6, int32s([3, 4])) + field_bytes(6, struct.pack("<f", 1.0))
write("protobuf_response", "simple", resp)
resp2 = field_bytes(1, "kserve") + field_bytes(5, tensor("out", "INT32", [2], contents=field_bytes(2, varint(1) + varint(2))))
write("protobuf_response", "typed", resp2)

# ---- BYTES tensors and compressed bodies ---------------------------------------------
write("bytes_tensor", "two", bytes_elements([b"ab", b""]))
write("bytes_tensor", "truncated", struct.pack("<I", 9) + b"abc")
write("compression", "gzip", gzip.compress(simple_json.encode(), mtime=0))
write("compression", "zlib", zlib.compress(header + blobs))

# ---- YAML configs: the shipped examples, and a few nearly valid ------------------------
ROOT = os.path.join(HERE, "..", "..")
for example in ("deploy/examples/demo.yaml", "deploy/examples/fleet.yaml",
                "deploy/examples/container.yaml", "deploy/compose/infergate.yaml"):
    with open(os.path.join(ROOT, example), "rb") as f:
        write("config", os.path.basename(os.path.dirname(example)) + "_" +
              os.path.basename(example), f.read())
minimal = """listeners:
  http: { address: "127.0.0.1:0" }
upstreams:
  - { name: a, protocol: grpc, endpoints: ["127.0.0.1:9001"], colocated: true,
      handoff: { min_bytes: 65536, pool_bytes: 1048576, kind: system } }
  - { name: b, protocol: http, endpoints: ["unix:/tmp/b.sock"], http_format: json }
routes:
  - match: { model_prefix: "llm-", version: "2", headers: { x-tenant: beta } }
    split: [ { upstream: a, weight: 90 }, { upstream: b, weight: 10 } ]
    rewrite: { model: llm-v2 }
    mirror: b
  - match: { model: "*" }
    upstream: a
    timeout_ms: 500
"""
write("config", "minimal", minimal)
write("config", "shadowed", minimal.replace('model: "*"', 'model_prefix: "llm-"'))
write("config", "bad_port", minimal.replace("9001", "70000"))
write("config", "anchors", "base: &u { protocol: builtin }\nupstreams: [ { <<: *u, name: a } ]\n"
      "routes: [ { match: { model: \"*\" }, upstream: a } ]\n"
      "listeners: { http: { address: \"[::1]:0\" } }\n")

# ---- route tables: structured bytes (FuzzReader), any value is a case ------------------
for i, data in enumerate([bytes(range(64)), bytes([7, 1, 2, 0, 1, 1] * 12),
                          bytes([3] + [2, 1, 0, 2, 2, 1, 2, 0] * 6), b"\xff" * 48]):
    write("route_matcher", "tables_%d" % i, data)

# ---- HTTP/1.1 streams: limits byte, split-plan byte, then the bytes on the wire --------
def http_stream(name, wire, limits=0, plan=0):
    write("http_connection", name, bytes([limits, plan]) + wire)


http_stream("pipelined", b"GET /v2/health/live HTTP/1.1\r\nHost: a\r\n\r\n"
            b"POST /later/1 HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello"
            b"GET /stream HTTP/1.1\r\nHost: a\r\n\r\n"
            b"GET /x HTTP/1.1\r\nHost: a\r\n\r\n")
http_stream("chunked", b"POST /v2/models/m/infer HTTP/1.1\r\nHost: a\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n4\r\nabcd\r\n3;ext=1\r\nefg\r\n0\r\nT: 1\r\n\r\n",
            plan=3)
http_stream("expect", b"POST /later HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\n"
            b"Content-Length: 3\r\n\r\nabcPOST /y HTTP/1.1\r\nHost: a\r\n"
            b"Expect: 100-continue\r\nContent-Length: 2\r\n\r\nhi", plan=5)
http_stream("close_then_more", b"GET /a HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"
            b"GET /b HTTP/1.1\r\nHost: a\r\n\r\n")
http_stream("http10", b"GET /a HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET /b HTTP/1.0\r\n\r\n")
http_stream("deny_with_body", b"POST /deny HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\n\r\nbody"
            b"GET /after HTTP/1.1\r\nHost: a\r\n\r\n")
http_stream("tight_limits", b"GET /a HTTP/1.1\r\nHost: a\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n"
            b"POST /b HTTP/1.1\r\nHost: a\r\nContent-Length: 101\r\n\r\n", limits=0x1f, plan=9)
http_stream("large_body", b"POST /big HTTP/1.1\r\nHost: a\r\nContent-Length: 20000\r\n\r\n" +
            b"x" * 20000 + b"GET /c HTTP/1.1\r\nHost: a\r\n\r\n", plan=200)
http_stream("bad_chunk", b"POST /a HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"zz\r\nabc\r\n0\r\n\r\n")
http_stream("smuggle", b"POST /a HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n")


# ---- upstream answers: method byte (0 GET, 1 HEAD, 2 POST), split-plan byte, the answer --
def http_answer(name, wire, method=0, plan=0):
    write("http_client", name, bytes([method, plan]) + wire)


http_answer("sized", b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            b"Content-Length: 11\r\n\r\n{\"a\":[1,2]}")
http_answer("chunked", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"4\r\nabcd\r\n3;x=y\r\nefg\r\n0\r\nTrailer: t\r\n\r\n", method=2, plan=5)
http_answer("interim", b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nX-Final: 1\r\n"
            b"Content-Length: 2\r\n\r\nok", plan=3)
http_answer("close_delimited", b"HTTP/1.1 200 OK\r\nX-Framing: none\r\n\r\nto the end", plan=9)
http_answer("head_with_length", b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n", method=1)
http_answer("truncated", b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly some", plan=7)
http_answer("garbage", b"NOT HTTP AT ALL\r\n\r\n")
http_answer("bytes_after", b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\na"
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nstray", method=2, plan=2)
http_answer("http10_error", b"HTTP/1.0 500 Internal Server Error\r\nContent-Type: application/json\r\n"
            b"Content-Length: 19\r\n\r\n{\"error\":\"failure\"}", plan=4)
http_answer("bad_chunk", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", method=2)
http_answer("padded_close", b"HTTP/1.1 200 OK\r\nContent-Length:  5 \r\nX-Space:   padded  \r\n"
            b"Connection: close\r\n\r\nhello", plan=6)
http_answer("larger_sized", b"HTTP/1.1 200 OK\r\nContent-Length: 40000\r\n\r\n" + b"y" * 40000,
            plan=250)


# ---- gRPC upstream answers (grpc_client): split-plan byte, then what the upstream sends on
# the connection, its server preface first, answering the client's ModelInfer on stream 1.
# Built with h2 (Debian's python3-h2, as tests/e2e/faulty_upstream.py is).
def grpc_answer(name, build, plan=0):
    import h2.config
    import h2.connection
    client = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=True))
    client.initiate_connection()
    client.send_headers(1, [(":method", "POST"), (":scheme", "http"),
                            (":path", "/inference.GRPCInferenceService/ModelInfer"),
                            (":authority", "localhost"), ("content-type", "application/grpc"),
                            ("te", "trailers")])
    client.send_data(1, b"\0\0\0\0\x06\x0a\x04fuzz", end_stream=True)
    server = h2.connection.H2Connection(config=h2.config.H2Configuration(
        client_side=False, header_encoding="utf-8", validate_outbound_headers=False))
    server.initiate_connection()
    server.receive_data(client.data_to_send())
    build(server)
    write("grpc_client", name, bytes([plan]) + server.data_to_send())


GRPC_HEAD = [(":status", "200"), ("content-type", "application/grpc")]


def grpc_message(payload, flag=0, length=None):
    return bytes([flag]) + struct.pack(">I", len(payload) if length is None else length) + payload


def unary(*messages, status="0", message=None, head=GRPC_HEAD):
    def build(s):
        s.send_headers(1, head)
        for m in messages:
            s.send_data(1, m)
        trailers = [("grpc-status", status)] + ([("grpc-message", message)] if message else [])
        s.send_headers(1, trailers, end_stream=True)
    return build


ANSWER = b"\x0a\x04fuzz\x12\x011"  # ModelInferResponse{model_name: "fuzz", model_version: "1"}
grpc_answer("ok", unary(grpc_message(ANSWER)))
grpc_answer("ok_split", unary(grpc_message(ANSWER)[:3], grpc_message(ANSWER)[3:]), plan=3)
grpc_answer("empty_message", unary(grpc_message(b"")), plan=1)
grpc_answer("error", unary(status="5", message="Request for unknown model: 'fuzz' is not found"))
grpc_answer("error_percent", unary(status="3", message="bad %25 input%0Aline"), plan=2)
grpc_answer("trailers_only", lambda s: s.send_headers(1, GRPC_HEAD + [
    ("grpc-status", "14"), ("grpc-message", "going away")], end_stream=True))
grpc_answer("two_messages", unary(grpc_message(ANSWER), grpc_message(ANSWER)), plan=4)
grpc_answer("compressed", unary(grpc_message(ANSWER, flag=1)))
grpc_answer("prefix_long", unary(grpc_message(ANSWER, length=len(ANSWER) + 100)), plan=5)
grpc_answer("prefix_short", unary(grpc_message(ANSWER, length=len(ANSWER) - 3)), plan=6)
grpc_answer("no_status", lambda s: (s.send_headers(1, GRPC_HEAD), s.send_data(1, b"", end_stream=True)))
grpc_answer("html", lambda s: (s.send_headers(1, [(":status", "200"), ("content-type", "text/html")]),
                               s.send_data(1, b"<html></html>", end_stream=True)))
grpc_answer("status_404", lambda s: s.send_headers(1, [(":status", "404")], end_stream=True))
grpc_answer("rst", lambda s: s.reset_stream(1, 2))
grpc_answer("rst_refused", lambda s: s.reset_stream(1, 7), plan=7)
grpc_answer("goaway", lambda s: s.close_connection(error_code=0, last_stream_id=0))
grpc_answer("ping_first", lambda s: (s.ping(b"12345678"), unary(grpc_message(ANSWER))(s)), plan=8)
grpc_answer("many_frames", unary(*[grpc_message(b"x" * 3000)[i:i + 1000] for i in range(0, 3005, 1000)]),
            plan=250)


# ---- gRPC client sessions (grpc_server, http2_server): split-plan byte, then what a client sends after
# HTTP/2's connection preface (the driver writes the preface itself) to the gateway's own
# gRPC server. Built with h2 as above.
SERVICE = "/inference.GRPCInferenceService/"


def grpc_session(name, build, plan=0):
    import h2.config
    import h2.connection
    client = h2.connection.H2Connection(config=h2.config.H2Configuration(
        client_side=True, header_encoding="utf-8", validate_outbound_headers=False))
    client.initiate_connection()
    build(client)
    wire = client.data_to_send()
    assert wire.startswith(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
    write("grpc_server", name, bytes([plan]) + wire[24:])
    # The same client bytes seed the HTTP/2 server alone (http2_server: its plan byte
    # means other things, so each seed goes once as it is and once with a plan of its own).
    write("http2_server", name, bytes([plan]) + wire[24:])
    write("http2_server", name + "_plan", bytes([(plan * 37 + 0x95) & 0xFF]) + wire[24:])


def call_head(method, extra=()):
    return [(":method", "POST"), (":scheme", "http"), (":path", SERVICE + method), (":authority", "localhost"),
            ("content-type", "application/grpc"), ("te", "trailers")] + list(extra)


SIMPLE_REQ = (field_bytes(1, "simple") + field_bytes(3, "seed")
              + field_bytes(5, tensor("INPUT0", "INT32", [1, 16]))
              + field_bytes(5, tensor("INPUT1", "INT32", [1, 16]))
              + field_bytes(7, int32s(range(16))) + field_bytes(7, int32s([1] * 16)))
SLEEP_REQ = (field_bytes(1, "sleep") + field_bytes(5, tensor("INPUT0", "INT32", [1]))
             + field_bytes(7, int32s([30])))


def call(method, *messages, stream_id=1, extra=(), end=True):
    def build(c):
        c.send_headers(stream_id, call_head(method, extra))
        for i, m in enumerate(messages):
            c.send_data(stream_id, m, end_stream=end and i == len(messages) - 1)
        if not messages and end:
            c.send_data(stream_id, b"", end_stream=True)
    return build


grpc_session("infer", call("ModelInfer", grpc_message(SIMPLE_REQ)))
grpc_session("infer_split", call("ModelInfer", grpc_message(SIMPLE_REQ)[:7], grpc_message(SIMPLE_REQ)[7:]), plan=3)
grpc_session("infer_gzip", call("ModelInfer", grpc_message(gzip.compress(SIMPLE_REQ), flag=1),
                                extra=[("grpc-encoding", "gzip")]), plan=2)
grpc_session("infer_deadline", call("ModelInfer", grpc_message(SLEEP_REQ), extra=[("grpc-timeout", "10m")]))
grpc_session("infer_metadata", call("ModelInfer", grpc_message(SIMPLE_REQ),
                                    extra=[("x-trace", "abc"), ("bin-bin", "AAEC"), ("traceparent", "00-1-2-01")]))
grpc_session("infer_two_messages", call("ModelInfer", grpc_message(SIMPLE_REQ), grpc_message(SIMPLE_REQ)), plan=4)
grpc_session("infer_prefix_long", call("ModelInfer", grpc_message(SIMPLE_REQ, length=len(SIMPLE_REQ) + 50)))
grpc_session("infer_prefix_huge", call("ModelInfer", grpc_message(b"", length=0x7FFFFFFF)), plan=5)
grpc_session("live", call("ServerLive", grpc_message(b"")))
grpc_session("metadata_rpc", call("ModelMetadata", grpc_message(field_bytes(1, "simple"))), plan=6)
grpc_session("health", lambda c: (
    c.send_headers(1, [(":method", "POST"), (":scheme", "http"), (":path", "/grpc.health.v1.Health/Check"),
                       (":authority", "localhost"), ("content-type", "application/grpc")]),
    c.send_data(1, grpc_message(b""), end_stream=True)))
grpc_session("stream", call("ModelStreamInfer", grpc_message(SIMPLE_REQ), grpc_message(SIMPLE_REQ)), plan=7)
grpc_session("stream_open", call("ModelStreamInfer", grpc_message(SIMPLE_REQ), end=False))
grpc_session("rst_mid_message", lambda c: (call("ModelInfer", grpc_message(SIMPLE_REQ)[:10], end=False)(c),
                                           c.reset_stream(1, 8)))
grpc_session("two_calls", lambda c: (call("ModelInfer", grpc_message(SLEEP_REQ))(c),
                                     call("ModelInfer", grpc_message(SIMPLE_REQ), stream_id=3)(c)), plan=8)
grpc_session("bad_content_type", call("ModelInfer", grpc_message(SIMPLE_REQ), extra=[("content-type", "text/plain")]))
grpc_session("unknown_method", call("NoSuchMethod", grpc_message(b"")))
grpc_session("ping_and_goaway", lambda c: (c.ping(b"12345678"), call("ServerLive", grpc_message(b""))(c),
                                           c.close_connection()))
grpc_session("bad_metadata_relay", call("ServerLive", grpc_message(b""), extra=[("x-a", "caf\u00e9"), ("x!y", "v")]))
grpc_session("bad_metadata_infer", call("ModelInfer", grpc_message(SIMPLE_REQ), extra=[("x-a", "a\tb")]), plan=9)
grpc_session("stream_refused_message", call("ModelStreamInfer", grpc_message(b"x" * 8, length=2 << 20)), plan=10)

# ---- HPACK header blocks (hpack): a limits byte, then blocks of a length byte and bytes --
from hpack import Encoder as HpackSeedEncoder  # noqa: E402  (Debian's python3-hpack, with python3-h2)


def hpack_seed(name, blocks, limits=2):
    out = bytes([limits])
    for block in blocks:
        out += bytes([len(block)]) + block
    write("hpack", name, out)


def hpack_blocks(header_lists, huffman, table_size=None):
    encoder = HpackSeedEncoder()
    if table_size is not None:
        encoder.header_table_size = table_size
    return [encoder.encode(headers, huffman=huffman) for headers in header_lists]


GRPC_REQUEST_HEADERS = [(":method", "POST"), (":scheme", "http"), (":path", "/inference.GRPCInferenceService/ModelInfer"),
                        (":authority", "localhost:8001"), ("content-type", "application/grpc"), ("te", "trailers"),
                        ("grpc-accept-encoding", "identity,deflate,gzip"), ("user-agent", "grpc-python/1.51.1")]
GRPC_RESPONSE_HEADERS = [(":status", "200"), ("content-type", "application/grpc")]
GRPC_TRAILERS = [("grpc-status", "0"), ("grpc-message", "")]
hpack_seed("rfc_requests", [bytes.fromhex(h) for h in (
    "828684410f7777772e6578616d706c652e636f6d", "828684be58086e6f2d6361636865",
    "828785bf400a637573746f6d2d6b65790c637573746f6d2d76616c7565")])
hpack_seed("grpc_calls_huffman", hpack_blocks([GRPC_REQUEST_HEADERS] * 3, huffman=True))
hpack_seed("grpc_calls_raw", hpack_blocks([GRPC_REQUEST_HEADERS, GRPC_REQUEST_HEADERS], huffman=False))
hpack_seed("grpc_answer", hpack_blocks([GRPC_RESPONSE_HEADERS, GRPC_TRAILERS] * 2, huffman=True))
hpack_seed("small_table", hpack_blocks([GRPC_REQUEST_HEADERS] * 2, huffman=True, table_size=256), limits=1)
hpack_seed("list_limit", hpack_blocks([GRPC_REQUEST_HEADERS[:4] + [("x-long", "v" * 150)]] * 2, huffman=False),
           limits=0x80)
hpack_seed("size_update_after_field", [bytes.fromhex("823f00")])
hpack_seed("huffman_eos", [bytes.fromhex("0084ffffffff0161")])
