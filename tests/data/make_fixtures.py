#!/usr/bin/python3
"""Builds the golden wire fixtures of tests/data/, byte by byte.

The real Triton clients (tritonclient.http / tritonclient.grpc, the C++ client library,
perf_analyzer) and Triton itself cannot be installed here, so each fixture is written from
the facts of /work/shared/PROTOCOL.md ("P" below: "P 13.1" = section 13.1) and the key
order of the client sources named there. Standard library only: no protobuf module, no
numpy, not even the json module (its float and escape forms are not rapidjson's).

    /usr/bin/python3 tests/data/make_fixtures.py

rewrites every fixture next to this script. The output is deterministic: rerunning
produces identical bytes (gzip with mtime=0; the compressed streams depend only on the
zlib of the machine). golden_test.cc reads the files; it never runs this script.

Files:
    <name>.headers   HTTP header lines as the client/server sends them, "Name: value\n"
    <name>.body      the HTTP body, exactly as on the wire
    <name>.pb        a serialized ModelInferRequest / ModelInferResponse (no gRPC frame)
"""

import decimal
import gzip
import math
import os
import struct
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))

# User agents. P 13.1: geventhttpclient sends "python/gevent-http-client-<ver>"; the
# version is whichever is installed, 2.3.1 stands for it. P 13.4: the C++ client sets
# CURLOPT_USERAGENT "libcurl-agent/1.0".
PYTHON_UA = "python/gevent-http-client-2.3.1"
CPP_UA = "libcurl-agent/1.0"
HOST = "localhost:8000"


# =====================================================================================
# JSON text, in the compact form of rapidjson's Writer: the Python client dumps with
# python-rapidjson (P 13.1), the C++ client and Triton write with rapidjson through
# TritonJson (P 5.2, 13.4). Objects are Python dicts, whose order is insertion order:
# each fixture builds them in the order the client/server inserts the keys.
# =====================================================================================

_HEX = "0123456789ABCDEF"  # rapidjson writes \u escapes with upper-case hex digits


def _json_string(s, ensure_ascii):
    out = ['"']
    for ch in s:
        c = ord(ch)
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch in "\b\f\n\r\t":
            out.append({"\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}[ch])
        elif c < 0x20:
            out.append("\\u00" + _HEX[c >> 4] + _HEX[c & 15])
        elif c >= 0x80 and ensure_ascii:
            # python-rapidjson's default ensure_ascii=True: \uXXXX (a surrogate pair past
            # the BMP).
            if c >= 0x10000:
                c -= 0x10000
                units = [0xD800 | (c >> 10), 0xDC00 | (c & 0x3FF)]
            else:
                units = [c]
            for u in units:
                out.append("\\u" + "".join(_HEX[(u >> s) & 15] for s in (12, 8, 4, 0)))
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _write_exponent(k):
    # rapidjson internal::WriteExponent: '-' when negative, no '+', no leading zeros.
    return ("-" if k < 0 else "") + str(abs(k))


def json_double(x):
    """A double as rapidjson's Writer::Double writes it (internal/dtoa.h Prettify), with
    kWriteNanAndInfFlag as Triton sets it (P 5.2): shortest round-trip digits, laid out
    as 1.0, 100.0, 0.001234, 12.34, 1e30, 1.234e33, 1.0000000116860974e-7."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    sign = "-" if x < 0 else ""
    # repr() gives the shortest digits that round-trip, as Grisu2 does for these values.
    t = decimal.Decimal(repr(abs(x))).normalize().as_tuple()
    digits = "".join(map(str, t.digits))
    length, k = len(digits), t.exponent  # value = digits * 10^k
    kk = length + k
    if 0 <= k and kk <= 21:  # 1234e7 -> 12340000000.0
        s = digits + "0" * k + ".0"
    elif 0 < kk <= 21:  # 1234e-2 -> 12.34
        s = digits[:kk] + "." + digits[kk:]
    elif -6 < kk <= 0:  # 1234e-6 -> 0.001234
        s = "0." + "0" * (-kk) + digits
    elif length == 1:  # 1e30
        s = digits + "e" + _write_exponent(kk - 1)
    else:  # 1234e30 -> 1.234e33
        s = digits[0] + "." + digits[1:] + "e" + _write_exponent(kk - 1)
    return sign + s


def to_json(value, ensure_ascii=True):
    """Compact JSON: no whitespace at all, keys in dict order."""
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)  # integers exact, int64 and uint64 alike (P 5.2)
    if isinstance(value, float):
        return json_double(value)
    if isinstance(value, str):
        return _json_string(value, ensure_ascii)
    if isinstance(value, dict):
        return "{" + ",".join(_json_string(k, ensure_ascii) + ":" + to_json(v, ensure_ascii)
                              for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(to_json(v, ensure_ascii) for v in value) + "]"
    raise TypeError(type(value))


# =====================================================================================
# Tensor bytes (P 6: little-endian, row-major, native width; BOOL one byte; BYTES each
# element a 4-byte little-endian length then the bytes).
# =====================================================================================


def le(fmt, values):
    return struct.pack("<%d%s" % (len(values), fmt), *values)


def int32s(values):
    return le("i", values)


def fp32(x):
    """The float32 nearest x, as the double a client's numpy .item() or Triton's
    float -> double conversion produces (P 5.2: FP32 written as double)."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


def bytes_elements(elements):
    return b"".join(struct.pack("<I", len(e)) + e for e in elements)


# The `simple` example model: INPUT0, INPUT1 INT32 [1,16]; OUTPUT0 = INPUT0 + INPUT1,
# OUTPUT1 = INPUT0 - INPUT1 (the data of Triton's simple_http_infer_client.py).
SIMPLE_INPUT0 = list(range(16))
SIMPLE_INPUT1 = [-1] * 16
SIMPLE_OUTPUT0 = [a + b for a, b in zip(SIMPLE_INPUT0, SIMPLE_INPUT1)]
SIMPLE_OUTPUT1 = [a - b for a, b in zip(SIMPLE_INPUT0, SIMPLE_INPUT1)]


# =====================================================================================
# Protobuf wire format by hand (P 11.2 field numbers; proto3: empty strings, zero
# scalars and empty repeated fields are omitted; repeated numeric fields packed; a map
# is repeated entry messages {1: key, 2: value}; fields written in field-number order,
# as the C++ and Python (upb) serializers do).
# =====================================================================================

VARINT, I64, LEN = 0, 1, 2


def varint(n):
    n &= (1 << 64) - 1  # int64 negatives are 10-byte two's complement
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def tag(number, wire_type):
    return varint(number << 3 | wire_type)


def pb_len(number, payload):
    if isinstance(payload, str):
        payload = payload.encode()
    return tag(number, LEN) + varint(len(payload)) + payload


def pb_str(number, s):
    """A singular proto3 string: omitted when empty."""
    return pb_len(number, s) if s else b""


def pb_packed(number, values):
    return pb_len(number, b"".join(varint(v) for v in values)) if values else b""


def infer_parameter(kind, value):
    """InferParameter, oneof parameter_choice (P 11.2): bool_param 1, int64_param 2,
    string_param 3, double_param 4, uint64_param 5. A oneof member is always written,
    even false / 0 / "" (oneof fields have presence)."""
    if kind == "bool":
        return tag(1, VARINT) + varint(1 if value else 0)
    if kind == "int64":
        return tag(2, VARINT) + varint(value)
    if kind == "string":
        return pb_len(3, value)
    if kind == "double":
        return tag(4, I64) + struct.pack("<d", value)
    if kind == "uint64":
        return tag(5, VARINT) + varint(value)
    raise ValueError(kind)


def pb_params(number, params):
    """map<string, InferParameter> as field `number`: one entry message per key, key
    (1) and value (2) both always written. Protobuf leaves map order unspecified; the
    fixtures use the order the client inserts the keys."""
    return b"".join(pb_len(number, pb_len(1, key) + pb_len(2, infer_parameter(kind, value)))
                    for key, kind, value in params)


def infer_input_tensor(name, datatype, shape, params=()):
    # ModelInferRequest.InferInputTensor: name 1, datatype 2, shape 3 (packed int64),
    # parameters 4; contents 5 is never sent by the clients (P 13.3).
    return pb_str(1, name) + pb_str(2, datatype) + pb_packed(3, shape) + pb_params(4, params)


def requested_output_tensor(name, params=()):
    # ModelInferRequest.InferRequestedOutputTensor: name 1, parameters 2.
    return pb_str(1, name) + pb_params(2, params)


def model_infer_request(model_name, model_version="", id="", params=(), inputs=(), outputs=(),
                        raw=()):
    # ModelInferRequest: model_name 1, model_version 2, id 3, parameters 4, inputs 5,
    # outputs 6, raw_input_contents 7 (every raw entry written, even an empty one).
    return (pb_str(1, model_name) + pb_str(2, model_version) + pb_str(3, id) +
            pb_params(4, params) +
            b"".join(pb_len(5, t) for t in inputs) +
            b"".join(pb_len(6, t) for t in outputs) +
            b"".join(pb_len(7, r) for r in raw))


def infer_output_tensor(name, datatype, shape):
    # ModelInferResponse.InferOutputTensor: name 1, datatype 2, shape 3 (packed);
    # Triton attaches no parameters and never fills contents 5 (P 11.4).
    return pb_str(1, name) + pb_str(2, datatype) + pb_packed(3, shape)


def model_infer_response(model_name, model_version, id, outputs, raw):
    # ModelInferResponse: model_name 1, model_version 2, id 3 (omitted when empty),
    # parameters 4 (none here), outputs 5, raw_output_contents 6: one entry per output at
    # the output's own index, empty for a shared-memory or zero-size output (P 11.4).
    assert len(outputs) == len(raw)
    return (pb_str(1, model_name) + pb_str(2, model_version) + pb_str(3, id) +
            b"".join(pb_len(5, t) for t in outputs) +
            b"".join(pb_len(6, r) for r in raw))


# =====================================================================================
# HTTP requests of the clients
# =====================================================================================


def python_http_input(name, shape, datatype, parameters=None, data=None):
    # tritonclient.http InferInput._get_tensor(): "name", "shape", "datatype", then
    # "parameters" when non-empty, then "data" for a JSON input.
    tensor = {"name": name, "shape": shape, "datatype": datatype}
    if parameters:
        tensor["parameters"] = parameters
    if data is not None:
        tensor["data"] = data
    return tensor


def python_http_output(name, binary_data=True, class_count=0):
    # tritonclient.http InferRequestedOutput: parameters "classification" (only when
    # class_count != 0) inserted before "binary_data", which is always present.
    parameters = {}
    if class_count:
        parameters["classification"] = class_count
    parameters["binary_data"] = binary_data
    return {"name": name, "parameters": parameters}


def python_http_request(inputs, blobs, request_id="", outputs=None, sequence=None,
                        priority=0, timeout=None, custom=None):
    """tritonclient.http _get_inference_request(): top-level keys in the order "id"
    (only when non-empty), "inputs", "outputs" (only when given), "parameters" (last, only
    when non-empty). Parameters in the order sequence_id, sequence_start, sequence_end
    (all three, only for a sequence; P 13.1), priority (only when != 0), timeout (only
    when given), binary_data_output (true when no outputs are given; P 13.1), then the
    custom ones. Returns (body, json_size): json_size only when a binary blob follows."""
    request = {}
    parameters = {}
    if request_id:
        request["id"] = request_id
    if sequence:
        sequence_id, start, end = sequence
        parameters["sequence_id"] = sequence_id
        parameters["sequence_start"] = start
        parameters["sequence_end"] = end
    if priority:
        parameters["priority"] = priority
    if timeout is not None:
        parameters["timeout"] = timeout
    request["inputs"] = inputs
    if outputs:
        request["outputs"] = outputs
    else:
        parameters["binary_data_output"] = True
    for key, value in (custom or {}).items():
        parameters[key] = value
    if parameters:
        request["parameters"] = parameters
    header = to_json(request, ensure_ascii=True).encode()
    if not blobs:
        return header, None
    # P 6: blobs follow the JSON in the order of the inputs that carry
    # binary_data_size; no padding.
    return header + b"".join(blobs), len(header)


def python_http_headers(body, json_size=None, content_encoding=None):
    """geventhttpclient's header order: its default User-Agent, then the headers the
    client passes (Content-Encoding is set before Inference-Header-Content-Length in
    InferenceServerClient.infer), then Host and Content-Length. No Content-Type
    (P 13.1). Inference-Header-Content-Length only when a binary blob follows (P 13.1),
    and then it is the uncompressed JSON length (P 6)."""
    headers = [("User-Agent", PYTHON_UA)]
    if content_encoding:
        headers.append(("Content-Encoding", content_encoding))
    if json_size is not None:
        headers.append(("Inference-Header-Content-Length", str(json_size)))
    headers.append(("Host", HOST))
    headers.append(("Content-Length", str(len(body))))
    return headers


def cpp_http_request(inputs, outputs, request_id="", sequence=None, priority=0, timeout=0):
    """C++ client HttpInferRequest::PrepareRequestJson: "id" always, even "" (P 5.1,
    13.4); "parameters" when a sequence, priority, timeout or no outputs call for it
    (sequence_id, sequence_start, sequence_end, priority, timeout, binary_data_output in
    that order; numbers as unsigned integers, P 13.4); "inputs"; "outputs" when given."""
    request = {"id": request_id}
    parameters = {}
    if sequence:
        sequence_id, start, end = sequence
        parameters["sequence_id"] = sequence_id
        parameters["sequence_start"] = start
        parameters["sequence_end"] = end
    if priority:
        parameters["priority"] = priority
    if timeout:
        parameters["timeout"] = timeout
    if not outputs:
        parameters["binary_data_output"] = True
    if parameters:
        request["parameters"] = parameters
    request["inputs"] = inputs
    if outputs:
        request["outputs"] = outputs
    return to_json(request, ensure_ascii=False).encode()


def cpp_http_headers(body, json_size, all_inputs_json):
    """libcurl's order: Host, User-Agent, Accept, then the client's list
    (Inference-Header-Content-Length, always, P 13.4; "Expect:" which only suppresses
    Expect: 100-continue, so no Expect line goes out; Content-Type json when every input
    is JSON, else octet-stream, P 13.4), then Content-Length."""
    return [
        ("Host", HOST),
        ("User-Agent", CPP_UA),
        ("Accept", "*/*"),
        ("Inference-Header-Content-Length", str(json_size)),
        ("Content-Type", "application/json" if all_inputs_json else "application/octet-stream"),
        ("Content-Length", str(len(body))),
    ]


# =====================================================================================
# HTTP responses of Triton (P 5.4, 6)
# =====================================================================================


def triton_http_output(name, datatype, shape, data=None, binary_size=None):
    # Each output: "name", "datatype", "shape", then "parameters" {"binary_data_size"}
    # for a binary output or "data" (a flat array) for a JSON one (P 5.4).
    output = {"name": name, "datatype": datatype, "shape": shape}
    if binary_size is not None:
        output["parameters"] = {"binary_data_size": binary_size}
    else:
        output["data"] = data
    return output


def triton_http_response(model_name, model_version, outputs, blobs, request_id=""):
    """Key order: "id" (only when the request's id was non-empty), "model_name",
    "model_version" (a string), "outputs" (P 5.4). Blobs follow the JSON in the order of
    the outputs that have binary_data_size (P 6). Headers: Content-Type json without a
    binary section, else octet-stream plus Inference-Header-Content-Length (P 5.4)."""
    response = {}
    if request_id:
        response["id"] = request_id
    response["model_name"] = model_name
    response["model_version"] = model_version
    response["outputs"] = outputs
    header = to_json(response, ensure_ascii=False).encode()
    body = header + b"".join(blobs)
    if blobs:
        headers = [("Content-Type", "application/octet-stream"),
                   ("Inference-Header-Content-Length", str(len(header))),
                   ("Content-Length", str(len(body)))]
    else:
        headers = [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
    return body, headers


# =====================================================================================
# The fixtures
# =====================================================================================

FIXTURES = {}  # file name -> bytes


def http_fixture(name, body, headers):
    FIXTURES[name + ".body"] = body
    FIXTURES[name + ".headers"] = "".join("%s: %s\n" % h for h in headers).encode()


def simple_binary_inputs():
    # InferInput("INPUT0", [1, 16], "INT32").set_data_from_numpy(x) with the default
    # binary_data=True: parameters {"binary_data_size": 64} (16 x 4 bytes, P 6).
    inputs = [python_http_input("INPUT0", [1, 16], "INT32", {"binary_data_size": 64}),
              python_http_input("INPUT1", [1, 16], "INT32", {"binary_data_size": 64})]
    return inputs, [int32s(SIMPLE_INPUT0), int32s(SIMPLE_INPUT1)]


def python_http_binary_simple():
    # tritonclient.http, `simple`: inputs binary, outputs InferRequestedOutput(name) with
    # the default binary_data=True (P 13.1).
    inputs, blobs = simple_binary_inputs()
    outputs = [python_http_output("OUTPUT0"), python_http_output("OUTPUT1")]
    body, json_size = python_http_request(inputs, blobs, outputs=outputs)
    http_fixture("python_http_binary_simple", body, python_http_headers(body, json_size))


def python_http_sequence():
    # tritonclient.http, `simple`, no outputs given (=> binary_data_output true, P 13.1),
    # request_id, sequence_id/start/end (all three), priority and timeout. Plus the same
    # body sent gzip- and deflate-compressed (P 6.1): Content-Encoding, and
    # Inference-Header-Content-Length still the uncompressed JSON length.
    inputs, blobs = simple_binary_inputs()
    body, json_size = python_http_request(inputs, blobs, request_id="seq-req-1",
                                          sequence=(1001, True, False), priority=2,
                                          timeout=5000)
    http_fixture("python_http_sequence", body, python_http_headers(body, json_size))
    # The client calls gzip.compress(body) (current mtime); mtime=0 keeps this
    # deterministic.
    gz = gzip.compress(body, compresslevel=9, mtime=0)
    http_fixture("python_http_sequence_gzip", gz, python_http_headers(gz, json_size, "gzip"))
    # "deflate" is zlib-wrapped: zlib.compress(body) (P 6.1, 13.1).
    zl = zlib.compress(body)
    http_fixture("python_http_sequence_deflate", zl,
                 python_http_headers(zl, json_size, "deflate"))


def python_http_json_inputs():
    # tritonclient.http with set_data_from_numpy(x, binary_data=False): "data" in the
    # JSON, no "parameters" (binary_data_size is popped), no blob, so no
    # Inference-Header-Content-Length (P 13.1). numpy .item() values: BYTES elements are
    # decoded UTF-8 str (python-rapidjson escapes non-ASCII as \u00F6), FP32 elements are
    # the float32 value as a Python float (a double), INT64 exact ints, BOOL true/false.
    text = ["hello", "w\u00f6rld", "", "tab\there"]
    scale = [fp32(0.1), fp32(1.0), fp32(-2.5)]
    inputs = [
        python_http_input("TEXT", [4], "BYTES", data=text),
        python_http_input("SCALE", [1, 3], "FP32", data=scale),
        python_http_input("COUNT", [2], "INT64", data=[9007199254740993, -9223372036854775808]),
        python_http_input("FLAGS", [2], "BOOL", data=[True, False]),
    ]
    # InferRequestedOutput("LABELS", binary_data=False, class_count=2) and
    # InferRequestedOutput("EMBEDDING", binary_data=False).
    outputs = [python_http_output("LABELS", binary_data=False, class_count=2),
               python_http_output("EMBEDDING", binary_data=False)]
    # Custom request parameters: float -> JSON number (a double), str -> string (P 9.4).
    body, json_size = python_http_request(inputs, [], outputs=outputs,
                                          custom={"temperature": 0.5, "mode": "fast"})
    assert json_size is None
    http_fixture("python_http_json_inputs", body, python_http_headers(body))


def python_http_shm_mixed():
    # P 6.2 worked example over HTTP: A INT32 [1,4] binary (16 bytes), S FP32 [2] in a
    # registered region (set_shared_memory("input_region", 8, offset=16): region,
    # byte_size, and offset since it is != 0, P 8.4), T BYTES [2] binary ("ab", "": 10
    # bytes). Blobs: A then T; S contributes none. OUT requested binary.
    inputs = [
        python_http_input("A", [1, 4], "INT32", {"binary_data_size": 16}),
        python_http_input("S", [2], "FP32", {"shared_memory_region": "input_region",
                                             "shared_memory_byte_size": 8,
                                             "shared_memory_offset": 16}),
        python_http_input("T", [2], "BYTES", {"binary_data_size": 10}),
    ]
    blobs = [int32s([1, 2, 3, 4]), bytes_elements([b"ab", b""])]
    assert blobs[1] == bytes.fromhex("02000000 6162 00000000")
    body, json_size = python_http_request(inputs, blobs, outputs=[python_http_output("OUT")])
    http_fixture("python_http_shm_mixed", body, python_http_headers(body, json_size))


def cpp_http_json():
    # C++ client, every input JSON (InferInput::SetBinaryData(false)), no outputs given:
    # "id":"" and parameters {"binary_data_output": true}; Inference-Header-Content-Length
    # present although the body is JSON alone, Content-Type application/json (P 13.4).
    # Input key order name, datatype, shape, data, then the (here empty) parameters object
    # the client always adds: not stated in PROTOCOL.md (an assumption); the decoder
    # must take any key order anyway.
    inputs = [
        {"name": "INPUT0", "datatype": "INT32", "shape": [1, 16], "data": SIMPLE_INPUT0,
         "parameters": {}},
        {"name": "INPUT1", "datatype": "INT32", "shape": [1, 16], "data": SIMPLE_INPUT1,
         "parameters": {}},
    ]
    body = cpp_http_request(inputs, outputs=[])
    http_fixture("cpp_http_json", body, cpp_http_headers(body, len(body), all_inputs_json=True))


def cpp_http_binary():
    # C++ client, binary inputs, both outputs with binary_data true, a sequence (unsigned
    # sequence_id), priority and timeout; Content-Type application/octet-stream (P 13.4).
    inputs = [
        {"name": "INPUT0", "datatype": "INT32", "shape": [1, 16],
         "parameters": {"binary_data_size": 64}},
        {"name": "INPUT1", "datatype": "INT32", "shape": [1, 16],
         "parameters": {"binary_data_size": 64}},
    ]
    outputs = [{"name": "OUTPUT0", "parameters": {"binary_data": True}},
               {"name": "OUTPUT1", "parameters": {"binary_data": True}}]
    header = cpp_http_request(inputs, outputs, request_id="cpp-1", sequence=(42, True, True),
                              priority=1, timeout=100000)
    body = header + int32s(SIMPLE_INPUT0) + int32s(SIMPLE_INPUT1)
    http_fixture("cpp_http_binary", body, cpp_http_headers(body, len(header), False))


def python_grpc_simple():
    # tritonclient.grpc, `simple`, request_id, sequence (sequence_id int64_param,
    # sequence_start / sequence_end bool_param, the false one written too), priority
    # uint64_param (P 13.3); one raw_input_contents entry per input; outputs by name.
    FIXTURES["python_grpc_simple.pb"] = model_infer_request(
        "simple", id="py-grpc-7",
        params=[("sequence_id", "int64", 1001), ("sequence_start", "bool", True),
                ("sequence_end", "bool", False), ("priority", "uint64", 3)],
        inputs=[infer_input_tensor("INPUT0", "INT32", [1, 16]),
                infer_input_tensor("INPUT1", "INT32", [1, 16])],
        outputs=[requested_output_tensor("OUTPUT0"), requested_output_tensor("OUTPUT1")],
        raw=[int32s(SIMPLE_INPUT0), int32s(SIMPLE_INPUT1)])


def python_grpc_shm_mixed():
    # P 6.2 worked example over gRPC, model version "2": A raw, S in shared memory
    # (shared_memory_region string_param, shared_memory_byte_size and _offset
    # int64_param, P 13.3), T raw. raw_input_contents holds exactly [A, T]: raw entry 1
    # is input 2 (P 6.2, 11.4). OUT is requested into a shared-memory region.
    FIXTURES["python_grpc_shm_mixed.pb"] = model_infer_request(
        "mixed", model_version="2",
        inputs=[infer_input_tensor("A", "INT32", [1, 4]),
                infer_input_tensor("S", "FP32", [2],
                                   [("shared_memory_region", "string", "input_region"),
                                    ("shared_memory_byte_size", "int64", 8),
                                    ("shared_memory_offset", "int64", 16)]),
                infer_input_tensor("T", "BYTES", [2])],
        outputs=[requested_output_tensor(
            "OUT", [("shared_memory_region", "string", "output_region"),
                    ("shared_memory_byte_size", "int64", 16)])],
        raw=[int32s([1, 2, 3, 4]), bytes_elements([b"ab", b""])])


def cpp_grpc_simple():
    # C++ gRPC client as perf_analyzer drives it (-m simple -x 1): model_version "1",
    # id "" (omitted), parameter triton_enable_empty_final_response bool_param false on
    # every request (P 13.4), raw contents, no outputs requested.
    FIXTURES["cpp_grpc_simple.pb"] = model_infer_request(
        "simple", model_version="1",
        params=[("triton_enable_empty_final_response", "bool", False)],
        inputs=[infer_input_tensor("INPUT0", "INT32", [1, 16]),
                infer_input_tensor("INPUT1", "INT32", [1, 16])],
        raw=[int32s(SIMPLE_INPUT0), int32s(SIMPLE_INPUT1)])


def triton_http_json_simple():
    # Triton's answer to a tritonclient.http request for `simple` with request_id
    # "json-1" and both outputs binary_data=False: INT32 data as JSON integers.
    outputs = [triton_http_output("OUTPUT0", "INT32", [1, 16], data=SIMPLE_OUTPUT0),
               triton_http_output("OUTPUT1", "INT32", [1, 16], data=SIMPLE_OUTPUT1)]
    body, headers = triton_http_response("simple", "1", outputs, [], request_id="json-1")
    http_fixture("triton_http_json_simple", body, headers)


def triton_http_binary_simple():
    # Triton's answer to python_http_binary_simple: both outputs binary (64 bytes each).
    outputs = [triton_http_output("OUTPUT0", "INT32", [1, 16], binary_size=64),
               triton_http_output("OUTPUT1", "INT32", [1, 16], binary_size=64)]
    blobs = [int32s(SIMPLE_OUTPUT0), int32s(SIMPLE_OUTPUT1)]
    body, headers = triton_http_response("simple", "1", outputs, blobs)
    http_fixture("triton_http_binary_simple", body, headers)


def triton_http_binary_sequence():
    # Triton's answer to python_http_sequence: no outputs were listed, so every output is
    # binary by binary_data_output (P 6); the request id is echoed first (P 5.4).
    outputs = [triton_http_output("OUTPUT0", "INT32", [1, 16], binary_size=64),
               triton_http_output("OUTPUT1", "INT32", [1, 16], binary_size=64)]
    blobs = [int32s(SIMPLE_OUTPUT0), int32s(SIMPLE_OUTPUT1)]
    body, headers = triton_http_response("simple", "1", outputs, blobs, request_id="seq-req-1")
    http_fixture("triton_http_binary_sequence", body, headers)


# FP32 values of triton_http_json_fp32, as float32.
FP32_VALUES = [fp32(0.1), 1.0, -2.5, -0.0, 100.0, fp32(1e-7), fp32(3.4028234663852886e38),
               16777216.0, float("nan"), float("-inf")]


def triton_http_json_fp32():
    # Triton writes FP32 as the double the float converts to (AppendDouble(float)), in
    # rapidjson's shortest form: 0.1f -> 0.10000000149011612, 1.0 -> 1.0, -0.0 -> -0.0,
    # 100.0 -> 100.0, 1e-7f -> 1.0000000116860974e-7, FLT_MAX ->
    # 3.4028234663852886e38, and NaN / -Infinity literals (P 5.2).
    outputs = [triton_http_output("OUTPUT0", "FP32", [1, len(FP32_VALUES)], data=FP32_VALUES)]
    body, headers = triton_http_response("identity_fp32", "1", outputs, [])
    assert body.startswith(b'{"model_name":"identity_fp32","model_version":"1","outputs":'
                           b'[{"name":"OUTPUT0","datatype":"FP32","shape":[1,10],"data":'
                           b'[0.10000000149011612,1.0,-2.5,-0.0,100.0,1.0000000116860974e-7,'
                           b'3.4028234663852886e38,16777216.0,NaN,-Infinity]}]}')
    http_fixture("triton_http_json_fp32", body, headers)


def triton_grpc_simple():
    # Triton's ModelInferResponse to python_grpc_simple: id echoed, one raw entry per
    # output at its index, no typed contents, no output parameters (P 11.4).
    FIXTURES["triton_grpc_simple.pb"] = model_infer_response(
        "simple", "1", "py-grpc-7",
        outputs=[infer_output_tensor("OUTPUT0", "INT32", [1, 16]),
                 infer_output_tensor("OUTPUT1", "INT32", [1, 16])],
        raw=[int32s(SIMPLE_OUTPUT0), int32s(SIMPLE_OUTPUT1)])


def triton_grpc_simple_shm_output():
    # As above for a request that put OUTPUT0 into a shared-memory region: OUTPUT0 is
    # still listed, and its raw entry (index 0) is empty (P 11.4).
    FIXTURES["triton_grpc_simple_shm_output.pb"] = model_infer_response(
        "simple", "1", "",
        outputs=[infer_output_tensor("OUTPUT0", "INT32", [1, 16]),
                 infer_output_tensor("OUTPUT1", "INT32", [1, 16])],
        raw=[b"", int32s(SIMPLE_OUTPUT1)])


def main():
    python_http_binary_simple()
    python_http_sequence()
    python_http_json_inputs()
    python_http_shm_mixed()
    cpp_http_json()
    cpp_http_binary()
    python_grpc_simple()
    python_grpc_shm_mixed()
    cpp_grpc_simple()
    triton_http_json_simple()
    triton_http_binary_simple()
    triton_http_binary_sequence()
    triton_http_json_fp32()
    triton_grpc_simple()
    triton_grpc_simple_shm_output()
    for name, data in sorted(FIXTURES.items()):
        with open(os.path.join(HERE, name), "wb") as f:
            f.write(data)
        print("%-42s %6d bytes" % (name, len(data)))


if __name__ == "__main__":
    main()
