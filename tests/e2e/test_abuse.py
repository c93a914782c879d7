"""End-to-end: abuse limits of a real infergate. Slow clients (slowloris), a client that
never reads its answer, connections past the per-client cap, a gzip bomb, oversize
bodies, deep JSON, and tensors past the count, rank and element limits, over HTTP and
gRPC. After each the gateway still serves, and at the end it exits cleanly without
sanitizer reports.

The assertions are about outcomes (answered, refused, closed, how much memory), never
about how fast."""
import gzip
import json
import resource
import select
import socket
import ssl
import struct
import threading
import time
import unittest
import zlib

import grpc
import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.settings

import grpc_stubs
from harness import LOOPBACK_HEAD, Gateway, Processes, read_until_closed, small_asan_quarantine, wait_until
from pki import Pki

LIMITS = """
limits:
  header_timeout_ms: 2000
  max_input_bytes: 1048576
  max_binary_body_bytes: 4194304
  max_grpc_message_bytes: 4194304
  max_tensors: 8
  max_tensor_rank: 8
  max_tensor_elements: 1048576
  max_json_depth: 32
"""

# Every model to the builtin ones.
TO_BUILTIN = """
upstreams:
  - name: demo
    protocol: builtin
routes:
  - match: { model: "*" }
    upstream: demo
"""

BUILTIN = LOOPBACK_HEAD + LIMITS + "$extra" + TO_BUILTIN

# In front of another infergate over HTTP: an inference body is forwarded undecoded.
PASSTHROUGH = LOOPBACK_HEAD + LIMITS + """
upstreams:
  - name: remote
    protocol: http
    endpoints: ["$upstream"]
routes:
  - match: { model: "*" }
    upstream: remote
"""

P = None
GW = None


def setUpModule():
    global P, GW
    # A thousand client sockets and the gateways' own.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 8192)), hard))
    P = Processes()
    GW = P.start("A", Gateway.from_template(BUILTIN, extra=""))


def tearDownModule():
    grpc_stubs.close_channels()
    problems = P.stop_all()
    assert not problems, "\n".join(problems)


def simple(inputs=None, parameters=None):
    body = {"inputs": inputs if inputs is not None else [
        {"name": "INPUT0", "shape": [1, 16], "datatype": "INT32", "data": list(range(16))},
        {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32", "data": [1] * 16}]}
    if parameters is not None:
        body["parameters"] = parameters
    return json.dumps(body).encode()


def infer(g, body, headers=None):
    return g.request("POST", "/v2/models/simple/infer", body, headers or {})


def metric(g, name, labels=None):
    """The value of the sample `name` with `labels` (a dict) on g's /metrics."""
    _, _, text = g.request("GET", "/metrics", listener="metrics")
    for line in text.decode().splitlines():
        sample, _, value = line.rpartition(" ")
        if sample.split("{")[0] == name and all(
                '%s="%s"' % kv in sample for kv in (labels or {}).items()):
            return float(value)
    raise AssertionError("no %s %s on /metrics" % (name, labels or ""))


def memory_bytes(g, field):
    """A figure of the gateway's /proc/PID/status: "VmHWM" (its peak RSS) or "VmRSS"."""
    with open("/proc/%d/status" % g.proc.pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no %s for the gateway" % field)


def peak_rss_bytes(g):
    return memory_bytes(g, "VmHWM")


def steady_peak_rss_bytes(g):
    """g's peak RSS once it has stopped growing (the same for a second), or after 20 s."""
    last, steady = -1, 0
    deadline = time.monotonic() + 20
    while steady < 10 and time.monotonic() < deadline:
        time.sleep(0.1)
        now = peak_rss_bytes(g)
        steady = steady + 1 if now == last else 0
        last = now
    return peak_rss_bytes(g)


def identity_fp32_binary(values, binary_output=False):
    """A whole HTTP request: `values` (FP32 bytes) as identity_fp32's INPUT0 in the binary
    extension, OUTPUT0 asked as binary with `binary_output` (JSON otherwise)."""
    body = {"inputs": [{"name": "INPUT0", "shape": [1, len(values) // 4], "datatype": "FP32",
                        "parameters": {"binary_data_size": len(values)}}]}
    if binary_output:
        body["outputs"] = [{"name": "OUTPUT0", "parameters": {"binary_data": True}}]
    header = json.dumps(body).encode()
    head = ("POST /v2/models/identity_fp32/infer HTTP/1.1\r\nHost: x\r\n"
            "Content-Type: application/octet-stream\r\n"
            "Inference-Header-Content-Length: %d\r\nContent-Length: %d\r\n\r\n"
            % (len(header), len(header) + len(values))).encode()
    return head + header + values


def slow_reader(g, receive_buffer, timeout):
    """A socket connected to g's HTTP listener with a receive buffer of `receive_buffer`
    bytes: a client whose reading the test decides."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    s.settimeout(timeout)
    s.connect(("127.0.0.1", g.port("http")))
    return s


class Base(unittest.TestCase):
    def assertServes(self, g=None):
        g = g or GW
        status, _, body = infer(g, simple())
        self.assertEqual(status, 200, body)
        outputs = {o["name"]: o["data"] for o in json.loads(body)["outputs"]}
        self.assertEqual(outputs["OUTPUT0"], [i + 1 for i in range(16)])

    def assertError(self, answer, status, fragment):
        code, _, body = answer
        self.assertEqual(code, status, body[:300])
        self.assertIn(fragment, json.loads(body)["error"])


class SlowClients(Base):
    def test_a_thousand_trickling_connections_do_not_stop_a_normal_client(self):
        slow = []
        try:
            for _ in range(1000):
                s = socket.create_connection(("127.0.0.1", GW.port("http")), timeout=10)
                s.sendall(b"POST /v2/models/simple/infer HTTP/1.1\r\nHost: slow\r\n")
                slow.append(s)
            stop = threading.Event()

            def trickle():  # one header byte per connection, round after round
                while not stop.is_set():
                    for s in slow:
                        try:
                            s.send(b"X")
                        except OSError:
                            pass
                    stop.wait(0.2)

            trickler = threading.Thread(target=trickle, daemon=True)
            trickler.start()
            try:
                # While they hang, a normal client is answered, on new connections and on
                # a kept-alive one.
                for _ in range(10):
                    self.assertServes()
                conn = GW.connection()
                for _ in range(10):
                    conn.request("POST", "/v2/models/simple/infer", simple())
                    response = conn.getresponse()
                    self.assertEqual(response.status, 200)
                    response.read()
                conn.close()
            finally:
                stop.set()
                trickler.join()
            # header_timeout_ms (2 s) ends each: a 408 and the close (or, when the
            # trickle's next byte crossed the close, a reset).
            poller = select.poll()
            for s in slow:
                poller.register(s, select.POLLIN)

            def all_ended():
                return len(poller.poll(500)) == len(slow)
            self.assertTrue(wait_until(all_ended, timeout=60), "slow connections still open")
            replies = []
            for s in slow:
                try:
                    replies.append(s.recv(4096))
                except ConnectionResetError:
                    replies.append(b"reset")
            odd = [r[:80] for r in replies if not (r.startswith(b"HTTP/1.1 408") or r == b"reset")]
            self.assertEqual(odd, [])
        finally:
            for s in slow:
                s.close()
        self.assertTrue(wait_until(lambda: metric(GW, "infergate_http_open_connections") <= 1))
        self.assertServes()


class PerClientCap(Base):
    @classmethod
    def setUpClass(cls):
        cls.g = P.start("C", Gateway.from_template(
            BUILTIN, extra="  max_connections_per_client: 20"))

    @classmethod
    def tearDownClass(cls):
        P.stop(cls.g)

    def connect(self, source="127.0.0.1"):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(10)
        s.bind((source, 0))
        s.connect(("127.0.0.1", self.g.port("http")))
        return s

    @staticmethod
    def ask(s):
        """One keep-alive health request on `s`: its reply, b"" when the peer closed."""
        try:
            s.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n")
            return s.recv(4096)
        except (ConnectionResetError, BrokenPipeError):
            return b""

    def test_connections_past_the_cap_are_closed_and_other_clients_served(self):
        held = [self.connect() for _ in range(20)]
        try:
            for s in held:  # each answered: accepted and counted
                self.assertTrue(self.ask(s).startswith(b"HTTP/1.1 200"))
            extra = self.connect()
            self.assertEqual(self.ask(extra), b"", "the 21st connection was served")
            extra.close()
            refused = metric(self.g, "infergate_http_connections_refused_total",
                             {"limit": "max_connections_per_client"})
            self.assertGreaterEqual(refused, 1)
            # Another client address is not affected.
            other = self.connect("127.0.0.2")
            self.assertTrue(self.ask(other).startswith(b"HTTP/1.1 200"))
            other.close()
            # One closed frees a place.
            held.pop().close()

            def served_again():
                s = self.connect()
                try:
                    return self.ask(s).startswith(b"HTTP/1.1 200")
                finally:
                    s.close()
            self.assertTrue(wait_until(served_again))
        finally:
            for s in held:
                s.close()
        self.assertTrue(wait_until(lambda: metric(self.g, "infergate_http_open_connections") <= 1))
        self.assertServes(self.g)

    def test_grpc_connections_past_the_cap_are_closed_too(self):
        preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\0\0\0\4\0\0\0\0\0"  # + empty SETTINGS

        def open_h2():
            """A connection that spoke HTTP/2; the server's first bytes, b"" when it closed."""
            s = socket.create_connection(("127.0.0.1", self.g.port("grpc")), timeout=10)
            try:
                s.sendall(preface)
                return s, s.recv(4096)
            except (ConnectionResetError, BrokenPipeError):
                return s, b""
        held = []
        try:
            for _ in range(20):  # each answered with the server's SETTINGS: accepted
                s, first = open_h2()
                held.append(s)
                self.assertNotEqual(first, b"")
            extra, first = open_h2()
            extra.close()
            self.assertEqual(first, b"", "the 21st gRPC connection was served")
            self.assertGreaterEqual(metric(self.g, "infergate_grpc_connections_refused_total",
                                          {"limit": "max_connections_per_client"}), 1)
            self.assertEqual(metric(self.g, "infergate_grpc_open_connections"), 20)
        finally:
            for s in held:
                s.close()
        self.assertTrue(wait_until(lambda: metric(self.g, "infergate_grpc_open_connections") == 0))
        stub = grpc_stubs.stub_of(self.g)
        code, _ = grpc_stubs.grpc_outcome(lambda: stub.ModelInfer(grpc_stubs.simple_infer_request()))
        self.assertEqual(code, "ok")


class Streams(Base):
    def test_answers_a_stream_client_has_not_read_are_bounded_and_shown(self):
        # 24 requests of 1 MiB, each answered with 1 MiB, from a client that reads nothing at
        # first: the answers that wait in the gateway (up to its bound: 4 MiB, then it takes
        # no more requests) show in infergate_grpc_stream_answer_bytes, which returns to 0
        # once the client has read them all.
        pb = grpc_stubs.load()[0]
        stub = grpc_stubs.stub_of(GW)
        elements = 256 * 1024
        payload = b"\0\0\xc0\x3f" * elements  # 1.5f

        def requests():
            for i in range(24):
                r = pb.ModelInferRequest(model_name="identity_fp32", id=str(i))
                r.inputs.add(name="INPUT0", datatype="FP32", shape=[1, elements])
                r.raw_input_contents.append(payload)
                yield r
        answers = stub.ModelStreamInfer(requests())
        try:
            waiting = lambda: metric(GW, "infergate_grpc_stream_answer_bytes")  # noqa: E731
            self.assertTrue(wait_until(lambda: waiting() >= 1 << 20), waiting())
            self.assertLess(waiting(), 16 << 20)
            ids = [a.infer_response.id for a in answers]
        finally:
            answers.cancel()
        self.assertEqual(ids, [str(i) for i in range(24)])
        self.assertTrue(wait_until(lambda: waiting() == 0), waiting())
        self.assertServes()


# A gRPC listener that cuts a client off after a burst of 3 stream resets (1 a second more).
RESET_LIMITED = LOOPBACK_HEAD + "limits: { grpc_reset_burst: 3, grpc_resets_per_second: 1 }" + TO_BUILTIN


class ResetFloods(Base):
    @classmethod
    def setUpClass(cls):
        cls.g = P.start("R", Gateway.from_template(RESET_LIMITED))

    @classmethod
    def tearDownClass(cls):
        P.stop(cls.g)

    def test_a_client_resetting_streams_past_the_configured_burst_is_cut_off_and_counted(self):
        # Four calls opened, then reset at once: one more than limits.grpc_reset_burst lets
        # pass (the default, 1000, would take them). The client gets GOAWAY
        # ENHANCE_YOUR_CALM, the metric counts it, and other clients are served.
        self.assertEqual(metric(self.g, "infergate_grpc_reset_floods_total"), 0)
        s = socket.create_connection(("127.0.0.1", self.g.port("grpc")), timeout=10)
        try:
            conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
            conn.initiate_connection()
            for stream in (1, 3, 5, 7):
                conn.send_headers(stream, [(":method", "POST"), (":scheme", "http"),
                                           (":path", "/inference.GRPCInferenceService/ModelInfer"),
                                           (":authority", "localhost"), ("content-type", "application/grpc"),
                                           ("te", "trailers")])
            for stream in (1, 3, 5, 7):
                conn.reset_stream(stream, h2.errors.ErrorCodes.CANCEL)
            s.sendall(conn.data_to_send())
            goaway = None
            while goaway is None:
                data = s.recv(65536)
                if not data:
                    break
                for event in conn.receive_data(data):
                    if isinstance(event, h2.events.ConnectionTerminated):
                        goaway = event.error_code
        finally:
            s.close()
        self.assertEqual(goaway, h2.errors.ErrorCodes.ENHANCE_YOUR_CALM)
        self.assertTrue(wait_until(lambda: metric(self.g, "infergate_grpc_reset_floods_total") == 1))
        self.assertServes(self.g)
        stub = grpc_stubs.stub_of(self.g)
        pb = grpc_stubs.load()[0]
        request = pb.ModelInferRequest(model_name="identity_int32")
        request.inputs.add(name="INPUT0", datatype="INT32", shape=[1, 1])
        request.raw_input_contents.append(struct.pack("<i", 7))
        answer = stub.ModelInfer(request, timeout=10)
        self.assertEqual(answer.raw_output_contents[0], struct.pack("<i", 7))


# Clients that never read their answers: plaintext HTTP, and gRPC over TLS (the native
# server's TLS path, and the key's way from the config to it).
PLAIN_GRPC = '  grpc:    { address: "127.0.0.1:0" }'
assert PLAIN_GRPC in LOOPBACK_HEAD
STALLED = (LOOPBACK_HEAD.replace(
    PLAIN_GRPC, '  grpc:    { address: "127.0.0.1:0", tls: { cert: "$cert", key: "$key" } }')
    + "limits: { send_timeout_ms: 500 }" + TO_BUILTIN)


class StalledReaders(Base):
    @classmethod
    def setUpClass(cls):
        cls.pki = Pki()
        cls.pki.issue("server")
        cls.g = P.start("S", Gateway.from_template(STALLED, cert=cls.pki.cert("server"),
                                                   key=cls.pki.key("server")))

    @classmethod
    def tearDownClass(cls):
        P.stop(cls.g)
        cls.pki.cleanup()

    def test_a_grpc_client_over_tls_that_reads_none_of_its_reply_is_disconnected(self):
        # One ModelInfer of 8 MiB each way on a raw HTTP/2 connection (windows opened wide,
        # a small receive buffer) whose client stops reading once its request is sent.
        n = 2 << 20
        pb = grpc_stubs.load()[0]
        request = pb.ModelInferRequest(model_name="identity_fp32")
        request.inputs.add(name="INPUT0", datatype="FP32", shape=[1, n])
        request.raw_input_contents.append(b"\0\0\xc0\x3f" * n)  # 1.5f
        message = request.SerializeToString()
        body = b"\0" + struct.pack(">I", len(message)) + message
        context = ssl.create_default_context(cafile=self.pki.ca)
        context.set_alpn_protocols(["h2"])
        raw = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
        raw.settimeout(10)
        raw.connect(("127.0.0.1", self.g.port("grpc")))
        s = context.wrap_socket(raw, server_hostname="localhost")
        try:
            conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
            conn.initiate_connection()
            conn.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 2**31 - 1})
            conn.increment_flow_control_window(2**31 - 1 - 65535)
            conn.send_headers(1, [(":method", "POST"), (":scheme", "https"),
                                  (":path", "/inference.GRPCInferenceService/ModelInfer"),
                                  (":authority", "localhost"), ("content-type", "application/grpc"),
                                  ("te", "trailers")])
            s.sendall(conn.data_to_send())
            sent = 0
            while sent < len(body):  # within the windows the server gives
                room = min(conn.local_flow_control_window(1), conn.max_outbound_frame_size)
                if room == 0:
                    conn.receive_data(s.recv(65536))
                else:
                    piece = body[sent:sent + room]
                    sent += len(piece)
                    conn.send_data(1, piece, end_stream=sent == len(body))
                s.sendall(conn.data_to_send())
            timeouts = lambda: metric(self.g, "infergate_grpc_send_timeouts_total")  # noqa: E731
            self.assertEqual(wait_until(lambda: timeouts() == 1), True, timeouts())
        finally:
            s.close()
        self.assertEqual(metric(self.g, "infergate_grpc_open_connections"), 0)
        self.assertServes(self.g)

    def test_a_client_that_reads_none_of_its_answer_is_disconnected_and_counted(self):
        # A 4 MB binary request whose answer, in JSON, is about 10 MB: far past what the
        # sockets hold for a client with a small receive buffer that reads nothing. Past
        # send_timeout_ms the gateway closes the connection and counts it.
        n = 1000000
        values = struct.pack("<%df" % n, *[(i % 1000) / 7.0 for i in range(n)])
        grpc_before = metric(self.g, "infergate_grpc_send_timeouts_total")
        s = slow_reader(self.g, 16384, 10)
        try:
            s.sendall(identity_fp32_binary(values))
            timeouts = lambda: metric(self.g, "infergate_http_send_timeouts_total")  # noqa: E731
            self.assertEqual(wait_until(lambda: timeouts() == 1), True, timeouts())
            received = read_until_closed(s)
        finally:
            s.close()
        self.assertTrue(received.startswith(b"HTTP/1.1 200"), received[:100])
        self.assertLess(len(received), 8 << 20)  # what the kernel held, not the answer
        self.assertEqual(metric(self.g, "infergate_grpc_send_timeouts_total"), grpc_before)
        self.assertServes(self.g)


# Room for one large tensor, on both sides of a passthrough.
BIG_LIMITS = """
limits: { max_binary_body_bytes: 268435456, max_input_bytes: 268435456 }
"""


class SlowDownloads(Base):
    """A large passthrough answer toward a client that reads slowly: the gateway holds a
    window of it, not all of it, and the upstream waits (TCP) for the client."""

    @classmethod
    def setUpClass(cls):
        cls.u = P.start("BU", Gateway.from_template(LOOPBACK_HEAD + BIG_LIMITS + TO_BUILTIN))
        with small_asan_quarantine():  # its RSS is measured: freed blocks must not count
            cls.g = P.start("BG", Gateway.from_template(
                PASSTHROUGH.replace(LIMITS, BIG_LIMITS), upstream=cls.u.address("http")))

    @classmethod
    def tearDownClass(cls):
        P.stop(cls.g)
        P.stop(cls.u)

    def test_a_large_answer_to_a_client_that_stops_reading_is_held_a_window_at_a_time(self):
        # 128 MiB each way through identity_fp32. The gateway reads the request whole (it is
        # not streamed), so that much it holds anyway; the answer, relayed as it arrives,
        # must not add another 128 MiB while the client reads none of it. Then the client
        # reads everything, and it must be the tensor sent.
        size = 128 << 20
        values = bytes(range(256)) * (size // 256)
        request = identity_fp32_binary(values, binary_output=True)
        before = memory_bytes(self.g, "VmRSS")
        s = slow_reader(self.g, 65536, 60)
        try:
            s.sendall(request)
            # Until the gateway's memory stops growing (the answer has gone as far as the
            # gateway lets it without the client), or 20 s.
            grown = steady_peak_rss_bytes(self.g) - before
            # The request's 128 MiB (and ASan's shadow of it) and a few MiB more; the whole
            # answer as well would be 256 MiB and more.
            self.assertLess(grown, size * 3 // 2,
                            "the gateway's peak memory grew by %d MiB" % (grown >> 20))
            received = read_until_closed_or(s, len(request) + 4096)
        finally:
            s.close()
        end = received.index(b"\r\n\r\n") + 4
        head_text = received[:end].decode("latin-1")
        self.assertTrue(head_text.startswith("HTTP/1.1 200"), head_text)
        fields = dict(line.split(": ", 1) for line in head_text.split("\r\n")[1:] if ": " in line)
        json_length = int(fields["Inference-Header-Content-Length"])
        body = received[end:]
        self.assertEqual(len(body), int(fields["Content-Length"]))
        answer = json.loads(body[:json_length])
        self.assertEqual(answer["outputs"][0]["parameters"]["binary_data_size"], size)
        self.assertTrue(body[json_length:] == values, "the relayed tensor differs from the one sent")
        self.assertServes(self.g)


# In front of another infergate over gRPC, with room for a 128 MiB message.
GRPC_PASSTHROUGH = LOOPBACK_HEAD + """
limits: { max_grpc_message_bytes: 268435456, max_input_bytes: 268435456 }
upstreams:
  - name: remote
    protocol: grpc
    endpoints: ["$upstream"]
routes:
  - match: { model: "*" }
    upstream: remote
"""


class SlowGrpcDownloads(Base):
    """The same toward a gRPC client (a passthrough, the answer's message relayed in blocks):
    a client that gives the answer no HTTP/2 window makes the gateway hold a window of it,
    and the upstream wait for the gateway's."""

    @classmethod
    def setUpClass(cls):
        cls.u = P.start("CU", Gateway.from_template(
            LOOPBACK_HEAD + BIG_LIMITS.replace("max_binary_body_bytes", "max_grpc_message_bytes") + TO_BUILTIN))
        with small_asan_quarantine():  # its RSS is measured: freed blocks must not count
            cls.g = P.start("CG", Gateway.from_template(GRPC_PASSTHROUGH, upstream=cls.u.address("grpc")))

    @classmethod
    def tearDownClass(cls):
        P.stop(cls.g)
        P.stop(cls.u)

    def test_a_large_answer_to_a_client_that_gives_no_window_is_held_a_window_at_a_time(self):
        # 128 MiB each way through identity_fp32 on a raw HTTP/2 connection whose stream
        # window (65,535, HTTP/2's first) the client gives back only after the gateway's
        # memory stopped growing. The request, read whole, the gateway holds anyway; the
        # answer must not add another 128 MiB meanwhile. Then it must be the tensor sent.
        pb, _, _, _ = grpc_stubs.load()
        size = 128 << 20
        values = bytes(range(256)) * (size // 256)
        request = pb.ModelInferRequest(model_name="identity_fp32")
        tensor = request.inputs.add()
        tensor.name, tensor.datatype = "INPUT0", "FP32"
        tensor.shape.extend([1, size // 4])
        request.raw_input_contents.append(values)
        before = memory_bytes(self.g, "VmRSS")
        grown = []

        def wait_for_the_gateway(conn, sock, sid):
            grown.append(steady_peak_rss_bytes(self.g) - before)

        headers, data, trailers, reset = grpc_stubs.h2_model_infer(
            self.g.address("grpc"), request.SerializeToString(), wait_for_the_gateway, timeout=60)
        self.assertEqual(len(grown), 1)
        # The request's 128 MiB (and ASan's shadow of it) and a few MiB more; the whole
        # answer as well would be 256 MiB and more.
        self.assertLess(grown[0], size * 3 // 2, "the gateway's peak memory grew by %d MiB" % (grown[0] >> 20))
        self.assertIsNone(reset)
        self.assertEqual(headers.get(":status"), "200")
        self.assertEqual(trailers.get("grpc-status"), "0", trailers)
        (length,) = struct.unpack(">I", data[1:5])
        self.assertEqual(len(data), 5 + length)
        answer = pb.ModelInferResponse.FromString(data[5:])
        self.assertTrue(answer.raw_output_contents[0] == values, "the relayed tensor differs from the one sent")
        self.assertServes(self.g)


def read_until_closed_or(s, expected):
    """Reads from `s` until it closes or holds a whole answer of at most `expected` bytes
    (its head says how long); the bytes."""
    data = bytearray()
    need = None
    while need is None or len(data) < need:
        chunk = s.recv(1 << 20)
        if not chunk:
            break
        data += chunk
        if need is None and b"\r\n\r\n" in data:
            end = data.index(b"\r\n\r\n") + 4
            for line in bytes(data[:end]).decode("latin-1").split("\r\n"):
                if line.lower().startswith("content-length:"):
                    need = min(end + int(line.split(":", 1)[1]), expected)
    return bytes(data)


class Bodies(Base):
    def test_a_gzip_bomb_is_refused_at_the_limit_without_inflating_it(self):
        # 512 MiB of JSON whitespace in ~0.5 MiB of gzip; the limit is 1 MiB inflated.
        packer = zlib.compressobj(9, zlib.DEFLATED, 31)
        chunk = b" " * (1 << 20)
        bomb = packer.compress(b'{"inputs": []') + b"".join(
            packer.compress(chunk) for _ in range(512)) + packer.compress(b"}") + packer.flush()
        self.assertLess(len(bomb), 4 << 20)
        before = peak_rss_bytes(GW)
        answer = infer(GW, bomb, {"Content-Encoding": "gzip",
                                  "Content-Type": "application/json"})
        self.assertError(answer, 413, "1048576")
        grown = peak_rss_bytes(GW) - before
        self.assertLess(grown, 128 << 20, "the gateway's peak memory grew by %d bytes" % grown)
        self.assertServes()

    def test_an_announced_oversize_body_is_refused_before_it_is_sent(self):
        s = socket.create_connection(("127.0.0.1", GW.port("http")), timeout=10)
        try:
            s.sendall(b"POST /v2/models/simple/infer HTTP/1.1\r\nHost: x\r\n"
                      b"Content-Length: 5000000\r\n\r\n")
            reply = s.recv(4096)  # answered without the body
        finally:
            s.close()
        self.assertTrue(reply.startswith(b"HTTP/1.1 413"), reply[:200])
        self.assertServes()

    def test_a_chunked_body_past_the_limit_is_refused(self):
        s = socket.create_connection(("127.0.0.1", GW.port("http")), timeout=10)
        reply = b""
        try:
            s.sendall(b"POST /v2/models/simple/infer HTTP/1.1\r\nHost: x\r\n"
                      b"Transfer-Encoding: chunked\r\n\r\n")
            chunk = b"%x\r\n" % (1 << 20) + b" " * (1 << 20) + b"\r\n"
            for _ in range(8):
                try:
                    s.sendall(chunk)
                except (BrokenPipeError, ConnectionResetError):
                    break
            reply = s.recv(4096)
        except ConnectionResetError:
            pass
        finally:
            s.close()
        self.assertTrue(reply.startswith(b"HTTP/1.1 413"), reply[:200])
        self.assertServes()

    def test_a_grpc_message_past_the_limit_is_resource_exhausted(self):
        request = grpc_stubs.simple_infer_request()
        request.raw_input_contents[0] = b"\0" * (5 << 20)
        code, details = grpc_stubs.grpc_outcome(
            lambda: grpc_stubs.stub_of(GW).ModelInfer(request, timeout=30))
        self.assertEqual(code, grpc.StatusCode.RESOURCE_EXHAUSTED, details)
        ok, _ = grpc_stubs.grpc_outcome(
            lambda: grpc_stubs.stub_of(GW).ModelInfer(grpc_stubs.simple_infer_request()))
        self.assertEqual(ok, "ok")


class Structure(Base):
    def test_deep_json_is_refused_wherever_it_nests(self):
        deep = json.loads("[" * 100 + "]" * 100)
        self.assertError(infer(GW, simple(parameters={"p": deep})), 400,
                         "JSON nested deeper than 32 levels")
        text = b'{"inputs": [], "x": ' + b"[" * 400000 + b"]" * 400000 + b"}"  # < 1 MiB
        self.assertError(infer(GW, text), 400, "JSON nested deeper than 32 levels")
        self.assertServes()

    def test_deep_json_is_refused_before_a_passthrough_forwards_it(self):
        upstream = P.start("U", Gateway.builtin_upstream())
        front = P.start("F", Gateway.from_template(PASSTHROUGH,
                                                   upstream=upstream.address("http")))
        try:
            self.assertServes(front)
            text = b'{"inputs": [], "x": ' + b"[" * 5000 + b"]" * 5000 + b"}"
            self.assertError(infer(front, text), 400, "JSON nested deeper than 32 levels")
            self.assertServes(front)
        finally:
            P.stop(front)
            P.stop(upstream)

    def test_tensor_count_rank_and_elements_past_their_limits(self):
        many = [{"name": "I%d" % i, "shape": [1], "datatype": "INT32", "data": [i]}
                for i in range(9)]
        self.assertError(infer(GW, simple(inputs=many)), 413, "more than 8 inputs")
        rank = [{"name": "INPUT0", "shape": [1] * 9, "datatype": "INT32", "data": [1]}]
        self.assertError(infer(GW, simple(inputs=rank)), 413,
                         "more than the limit of 8 dimensions")
        # Binary data: the shape alone is past the element limit.
        header = json.dumps({"inputs": [{"name": "INPUT0", "shape": [1, 2097152],
                                         "datatype": "UINT8",
                                         "parameters": {"binary_data_size": 2097152}}]}).encode()
        answer = infer(GW, header + b"\0" * 2097152,
                       {"Inference-Header-Content-Length": str(len(header))})
        self.assertError(answer, 413, "more than the limit of 1048576")
        # And over gRPC.
        request = grpc_stubs.simple_infer_request()
        del request.inputs[0].shape[:]
        request.inputs[0].shape.extend([1] * 9)
        code, details = grpc_stubs.grpc_outcome(
            lambda: grpc_stubs.stub_of(GW).ModelInfer(request, timeout=30))
        self.assertEqual(code, grpc.StatusCode.RESOURCE_EXHAUSTED, details)
        self.assertIn("9 dimensions, more than the limit of 8", details)
        self.assertServes()


if __name__ == "__main__":
    unittest.main()
