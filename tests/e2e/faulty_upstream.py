"""A fault-injecting KServe v2 upstream for the end-to-end tests: it misbehaves at the byte
level, on purpose, in one way per request, chosen by the model name.

  FaultyUpstream()    three listeners on 127.0.0.1, port 0 each, served by threads of the
                      test process (start() / stop(), or `python3 faulty_upstream.py`,
                      which prints one JSON line with the addresses and serves until
                      stdin closes):
    "http"     HTTP/1.1 on raw sockets: POST /v2/models/<model>[/versions/<v>]/infer
    "grpc"     gRPC over HTTP/2 (the h2 package, Debian's python3-h2): ModelInfer
    "refuse"   accepts and resets every connection at once (RST, SO_LINGER 0), before a
               byte is read: an upstream that refuses

The fault is the model name after its first "_" ("http_reset_body" -> reset_body; a name
without "_" is taken whole), so that a gateway may route "http_*" and "grpc_*" apart and
one process serves every case. Model "ok" answers correctly: OUTPUT0 = INPUT0 (same
datatype, shape and values; INT32, FP32 and the other fixed-size types), as JSON, or as a
binary tensor when the request asked for binary outputs.

HTTP faults (HTTP_FAULTS):
  ok            a correct answer; the connection stays open (keep-alive)
  close         the request is read, the connection closed (FIN) without a byte sent
  rst           the request is read, the connection reset (RST) without a byte sent
  reset_head    half of the response head, then RST
  reset_body    the whole head (Content-Length of the whole body), half the body, then RST
  stall         no answer ever; the connection is held until the peer closes it
  garbage       bytes that are no HTTP response, then held open until the peer closes
  html          200 with Content-Type: text/html and an HTML body, correctly framed
  truncated     Content-Length of the whole body, half of it sent, then FIN
  truncated_large  the same with a large body (the JSON answer and LARGE_PADDING bytes of
                JSON whitespace): a gateway that relays a large answer as it arrives has
                sent the head and some of the body before the FIN
  bad_chunk     Transfer-Encoding: chunked with a chunk-size line that is not hex
  chunk_crlf    chunked, a chunk's data longer than its size says (no CRLF after it)
  excess        Content-Length covering a correct JSON answer, followed in the same write by
                a whole second HTTP response (POISON: OUTPUT0 = POISON_VALUE) that no
                request asked for
  excess_late   a correct answer, then the same unasked response a moment later, once the
                gateway has its answer; `poisoned` counts these sends, so that a test can
                wait for it before it sends the next request. The next request on that
                connection, if one comes, is read and not answered: should the gateway take
                the unasked response for its answer, the connection is in step again
  ihcl_long     binary answer whose Inference-Header-Content-Length is past the body's end
  ihcl_short    binary answer whose Inference-Header-Content-Length cuts the JSON header
  bds_long      binary answer whose binary_data_size is larger than the binary section
  bds_short     binary answer whose binary_data_size is smaller than the binary section
  status_500    a correct KServe error answer: 500 {"error": ERROR_TEXT}
Two more, outside the fault table (a large binary answer's own tests use them):
  ok_empty      as ok, with one more output after OUTPUT0, EMPTY (INT8, shape [0])
  reset_binary  a binary answer's whole head, half its body, then RST (reset_body's JSON
                answer otherwise)

gRPC faults (GRPC_FAULTS), after the whole request (END_STREAM) has arrived:
  ok            HEADERS, one message (the echo), trailers grpc-status 0
  rst           RST_STREAM (INTERNAL_ERROR), nothing else
  rst_mid       HEADERS, half a message, RST_STREAM (INTERNAL_ERROR)
  no_status     HEADERS, then END_STREAM on an empty DATA frame: no message, no grpc-status
  no_message    HEADERS, then trailers grpc-status 0: a unary call answered with no message
  garbage       HEADERS, a correctly length-prefixed message of bytes that are no protobuf
                (GARBAGE), trailers grpc-status 0
  bad_frame     HEADERS, a DATA frame that is no gRPC framing (compressed flag 0x7f), trailers 0
  prefix_long   HEADERS, a length prefix 100 bytes longer than the message that follows,
                trailers grpc-status 0
  prefix_short  HEADERS, a length prefix 3 bytes shorter than the message that follows,
                trailers grpc-status 0
  html          HEADERS with content-type text/html, an HTML body, END_STREAM
  stall         nothing on the stream; the connection keeps serving others
  goaway        GOAWAY (NO_ERROR, naming this stream as processed), then the connection closed
  tcp_reset     the TCP connection reset (RST) under the stream
  status        trailers-only answer: grpc-status 9 (FAILED_PRECONDITION), grpc-message
                ERROR_TEXT
  unavailable   trailers-only answer: grpc-status 14 (UNAVAILABLE), grpc-message ERROR_TEXT
  status_after  HEADERS, the whole message (the echo), then trailers grpc-status 13
                (INTERNAL), grpc-message ERROR_TEXT: an error told after the answer's bytes
One more, outside the fault table (the binary relay's own test uses it):
  misframed     HEADERS, then the first half of an answer whose head lays out OUTPUT0 (the
                echo's shape) and OUTPUT1 (FP32 [1, 1]) but whose first raw entry is 4
                bytes short and the second 4 bytes long (the message's size as the head
                says), then nothing: the stream stays open until the gateway resets it
A gRPC fault name may end in "_empty" ("ok_empty", "status_after_empty"): the echo then has
one more output after OUTPUT0, EMPTY (INT8, shape [0]), whose raw entry is the message's last
two bytes.

hold(timeout): the next ok, rst_mid or status_after answer stops after HEADERS and the first
half of its message until release() (or `timeout` seconds), then goes on as its fault says
(over HTTP: the next binary ok, ok_empty or reset_binary answer, after its head and half its
tensor bytes);
`held` records, per hold, whether release() came first. A test thereby learns whether the
gateway began its client's answer before the upstream's message was whole. disarm() drops
a hold no answer took.

`requests` counts the requests each fault got, per listener ("http", "grpc"), so a test
can tell that a fault reached the upstream; `resets` the RST_STREAMs the gRPC listener got;
`connections` counts accepted connections;
sent(fault) is the last HTTP answer a correctly framed fault sent (status, headers, body:
what a gateway that relays answers as they are must hand its client).
"""
import json
import os
import socket
import struct
import sys
import threading
import time

import h2.config
import h2.connection
import h2.errors
import h2.events

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)
import grpc_stubs  # noqa: E402  (the stubs are generated at run time)

HTTP_FAULTS = ("ok", "close", "rst", "reset_head", "reset_body", "stall", "garbage", "html",
               "truncated", "truncated_large", "bad_chunk", "chunk_crlf", "excess", "excess_late", "ihcl_long",
               "ihcl_short", "bds_long", "bds_short", "status_500")
GRPC_FAULTS = ("ok", "rst", "rst_mid", "no_status", "no_message", "garbage", "bad_frame",
               "prefix_long", "prefix_short", "html", "stall", "goaway", "tcp_reset", "status",
               "unavailable", "status_after")

GARBAGE = b"\x07\x00this is not a protobuf message\xff\xff\xff"
HTTP_GARBAGE = b"\x16\x03\x01\x00\xa5garbage where an HTTP response belongs\x00\xff\r\n\r\n"
HTML = b"<html><body><h1>502 Bad Gateway</h1><p>a load balancer page</p></body></html>"
ERROR_TEXT = "fault injected: the upstream refuses this request"
POISON_VALUE = 666
LARGE_PADDING = 4 << 20

# struct formats of the fixed-size KServe datatypes.
FORMATS = {"BOOL": "?", "INT8": "b", "INT16": "h", "INT32": "i", "INT64": "q", "UINT8": "B",
           "UINT16": "H", "UINT32": "I", "UINT64": "Q", "FP32": "f", "FP64": "d"}


def fault_of(model):
    """The fault a model name asks for: the text after its first "_" (or the whole name)."""
    return model.split("_", 1)[1] if "_" in model else model


def reset(sock):
    """Closes `sock` with an RST rather than a FIN."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    sock.close()


def drain_until_closed(sock):
    """Reads and drops whatever comes until the peer closes (or the socket is shut down)."""
    try:
        while sock.recv(65536):
            pass
    except OSError:
        pass


# ---- the answer of model "ok" ---------------------------------------------------------------

def flat(data):
    if isinstance(data, list):
        out = []
        for d in data:
            out.extend(flat(d))
        return out
    return [data]


def echo_outputs(model, inputs):
    """The KServe v2 JSON answer (a dict) echoing the first input as OUTPUT0: `inputs` is
    [(name, datatype, shape, values)]."""
    name, datatype, shape, values = inputs[0]
    return {"model_name": model, "model_version": "1",
            "outputs": [{"name": "OUTPUT0", "datatype": datatype, "shape": shape, "data": values}]}


def as_binary(answer):
    """(json header bytes, binary section) of `answer` with every output as a binary tensor."""
    header = {k: v for k, v in answer.items() if k != "outputs"}
    blobs, outputs = [], []
    for out in answer["outputs"]:
        blob = struct.pack("<%d%s" % (len(out["data"]), FORMATS[out["datatype"]]), *out["data"])
        blobs.append(blob)
        outputs.append({"name": out["name"], "datatype": out["datatype"], "shape": out["shape"],
                        "parameters": {"binary_data_size": len(blob)}})
    header["outputs"] = outputs
    return json.dumps(header).encode(), b"".join(blobs)


def decode_http_infer(headers, body):
    """(inputs, wants binary outputs) of an /infer body, JSON or with binary tensors."""
    ihcl = headers.get("inference-header-content-length")
    json_size = int(ihcl) if ihcl is not None else len(body)
    request = json.loads(body[:json_size])
    offset = json_size
    inputs = []
    for tensor in request.get("inputs", []):
        shape = tensor["shape"]
        size = (tensor.get("parameters") or {}).get("binary_data_size")
        if size is not None:
            blob = body[offset:offset + size]
            offset += size
            fmt = FORMATS[tensor["datatype"]]
            values = list(struct.unpack("<%d%s" % (size // struct.calcsize(fmt), fmt), blob))
        else:
            values = flat(tensor["data"])
        inputs.append((tensor["name"], tensor["datatype"], shape, values))
    binary = bool((request.get("parameters") or {}).get("binary_data_output"))
    for out in request.get("outputs", []) or []:
        binary = binary or bool((out.get("parameters") or {}).get("binary_data"))
    return inputs, binary


def http_response(status, headers, body):
    head = ["HTTP/1.1 %d %s" % (status, {200: "OK", 500: "Internal Server Error"}.get(status, "X"))]
    head += ["%s: %s" % (k, v) for k, v in headers]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def poison_response():
    """A whole HTTP response that no request asked for, with a wrong answer in it."""
    body = json.dumps({"model_name": "poison", "model_version": "1", "outputs": [
        {"name": "OUTPUT0", "datatype": "INT32", "shape": [1], "data": [POISON_VALUE]}]}).encode()
    return http_response(200, [("Content-Type", "application/json"),
                               ("Content-Length", len(body))], body)


class FaultyUpstream:
    def __init__(self):
        self.pb = grpc_stubs.load()[0]
        self.lock = threading.Lock()
        self.requests = {"http": {}, "grpc": {}}
        self.connections = {"http": 0, "grpc": 0, "refuse": 0}
        self.resets = {"grpc": 0}
        self.poisoned = 0
        self.answers = {}  # HTTP fault -> (status, {lower-case name: value}, body) last sent
        self.listeners = {}
        self.open_sockets = set()
        self.threads = []
        self.stopping = False
        self._hold = None  # (threading.Event, timeout) armed by hold(), until an answer takes it
        self._release = None  # the last hold's event
        self.held = []     # per hold: released before its timeout
        self._holding = 0  # holds taken and not yet recorded in `held`

    def hold(self, timeout):
        """Arms a hold of the next ok / rst_mid / status_after gRPC answer (see the top)."""
        with self.lock:
            self._hold = (threading.Event(), timeout)
            self._release = self._hold[0]

    def disarm(self):
        """Drops a hold no answer took, and ends the last one: once this returns, every hold
        taken is recorded in `held` (the next test's count starts after it)."""
        with self.lock:
            self._hold = None
        self.release()
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            with self.lock:
                if self._holding == 0:
                    return
            time.sleep(0.005)

    def release(self):
        """Ends the last hold armed (whether or not an answer took it yet)."""
        with self.lock:
            event = self._release
        if event is not None:
            event.set()

    # ---- life cycle --------------------------------------------------------------------
    def start(self):
        for name, serve in (("http", self._serve_http), ("grpc", self._serve_grpc),
                            ("refuse", None)):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(("127.0.0.1", 0))
            sock.listen(128)
            self.listeners[name] = sock
            self._spawn(self._accept_loop, name, sock, serve)
        return self

    def address(self, listener):
        return "127.0.0.1:%d" % self.listeners[listener].getsockname()[1]

    def stop(self):
        """Closes the listeners and every connection; joins every thread."""
        self.stopping = True
        for sock in self.listeners.values():
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()
        with self.lock:
            live = list(self.open_sockets)
        for sock in live:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        for t in list(self.threads):
            t.join(timeout=10)

    def count(self, listener, fault):
        with self.lock:
            return self.requests[listener].get(fault, 0)

    def sent(self, fault):
        with self.lock:
            return self.answers.get(fault)

    def _send_http(self, conn, fault, status, headers, body, extra=b""):
        """Sends one framed answer (and `extra` bytes in the same write); remembers it."""
        with self.lock:
            self.answers[fault] = (status, {k.lower(): str(v) for k, v in headers}, body)
        conn.sendall(http_response(status, headers, body) + extra)

    def _note(self, listener, fault):
        with self.lock:
            self.requests[listener][fault] = self.requests[listener].get(fault, 0) + 1

    def _spawn(self, target, *args):
        t = threading.Thread(target=target, args=args, daemon=True)
        with self.lock:
            self.threads = [x for x in self.threads if x.is_alive()]
            self.threads.append(t)
        t.start()

    def _accept_loop(self, name, listener, serve):
        while not self.stopping:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with self.lock:
                self.connections[name] += 1
            if serve is None:  # "refuse": reset before reading a byte
                reset(conn)
                continue
            with self.lock:
                self.open_sockets.add(conn)
            self._spawn(self._run_connection, conn, serve)

    def _run_connection(self, conn, serve):
        try:
            serve(conn)
        except OSError:
            pass
        finally:
            with self.lock:
                self.open_sockets.discard(conn)
            try:
                conn.close()
            except OSError:
                pass

    # ---- HTTP/1.1 ----------------------------------------------------------------------
    def _serve_http(self, conn):
        """One connection: requests in turn until a fault ends it or the peer closes."""
        buffered = b""
        owed = False  # an unasked answer was sent: the next request is taken as answered
        while True:
            while b"\r\n\r\n" not in buffered:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                buffered += chunk
            head, buffered = buffered.split(b"\r\n\r\n", 1)
            lines = head.decode("latin-1").split("\r\n")
            method, target = lines[0].split(" ")[:2]
            headers = {}
            for line in lines[1:]:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
            length = int(headers.get("content-length", "0"))
            while len(buffered) < length:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                buffered += chunk
            body, buffered = buffered[:length], buffered[length:]
            if owed:
                owed = False
                continue
            answered = self._answer_http(conn, method, target, headers, body)
            if answered is False:
                return
            owed = answered == "owed"

    def _answer_http(self, conn, method, target, headers, body):
        """Answers one request: True, False when the connection is done with, "owed" when an
        unasked answer went out after this one."""
        path = target.split("?", 1)[0]
        parts = path.strip("/").split("/")
        if method == "GET" and path in ("/v2/health/ready", "/v2/health/live"):
            conn.sendall(http_response(200, [("Content-Length", 0)], b""))
            return True
        if len(parts) < 4 or parts[:2] != ["v2", "models"] or parts[-1] != "infer":
            body = json.dumps({"error": "not served here: %s %s" % (method, path)}).encode()
            conn.sendall(http_response(404, [("Content-Type", "application/json"),
                                             ("Content-Length", len(body))], body))
            return True
        model = parts[2]
        fault = fault_of(model)
        self._note("http", fault)
        inputs, binary = decode_http_infer(headers, body)
        answer = echo_outputs(model, inputs)
        text = json.dumps(answer).encode()
        json_type = ("Content-Type", "application/json")

        if fault in ("ok", "ok_empty", "reset_binary") and binary:
            if fault == "ok_empty":
                answer["outputs"].append({"name": "EMPTY", "datatype": "INT8", "shape": [0], "data": []})
            header, blob = as_binary(answer)
            whole = http_response(200, [("Content-Type", "application/octet-stream"),
                                        ("Inference-Header-Content-Length", len(header)),
                                        ("Content-Length", len(header) + len(blob))],
                                  header + blob)
            cut = len(whole) - len(blob) // 2
            hold = self._take_hold()
            if hold is None and fault != "reset_binary":
                conn.sendall(whole)
                return True
            conn.sendall(whole[:cut])
            self._await_hold(hold)
            if fault == "reset_binary":
                reset(conn)
                return False
            conn.sendall(whole[cut:])
            return True
        if fault == "reset_binary":
            fault = "reset_body"
        if fault in ("ok", "ok_empty"):  # asked as JSON
            conn.sendall(http_response(200, [json_type, ("Content-Length", len(text))], text))
            return True
        if fault == "close":
            conn.shutdown(socket.SHUT_RDWR)
            return False
        if fault == "rst":
            reset(conn)
            return False
        if fault in ("reset_head", "reset_body"):
            whole = http_response(200, [json_type, ("Content-Length", len(text))], text)
            if fault == "reset_head":
                cut = whole.index(b"\r\n\r\n") // 2
            else:
                cut = len(whole) - len(text) // 2
            conn.sendall(whole[:cut])
            reset(conn)
            return False
        if fault in ("stall", "garbage", "bad_chunk", "chunk_crlf"):
            if fault == "garbage":
                conn.sendall(HTTP_GARBAGE)
            elif fault == "bad_chunk":
                conn.sendall(http_response(200, [json_type, ("Transfer-Encoding", "chunked")],
                                           b"zz\r\n" + text + b"\r\n0\r\n\r\n"))
            elif fault == "chunk_crlf":
                conn.sendall(http_response(200, [json_type, ("Transfer-Encoding", "chunked")],
                                           b"%x\r\n" % 4 + text + b"\r\n0\r\n\r\n"))
            # Held open: the gateway must judge from what it got (or its timeout must fire).
            drain_until_closed(conn)
            return False
        if fault == "html":
            self._send_http(conn, fault, 200, [("Content-Type", "text/html"),
                                               ("Content-Length", len(HTML))], HTML)
            return True
        if fault == "truncated":
            whole = http_response(200, [json_type, ("Content-Length", len(text))], text)
            conn.sendall(whole[:len(whole) - len(text) // 2])
            conn.shutdown(socket.SHUT_RDWR)
            return False
        if fault == "truncated_large":
            length = len(text) + LARGE_PADDING
            conn.sendall(http_response(200, [json_type, ("Content-Length", length)], b""))
            conn.sendall(text + b" " * (length // 2 - len(text)))
            conn.shutdown(socket.SHUT_RDWR)
            return False
        if fault == "excess":
            self._send_http(conn, fault, 200, [json_type, ("Content-Length", len(text))], text,
                            extra=poison_response())
            drain_until_closed(conn)
            return False
        if fault == "excess_late":
            self._send_http(conn, fault, 200, [json_type, ("Content-Length", len(text))], text)
            # Late on purpose (part of the fault, not a synchronisation): the gateway has
            # read its answer by then, and the unasked response sits on a pooled connection.
            threading.Event().wait(0.2)
            try:
                conn.sendall(poison_response())
            finally:
                with self.lock:
                    self.poisoned += 1
            return "owed"
        if fault in ("ihcl_long", "ihcl_short", "bds_long", "bds_short"):
            header, blob = as_binary(answer)
            if fault.startswith("bds"):
                size = len(blob) + (8 if fault == "bds_long" else -2)
                wrong = json.loads(header)
                wrong["outputs"][0]["parameters"]["binary_data_size"] = size
                header = json.dumps(wrong).encode()
            ihcl = len(header)
            if fault == "ihcl_long":
                ihcl = len(header) + len(blob) + 16
            elif fault == "ihcl_short":
                ihcl = len(header) // 2
            self._send_http(conn, fault, 200, [("Content-Type", "application/octet-stream"),
                                               ("Inference-Header-Content-Length", ihcl),
                                               ("Content-Length", len(header) + len(blob))],
                            header + blob)
            return True
        if fault == "status_500":
            error = json.dumps({"error": ERROR_TEXT}).encode()
            self._send_http(conn, fault, 500, [json_type, ("Content-Length", len(error))], error)
            return True
        error = json.dumps({"error": "unknown fault '%s'" % fault}).encode()
        conn.sendall(http_response(400, [json_type, ("Content-Length", len(error))], error))
        return True

    # ---- gRPC over HTTP/2 ----------------------------------------------------------------
    def _serve_grpc(self, sock):
        conn = h2.connection.H2Connection(config=h2.config.H2Configuration(
            client_side=False, header_encoding="utf-8", validate_inbound_headers=False))
        conn.initiate_connection()
        sock.sendall(conn.data_to_send())
        bodies = {}
        while True:
            data = sock.recv(65536)
            if not data:
                return
            for event in conn.receive_data(data):
                if isinstance(event, h2.events.RequestReceived):
                    bodies[event.stream_id] = {"headers": dict(event.headers), "data": b""}
                elif isinstance(event, h2.events.DataReceived):
                    if event.stream_id in bodies:
                        bodies[event.stream_id]["data"] += event.data
                    conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                elif isinstance(event, h2.events.StreamEnded) and event.stream_id in bodies:
                    request = bodies.pop(event.stream_id)
                    if not self._answer_grpc(sock, conn, event.stream_id, request):
                        return
                elif isinstance(event, h2.events.StreamReset):
                    bodies.pop(event.stream_id, None)
                    with self.lock:
                        self.resets["grpc"] += 1
                elif isinstance(event, h2.events.ConnectionTerminated):
                    sock.sendall(conn.data_to_send())
                    return
            sock.sendall(conn.data_to_send())

    def _answer_grpc(self, sock, conn, stream_id, request):
        """Answers one call; False when the connection is done with."""
        path = request["headers"].get(":path", "")
        ok_head = [(":status", "200"), ("content-type", "application/grpc")]
        data = request["data"]
        if path != "/inference.GRPCInferenceService/ModelInfer" or len(data) < 5:
            conn.send_headers(stream_id, ok_head + [("grpc-status", "12"), (
                "grpc-message", "not served here: %s" % path)], end_stream=True)
            return True
        length = struct.unpack(">I", data[1:5])[0]
        message = self.pb.ModelInferRequest.FromString(data[5:5 + length])
        fault = fault_of(message.model_name)
        self._note("grpc", fault)
        empty_tail = fault.endswith("_empty")
        fault = fault[:-len("_empty")] if empty_tail else fault
        answer = self._grpc_echo(message, empty_tail).SerializeToString()
        framed = b"\x00" + struct.pack(">I", len(answer)) + answer
        ok_trailers = [("grpc-status", "0")]

        if fault in ("ok", "rst_mid", "status_after"):
            conn.send_headers(stream_id, ok_head)
            half = len(framed) // 2
            self._send_data(sock, conn, stream_id, framed[:half])
            self._wait_hold(sock, conn)
            if fault == "rst_mid":
                conn.reset_stream(stream_id, h2.errors.ErrorCodes.INTERNAL_ERROR)
            else:
                self._send_data(sock, conn, stream_id, framed[half:])
                conn.send_headers(stream_id, ok_trailers if fault == "ok" else [
                    ("grpc-status", "13"), ("grpc-message", ERROR_TEXT)], end_stream=True)
        elif fault == "misframed":
            conn.send_headers(stream_id, ok_head)
            misframed = self._grpc_echo(message)
            misframed.outputs.add(name="OUTPUT1", datatype="FP32", shape=[1, 1])
            raw = misframed.raw_output_contents[0]
            misframed.raw_output_contents[0] = raw[:-4]
            misframed.raw_output_contents.append(raw[-4:] + bytes(4))
            body = misframed.SerializeToString()
            framed = b"\x00" + struct.pack(">I", len(body)) + body
            self._send_data(sock, conn, stream_id, framed[:len(framed) // 2])
        elif fault == "rst":
            conn.reset_stream(stream_id, h2.errors.ErrorCodes.INTERNAL_ERROR)
        elif fault == "no_status":
            conn.send_headers(stream_id, ok_head)
            conn.send_data(stream_id, b"", end_stream=True)
        elif fault == "no_message":
            conn.send_headers(stream_id, ok_head)
            conn.send_headers(stream_id, ok_trailers, end_stream=True)
        elif fault in ("garbage", "bad_frame", "prefix_long", "prefix_short"):
            body = {"garbage": b"\x00" + struct.pack(">I", len(GARBAGE)) + GARBAGE,
                    "bad_frame": b"\x7f" + GARBAGE,
                    "prefix_long": b"\x00" + struct.pack(">I", len(answer) + 100) + answer,
                    "prefix_short": b"\x00" + struct.pack(">I", len(answer) - 3) + answer}[fault]
            conn.send_headers(stream_id, ok_head)
            conn.send_data(stream_id, body)
            conn.send_headers(stream_id, ok_trailers, end_stream=True)
        elif fault == "html":
            conn.send_headers(stream_id, [(":status", "200"), ("content-type", "text/html")])
            conn.send_data(stream_id, HTML, end_stream=True)
        elif fault == "stall":
            pass
        elif fault == "goaway":
            conn.close_connection(error_code=h2.errors.ErrorCodes.NO_ERROR,
                                  last_stream_id=stream_id)
            sock.sendall(conn.data_to_send())
            sock.shutdown(socket.SHUT_RDWR)
            return False
        elif fault == "tcp_reset":
            sock.sendall(conn.data_to_send())
            reset(sock)
            return False
        elif fault in ("status", "unavailable"):
            code = "9" if fault == "status" else "14"
            conn.send_headers(stream_id, ok_head + [("grpc-status", code),
                                                    ("grpc-message", ERROR_TEXT)], end_stream=True)
        else:
            conn.send_headers(stream_id, ok_head + [("grpc-status", "3"), (
                "grpc-message", "unknown fault '%s'" % fault)], end_stream=True)
        return True

    @staticmethod
    def _send_data(sock, conn, stream_id, data):
        """`data` on the stream in frames the peer accepts (its windows are the gateway's,
        HTTP/2's largest), written to the socket as they are made."""
        step = conn.max_outbound_frame_size
        for at in range(0, len(data), step):
            conn.send_data(stream_id, data[at:at + step])
            if at % (64 * step) == 0:
                sock.sendall(conn.data_to_send())

    def _take_hold(self):
        """The hold armed by hold(), taken by this answer; None when none is armed."""
        with self.lock:
            hold, self._hold = self._hold, None
            if hold is not None:
                self._holding += 1
        return hold

    def _await_hold(self, hold):
        """Waits out a hold taken (release() or its timeout) and records which came first."""
        if hold is None:
            return
        released = hold[0].wait(hold[1])
        with self.lock:
            self.held.append(released)
            self._holding -= 1

    def _wait_hold(self, sock, conn):
        """A hold armed by hold(): what was made so far goes out, then the wait."""
        hold = self._take_hold()
        if hold is None:
            return
        sock.sendall(conn.data_to_send())
        self._await_hold(hold)

    def _grpc_echo(self, request, empty_tail=False):
        response = self.pb.ModelInferResponse(model_name=request.model_name, model_version="1",
                                              id=request.id)
        if request.inputs:
            tensor = request.inputs[0]
            out = response.outputs.add()
            out.name, out.datatype = "OUTPUT0", tensor.datatype
            out.shape.extend(tensor.shape)
            if request.raw_input_contents:
                response.raw_output_contents.append(request.raw_input_contents[0])
            else:
                out.contents.CopyFrom(tensor.contents)
            if empty_tail and request.raw_input_contents:
                empty = response.outputs.add()
                empty.name, empty.datatype = "EMPTY", "INT8"
                empty.shape.append(0)
                response.raw_output_contents.append(b"")
        return response


def main():
    upstream = FaultyUpstream().start()
    print(json.dumps({"event": "ready", **{k: upstream.address(k) for k in upstream.listeners}}),
          flush=True)
    sys.stdin.read()  # serves until stdin closes
    upstream.stop()


if __name__ == "__main__":
    main()
