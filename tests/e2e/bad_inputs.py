"""The corpus of test_bad_inputs: malformed and hostile requests, each with the answer it
must get. Plain data (dataclasses) built by functions; the gRPC families take the
generated protobuf module (grpc_stubs.load()[0]) since messages are built with it.

Where each expectation comes from (`why` of a case):
  P<section>   /work/shared/PROTOCOL.md (Triton's behaviour): statuses, codes, texts
  RFC 9112/9110/6585  HTTP/1.1 framing where PROTOCOL.md says nothing; what nginx does
               agrees unless said otherwise
  README       config/README.md (gateway-level limits: 413 / RESOURCE_EXHAUSTED)
  gateway      the gateway's documented choice where Triton has no equivalent

Two deliberate conventions of the gateway are expected here, not Triton's: a request body
the gateway cannot decode (malformed JSON, a JSON type error, negative shape, data count
that does not match) is 400 / INVALID_ARGUMENT (codecs/README.md: "Every decoder error is
INVALID_ARGUMENT"), where Triton answers 500 (PROTOCOL 3, 15.1); and a malformed protobuf
message is INVALID_ARGUMENT, where grpc++ under Triton answers INTERNAL.

Targets: G_local (builtin models in-process), G_grpc (every model to U over gRPC),
G_http (every model to U over HTTP), U (the builtin upstream itself: shared memory).
"""
import json
import struct
from dataclasses import dataclass, field
from typing import Callable, Optional, Tuple

import numpy as np

import grpc_stubs

L, G, H, U = "G_local", "G_grpc", "G_http", "U"
ALL = (L, G, H)
CLOSED = "closed without a response"
OK = "OK"

# ---- the case kinds ----------------------------------------------------------------------


@dataclass
class Raw:
    """Bytes written on a fresh HTTP connection. `status`: the status line expected (then
    the connection must be closed after that one answer when `close`), or CLOSED: nothing
    may come back and the gateway must close. `shut`: half-close after sending (a client
    that gives up). `fragment`: in the JSON error."""
    name: str
    data: bytes
    status: object
    fragment: str = ""
    why: str = ""
    targets: Tuple[str, ...] = ALL
    shut: bool = False
    close: bool = True


@dataclass
class Http:
    """One well-formed HTTP/1.1 request on a fresh connection (Host and Content-Length
    written by the sender unless `headers` writes them). `check` runs on the parsed JSON of
    a 200. `repeat`: sent this many times, each on a new connection; every answer must be
    the expected one (a decoder whose answer depends on stale memory shows here)."""
    name: str
    method: str
    path: str
    body: bytes = b""
    headers: Tuple[Tuple[str, str], ...] = ()
    status: int = 400
    fragment: str = ""
    why: str = ""
    targets: Tuple[str, ...] = ALL
    check: Optional[Callable] = None
    repeat: int = 1


@dataclass
class Grpc:
    """One unary call; `request` is a message or bytes sent as they are (identity
    serializer). `code`: a grpc.StatusCode name ("INVALID_ARGUMENT"...) or OK; `check`
    runs on the raw response bytes of an OK answer. `fresh_channel`: on a channel of its
    own (a transport-level refusal may take the connection down)."""
    name: str
    request: object
    code: str
    fragment: str = ""
    why: str = ""
    rpc: str = "ModelInfer"
    metadata: Tuple[Tuple[str, str], ...] = ()
    targets: Tuple[str, ...] = ALL
    check: Optional[Callable] = None
    fresh_channel: bool = False


@dataclass
class Stream:
    """A ModelStreamInfer call of `messages` (bytes). `answers`: request id -> "" (a
    successful response) or a fragment of its in-band error_message; the id "" collects
    errors of messages that could not be parsed. `code`: the stream's final status."""
    name: str
    messages: list
    code: str = OK
    fragment: str = ""
    answers: dict = field(default_factory=dict)
    metadata: Tuple[Tuple[str, str], ...] = ()
    why: str = ""
    targets: Tuple[str, ...] = ALL


@dataclass
class H2:
    """A gRPC call written as raw HTTP/2 frames (the message cut off, reset, or the
    connection closed mid-message). `tail(message)` gives the frames after HEADERS.
    `expect`: None (nothing is owed on the stream: the client reset it or left; only a
    CANCELLED status that crossed the reset may come), or the grpc-status (str) of the
    trailers that must end the stream; `data`: whether a DATA frame (a response message)
    may come first. `close_socket`: the connection is closed right after the frames."""
    name: str
    path: str
    tail: Callable
    expect: Optional[str]
    data: bool = False
    close_socket: bool = False
    why: str = ""
    targets: Tuple[str, ...] = ALL
    flood: int = 0  # after HEADERS: a 4 GiB length prefix, then this many bytes (flow-controlled)


# ---- tensors -----------------------------------------------------------------------------

DATATYPES = ["BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64",
             "FP16", "FP32", "FP64", "BF16", "BYTES"]
NUMPY = {"BOOL": np.bool_, "UINT8": np.uint8, "UINT16": np.uint16, "UINT32": np.uint32,
         "UINT64": np.uint64, "INT8": np.int8, "INT16": np.int16, "INT32": np.int32,
         "INT64": np.int64, "FP16": np.float16, "FP32": np.float32, "FP64": np.float64,
         "BF16": np.uint16}
JSON_TYPES = [d for d in DATATYPES if d not in ("FP16", "BF16")]  # P5.2: no FP16/BF16 JSON
INTEGER_TYPES = ["UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64"]
# The typed-contents field of each type (P10), and a field of the wrong kind for it.
TYPED = {"BOOL": "bool_contents", "UINT8": "uint_contents", "UINT16": "uint_contents",
         "UINT32": "uint_contents", "UINT64": "uint64_contents", "INT8": "int_contents",
         "INT16": "int_contents", "INT32": "int_contents", "INT64": "int64_contents",
         "FP32": "fp32_contents", "FP64": "fp64_contents", "BYTES": "bytes_contents"}
WRONG_TYPED = {"BOOL": ("int_contents", 1), "UINT8": ("int_contents", 1),
               "UINT16": ("fp32_contents", 1.0), "UINT32": ("int64_contents", 1),
               "UINT64": ("uint_contents", 1), "INT8": ("uint_contents", 1),
               "INT16": ("bool_contents", True), "INT32": ("fp32_contents", 1.0),
               "INT64": ("int_contents", 1), "FP32": ("fp64_contents", 1.0),
               "FP64": ("fp32_contents", 1.0), "BYTES": ("int_contents", 1),
               "FP16": ("fp32_contents", 1.0), "BF16": ("fp32_contents", 1.0)}


def model_of(datatype):
    return "identity_" + datatype.lower()


def json_values(datatype, n=6):
    if datatype == "BOOL":
        return [i % 2 == 0 for i in range(n)]
    if datatype == "BYTES":
        return ["s%d" % i for i in range(n)]
    if datatype in ("FP32", "FP64"):
        return [i + 0.5 for i in range(n)]
    return list(range(n))


def raw_values(datatype, n=6):
    """Binary-extension / raw_input_contents bytes of n elements."""
    if datatype == "BYTES":
        return b"".join(struct.pack("<I", 2) + b"s%d" % (i % 10) for i in range(n))
    if datatype == "BOOL":
        return bytes(i % 2 for i in range(n))
    return np.arange(n).astype(NUMPY[datatype]).tobytes()


def dumps(obj):
    return json.dumps(obj, separators=(",", ":")).encode()


def json_infer(datatype, data, shape=(1, 6), name="INPUT0", **extra):
    inp = {"name": name, "shape": list(shape), "datatype": datatype, "data": data}
    inp.update(extra)
    return dumps({"inputs": [inp]})


AUTO = "the blob's length"


def binary_infer(tensors, outputs=None, parameters=None):
    """tensors: [(name, datatype, shape, raw bytes, binary_data_size or AUTO)]
    -> (body, header length)."""
    inputs = [{"name": n, "shape": list(s), "datatype": d,
               "parameters": {"binary_data_size": len(r) if size is AUTO else size}}
              for n, d, s, r, size in tensors]
    header = {"inputs": inputs}
    if outputs is not None:
        header["outputs"] = outputs
    if parameters is not None:
        header["parameters"] = parameters
    js = dumps(header)
    return js + b"".join(t[3] for t in tensors), len(js)


def ihcl(n):
    return (("Inference-Header-Content-Length", str(n)),)


def infer_path(model):
    return "/v2/models/%s/infer" % model


SIMPLE_JSON = dumps({"inputs": [
    {"name": "INPUT0", "shape": [1, 16], "datatype": "INT32", "data": list(range(16))},
    {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32", "data": [1] * 16}]})
FP32_ONE = json_infer("FP32", [1.0], shape=(1, 1))


def outputs_equal(expected):
    """A check: OUTPUT0's JSON data equals `expected` (NaN compared as NaN)."""
    def check(answer):
        data = {o["name"]: o for o in answer["outputs"]}["OUTPUT0"]["data"]
        got = ["nan" if isinstance(v, float) and v != v else v for v in data]
        want = ["nan" if isinstance(v, float) and v != v else v for v in expected]
        assert got == want, (got, want)
    return check


# ---- HTTP framing (raw sockets) ----------------------------------------------------------

R_FRAMING = ("RFC 9112 3 / 5 / 6: a request whose framing cannot be trusted is answered "
             "400 and the connection closed (gateway: http_connection.cc failRequest)")


def framing_cases():
    live = b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n"
    post = b"POST /v2/repository/index HTTP/1.1\r\nHost: x\r\n"
    infer = b"POST /v2/models/simple/infer HTTP/1.1\r\nHost: x\r\n"
    c = []

    def bad(name, data, fragment="malformed HTTP request", status=400, why=R_FRAMING, **kw):
        c.append(Raw(name, data, status, fragment, why, **kw))

    bad("garbage bytes", b"\x00\x01\x02garbage\r\n\r\n")
    bad("HTTP/2 preface on the HTTP/1.1 port", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
    bad("method with a separator", b"G(T /v2/health/live HTTP/1.1\r\n\r\n")
    bad("lower-case method", b"get /v2/health/live HTTP/1.1\r\n\r\n")
    bad("unknown method", b"BREW /v2/health/live HTTP/1.1\r\n\r\n")
    bad("method alone", b"GET\r\n\r\n")
    bad("version not a number", b"GET /v2/health/live HTTP/1.x\r\n\r\n")
    bad("space inside the target", b"GET /v2/health /live HTTP/1.1\r\n\r\n")
    bad("control byte in the target", b"GET /v2/health/live\x01 HTTP/1.1\r\n\r\n")
    bad("CR without LF", b"GET /v2/health/live HTTP/1.1\rHost: x\r\r")
    bad("header line without a colon", live + b"NoColonHere\r\n\r\n")
    bad("empty header name", live + b": y\r\n\r\n")
    bad("separator in a header name", live + b"X(A: y\r\n\r\n")
    bad("tab in a header name", live + b"X\tA: y\r\n\r\n")
    bad("NUL in a header value", live + b"X-A: a\x00b\r\n\r\n")
    bad("control byte in a header value", live + b"X-A: a\x01b\r\n\r\n")
    bad("DEL in a header value", live + b"X-A: a\x7fb\r\n\r\n")
    bad("bare CR inside a header value", live + b"X-A: a\rb\r\n\r\n")
    for value in (b"abc", b"-1", b"+5", b"2, 2", b"99999999999999999999999", b"0x10"):
        bad("Content-Length %r" % value.decode(), infer + b"Content-Length: " + value + b"\r\n\r\n{}")
    bad("two different Content-Lengths", infer + b"Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}x",
        why="RFC 9112 6.3: differing Content-Length values are an unrecoverable framing error (400, close)")
    bad("Content-Length and Transfer-Encoding together",
        infer + b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        why="RFC 9112 6.1: MAY reject, and MUST close after answering; request smuggling shape")
    bad("Transfer-Encoding without chunked last", infer + b"Transfer-Encoding: gzip\r\n\r\n",
        fragment="does not end in chunked", why="RFC 9112 6.3: chunked not the final coding of a request: 400 and close")
    bad("Transfer-Encoding chunked, gzip", infer + b"Transfer-Encoding: chunked, gzip\r\n\r\n0\r\n\r\n",
        fragment="does not end in chunked", why="RFC 9112 6.3: chunked not the final coding of a request: 400 and close")
    bad("Transfer-Encoding xchunked", post + b"Transfer-Encoding: xchunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
        fragment="does not end in chunked", why="RFC 9112 6.3: chunked not the final coding of a request: 400 and close")
    chunked = infer + b"Transfer-Encoding: chunked\r\n\r\n"
    bad("chunk size not hex", chunked + b"zz\r\nab\r\n0\r\n\r\n")
    bad("negative chunk size", chunked + b"-2\r\nab\r\n0\r\n\r\n")
    bad("chunk size overflowing 64 bits", chunked + b"fffffffffffffffffffff\r\nab\r\n0\r\n\r\n")
    bad("more than 65536 chunks", chunked + b"1\r\n \r\n" * 65537 + b"0\r\n\r\n",
        fragment="more than 65536 chunks",
        why="P1: more than 65 536 non-empty chunks -> 400 and the connection is closed")
    # Found: the system libhttp-parser is built lenient (HTTP_PARSER_STRICT=0).
    bad("whitespace between field name and colon",
        post + b"Content-Length : 2\r\n\r\n{}", fragment="",
        why="RFC 9112 5.1: a server MUST reject whitespace between a field name and the colon "
            "with 400 (a proxy in front that ignores the line frames the body differently)")
    bad("chunk data not followed by CRLF",
        post + b"Transfer-Encoding: chunked\r\n\r\n2\r\n{}XX0\r\n\r\n", fragment="",
        why="RFC 9112 7.1: chunk = size CRLF data CRLF; anything else is invalid framing "
            "(400 and close, as nginx: 'invalid chunked body')")
    bad("Host given twice", live + b"Host: b\r\n\r\n", fragment="",
        why="RFC 9112 3.2: a server MUST answer 400 to a request with more than one Host line")
    bad("Host with an invalid value", b"GET /v2/health/live HTTP/1.1\r\nHost: a b\r\n\r\n",
        fragment="", why="RFC 9112 3.2: MUST answer 400 to a Host field with an invalid value")
    bad("HTTP/2.0 request line", b"GET /v2/health/live HTTP/2.0\r\nHost: x\r\n\r\n", status=505,
        fragment="", why="RFC 9110 15.6.6: a major version the server does not implement is "
                         "505 (nginx: 505 for any major version above 1)")
    bad("HTTP/9.9 request line", b"GET /v2/health/live HTTP/9.9\r\nHost: x\r\n\r\n", status=505,
        fragment="", why="RFC 9110 15.6.6 (as above)")
    bad("Transfer-Encoding gzip, chunked", infer + b"Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
        status=501, fragment="",
        why="RFC 9112 6.1: a transfer coding the server does not understand SHOULD be 501 "
            "(nginx: 501 'unknown transfer-encoding'); the gateway ignores the gzip coding")
    return c


# ---- HTTP cut off mid-message ------------------------------------------------------------

def cut_off_cases():
    why = ("the client gave up: half-closed with the request incomplete. Nothing can be "
           "answered; the gateway closes and frees the request (as Triton/libevhtp)")
    infer = b"POST /v2/models/simple/infer HTTP/1.1\r\nHost: x\r\n"
    c = [
        Raw("cut in the request line", b"POST /v2/models/sim", CLOSED, why=why, shut=True),
        Raw("cut in a header name", infer + b"Content-Le", CLOSED, why=why, shut=True),
        Raw("cut after the headers", infer + b"Content-Length: 100\r\n", CLOSED, why=why, shut=True),
        Raw("body shorter than Content-Length", infer + b"Content-Length: 1000\r\n\r\n" + SIMPLE_JSON[:40],
            CLOSED, why=why, shut=True),
        Raw("JSON cut mid-number", infer + b"Content-Length: %d\r\n\r\n" % len(SIMPLE_JSON)
            + SIMPLE_JSON[:SIMPLE_JSON.index(b"15")], CLOSED, why=why, shut=True),
        Raw("binary body cut in a tensor", b"POST /v2/models/identity_fp32/infer HTTP/1.1\r\nHost: x\r\n"
            b"Inference-Header-Content-Length: 0\r\nContent-Length: 4096\r\n\r\n" + bytes(1000),
            CLOSED, why=why, shut=True),
        Raw("chunked body cut mid-chunk", infer + b"Transfer-Encoding: chunked\r\n\r\n40\r\n{\"inputs\"",
            CLOSED, why=why, shut=True),
        Raw("chunked body cut in a chunk size", infer + b"Transfer-Encoding: chunked\r\n\r\n4",
            CLOSED, why=why, shut=True),
        Raw("chunked body without the last chunk", infer + b"Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n",
            CLOSED, why=why, shut=True),
        # A complete request and then the half-close: still answered (RFC 9112 9.6).
        Raw("complete request, then half-closed", b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n",
            200, why="RFC 9112 9.6: a half-close after a complete request still gets the answer",
            shut=True, close=False),
    ]
    return c


# ---- header floods, huge Content-Length ---------------------------------------------------

R_431 = ("RFC 6585 5: header fields too large are 431 (413 is about content, RFC 9110 "
         "15.5.14); config/README.md names no status for these limits")


def flood_cases():
    live = b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n"
    infer = b"POST /v2/models/simple/infer HTTP/1.1\r\nHost: x\r\n"
    c = [
        Raw("101 headers (max_header_count 100)", live + b"".join(b"X-H%d: v\r\n" % i for i in range(100)) + b"\r\n",
            431, "more than 100 request headers", R_431),
        Raw("1000 headers", live + b"".join(b"X-H%d: v\r\n" % i for i in range(1000)) + b"\r\n",
            431, "more than 100 request headers", R_431),
        Raw("one 70 KB header (max_header_bytes 65536)", live + b"X-Big: " + b"a" * 70000 + b"\r\n\r\n",
            431, "65536", R_431),
        Raw("99 headers of 700 bytes", live + b"".join(b"X-%d: %s\r\n" % (i, b"v" * 700) for i in range(99)) + b"\r\n",
            431, "65536", R_431),
        Raw("70 KB request target", b"GET /v2/models/" + b"a" * 70000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
            414, "65536", "RFC 9110 15.5.15: a target longer than the server will read is 414"),
        Raw("Content-Length 2^31 (max_binary_body_bytes 2^31-1)", infer + b"Content-Length: 2147483648\r\n\r\n",
            413, "exceeds the limit", "README limits.max_binary_body_bytes; P1: Content-Length is int32 "
            "at Triton; answered before the body is sent"),
        Raw("Content-Length 1 TiB", infer + b"Content-Length: 1099511627776\r\n\r\n",
            413, "exceeds the limit", "README limits.max_binary_body_bytes"),
        Raw("Content-Length 2^63-1 with Expect: 100-continue",
            infer + b"Expect: 100-continue\r\nContent-Length: 9223372036854775807\r\n\r\n",
            413, "exceeds the limit", "README limits.max_binary_body_bytes: refused instead of 100 Continue"),
    ]
    return c


# ---- JSON syntax ----------------------------------------------------------------------------

R_JSON = "P3 row 'Malformed JSON body' (Triton 500); gateway convention 400 (module docstring)"


def json_syntax_cases():
    p = infer_path("identity_fp32")
    bodies = [
        ("empty body", b"", "JSON"),
        ("truncated object", b'{"inputs":[', "JSON"),
        ("unterminated string", b'{"inputs":[{"name":"INPUT0', "JSON"),
        ("trailing garbage", FP32_ONE + b" x", ""),
        ("two documents", FP32_ONE + FP32_ONE, "after the JSON"),
        ("trailing comma", b'{"inputs":[{"name":"INPUT0","shape":[1,1],"datatype":"FP32","data":[1],}]}', "JSON"),
        ("single quotes", b"{'inputs':[]}", "JSON"),
        ("comment", b'{/*c*/"inputs":[]}', "JSON"),
        ("NUL byte between values", b'{"inputs":[\x00]}', ""),
        ("bad escape", b'{"inputs":[{"name":"IN\\qPUT0","shape":[1,1],"datatype":"FP32","data":[1]}]}', ""),
        ("leading zero", b'{"inputs":[{"name":"INPUT0","shape":[01,1],"datatype":"FP32","data":[1]}]}', "shape"),
        ("hex number", b'{"inputs":[{"name":"INPUT0","shape":[1,1],"datatype":"FP32","data":[0x10]}]}', "INPUT0"),
        ("5000-digit number", b'{"inputs":[{"name":"INPUT0","shape":[1,1],"datatype":"FP32","data":[' + b"9" * 5000 + b']}]}', "INPUT0"),
        ("1e400 in FP64 data", json_infer("FP64", [1.0], shape=(1, 1)).replace(b"1.0", b"1e400"), "INPUT0"),
        ("byte order mark", b"\xef\xbb\xbf" + FP32_ONE, ""),
        ("null document", b"null", "JSON object"),
        ("array document", b"[]", "JSON object"),
        ("string document", b'"inputs"', "JSON object"),
        ("lone surrogate escape", b'{"inputs":[{"name":"INPUT0\\ud800","shape":[1,1],"datatype":"FP32","data":[1]}]}', ""),
    ]
    c = [Http(name, "POST", p, body, status=400, fragment=frag, why=R_JSON) for name, body, frag in bodies]
    gen = "/v2/models/identity_fp32/generate"
    c.append(Http("generate: truncated JSON, one answer every time", "POST", gen, b'{"INPUT0": [1',
                  status=400, fragment="failed to parse the request JSON", repeat=12, targets=(L, H),
                  why="P5.6 / gateway: the same bytes must get the same answer. The error of /generate "
                      "changes from call to call (apparently codecs::parseJson parses a copy in per-thread "
                      "scratch whose bytes past the body are those of earlier requests, and a truncated "
                      "document is read into them)"))
    return c


# ---- JSON structure: wrong types, missing and repeated keys, duplicate tensors --------------

R_TYPE = "P3 row 'JSON field of wrong type' (Triton 500); gateway convention 400"


def json_structure_cases():
    p = infer_path("identity_fp32")
    base = {"inputs": [{"name": "INPUT0", "shape": [1, 1], "datatype": "FP32", "data": [1]}]}

    def with_input(**kv):
        inp = dict(base["inputs"][0])
        inp.update(kv)
        for k in [k for k, v in kv.items() if v is _DROP]:
            del inp[k]
        return dumps({"inputs": [inp]})

    c = []

    def add(name, body, fragment, why=R_TYPE, path=p, status=400):
        c.append(Http(name, "POST", path, body, status=status, fragment=fragment, why=why))

    add("no inputs key", b"{}", "inputs")
    add("inputs an object", b'{"inputs":{}}', "must be an array")
    add("inputs a string", b'{"inputs":"x"}', "must be an array")
    add("input a number", b'{"inputs":[1]}', "input 0")
    add("input without name", with_input(name=_DROP), "name")
    add("name a number", with_input(name=5), "name")
    add("name null", with_input(name=None), "name")
    add("input without shape", with_input(shape=_DROP), "shape")
    add("shape an object", with_input(shape={}), "shape")
    add("shape a string", with_input(shape="1,1"), "shape")
    add("shape of strings", with_input(shape=["1", "1"]), "shape")
    add("shape of floats", with_input(shape=[1.0, 1.0]), "shape")
    add("shape of booleans", with_input(shape=[True, True]), "shape")
    add("nested shape", with_input(shape=[[1], [1]]), "shape")
    add("input without datatype", with_input(datatype=_DROP), "datatype")
    add("datatype a number", with_input(datatype=11), "datatype")
    add("data an object", with_input(data={"a": 1}), "data")
    add("data a scalar", with_input(data=1), "data")
    add("data null", with_input(data=None), "data")
    add("id a number", dumps({"id": 5, **base}), "id")
    add("id null", dumps({"id": None, **base}), "id")
    add("outputs an object", dumps({**base, "outputs": {}}), "outputs")
    add("output without name", dumps({**base, "outputs": [{}]}), "name")
    add("output a string", dumps({**base, "outputs": ["OUTPUT0"]}), "output 0")
    add("parameters an array", dumps({**base, "parameters": [1]}), "parameters")
    add("parameters a string", dumps({**base, "parameters": "x"}), "parameters")
    add("input parameters an array", with_input(parameters=[]), "parameters")
    add("output parameters a number", dumps({**base, "outputs": [{"name": "OUTPUT0", "parameters": 3}]}), "parameters")
    add("no inputs at all", b'{"inputs":[]}', "expected 1 inputs but got 0",
        why="P3 row 'wrong input count' -> 400")
    add("scalar shape [] with data", with_input(shape=[]), "INPUT0",
        why="P5.1 / P15.26: shape [] means 0 elements on the JSON path; 1 datum does not match")
    add("both data and binary_data_size", with_input(parameters={"binary_data_size": 4}),
        "exactly one of", why="P3 row 'Input with both/neither' -> 400")
    add("neither data nor binary_data_size", with_input(data=_DROP), "exactly one of",
        why="P3 row 'Input with both/neither' -> 400")
    # Repeated keys and tensors (Triton reads the first of equal keys; the gateway refuses:
    # commit 592a5ea. Two inputs of one name: core 'already exists', INVALID_ARG).
    add("inputs key twice", b'{"inputs":[],' + FP32_ONE[1:], "appears more than once", why="gateway (592a5ea)")
    add("datatype key twice", FP32_ONE.replace(b'"datatype":"FP32"', b'"datatype":"FP32","datatype":"INT32"'),
        "appears more than once", why="gateway (592a5ea)")
    add("data key twice", FP32_ONE.replace(b'"data":[1.0]', b'"data":[1.0],"data":[2.0,3.0]'),
        "appears more than once", why="gateway (592a5ea)")
    add("parameters key twice", dumps({**base, "parameters": {"a": 1}})[:-1] + b',"parameters":{}}',
        "appears more than once", why="gateway (592a5ea)")
    add("parameter key twice", dumps({**base, "parameters": {"a": 1}}).replace(b'"a":1', b'"a":1,"a":"x"'),
        "appears more than once", why="gateway (592a5ea)")
    add("duplicate input", dumps({"inputs": base["inputs"] * 2}), "INPUT0",
        why="P3 row 'wrong input count'; core: input already exists (INVALID_ARG) -> 400")
    add("duplicate input, 100 times", dumps({"inputs": base["inputs"] * 100}), "INPUT0",
        why="as above")
    add("duplicate input on simple", dumps({"inputs": json.loads(SIMPLE_JSON)["inputs"][:1] * 2}),
        "INPUT0", path=infer_path("simple"), why="as above")
    add("unknown input", with_input(name="INPUTX"), "INPUTX", why="P3 row 'unknown input/output name' -> 400")
    add("unknown output", dumps({**base, "outputs": [{"name": "NOPE"}]}), "NOPE",
        why="P5.4: requesting an unknown output name -> 400")
    add("missing second input", dumps({"inputs": json.loads(SIMPLE_JSON)["inputs"][:1]}),
        "missing required inputs", path=infer_path("simple"), why="P3 row 'wrong input count' -> 400")
    add("extra input", dumps({"inputs": json.loads(SIMPLE_JSON)["inputs"] + [
        {"name": "INPUT2", "shape": [1, 16], "datatype": "INT32", "data": [0] * 16}]}),
        "INPUT2", path=infer_path("simple"), why="P3 row 'unknown input' -> 400")
    add("batch past max_batch_size", dumps({"inputs": [
        {"name": n, "shape": [9, 16], "datatype": "INT32", "data": [0] * 144} for n in ("INPUT0", "INPUT1")]}),
        "batch-size must be <= 8", path=infer_path("simple"), why="P3 row 'wrong shape vs model config'")
    add("shape without the batch dimension", dumps({"inputs": [
        {"name": n, "shape": [16], "datatype": "INT32", "data": [0] * 16} for n in ("INPUT0", "INPUT1")]}),
        "", path=infer_path("simple"), why="P3 row 'wrong shape vs model config'")
    add("wrong inner dimension", SIMPLE_JSON.replace(b"[1,16]", b"[2,8]"), "unexpected shape",
        path=infer_path("simple"), why="P3 row 'wrong shape vs model config'")
    add("simple_string element not a decimal", dumps({"inputs": [
        {"name": n, "shape": [1, 16], "datatype": "BYTES", "data": ["x1"] * 16} for n in ("INPUT0", "INPUT1")]}),
        "is not a decimal int32", path=infer_path("simple_string"),
        why="gateway/upstream/builtin/README.md simple_string: INVALID_ARGUMENT")
    add("sleep with a negative time", json_infer("INT32", [-5], shape=(1,)), "non-negative",
        path=infer_path("sleep"), why="builtin README sleep: negative -> INVALID_ARGUMENT")
    return c


_DROP = object()


# ---- every datatype: counts, kinds, shapes, limits ------------------------------------------

R_COUNT = "P3 row '`data` element count != shape' (Triton 500); gateway convention 400"
R_SIZE = "P3 row 'byte-size mismatch' -> 400; P6 'unexpected size for input'"
R_SHAPE = "P5.1: shape is non-negative integers (Triton 500 for negative); gateway 400"
R_OVER = "P3 row 'Shape overflow (element count > INT64_MAX)' -> 400"
R_LIMIT = "README limits.max_tensor_elements (2^31-1 by default): 413 naming the tensor"
R_RANK = "README limits.max_tensor_rank (64 by default): 413"
R_DT = "P3 row 'wrong datatype vs config' -> 400"
R_BADDT = "P3 row 'Unsupported/unknown datatype string' -> 400; P10 exact upper-case names"

WRONG_JSON_KIND = {"BOOL": (1, "true or false"), "BYTES": (1, "not a string"),
                   "FP32": ("x", "not a number"), "FP64": (True, "not a number")}


def datatype_cases():
    c = []
    for dt in DATATYPES:
        p = infer_path(model_of(dt))
        other = "INT32" if dt != "INT32" else "FP32"
        if dt in JSON_TYPES:
            c.append(Http("%s: 5 data for shape [1,6]" % dt, "POST", p,
                          json_infer(dt, json_values(dt, 5)), fragment="6 elements", why=R_COUNT))
            c.append(Http("%s: 7 data for shape [1,6]" % dt, "POST", p,
                          json_infer(dt, json_values(dt, 7)), fragment="INPUT0", why=R_COUNT))
            bad, fragment = WRONG_JSON_KIND.get(dt, ("1", "not an integer" if dt.startswith("INT")
                                                     else "not a non-negative integer"))
            c.append(Http("%s: data of the wrong JSON kind (%r)" % (dt, bad), "POST", p,
                          json_infer(dt, [bad] * 6), fragment=fragment, why=R_TYPE))
        else:
            c.append(Http("%s: JSON data refused" % dt, "POST", p, json_infer(dt, [1.0] * 6),
                          fragment="receiving %s data via JSON is not supported" % dt,
                          why="P5.2 / P3 row 'FP16/BF16 sent as JSON data' -> 400"))
        body, n = binary_infer([("INPUT0", dt, (1, 6), raw_values(dt, 5), AUTO)])
        c.append(Http("%s: binary blob of 5 elements for shape [1,6]" % dt, "POST", p, body, ihcl(n),
                      fragment="INPUT0", why=R_SIZE))
        body, n = binary_infer([("INPUT0", dt, (1, 6), raw_values(dt, 6) + b"\x01", AUTO)])
        c.append(Http("%s: binary blob one byte long" % dt, "POST", p, body, ihcl(n),
                      fragment="INPUT0", why=R_SIZE))
        body, n = binary_infer([("INPUT0", other, (1, 6), raw_values(other, 6), AUTO)])
        c.append(Http("%s model sent %s" % (dt, other), "POST", p, body, ihcl(n),
                      fragment="data-type is '%s'" % other, why=R_DT))
        data = json_values(dt, 6) if dt in JSON_TYPES else None
        for label, shape, status, fragment, why in (
                ("negative dimension", (1, -6), 400, "non-negative", R_SHAPE),
                ("all dimensions -1", (-1, -1), 400, "non-negative", R_SHAPE),
                ("dimension 2^63", (1, 2 ** 63), 400, "shape", R_SHAPE),
                ("dimension 2^64", (1, 2 ** 64), 400, "shape", R_SHAPE),
                ("elements overflow int64", (2 ** 62, 4), 400, "int64", R_OVER),
                ("elements past the limit", (1, 2 ** 40), 413, "more than the limit", R_LIMIT),
                ("rank 65", (1,) * 65, 413, "64 dimensions", R_RANK)):
            if data is not None:
                body, headers = json_infer(dt, data, shape=shape), ()
            else:
                body, n = binary_infer([("INPUT0", dt, shape, raw_values(dt, 6), AUTO)])
                headers = ihcl(n)
            c.append(Http("%s: %s" % (dt, label), "POST", p, body, headers, status=status,
                          fragment=fragment, why=why))
    for name in ("FLOAT32", "fp32", "Fp32", "STRING", "INT128", "", "FP32 ", "TYPE_FP32", "BOOLEAN", "\u0130NT32"):
        c.append(Http("unknown datatype %r" % name, "POST", infer_path("identity_fp32"),
                      json_infer(name, [1.0] * 6), fragment="invalid datatype", why=R_BADDT))
    # Accepted as Triton does (P5.2): integers narrowed without a range check.
    for dt, value, want in (("INT8", 300, 44), ("UINT8", 256, 0), ("INT16", 70000, 4464),
                            ("UINT32", 2 ** 33, 0), ("INT32", -2 ** 40, 0)):
        c.append(Http("%s: %d narrowed, not refused" % (dt, value), "POST", infer_path(model_of(dt)),
                      json_infer(dt, [value], shape=(1, 1)), status=200, check=outputs_equal([want]),
                      why="P5.2: INT8/16/32 (and UINT8/16/32) narrowed by truncation, no range check"))
    for dt, value in (("INT64", 2 ** 63), ("UINT64", 2 ** 64), ("UINT64", -1), ("INT64", -2 ** 63 - 1)):
        c.append(Http("%s: %d out of 64-bit range" % (dt, value), "POST", infer_path(model_of(dt)),
                      json_infer(dt, [value], shape=(1, 1)), fragment="INPUT0", why=R_TYPE))
    c.append(Http("nested data arrays accepted", "POST", infer_path("identity_int32"),
                  json_infer("INT32", [[1, 2], [3, 4]], shape=(1, 4)), status=200,
                  check=outputs_equal([1, 2, 3, 4]), why="P5.2: data may be nested; only the count counts"))
    return c


# ---- NaN / Infinity -----------------------------------------------------------------------

R_NAN = ("P5.2: Triton's JSON reader takes NaN/Infinity literals; only a float tensor (or a "
         "double custom parameter) can hold one: elsewhere it is a type error (400)")


def nan_cases():
    c = []
    for dt in ["BOOL", "BYTES"] + INTEGER_TYPES:
        c.append(Http("NaN in %s data" % dt, "POST", infer_path(model_of(dt)),
                      json_infer(dt, [0], shape=(1, 1)).replace(b"[0]", b"[NaN]"),
                      fragment="INPUT0", why=R_NAN))
    for dt, lit in (("INT32", b"Infinity"), ("INT64", b"-Infinity"), ("UINT8", b"Infinity"),
                    ("BOOL", b"-Infinity"), ("BYTES", b"Infinity")):
        c.append(Http("%s in %s data" % (lit.decode(), dt), "POST", infer_path(model_of(dt)),
                      json_infer(dt, [0], shape=(1, 1)).replace(b"[0]", b"[" + lit + b"]"),
                      fragment="INPUT0", why=R_NAN))
    c.append(Http("NaN in FP16 data", "POST", infer_path("identity_fp16"),
                  json_infer("FP16", [0], shape=(1, 1)).replace(b"[0]", b"[NaN]"),
                  fragment="FP16", why="P5.2: no FP16 JSON at all"))
    for dt in ("FP32", "FP64"):
        c.append(Http("NaN and infinities in %s data accepted" % dt, "POST", infer_path(model_of(dt)),
                      json_infer(dt, [0], shape=(1, 3)).replace(b"[0]", b"[NaN,Infinity,-Infinity]"),
                      status=200, check=outputs_equal([float("nan"), float("inf"), float("-inf")]),
                      why="P5.2 / P15.9: accepted in requests, written back in responses"))
    c.append(Http("1e39 in FP32 data becomes Infinity", "POST", infer_path("identity_fp32"),
                  json_infer("FP32", [0], shape=(1, 1)).replace(b"[0]", b"[1e39]"), status=200,
                  check=outputs_equal([float("inf")]), why="P5.2: FP32 is converted from double"))
    base = json_infer("FP32", [1.0], shape=(1, 1))
    p = infer_path("identity_fp32")

    def with_params(params_text):
        return b'{"parameters":' + params_text + b"," + base[1:]

    for key, lit, fragment in (("priority", b"NaN", "priority"), ("timeout", b"Infinity", "timeout"),
                               ("sequence_id", b"NaN", "sequence_id"),
                               ("binary_data_output", b"NaN", "binary_data_output")):
        c.append(Http("NaN/Infinity as %s" % key, "POST", p, with_params(b'{"%s":%s}' % (key.encode(), lit)),
                      fragment=fragment, why=R_NAN + "; P5.3 types of the reserved keys"))
    c.append(Http("NaN as a shape dimension", "POST", p, base.replace(b'"shape":[1,1]', b'"shape":[1,NaN]'),
                  fragment="shape", why=R_NAN))
    c.append(Http("Infinity as binary_data_size", "POST", p,
                  base.replace(b'"data":[1.0]', b'"parameters":{"binary_data_size":Infinity}'),
                  fragment="binary_data_size", why=R_NAN))
    c.append(Http("NaN as classification", "POST", p,
                  base[:-1] + b',"outputs":[{"name":"OUTPUT0","parameters":{"classification":NaN}}]}',
                  fragment="classification", why=R_NAN))
    # Found: custom parameters holding NaN / Infinity / a number past uint64 are refused.
    for label, lit in (("Infinity", b"Infinity"), ("NaN", b"NaN"), ("2^64", b"18446744073709551616"),
                       ("1e400", b"1e300")):
        c.append(Http("custom parameter %s accepted" % label, "POST", p,
                      with_params(b'{"my_param":%s}' % lit), status=200, check=outputs_equal([1.0]),
                      why="P5.3: any other key may be a string, int64, bool or other number "
                          "(-> double); P5.2: Triton's parser takes NaN/Infinity and numbers past "
                          "uint64 as doubles, so Triton answers 200"))
    return c


# ---- binary tensor extension ----------------------------------------------------------------

def binary_cases():
    i32 = np.arange(16, dtype=np.int32).tobytes()
    good, n = binary_infer([("INPUT0", "INT32", (1, 16), i32, AUTO), ("INPUT1", "INT32", (1, 16), i32, AUTO)])
    p = infer_path("simple")
    c = []
    R_IHCL = "P6: Inference-Header-Content-Length parsed as int32, 0 <= value <= content length, else 400"
    for label, value in (("past the body", str(len(good) + 1)), ("-1", "-1"), ("abc", "abc"),
                         ("20 digits", "99999999999999999999"), ("2^31", str(2 ** 31)),
                         ("empty", ""), ("+N", "+%d" % n), ("N followed by text", "%d 1" % n),
                         ("0x10", "0x10")):
        c.append(Http("Inference-Header-Content-Length %s" % label, "POST", p, good,
                      (("Inference-Header-Content-Length", value),), fragment="Inference-Header-Content-Length",
                      why=R_IHCL))
    c.append(Http("Inference-Header-Content-Length splits the JSON", "POST", p, good, ihcl(n - 5),
                  fragment="JSON", why="P6: the header part must be the whole JSON"))
    c.append(Http("Inference-Header-Content-Length splits a UTF-8 character", "POST", infer_path("identity_bytes"),
                  '{"inputs":[{"name":"INPUT0\u00e9'.encode(), ihcl(len(b'{"inputs":[{"name":"INPUT0') + 1),
                  fragment="JSON", why="P6 / RFC 8259"))
    c.append(Http("JSON header not JSON", "POST", p, b"xxxxxxxx" + i32 * 2, ihcl(8), fragment="JSON object",
                  why=R_JSON))
    for label, sizes, fragment in (("binary_data_size past the body", (64, 65), "INPUT1"),
                                   ("bytes left over", (64, 63), "INPUT1"),
                                   ("binary_data_size 0", (0, 64), "INPUT0"),
                                   ("binary_data_size 2^63", (64, 2 ** 63), "INPUT1")):
        body, m = binary_infer([("INPUT0", "INT32", (1, 16), i32, sizes[0]), ("INPUT1", "INT32", (1, 16), i32, sizes[1])])
        c.append(Http(label, "POST", p, body, ihcl(m), fragment=fragment, why=R_SIZE))
    body, m = binary_infer([("INPUT0", "INT32", (1, 16), i32, AUTO), ("INPUT1", "INT32", (1, 16), i32, AUTO)])
    c.append(Http("unexpected additional input data", "POST", p, body + b"EXTRA", ihcl(m),
                  fragment="unexpected additional input data",
                  why="P6: leftover bytes after all binary inputs -> 400 'unexpected additional input data'"))
    for label, value in (("-1", -1), ("a string", "64"), ("2^64", 2 ** 64), ("1.5", 1.5),
                         ("true", True), ("null", None)):
        body, m = binary_infer([("INPUT0", "INT32", (1, 16), i32, AUTO), ("INPUT1", "INT32", (1, 16), i32, value)])
        c.append(Http("binary_data_size %s" % label, "POST", p, body, ihcl(m), fragment="binary_data_size",
                      why="P5.1: binary_data_size is a uint (Triton 500 on a type error); gateway 400"))
    R_RAW = "P5.5: raw binary request (IHCL 0) violations -> 400"
    for label, model, blob, fragment in (("raw binary to a two-input model", "simple", i32, "exactly one input"),
                                         ("raw binary not a whole FP32 element", "identity_fp32", bytes(7), "whole number"),
                                         ("raw binary not a whole FP64 element", "identity_fp64", bytes(12), "whole number"),
                                         ("raw binary not a whole INT16 element", "identity_int16", bytes(3), "whole number")):
        c.append(Http(label, "POST", infer_path(model), blob, ihcl(0), fragment=fragment, why=R_RAW,
                      targets=(L, H)))
    c.append(Http("raw binary through a gRPC upstream", "POST", infer_path("identity_fp32"), bytes(8), ihcl(0),
                  status=501, fragment="HTTP upstreams only", targets=(G,),
                  why="gateway/README.md 'Known limits': raw-binary requests go to HTTP and builtin upstreams only"))
    return c


# ---- BYTES elements -------------------------------------------------------------------------

R_BYTES = "P6 / P11.4: BYTES = 4-byte LE length + bytes per element; a bad framing is a size error (400)"


def bytes_element_blobs():
    def el(*items):
        return b"".join(struct.pack("<I", len(e)) + e for e in items)
    return [
        ("element runs past the end", (1, 1), struct.pack("<I", 10) + b"abc", "runs past the end"),
        ("length prefix 0xFFFFFFFF", (1, 1), struct.pack("<I", 0xFFFFFFFF) + b"abc", "runs past the end"),
        ("length prefix 0x7FFFFFFF", (1, 2), el(b"a") + struct.pack("<I", 0x7FFFFFFF), "runs past the end"),
        ("truncated length prefix", (1, 2), el(b"ab") + b"\x01\x00", "truncated"),
        ("1 byte, no prefix at all", (1, 1), b"\x05", "truncated"),
        ("fewer elements than the shape", (1, 3), el(b"a", b"b"), "calls for 3"),
        ("more elements than the shape", (1, 3), el(b"a", b"b", b"c", b"d"), "calls for 3"),
        ("empty blob for 2 elements", (1, 2), b"", "calls for 2"),
        ("elements past the end of a tiny shape", (1, 1), el(b"a") + el(b"b"), "calls for 1"),
    ]


def bytes_http_cases():
    c = []
    for label, shape, blob, fragment in bytes_element_blobs():
        body, n = binary_infer([("INPUT0", "BYTES", shape, blob, AUTO)])
        c.append(Http("BYTES %s" % label, "POST", infer_path("identity_bytes"), body, ihcl(n),
                      fragment=fragment, why=R_BYTES))
    c.append(Http("BYTES a million empty elements for shape [1,1]", "POST", infer_path("identity_bytes"),
                  *_binary_one("BYTES", (1, 1), struct.pack("<I", 0) * 1000000), fragment="calls for 1",
                  why=R_BYTES))
    return c


def _binary_one(dt, shape, blob):
    body, n = binary_infer([("INPUT0", dt, shape, blob, AUTO)])
    return body, ihcl(n)


# ---- compression ----------------------------------------------------------------------------

def compression_cases():
    import gzip
    import zlib
    p = infer_path("identity_fp32")
    packed = gzip.compress(FP32_ONE)
    R_GZ = "P6.1 / gateway: a body that does not inflate is a bad request (400)"
    c = [
        Http("gzip: not gzip at all", "POST", p, b"\x1f\x8b\x08\x00garbagegarbage", (("Content-Encoding", "gzip"),),
             fragment="gzip", why=R_GZ),
        Http("gzip: truncated stream", "POST", p, packed[:-12], (("Content-Encoding", "gzip"),),
             fragment="truncated", why=R_GZ),
        Http("gzip: bad CRC", "POST", p, packed[:-8] + b"\0\0\0\0" + packed[-4:], (("Content-Encoding", "gzip"),),
             fragment="gzip", why=R_GZ),
        Http("gzip: junk after the stream", "POST", p, packed + b"JUNK", (("Content-Encoding", "gzip"),),
             fragment="after the end", why=R_GZ),
        Http("gzip: empty body", "POST", p, b"", (("Content-Encoding", "gzip"),), fragment="gzip", why=R_GZ),
        Http("deflate: not zlib", "POST", p, b"notzlibatall", (("Content-Encoding", "deflate"),),
             fragment="deflate", why=R_GZ),
        Http("deflate: raw deflate without the zlib wrapper", "POST", p,
             zlib.compress(FP32_ONE)[2:-4], (("Content-Encoding", "deflate"),), fragment="deflate", why=R_GZ),
        Http("gzip: inflates to garbage", "POST", p, gzip.compress(b"\xff\xfe not json"),
             (("Content-Encoding", "gzip"),), fragment="", why=R_JSON),
        Http("Content-Encoding br", "POST", p, FP32_ONE, (("Content-Encoding", "br"),), status=501,
             fragment="br", why="P6.1: anything but gzip/deflate/identity -> 501"),
        Http("Content-Encoding gzip, gzip", "POST", p, gzip.compress(packed), (("Content-Encoding", "gzip, gzip"),),
             status=501, fragment="gzip, gzip", why="P6.1 -> 501"),
        Http("Content-Encoding compress", "POST", p, FP32_ONE, (("Content-Encoding", "compress"),), status=501,
             fragment="compress", why="P6.1 -> 501"),
        Http("gzip: inflates past max_input_bytes (1 MiB on G_local)", "POST", p,
             gzip.compress(b'{"inputs":[' + b" " * (2 << 20) + b"]}"), (("Content-Encoding", "gzip"),),
             status=413, fragment="1048576", targets=(L,),
             why="README limits.max_input_bytes (a decompressed body); P6.1 capped by "
                 "--http-max-input-size"),
        Http("generate: gzip body", "POST", "/v2/models/identity_fp32/generate", gzip.compress(b'{"INPUT0":[1]}'),
             (("Content-Encoding", "gzip"),), fragment="Content-Encoding", targets=(L, H),
             why="P5.6: Content-Encoding other than identity on generate -> 400"),
    ]
    return c


# ---- HTTP parameters of the wrong kind --------------------------------------------------------

def http_parameter_cases():
    p = infer_path("identity_fp32")
    base = json.loads(json_infer("FP32", [1.0, 3.0, 2.0, 0.0], shape=(1, 4)))
    seq_base = {"inputs": [{"name": "INPUT", "shape": [1, 1], "datatype": "INT32", "data": [1]}]}

    def req(params=None, outputs=None, body=None):
        b = dict(body or base)
        if params is not None:
            b["parameters"] = params
        if outputs is not None:
            b["outputs"] = outputs
        return dumps(b)

    c = []
    R_P = "P5.3 (types of the reserved keys; Triton 500 on a type error); gateway 400"
    for key, value in (("sequence_id", True), ("sequence_id", -1), ("sequence_id", 1.5),
                       ("sequence_id", [1]), ("sequence_id", {}), ("priority", "1"), ("priority", -1),
                       ("priority", 1.5), ("priority", True), ("priority", 2 ** 64), ("timeout", -1), ("timeout", "5"),
                       ("timeout", False), ("binary_data_output", "true"), ("binary_data_output", 1),
                       ("binary_data_output", None)):
        c.append(Http("%s = %s" % (key, json.dumps(value)), "POST", p, req({key: value}), fragment=key, why=R_P))
    for key, value in (("sequence_start", "true"), ("sequence_start", 1), ("sequence_end", None),
                       ("sequence_end", 0)):
        c.append(Http("%s = %s" % (key, json.dumps(value)), "POST", infer_path("simple_sequence"),
                      req({"sequence_id": 99, "sequence_start": True, key: value}, body=seq_base),
                      fragment=key, why="P9.2: sequence_start/end are bool; wrong type -> 500 at Triton, "
                                        "gateway 400"))
    for key in ("triton_enable_empty_final_response", "triton_x", "triton_"):
        c.append(Http("reserved parameter %s" % key, "POST", p, req({key: False}), fragment="triton_",
                      why="P5.3: any key starting with triton_ is rejected with 400 on HTTP"))
    for label, value in (("an array", [1]), ("an object", {"a": 1}), ("null", None)):
        c.append(Http("custom parameter %s" % label, "POST", p, req({"my_param": value}), fragment="my_param",
                      why="P5.3: arrays/objects -> 400 (null is not a parameter value)"))
    for label, value in (("a string", "yes"), ("1", 1), ("null", None)):
        c.append(Http("output binary_data %s" % label, "POST", p,
                      req(outputs=[{"name": "OUTPUT0", "parameters": {"binary_data": value}}]),
                      fragment="binary_data", why="P5.1 requested output: binary_data is a bool"))
    for label, value in (("-1", -1), ("a string", "2"), ("2.5", 2.5), ("true", True)):
        c.append(Http("classification %s" % label, "POST", p,
                      req(outputs=[{"name": "OUTPUT0", "parameters": {"classification": value}}]),
                      fragment="classification", why="P5.1: classification is a uint"))
    for dt in ("BYTES", "BOOL", "FP16", "BF16"):
        if dt in ("FP16", "BF16"):
            body, n = binary_infer([("INPUT0", dt, (1, 2), raw_values(dt, 2), AUTO)],
                                   outputs=[{"name": "OUTPUT0", "parameters": {"classification": 1}}])
            headers = ihcl(n)
        else:
            body = dumps({"inputs": [{"name": "INPUT0", "shape": [1, 2], "datatype": dt, "data": json_values(dt, 2)}],
                          "outputs": [{"name": "OUTPUT0", "parameters": {"classification": 1}}]})
            headers = ()
        c.append(Http("classification of %s" % dt, "POST", infer_path(model_of(dt)), body, headers,
                      fragment=dt, why="P9.1: FP16/BF16/BOOL/BYTES classification -> 400"))
    c.append(Http("output shared memory and classification", "POST", p,
                  req(outputs=[{"name": "OUTPUT0", "parameters": {"classification": 1, "shared_memory_region": "r",
                                                                  "shared_memory_byte_size": 8}}]),
                  fragment="classification", why="P5.1 requested output: cannot be combined (400)"))
    body, n = binary_infer([("INPUT0", "FP16", (1, 2), raw_values("FP16", 2), AUTO)],
                           outputs=[{"name": "OUTPUT0", "parameters": {"binary_data": False}}])
    c.append(Http("FP16 output asked as JSON", "POST", infer_path("identity_fp16"), body, ihcl(n),
                  fragment="FP16", why="P5.2: FP16 outputs requested as JSON fail with 400"))
    R_MANY = ("codecs/parameters.h: a parameter map holds at most 1024 entries, in JSON as in "
              "protobuf (unbounded, decoding would be quadratic): 413")
    many = {"p%d" % i: i for i in range(5000)}
    c.append(Http("5000 request parameters", "POST", p, req(many), status=413,
                  fragment="more than 1024 parameters in the request", why=R_MANY))
    tensor = dict(base["inputs"][0], parameters=many)
    c.append(Http("5000 parameters on an input", "POST", p, req(body=dict(base, inputs=[tensor])),
                  status=413, fragment="more than 1024 parameters in tensor 'INPUT0'", why=R_MANY))
    return c


# ---- routes, models, versions -----------------------------------------------------------------

def route_cases():
    c = []
    R404 = "P3 'Unknown model name' -> 404 'Request for unknown model'"
    for name in ("nope", "SIMPLE", "simple%20", "%00", "identity_fp32%2F..", "a" * 10000):
        c.append(Http("unknown model %r" % name[:20], "POST", infer_path(name), FP32_ONE, status=404,
                      fragment="unknown model", why=R404))
    c.append(Http("unknown version", "POST", "/v2/models/identity_fp32/versions/2/infer", FP32_ONE, status=404,
                  fragment="version 2", why="P3 'Requested version number does not exist' -> 404"))
    for version in ("v1", "-1", "1.0", "1e0", " 1"):
        c.append(Http("version %r does not route" % version, "POST",
                      "/v2/models/identity_fp32/versions/%s/infer" % version.replace(" ", "%20"), FP32_ONE,
                      status=404, fragment="Not Found", why="P2: version segment must be all digits, else 404"))
    c.append(Http("version past int64", "POST", "/v2/models/identity_fp32/versions/99999999999999999999999/infer",
                  FP32_ONE, fragment="version", why="P3 'Non-numeric / negative version string' -> 400"))
    c.append(Http("version 01 is version 1", "POST", "/v2/models/identity_fp32/versions/01/infer", FP32_ONE,
                  status=200, check=lambda a: _equal(a["model_version"], "1"),
                  why="builtin README: versions parsed as std::stol ('01' is 1); Triton answers the "
                      "resolved version, model_version '1' (P5.4)"))
    for method, path in (("GET", "/v2/models/simple/infer"), ("PUT", "/v2/models/simple/infer"),
                         ("DELETE", "/v2/health/live"), ("PATCH", "/v2"), ("POST", "/v2/health/ready"),
                         ("OPTIONS", "/v2/models/simple")):
        c.append(Http("%s %s" % (method, path), method, path, b"{}" if method != "GET" else b"", status=405,
                      fragment="Method Not Allowed", why="P2: wrong method on any route -> 405"))
    for path in ("/v2/", "/v2/models/simple/infer/", "/v2/models//infer", "/v3/models/simple/infer",
                 "/v2/models/simple/versions/1/trace/setting", "/" + "x" * 4000):
        c.append(Http("no route %s" % path[:40], "POST", path, FP32_ONE, status=404, fragment="Not Found",
                      why="P2 rule 10 -> 404 {'error':'Not Found'}"))
    c.append(Http("decoupled model on /infer", "POST", infer_path("repeat_int32"),
                  json_infer("INT32", [1], shape=(1,), name="IN"), status=501, fragment="decoupled",
                  why="P3 'Decoupled model on /infer' -> 501"))
    c.append(Http("statistics of an unknown model", "GET", "/v2/models/nope/stats", status=400,
                  fragment="nope", why="P2.1 Statistics: unknown model -> 400"))
    c.append(Http("sequence without a start", "POST", infer_path("simple_sequence"),
                  dumps({"parameters": {"sequence_id": 987654321},
                         "inputs": [{"name": "INPUT", "shape": [1, 1], "datatype": "INT32", "data": [1]}]}),
                  fragment="START", why="builtin README simple_sequence (the sequence batcher's text)"))
    c.append(Http("sequence with batch 2", "POST", infer_path("simple_sequence"),
                  dumps({"parameters": {"sequence_id": 5, "sequence_start": True},
                         "inputs": [{"name": "INPUT", "shape": [2, 1], "datatype": "INT32", "data": [1, 2]}]}),
                  fragment="batch-size 1", why="builtin README simple_sequence"))
    c.append(Http("load with malformed JSON", "POST", "/v2/repository/models/simple/load", b"{",
                  fragment="JSON", why="P2.1 Load: body must be JSON when present (Triton 500); gateway 400"))
    c.append(Http("load of an unknown model", "POST", "/v2/repository/models/nope/load", b"{}", status=500,
                  fragment="nope", why="P2.1 / builtin README: unknown model on load is Triton's 500"))
    c.append(Http("trace level OFF with another", "POST", "/v2/trace/setting",
                  b'{"trace_level":["OFF","TIMESTAMPS"]}', fragment="OFF", why="P2.1 Trace: -> 400"))
    c.append(Http("trace rate out of range", "POST", "/v2/trace/setting", b'{"trace_rate":"99999999999999999999"}',
                  fragment="trace_rate", why="P2.1 Trace: number strings out of range -> 400"))
    c.append(Http("logging level of the wrong type", "POST", "/v2/logging", b'{"log_verbose_level":"x"}',
                  fragment="log_verbose_level", why="P2.1 Logging: type errors (Triton 500); gateway 400"))
    c.append(Http("logging body not JSON", "POST", "/v2/logging", b"not json", fragment="JSON",
                  why="P2.1 Logging: POST body must be valid JSON (Triton 500); gateway 400"))
    for label, body, fragment in (("a string", b'"x"', "JSON object"), ("an array input", b'{"INPUT0":[[1]]}', "flat"),
                                  ("text for FP32", b'{"INPUT0":"x"}', "INPUT0"),
                                  ("an object parameter", b'{"INPUT0":[1],"p":{"a":1}}', "p")):
        c.append(Http("generate: %s" % label, "POST", "/v2/models/identity_fp32/generate", body, fragment=fragment,
                      targets=(L, H), why="P5.6: arrays/objects as parameters and bad inputs -> 400"))
    c.append(Http("generate through a gRPC upstream", "POST", "/v2/models/identity_fp32/generate", b'{"INPUT0":[1]}',
                  status=501, fragment="HTTP only", targets=(G,),
                  why="gateway/README.md 'Known limits': generate needs an HTTP or builtin upstream"))
    return c


def _equal(a, b):
    assert a == b, (a, b)


# ---- invalid UTF-8 where it matters (HTTP) ----------------------------------------------------

def utf8_http_cases():
    p = infer_path("identity_bytes")
    R_U8 = "RFC 8259 8.1: JSON text is UTF-8; a body that is not is malformed (400)"
    c = []
    for label, body in (
            ("in an input name", b'{"inputs":[{"name":"INPUT0\xff","shape":[1,1],"datatype":"BYTES","data":["a"]}]}'),
            ("in a BYTES datum", b'{"inputs":[{"name":"INPUT0","shape":[1,1],"datatype":"BYTES","data":["\xc3\x28"]}]}'),
            ("overlong encoding", b'{"inputs":[{"name":"INPUT0","shape":[1,1],"datatype":"BYTES","data":["\xc0\xaf"]}]}'),
            ("encoded surrogate", b'{"inputs":[{"name":"INPUT0","shape":[1,1],"datatype":"BYTES","data":["\xed\xa0\x80"]}]}'),
            ("past U+10FFFF", b'{"inputs":[{"name":"INPUT0","shape":[1,1],"datatype":"BYTES","data":["\xf4\x90\x80\x80"]}]}'),
            ("truncated sequence", b'{"inputs":[{"name":"INPUT0","shape":[1,1],"datatype":"BYTES","data":["\xe2\x82"]}]}'),
            ("in a key", b'{"inputs":[{"na\xffme":"INPUT0","shape":[1,1],"datatype":"BYTES","data":["a"]}]}'),
            ("in a parameter value", b'{"parameters":{"p":"\xfe"},"inputs":[{"name":"INPUT0","shape":[1,1],"datatype":"BYTES","data":["a"]}]}'),
            ("in the request id", b'{"id":"\x80","inputs":[{"name":"INPUT0","shape":[1,1],"datatype":"BYTES","data":["a"]}]}')):
        c.append(Http("invalid UTF-8 %s" % label, "POST", p, body, fragment="UTF-8", why=R_U8))
    c.append(Http("valid UTF-8 BYTES round trip", "POST", p,
                  '{"inputs":[{"name":"INPUT0","shape":[1,2],"datatype":"BYTES","data":["\u00e9","\U0001F600"]}]}'.encode(),
                  status=200, check=outputs_equal(["\u00e9", "\U0001F600"]), why="P5.2 BYTES as strings"))
    c.append(Http("non-UTF-8 bytes in binary BYTES are fine", "POST", p,
                  *_binary_one("BYTES", (1, 1), struct.pack("<I", 2) + b"\xff\xfe"),
                  status=200, why="P5.2: BYTES elements are bytes; only JSON text must be UTF-8"))
    # The model name is a raw path segment (P2): not UTF-8, it is an unknown model, and the
    # error body must still be JSON (P3: always {"error": ...}).
    for label, method, suffix, status, fragment in (
            ("infer", "POST", "/infer", 404, "unknown model"), ("metadata", "GET", "", 404, "unknown model"),
            ("ready", "GET", "/ready", 404, "unknown model"), ("config", "GET", "/config", 404, "unknown model"),
            ("statistics", "GET", "/stats", 400, "not available")):
        c.append(Http("non-UTF-8 model name: %s" % label, method, "/v2/models/ab\udcffcd" + suffix,
                      FP32_ONE if method == "POST" else b"", status=status, fragment=fragment,
                      why="P2 (raw path, verbatim names) + P3 (error body is always JSON, so the "
                          "name must be escaped); P2.1 for each endpoint's unknown-model status"))
    c.append(Http("UTF-8 model name arrives as written", "POST", "/v2/models/mod\u00e8le/infer", FP32_ONE,
                  status=404, fragment="'mod\u00e8le'",
                  why="P2 (raw path, verbatim names; pitfall 4: never re-encode the path) + P3"))
    c.append(Http("non-UTF-8 model name: load", "POST", "/v2/repository/models/ab\udcffcd/load", b"{}",
                  status=500, fragment="failed to load", why="P2.1 Load: unknown model -> 500 (Triton's code)"))
    return c


# ---- deeply nested JSON -------------------------------------------------------------------------

def deep_json_cases():
    R_DEEP = "README limits.max_json_depth (100): 400 'JSON nested deeper than 100 levels', also before a pass-through"
    p = infer_path("identity_fp32")
    c = []

    def nest(n, inner=b""):
        return b"[" * n + inner + b"]" * n

    for label, body in (
            ("101 levels in a parameter", b'{"parameters":{"x":' + nest(100) + b'},' + FP32_ONE[1:]),
            ("100000 levels in a parameter", b'{"parameters":{"x":' + nest(100000) + b'},' + FP32_ONE[1:]),
            ("150 levels of data", FP32_ONE.replace(b"[1.0]", nest(150, b"1.0"))),
            ("objects 200 deep", b'{"parameters":' + b'{"a":' * 200 + b"1" + b"}" * 200 + b"," + FP32_ONE[1:]),
            ("unbalanced 500000 opens", b'{"inputs":' + b"[" * 500000),
            ("deep inside outputs", FP32_ONE[:-1] + b',"outputs":[{"name":"OUTPUT0","parameters":{"p":' + nest(120) + b"}}]}"),
            ("deep inside an input", FP32_ONE.replace(b'"datatype"', b'"x":' + nest(120) + b',"datatype"')),
            ("deep unknown key", b'{"junk":' + nest(101) + b"," + FP32_ONE[1:])):
        c.append(Http(label, "POST", p, body, fragment="nested deeper than 100", why=R_DEEP))
    c.append(Http("deep JSON on generate", "POST", "/v2/models/identity_fp32/generate",
                  b'{"INPUT0":[1],"p":' + nest(300) + b"}", fragment="nested deeper", targets=(L, H), why=R_DEEP))
    c.append(Http("deep JSON on shm register", "POST", "/v2/systemsharedmemory/region/r/register",
                  b'{"key":' + nest(300) + b"}", fragment="nested deeper", targets=(U,), why=R_DEEP))
    c.append(Http("99 levels of data accepted", "POST", p, FP32_ONE.replace(b"[1.0]", nest(95, b"1.0")),
                  status=200, check=outputs_equal([1.0]),
                  why="README max_json_depth 100 counts the root object; P5.2 nesting allowed"))
    return c


# ---- gRPC: tensors -------------------------------------------------------------------------------

R_GBAD = "P3 rows 'wrong shape / datatype / byte-size / input count / unknown name' -> INVALID_ARGUMENT"


def grpc_tensor_cases(pb):
    c = []

    def ident(dt, raw=None, shape=(1, 6), typed=None):
        req = pb.ModelInferRequest(model_name=model_of(dt))
        t = req.inputs.add()
        t.name, t.datatype = "INPUT0", dt
        t.shape.extend(shape)
        if typed is not None:
            getattr(t.contents, typed[0]).extend(typed[1])
        else:
            req.raw_input_contents.append(raw_values(dt, 6) if raw is None else raw)
        return req

    for dt in DATATYPES:
        if dt == "BYTES":
            short, long_ = raw_values(dt, 5), raw_values(dt, 6) + b"\x00"
        else:
            short, long_ = raw_values(dt, 6)[:-1], raw_values(dt, 6) + b"\x00"
        c.append(Grpc("%s: raw contents short" % dt, ident(dt, short), "INVALID_ARGUMENT", "INPUT0", R_GBAD))
        c.append(Grpc("%s: raw contents one byte long" % dt, ident(dt, long_), "INVALID_ARGUMENT", "INPUT0", R_GBAD))
        c.append(Grpc("%s: negative dimension" % dt, ident(dt, shape=(1, -6)), "INVALID_ARGUMENT", "negative", R_SHAPE))
        c.append(Grpc("%s: dimension -2^63" % dt, ident(dt, shape=(-2 ** 63,)), "INVALID_ARGUMENT", "negative", R_SHAPE))
        c.append(Grpc("%s: elements overflow int64" % dt, ident(dt, shape=(2 ** 62, 4)), "INVALID_ARGUMENT", "int64", R_OVER))
        c.append(Grpc("%s: elements past the limit" % dt, ident(dt, shape=(1, 2 ** 40)), "RESOURCE_EXHAUSTED",
                      "more than the limit", R_LIMIT))
        wrong_field, value = WRONG_TYPED[dt]
        c.append(Grpc("%s: typed contents in %s" % (dt, wrong_field), ident(dt, typed=(wrong_field, [value] * 6)),
                      "INVALID_ARGUMENT", "INPUT0", "P11.4: typed contents must match the datatype; FP16/BF16 raw only"))
        if dt in TYPED:
            good = [True] * 5 if dt == "BOOL" else ([b"x"] * 5 if dt == "BYTES" else [1] * 5)
            c.append(Grpc("%s: 5 typed values for shape [1,6]" % dt, ident(dt, typed=(TYPED[dt], good)),
                          "INVALID_ARGUMENT", "INPUT0", R_GBAD))
            mixed = ident(dt)
            getattr(mixed.inputs[0].contents, TYPED[dt]).extend(good + good[:1])
            c.append(Grpc("%s: typed and raw contents together" % dt, mixed, "INVALID_ARGUMENT", "contents",
                          "P11.4: contents with raw_input_contents -> INVALID_ARGUMENT"))
        other = "INT32" if dt != "INT32" else "FP32"
        req = ident(other)
        req.model_name = model_of(dt)
        c.append(Grpc("%s model sent %s" % (dt, other), req, "INVALID_ARGUMENT", "data-type is '%s'" % other, R_DT))
    for name in ("FLOAT32", "int32", "STRING", "", "TYPE_INT32", "INT32\x00"):
        req = ident("INT32")
        req.inputs[0].datatype = name
        c.append(Grpc("unknown datatype %r" % name, req, "INVALID_ARGUMENT", "datatype", R_BADDT))
    for label, shape, blob, fragment in bytes_element_blobs():
        req = pb.ModelInferRequest(model_name="identity_bytes")
        t = req.inputs.add()
        t.name, t.datatype = "INPUT0", "BYTES"
        t.shape.extend(shape)
        req.raw_input_contents.append(blob)
        c.append(Grpc("BYTES %s" % label, req, "INVALID_ARGUMENT", fragment, R_BYTES))

    S = grpc_stubs.simple_infer_request

    def edit(f):
        req = S()
        f(req)
        return req

    def set_shape(req, i, dims):
        del req.inputs[i].shape[:]
        req.inputs[i].shape.extend(dims)

    for label, f, code, fragment, why in (
            ("unknown model", lambda r: setattr(r, "model_name", "nope"), "NOT_FOUND", "unknown model", R404G),
            ("empty model name", lambda r: setattr(r, "model_name", ""), "NOT_FOUND", "", R404G),
            ("version abc", lambda r: setattr(r, "model_version", "abc"), "INVALID_ARGUMENT", "abc", RVER),
            ("version -1", lambda r: setattr(r, "model_version", "-1"), "INVALID_ARGUMENT", "-1", RVER),
            ("version 2", lambda r: setattr(r, "model_version", "2"), "NOT_FOUND", "version 2",
             "P3 'Requested version number does not exist' -> NOT_FOUND"),
            ("shape [1,15]", lambda r: r.inputs[0].shape.__setitem__(1, 15), "INVALID_ARGUMENT", "INPUT0", R_GBAD),
            ("rank 65", lambda r: set_shape(r, 0, [1] * 65), "RESOURCE_EXHAUSTED", "65 dimensions", R_RANK),
            ("batch 9", lambda r: (set_shape(r, 0, [9, 16]), set_shape(r, 1, [9, 16]),
                                   r.raw_input_contents.__setitem__(0, bytes(576)),
                                   r.raw_input_contents.__setitem__(1, bytes(576))),
             "INVALID_ARGUMENT", "batch-size must be <= 8", R_GBAD),
            ("a raw content missing", lambda r: r.raw_input_contents.__delitem__(1), "INVALID_ARGUMENT",
             "unable to find data for input tensor 'INPUT1'", "P11.4: no data source -> INVALID_ARGUMENT"),
            ("no raw contents", lambda r: r.ClearField("raw_input_contents"), "INVALID_ARGUMENT",
             "unable to find data", "P11.4"),
            ("duplicate input", lambda r: setattr(r.inputs[1], "name", "INPUT0"), "INVALID_ARGUMENT", "INPUT0",
             "core: input already exists -> INVALID_ARG"),
            ("unknown input", lambda r: setattr(r.inputs[1], "name", "INPUTX"), "INVALID_ARGUMENT", "INPUTX", R_GBAD),
            ("unknown output", lambda r: setattr(r.outputs.add(), "name", "NOPE"), "INVALID_ARGUMENT", "NOPE", R_GBAD),
            ("input without a name", lambda r: setattr(r.inputs[1], "name", ""), "INVALID_ARGUMENT", "", R_GBAD),
            ("input without a datatype", lambda r: setattr(r.inputs[1], "datatype", ""), "INVALID_ARGUMENT", "datatype",
             R_BADDT),
            ("input without a shape", lambda r: set_shape(r, 0, []), "INVALID_ARGUMENT", "INPUT0", R_GBAD),
            ("decoupled model", lambda r: setattr(r, "model_name", "repeat_int32"), "UNIMPLEMENTED", "decoupled",
             "P11.4: decoupled model via ModelInfer -> UNIMPLEMENTED")):
        c.append(Grpc(label, edit(f), code, fragment, why))
    # Protobuf's own rule for a repeated singular field: the last one wins; the routing peek
    # must agree with the decoder.
    good = S().SerializeToString()
    c.append(Grpc("model_name twice, the last is simple", _field(1, b"nope") + good, OK,
                  why="protobuf: the last value of a singular field wins (routing peek == decoder)",
                  check=_model_is("simple")))
    c.append(Grpc("model_name twice, the last is unknown", good + _field(1, b"nope"), "NOT_FOUND", "nope",
                  why="protobuf: the last value wins -> unknown model"))
    return c


R404G = "P3 'Unknown model name' -> NOT_FOUND"
RVER = "P3 'Non-numeric / negative version string' -> INVALID_ARGUMENT; P11.4"


def _model_is(name):
    def check(raw, pb):
        got = pb.ModelInferResponse.FromString(raw).model_name
        assert got == name, got
    return check


# ---- gRPC: parameters of the wrong kind ------------------------------------------------------------

def grpc_parameter_cases(pb):
    S = grpc_stubs.simple_infer_request
    c = []

    def with_param(key, kind, value, base=None, where=None):
        req = base() if base else S()
        target = where(req) if where else req.parameters
        setattr(target[key], kind, value)
        return req

    def seq_base():
        req = pb.ModelInferRequest(model_name="simple_sequence")
        t = req.inputs.add()
        t.name, t.datatype = "INPUT", "INT32"
        t.shape.extend([1, 1])
        req.raw_input_contents.append(struct.pack("<i", 1))
        req.parameters["sequence_start"].bool_param = True
        return req

    R_KIND = "P9.2 / 9.3 / 9.4 / 15.11: Triton's gRPC frontend checks each reserved key's kind -> INVALID_ARGUMENT"
    for key, kind, value, base in (
            ("sequence_id", "uint64_param", 5, seq_base), ("sequence_id", "bool_param", True, None),
            ("sequence_id", "double_param", 5.0, None),
            ("sequence_start", "int64_param", 1, None), ("sequence_end", "string_param", "true", None),
            ("priority", "string_param", "1", None), ("priority", "int64_param", -1, None),
            ("priority", "double_param", float("nan"), None), ("priority", "bool_param", True, None),
            ("timeout", "uint64_param", 5, None), ("timeout", "double_param", float("inf"), None),
            ("timeout", "string_param", "5", None)):
        c.append(Grpc("%s as %s %r" % (key, kind, value), with_param(key, kind, value, base),
                      "INVALID_ARGUMENT", key, R_KIND))
    c.append(Grpc("custom parameter as uint64_param", with_param("my_param", "uint64_param", 5),
                  "INVALID_ARGUMENT", "my_param", "P9.4: uint64_param for a custom key -> INVALID_ARGUMENT"))
    c.append(Grpc("reserved triton_ parameter", with_param("triton_foo", "bool_param", True),
                  "INVALID_ARGUMENT", "triton_", "P9.4: gRPC keys starting with triton_ are rejected "
                                                 "except triton_enable_empty_final_response"))
    c.append(Grpc("triton_enable_empty_final_response as int64_param",
                  with_param("triton_enable_empty_final_response", "int64_param", 1), "INVALID_ARGUMENT",
                  "triton_enable_empty_final_response", "P15.11: accepted only as bool_param"))
    unset = S()
    unset.parameters["my_param"].SetInParent()
    c.append(Grpc("parameter with no value", unset, "INVALID_ARGUMENT", "my_param",
                  "InferParameter with no oneof member carries no value (gateway: refused)"))

    def out_param(kind, value, key="classification"):
        req = S()
        o = req.outputs.add()
        o.name = "OUTPUT0"
        setattr(o.parameters[key], kind, value)
        return req

    R_CLS = "P9.1: classification must be int64_param > 0, otherwise INVALID_ARGUMENT"
    c.append(Grpc("classification as bool_param", out_param("bool_param", True), "INVALID_ARGUMENT",
                  "classification", R_CLS))
    c.append(Grpc("classification -3", out_param("int64_param", -3), "INVALID_ARGUMENT", "classification", R_CLS))
    c.append(Grpc("classification 0", out_param("int64_param", 0), "INVALID_ARGUMENT", "classification", R_CLS))
    c.append(Grpc("classification as uint64_param", out_param("uint64_param", 2), "INVALID_ARGUMENT",
                  "classification", R_CLS))
    R_SHM = "P8.3: shm sizes int64_param; offset/byte_size without region, region without byte_size -> INVALID_ARGUMENT"

    def in_param(params, drop_raw=False):
        req = S()
        for key, (kind, value) in params.items():
            setattr(req.inputs[0].parameters[key], kind, value)
        if drop_raw:
            del req.raw_input_contents[0]
        return req

    for label, params, fragment in (
            ("byte size without a region", {"shared_memory_byte_size": ("int64_param", 64)}, "shared_memory_region"),
            ("offset without a region", {"shared_memory_offset": ("int64_param", 0)}, "shared_memory_region"),
            ("region without a byte size", {"shared_memory_region": ("string_param", "r")}, "shared_memory_byte_size"),
            ("byte size as uint64_param", {"shared_memory_region": ("string_param", "r"),
                                           "shared_memory_byte_size": ("uint64_param", 64)}, "int64_param"),
            ("offset as double_param", {"shared_memory_region": ("string_param", "r"),
                                        "shared_memory_byte_size": ("int64_param", 64),
                                        "shared_memory_offset": ("double_param", 0.0)}, "shared_memory_offset"),
            ("region as int64_param", {"shared_memory_region": ("int64_param", 1),
                                       "shared_memory_byte_size": ("int64_param", 64)}, "shared_memory_region")):
        c.append(Grpc("shm %s" % label, in_param(params, drop_raw=True), "INVALID_ARGUMENT", fragment, R_SHM))
    c.append(Grpc("shm region at a gateway without client shm", in_param(
        {"shared_memory_region": ("string_param", "r"), "shared_memory_byte_size": ("int64_param", 64)},
        drop_raw=True), "UNIMPLEMENTED", "shared memory is disabled",
        why="P8.1 / README shm: client shared memory off -> UNIMPLEMENTED (gateway: names the setting)"))
    # Accepted kinds (controls): what tritonclient sends.
    ok = S()
    ok.parameters["priority"].uint64_param = 1
    ok.parameters["timeout"].int64_param = 10 ** 9
    ok.parameters["my_param"].double_param = float("nan")
    ok.parameters["triton_enable_empty_final_response"].bool_param = False
    c.append(Grpc("accepted kinds, NaN in a double custom parameter", ok, OK,
                  why="P13.3 / P9.4: priority uint64_param, timeout int64_param, custom double_param "
                      "(any double, NaN too), triton_enable_empty_final_response bool_param",
                  check=_model_is("simple")))
    for version, why in ((" 1", "builtin README / P11.4: version parsed as std::stol (' 1' is 1)"),
                         ("01", "as above ('01' is 1)")):
        req = S()
        req.model_version = version
        c.append(Grpc("version %r is version 1" % version, req, OK, why=why, check=_version_is("1")))
    # A gRPC model name that no HTTP path carries verbatim (P2: Triton matches the raw path,
    # the name one segment) is an unknown model on every path; through an HTTP upstream it
    # must never become another model's path ("simple/../simple", "simple?x" would reach
    # simple) or a header ("\r\n"), and a UTF-8 name must arrive as written (not %-encoded).
    for name in ("simple/../simple", "simple?x", "simple#x", "..", "a b", "a\r\nX-Evil: 1", "a\x00b",
                 "mod\u00e8le"):
        req = S()
        req.model_name = name
        c.append(Grpc("model name %r is unknown" % name, req, "NOT_FOUND",
                      "Request for unknown model: '%s'" % name, R404G + "; P2 (raw path, one segment)"))
    return c


def _version_is(v):
    def check(raw, pb):
        got = pb.ModelInferResponse.FromString(raw).model_version
        assert got == v, repr(got)
    return check


# ---- gRPC: the protobuf wire format ----------------------------------------------------------------

_names = iter(range(10 ** 6))


def _unique(prefix):
    return "%s_%d" % (prefix, next(_names))


def _varint(n):
    out = b""
    while True:
        b, n = n & 0x7F, n >> 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def _field(num, payload, wire=2):
    key = _varint((num << 3) | wire)
    return key + _varint(len(payload)) + payload if wire == 2 else key + payload


def protobuf_cases(pb):
    good = grpc_stubs.simple_infer_request().SerializeToString()
    R_PB = ("gateway: a message that is not valid protobuf is INVALID_ARGUMENT naming the offset "
            "(grpc++ under Triton: INTERNAL 'Unable to parse request')")

    def nest(n):
        b = b""
        for _ in range(n):
            b = _field(99, b)
        return b

    def ident_int32(name=b"INPUT0", datatype=b"INT32", shape=_field(3, _varint(1) + _varint(1)), raw=bytes(4)):
        return (_field(1, b"identity_int32") + _field(5, _field(1, name) + _field(2, datatype) + shape)
                + _field(7, raw))

    c = []
    for label, data, fragment in (
            ("truncated varint", b"\x0a\x80", "truncated varint"),
            ("length past the end", b"\x0a\x7fsimple", "runs past the end"),
            ("length 2^32-1", b"\x0a\xff\xff\xff\xff\x0fsimple", "runs past the end"),
            ("length 2^64-1", b"\x0a" + b"\xff" * 9 + b"\x01simple", "malformed"),
            ("wire type 7", b"\x0f\x00", "wire type 7"),
            ("wire type 6", b"\x0e\x00", "wire type 6"),
            ("field number 0", b"\x02\x00", "field number 0"),
            ("varint of 11 bytes", b"\x10" + b"\xff" * 10 + b"\x01", "varint"),
            ("unterminated group", good + b"\x5b", "group"),
            ("end-group without a start", good + b"\x5c", "group"),
            ("groups nested 200000 deep", good + b"\x9b\x06" * 200000 + b"\x9c\x06" * 200000, "nested too deeply"),
            ("inputs entry truncated", _field(1, b"simple") + _field(5, _field(1, b"INPUT0"))[:-3], "malformed"),
            ("packed shape truncated", ident_int32(shape=_field(3, b"\x01\x80")), "malformed"),
            ("raw contents truncated", good[:-5], "malformed"),
            ("parameter map entry truncated", good + _field(4, _field(1, b"k") + _field(2, b"\x08")), "malformed"),
            ("garbage", b"\xde\xad\xbe\xef" * 8, "malformed"),
            ("shape of wire type fixed32", ident_int32(shape=b"\x1d\x01\x00\x00\x00"), "INPUT0")):
        c.append(Grpc(label, data, "INVALID_ARGUMENT", fragment, R_PB))
    c.append(Grpc("empty message", b"", "NOT_FOUND", "", R404G + " (model_name '')"))
    c.append(Grpc("unknown fields are skipped", good + _field(99, b"whatever") + _field(100, b"\x01", wire=0), OK,
                  why="protobuf: unknown fields are skipped", check=_model_is("simple")))
    c.append(Grpc("an unknown field nested 5000 deep is skipped", good + nest(5000), OK,
                  why="protobuf: an unknown length-delimited field is skipped whole, not parsed",
                  check=_model_is("simple")))
    c.append(Grpc("shape sent unpacked", ident_int32(shape=_field(3, _varint(1), 0) + _field(3, _varint(1), 0)), OK,
                  why="P11.2 wire note: a parser must accept unpacked repeated numbers",
                  check=_model_is("identity_int32")))
    # Invalid UTF-8 in proto3 string fields: protobuf parsers must refuse the message (the
    # client's runtime refuses it too: an echoed id makes the answer unreadable).
    R_U8P = ("protobuf: a proto3 string field holding invalid UTF-8 makes the message invalid "
             "(Triton's protobuf refuses to parse it); refused as malformed -> INVALID_ARGUMENT")
    for label, data in (("request id", good + _field(3, b"a\xffb")),
                        ("model name", _field(1, b"simpl\xff") + good[len(_field(1, b"simple")):]),
                        ("custom string parameter", good + _field(4, _field(1, b"p") + _field(2, _field(3, b"\xff\xfe")))),
                        ("input name", ident_int32(name=b"INPUT0\xc3")),
                        ("datatype", ident_int32(datatype=b"INT\xff"))):
        c.append(Grpc("invalid UTF-8 in the protobuf %s" % label, data, "INVALID_ARGUMENT", "", R_U8P))
    return c


# ---- gRPC metadata floods ------------------------------------------------------------------------

def metadata_cases(pb):
    R_MD = ("README limits.max_header_bytes bounds a call's metadata on the gRPC listener "
            "(grpc's RESOURCE_EXHAUSTED 'received initial metadata size exceeds limit')")
    return [
        Grpc("100 metadata entries of 1000 bytes", grpc_stubs.simple_infer_request(), "RESOURCE_EXHAUSTED",
             "metadata", R_MD, metadata=tuple(("x-h%d" % i, "v" * 1000) for i in range(100)), fresh_channel=True),
        Grpc("one 70 KB metadata value", grpc_stubs.simple_infer_request(), "RESOURCE_EXHAUSTED", "metadata", R_MD,
             metadata=(("x-big", "v" * 70000),), fresh_channel=True),
        Grpc("1000 small metadata entries", grpc_stubs.simple_infer_request(), OK,
             why="README: only the byte size of metadata is limited on gRPC (no count)",
             metadata=tuple(("x-h%d" % i, "v") for i in range(1000)), fresh_channel=True,
             check=_model_is("simple")),
        Grpc("unknown model of 20000 characters", pb.ModelInferRequest(model_name="m" * 20000), "NOT_FOUND",
             "unknown model", R404G + "; the error text echoes the name, which must not turn the "
                                      "answer into a metadata-size failure", fresh_channel=True),
        Grpc("metadata of an unknown model of 8000 characters", pb.ModelMetadataRequest(name="m" * 8000),
             "NOT_FOUND", "unknown model", "P11.6: ModelMetadata, same semantics as HTTP (404)",
             rpc="ModelMetadata", fresh_channel=True),
    ]


# ---- shared memory (at U, whose shm section allows /infergate_bad_) -------------------------------

def shm_cases(pb, key, small_key):
    """`key`: an object of 4096 bytes registered by the test as region 'bad_r' (256 bytes at
    offset 0); `small_key`: another object of 4096 bytes, not registered."""
    c = []
    R_REG = "P8.1: offset + byte_size <= object size, else 400 'invalid args'"

    def reg(name, body, status, fragment, why, targets=(U,)):
        c.append(Http(name, "POST", "/v2/systemsharedmemory/region/bad_new_%d/register" % len(c),
                      body if isinstance(body, bytes) else dumps(body), status=status, fragment=fragment,
                      why=why, targets=targets))

    reg("register past the object", {"key": small_key, "byte_size": 8192}, 400, "exceeds", R_REG)
    reg("register offset past the object", {"key": small_key, "byte_size": 16, "offset": 4090}, 400, "exceeds", R_REG)
    reg("register offset + size overflowing", {"key": small_key, "byte_size": 16, "offset": 2 ** 64 - 8}, 400,
        "", R_REG)
    reg("register a key outside the allowed prefixes", {"key": "/etc_passwd", "byte_size": 16}, 400,
        "allowed prefixes", "README shm.allowed_key_prefixes")
    reg("register Triton's python backend key", {"key": "/triton_python_backend_shm_region_1", "byte_size": 16},
        400, "reserved", "P8.1: keys starting with triton_python_backend_shm_region_ -> 400")
    reg("register a key of slashes", {"key": "///", "byte_size": 16}, 400, "only slashes",
        "P8.1: a key made only of slashes is refused")
    reg("register a key with a path", {"key": "/infergate_bad_../../etc/passwd", "byte_size": 16}, 400, "'/'",
        "README shm: a key is leading slashes then a name without '/'")
    reg("register a missing object", {"key": "/infergate_bad_does_not_exist", "byte_size": 16}, 400, "shm_open",
        "P8.1: shm_open without O_CREAT, the client must create the object first (the status "
        "is not stated there; the gateway answers 400 naming the failure)")
    reg("register without key", {"byte_size": 16}, 400, "key", "P8.2: missing key -> 400")
    reg("register without byte_size", {"key": small_key}, 400, "byte_size", "P8.2: missing byte_size -> 400")
    reg("register byte_size -1", {"key": small_key, "byte_size": -1}, 400, "byte_size", "P8.2: uint")
    reg("register byte_size 2^64", {"key": small_key, "byte_size": 2 ** 64}, 400, "", "P8.2: uint")
    reg("register key a number", {"key": 5, "byte_size": 16}, 400, "key", "P8.2: key is a string")
    reg("register malformed JSON", b"{", 400, "JSON", "P15.19: register needs a JSON object (Triton 500); gateway 400")
    reg("register NaN byte_size", b'{"key":"%s","byte_size":NaN}' % small_key.encode(), 400, "",
        R_NAN)
    c.append(Http("register an existing name", "POST", "/v2/systemsharedmemory/region/bad_r/register",
                  dumps({"key": small_key, "byte_size": 16}), fragment="already",
                  why="P3 'Region already registered' -> 400", targets=(U,)))
    c.append(Http("register without a region name", "POST", "/v2/systemsharedmemory/register",
                  dumps({"key": small_key, "byte_size": 16}), fragment="region name",
                  why="P8.2: no region segment -> 400", targets=(U,)))
    c.append(Http("status of an unknown region", "GET", "/v2/systemsharedmemory/region/nope/status", status=404,
                  fragment="nope", why="P8.2: unknown name -> 404", targets=(U,)))
    c.append(Http("CUDA handle of 3 bytes", "POST", "/v2/cudasharedmemory/region/c/register",
                  dumps({"raw_handle": {"b64": "AAAA"}, "device_id": 0, "byte_size": 8}), fragment="64",
                  why="P8.2: decoded raw_handle must be 64 bytes else 400", targets=(U,)))
    c.append(Http("register at a gateway without client shm", "POST", "/v2/systemsharedmemory/region/x/register",
                  dumps({"key": small_key, "byte_size": 16}), status=501, fragment="disabled",
                  why="P8.1: client shm disabled -> 501", targets=ALL))

    def shm_infer(params, outputs=None):
        body = {"inputs": [{"name": "INPUT0", "shape": [1, 16], "datatype": "INT32", "parameters": params}]}
        if outputs is not None:
            body["outputs"] = outputs
        return dumps(body)

    p = infer_path("identity_int32")
    region = {"shared_memory_region": "bad_r", "shared_memory_byte_size": 64}
    R_OFF = "P8.3: offset < region size else 400 'Invalid offset'; offset + size <= region size else 400"
    for label, params, status, fragment, why in (
            ("offset at the region's end", {**region, "shared_memory_offset": 256}, 400, "Invalid offset", R_OFF),
            ("offset + size past the region", {**region, "shared_memory_offset": 200}, 400, "Invalid offset", R_OFF),
            ("offset 2^64-32", {**region, "shared_memory_offset": 2 ** 64 - 32}, 400, "Invalid offset", R_OFF),
            ("offset 2^63-1", {**region, "shared_memory_offset": 2 ** 63 - 1}, 400, "Invalid offset", R_OFF),
            ("offset -1", {**region, "shared_memory_offset": -1}, 400, "shared_memory_offset", "P8.3: HTTP uint"),
            ("offset NaN", None, 400, "shared_memory_offset", R_NAN),
            ("byte size past the region", {**region, "shared_memory_byte_size": 512}, 400, "INPUT0", R_OFF),
            ("byte size 2^64-1", {**region, "shared_memory_byte_size": 2 ** 64 - 1}, 400, "", R_OFF),
            ("byte size -64", {**region, "shared_memory_byte_size": -64}, 400, "shared_memory_byte_size", "P8.3: uint"),
            ("byte size not the tensor's", {**region, "shared_memory_byte_size": 32}, 400, "needs 64 bytes",
             "P3 'byte-size mismatch' -> 400"),
            ("byte size missing", {"shared_memory_region": "bad_r"}, 400, "needs 64 bytes",
             "P8.3: missing byte size defaults to 0, then a byte-size mismatch"),
            ("region a number", {**region, "shared_memory_region": 5}, 400, "shared_memory_region", "P8.3: string"),
            ("unknown region", {**region, "shared_memory_region": "nope"}, 404, "nope",
             "P8.3: region must exist else 404 'Unable to find shared memory region'")):
        body = shm_infer(params) if params else shm_infer(region).replace(b'"shared_memory_byte_size":64',
                                                                         b'"shared_memory_byte_size":64,"shared_memory_offset":NaN')
        c.append(Http("input in shm: %s" % label, "POST", p, body, status=status, fragment=fragment, why=why,
                      targets=(U,)))
    c.append(Http("input in shm and data", "POST", p, dumps({"inputs": [
        {"name": "INPUT0", "shape": [1, 16], "datatype": "INT32", "data": [0] * 16, "parameters": region}]}),
        fragment="exactly one of", why="P8.3: input with shm + data -> 400", targets=(U,)))
    for label, out, status, fragment, why in (
            ("output region too small", {"shared_memory_region": "bad_r", "shared_memory_byte_size": 8}, 500,
             "should be at least 64 bytes", "P8.3: output larger than the region's byte size -> 500 / INTERNAL"),
            ("output past the region", {"shared_memory_region": "bad_r", "shared_memory_byte_size": 64,
                                        "shared_memory_offset": 250}, 400, "Invalid offset", R_OFF),
            ("output in shm and binary_data", {"shared_memory_region": "bad_r", "shared_memory_byte_size": 64,
                                               "binary_data": True}, 400, "binary_data",
             "P5.1: shm output cannot be combined with binary_data: true"),
            ("output in an unknown region", {"shared_memory_region": "nope", "shared_memory_byte_size": 64}, 404,
             "nope", "P8.3 -> 404")):
        c.append(Http("output in shm: %s" % label, "POST", p,
                      shm_infer(region, [{"name": "OUTPUT0", "parameters": out}]), status=status,
                      fragment=fragment, why=why, targets=(U,)))
    c.append(Http("input in shm at a gateway without client shm", "POST", p, shm_infer(region), status=501,
                  fragment="shared memory is disabled", targets=ALL,
                  why="P8.1 / README shm: off at these gateways -> 501 (the region is never looked up)"))

    def g_infer(params):
        req = pb.ModelInferRequest(model_name="identity_int32")
        t = req.inputs.add()
        t.name, t.datatype = "INPUT0", "INT32"
        t.shape.extend([1, 16])
        for k, (kind, v) in params.items():
            setattr(t.parameters[k], kind, v)
        return req

    g_region = {"shared_memory_region": ("string_param", "bad_r"), "shared_memory_byte_size": ("int64_param", 64)}
    for label, params, code, fragment, why in (
            ("offset -1", {**g_region, "shared_memory_offset": ("int64_param", -1)}, "INVALID_ARGUMENT",
             "shared_memory_offset", "P8.3"),
            ("offset + size past the region", {**g_region, "shared_memory_offset": ("int64_param", 250)},
             "INVALID_ARGUMENT", "Invalid offset", R_OFF),
            ("offset 2^63-1", {**g_region, "shared_memory_offset": ("int64_param", 2 ** 63 - 1)}, "INVALID_ARGUMENT",
             "Invalid offset", R_OFF),
            ("offset as uint64_param", {**g_region, "shared_memory_offset": ("uint64_param", 8)}, "INVALID_ARGUMENT",
             "int64_param", "P8.3: int64_param only"),
            ("byte size -64", {**g_region, "shared_memory_byte_size": ("int64_param", -64)}, "INVALID_ARGUMENT",
             "shared_memory_byte_size", "P8.3"),
            ("byte size 2^63-1", {**g_region, "shared_memory_byte_size": ("int64_param", 2 ** 63 - 1)},
             "INVALID_ARGUMENT", "", R_OFF),
            ("unknown region", {**g_region, "shared_memory_region": ("string_param", "nope")}, "NOT_FOUND", "nope",
             "P8.3 -> NOT_FOUND")):
        c.append(Grpc("gRPC input in shm: %s" % label, g_infer(params), code, fragment, why, targets=(U,)))
    both = g_infer(g_region)
    both.inputs[0].contents.int_contents.extend([0] * 16)
    c.append(Grpc("gRPC input in shm and contents", both, "INVALID_ARGUMENT", "contents",
                  "P8.3: gRPC input with shm + contents -> INVALID_ARGUMENT", targets=(U,)))
    for label, request, code, fragment, why in (
            ("past the object", pb.SystemSharedMemoryRegisterRequest(name=_unique("g_new"), key=small_key, byte_size=8192),
             "INVALID_ARGUMENT", "exceeds", R_REG),
            ("offset overflowing", pb.SystemSharedMemoryRegisterRequest(name=_unique("g_new"), key=small_key, byte_size=16,
                                                                        offset=2 ** 64 - 8),
             "INVALID_ARGUMENT", "overflows", R_REG),
            ("an existing name", pb.SystemSharedMemoryRegisterRequest(name="bad_r", key=small_key, byte_size=16),
             "ALREADY_EXISTS", "already", "P3 'Region already registered' -> ALREADY_EXISTS"),
            ("no name", pb.SystemSharedMemoryRegisterRequest(name="", key=small_key, byte_size=16),
             "INVALID_ARGUMENT", "region name", "P8.2"),
            ("a key outside the prefixes", pb.SystemSharedMemoryRegisterRequest(name=_unique("g_new"), key="/nope", byte_size=16),
             "INVALID_ARGUMENT", "allowed prefixes", "README shm.allowed_key_prefixes")):
        c.append(Grpc("gRPC register %s" % label, request, code, fragment, why, rpc="SystemSharedMemoryRegister",
                      targets=(U,)))
    c.append(Grpc("gRPC status of an unknown region", pb.SystemSharedMemoryStatusRequest(name="nope"), "NOT_FOUND",
                  "nope", "P8.2 -> NOT_FOUND", rpc="SystemSharedMemoryStatus", targets=(U,)))
    c.append(Grpc("gRPC register at a gateway without client shm",
                  pb.SystemSharedMemoryRegisterRequest(name="x", key=small_key, byte_size=16), "UNIMPLEMENTED",
                  "disabled", "P8.1 -> UNIMPLEMENTED", rpc="SystemSharedMemoryRegister", targets=ALL))
    return c


# ---- streams --------------------------------------------------------------------------------------

def stream_cases(pb):

    def simple(rid, **edits):
        req = grpc_stubs.simple_infer_request()
        req.id = rid
        for k, v in edits.items():
            setattr(req, k, v)
        return req

    def bad_shape(rid):
        req = simple(rid)
        req.inputs[0].shape[1] = 15
        return req.SerializeToString()

    R_INBAND = "P11.5: per-request errors in-band (error_message); the stream stays open and ends OK"
    R_TGE = "P11.5: with triton_grpc_error: true the first error ends the stream with its code"
    ok = lambda rid: simple(rid).SerializeToString()  # noqa: E731
    return [
        Stream("unknown model in the middle", [ok("a"), simple("b", model_name="nope").SerializeToString(), ok("c")],
               answers={"a": "", "b": "unknown model", "c": ""}, why=R_INBAND),
        Stream("bad shape in the middle", [ok("a"), bad_shape("b"), ok("c")],
               answers={"a": "", "b": "INPUT0", "c": ""}, why=R_INBAND),
        Stream("malformed message in the middle", [ok("a"), b"\x0a\x7fxx", ok("c")],
               answers={"a": "", "": "malformed", "c": ""}, why=R_INBAND + " (the id cannot be read)"),
        Stream("unknown version in the middle",
               [simple("v", model_version="7").SerializeToString()], answers={"v": "version 7"}, why=R_INBAND),
        Stream("every message malformed", [b"\xff" * 7, b"\x0f", b"\x0a\x05ab"],
               answers={"": "malformed"}, why=R_INBAND),
        Stream("bad shape with triton_grpc_error", [ok("a"), bad_shape("b"), ok("c")], code="INVALID_ARGUMENT",
               fragment="INPUT0", metadata=(("triton_grpc_error", "true"),), why=R_TGE),
        Stream("malformed message with triton_grpc_error", [b"\x0a\x7fxx", ok("c")], code="INVALID_ARGUMENT",
               fragment="malformed", metadata=(("triton_grpc_error", "true"),), why=R_TGE),
        Stream("unknown model with triton_grpc_error", [simple("b", model_name="nope").SerializeToString()],
               code="NOT_FOUND", fragment="nope", metadata=(("triton_grpc_error", "true"),), why=R_TGE),
    ]


# ---- raw HTTP/2: gRPC calls cut off -----------------------------------------------------------------

def h2_cases():
    infer = "/inference.GRPCInferenceService/ModelInfer"
    stream = "/inference.GRPCInferenceService/ModelStreamInfer"
    R_RST = "RFC 9113 5.4.2 / 8.7: after the client's RST_STREAM nothing is owed on the stream"
    R_LEFT = "the client closed the TCP connection mid-message: nothing to answer; the call is dropped"
    R_HALF = ("gRPC over HTTP/2: END_STREAM with an incomplete length-prefixed message ends the "
              "request stream; a unary call then has no request (INTERNAL, as grpc does for an "
              "unreadable message); a stream simply ends with its complete messages (none) and OK")

    def partial(m):
        return _grpc_frame(m, length=len(m) + 100)[:40]

    return [
        H2("unary: half a message then RST_STREAM", infer,
           lambda m: _data(partial(m)) + _rst(), None, why=R_RST),
        H2("stream: half a message then RST_STREAM", stream,
           lambda m: _data(partial(m)) + _rst(), None, why=R_RST),
        H2("stream: a message and a half then RST_STREAM", stream,
           lambda m: _data(_grpc_frame(m) + partial(m)) + _rst(), None, why=R_RST, data=True),
        H2("unary: half a message then the connection closed", infer,
           lambda m: _data(partial(m)), None, close_socket=True, why=R_LEFT),
        H2("stream: a message and a half then the connection closed", stream,
           lambda m: _data(_grpc_frame(m) + partial(m)), None, close_socket=True, why=R_LEFT),
        H2("unary: half a message then END_STREAM", infer,
           lambda m: _data(partial(m), end=True), "13", why=R_HALF),
        H2("unary: a message length prefix cut, then END_STREAM", infer,
           lambda m: _data(b"\x00\x00\x00", end=True), "13", why=R_HALF),
        H2("unary: no message at all", infer, lambda m: _data(b"", end=True), "13", why=R_HALF),
        H2("stream: half a message then END_STREAM", stream,
           lambda m: _data(partial(m), end=True), "0", why=R_HALF),
        H2("stream: a message and a half then END_STREAM", stream,
           lambda m: _data(_grpc_frame(m) + partial(m), end=True), "0", data=True, why=R_HALF),
        H2("unary: length prefix of 4 GiB, then 4 MiB of it", infer, lambda m: b"", "8", flood=4 << 20,
           why="README limits.max_grpc_message_bytes (2^31-1 here): a message announced past the limit "
               "is refused (RESOURCE_EXHAUSTED) when its length prefix arrives, as an HTTP "
               "Content-Length past max_binary_body_bytes is answered 413 before the body "
               "(test_abuse); never buffered to the announced size"),
        H2("stream: length prefix of 4 GiB, then 4 MiB of it", stream, lambda m: b"", "8", flood=4 << 20,
           why="as above, on ModelStreamInfer"),
    ]


def _grpc_frame(message, flag=0, length=None):
    return bytes([flag]) + struct.pack(">I", len(message) if length is None else length) + message


def h2_frame(kind, flags, stream_id, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream_id) + payload


def _data(payload, end=False):
    return h2_frame(0, 1 if end else 0, 1, payload)


def _rst():
    return h2_frame(3, 0, 1, struct.pack(">I", 8))  # CANCEL


# ---- known findings ----------------------------------------------------------------------
# Cases whose expected answer the gateway does not give yet, each with why. The test runs
# them and requires them to still fail (a fixed one fails the test until it is taken off
# this list), and prints how many there are. Every entry is open work of the hardening
# issue; none is an expectation changed to fit the gateway.

KNOWN = {}
