"""End-to-end: upstream faults. A real infergate routes models to a fault-injecting
upstream (faulty_upstream.py, threads of this process) that misbehaves at the byte level in
one way per request; for each fault and each client path that reaches it, the client must
get the gateway's error for it (the exact HTTP status or gRPC code, a message naming the
upstream), and the gateway must go on serving.

  UP     faulty_upstream.FaultyUpstream: HTTP/1.1 and gRPC listeners, and one that resets
         every connection at accept ("refuse")
  GW     the gateway: models "http_<fault>" -> upstream f-http, "grpc_<fault>" -> f-grpc;
         http_refuse / grpc_refuse -> the resetting listener, http_down / grpc_down -> a
         port nothing listens on. Health checks, passive ejection and retries are off, so
         every fault reaches the client as it happened (and nothing is ejected). The stalls
         have a 400 ms route timeout.

Paths (PATHS):
  HH  HTTP JSON client -> HTTP upstream: passthrough; a correctly framed answer comes back
      as the upstream sent it (http_forward.cc forwardHttp / relayAnswer), so a well-framed
      but wrong body (text/html, a binary tensor whose sizes disagree) is relayed and the
      client's own decoding is what fails; broken framing is the gateway's to report
  GH  gRPC client -> HTTP upstream: the answer is decoded (http_upstream_infer.cc)
  HG  HTTP client -> gRPC upstream: the answer is decoded (decoded_forward.cc)
  GG  gRPC client -> gRPC upstream: passthrough of the message bytes; a correctly framed
      message that is no protobuf is relayed (the client's decode fails), anything that
      breaks gRPC's framing is the gateway's to report

What the gateway promises (DESIGN.md "Errors", error_mapping.h, http_client.h,
grpc_client.h): an upstream that refused or reset, or closed before a whole answer, is 503
(gRPC UNAVAILABLE); one that answered garbage or broke the protocol is 502 (UNAVAILABLE);
one that did not answer in time is 504 (DEADLINE_EXCEEDED); each message names the
upstream ("upstream 'f-http' ..."); an upstream's own error answer passes through with its
code and message. HTTP errors are {"error": "..."}.

Findings the gateway does not meet yet are in KNOWN: their test asserts the right
behaviour and must still fail (so that a fix is noticed and the entry taken out).

After the faults: the gateway's descriptors and RSS are back to the figures taken after a
warm-up pass of every fault, and it exits 0 on SIGTERM without a sanitizer report.

Run: INFERGATE_BIN=... python3 -m unittest -v test_upstream_faults
(UPSTREAM_FAULTS_TRACE=1 prints every fault's outcome, and why each known finding failed.)
"""
import functools
import http.client
import itertools
import json
import os
import socket
import struct
import sys
import threading
import time
import unittest

import grpc
import h2.errors
from google.protobuf.message import DecodeError

import faulty_upstream as F
import grpc_stubs
from grpc_stubs import MODEL_INFER, MODEL_STREAM_INFER, h2_model_infer
from harness import Gateway, Processes, free_port, small_asan_quarantine, wait_until

HH, GH, HG, GG = "HTTP->http", "gRPC->http", "HTTP->grpc", "gRPC->grpc"
PATHS = {"http": (HH, GH), "grpc": (HG, GG)}  # upstream protocol -> the paths that reach it

UPSTREAM_KEYS = ("timeout_ms: 10000, health_check: { enabled: false }, "
                 "outlier: { consecutive_failures: 0 }, retry: { max_retries: 0 }")

# max_connections: 1 keeps one connection per worker to f-http, so the request after a
# fault goes on the connection the fault left behind if the gateway kept it.
GATEWAY = """
listeners:
  http:    { address: "127.0.0.1:0" }
  grpc:    { address: "127.0.0.1:0" }
  metrics: { address: "127.0.0.1:0" }
workers: 2
readiness: { policy: always }
upstreams:
  - { name: f-http, protocol: http, endpoints: ["$http"], max_connections: 1, $keys }
  - { name: f-grpc, protocol: grpc, endpoints: ["$grpc"], $keys }
  - { name: refuse-http, protocol: http, endpoints: ["$refuse"], $keys }
  - { name: refuse-grpc, protocol: grpc, endpoints: ["$refuse"], $keys }
  - { name: down-http, protocol: http, endpoints: ["127.0.0.1:$down"], $keys }
  - { name: down-grpc, protocol: grpc, endpoints: ["127.0.0.1:$down"], $keys }
routes:
  - { match: { model: http_refuse }, upstream: refuse-http }
  - { match: { model: grpc_refuse }, upstream: refuse-grpc }
  - { match: { model: http_down }, upstream: down-http }
  - { match: { model: grpc_down }, upstream: down-grpc }
  - { match: { model: http_stall }, upstream: f-http, timeout_ms: 400 }
  - { match: { model: grpc_stall }, upstream: f-grpc, timeout_ms: 400 }
  # Short too, should the gateway ever wait out the deadline on this one again.
  - { match: { model: grpc_prefix_short }, upstream: f-grpc, timeout_ms: 400 }
  # The passthrough of an answer as it arrives stops where the route renames the model.
  - { match: { model: grpc_alias_ok }, upstream: f-grpc, rewrite: { model: grpc_ok } }
  # Renaming routes read the answer to rename it: garbage counts against the endpoint.
  - { match: { model: grpc_alias_garbage }, upstream: f-grpc, rewrite: { model: grpc_garbage } }
  - { match: { model: http_alias_html }, upstream: f-http, rewrite: { model: http_html } }
  - { match: { model_prefix: "http_" }, upstream: f-http }
  - { match: { model_prefix: "grpc_" }, upstream: f-grpc }
"""

# Connections between the gateway and UP that its pools may hold more than after the
# warm-up: one per worker to f-http (max_connections: 1), one per channel of f-grpc (2),
# which grpc reopens after a GOAWAY or a reset, and a connect attempt of a refuse-grpc
# channel. A connection leaked per fault would be dozens.
POOL_SLACK = 4

TRACE = bool(os.environ.get("UPSTREAM_FAULTS_TRACE"))

pb = None
UP = GW = None
PROCESSES = Processes()
BASELINE = {}
_values = itertools.count(1)


# ---- what each fault must give -------------------------------------------------------------

class Err:
    """The gateway's error: HTTP `status` (gRPC: UNAVAILABLE for 502 / 503,
    DEADLINE_EXCEEDED for 504), the message naming `upstream` (and holding `holds`)."""

    def __init__(self, status, upstream=None, holds=None):
        self.status, self.upstream, self.holds = status, upstream, holds

    def code(self):
        return {502: grpc.StatusCode.UNAVAILABLE, 503: grpc.StatusCode.UNAVAILABLE,
                504: grpc.StatusCode.DEADLINE_EXCEEDED}[self.status]


class Relay:
    """Passthrough: the upstream's answer as it sent it."""


class Cut:
    """Relayed as it arrived, then cut: the client got the upstream's head and part of the
    body, then the close (HTTP's only way to tell that an answer ended short)."""


class Correct:
    """A correct answer: OUTPUT0 echoes the request's INPUT0."""


class UpstreamError:
    """The upstream's own error answer: HTTP `status` / gRPC `code`, its message as it is."""

    def __init__(self, status, code):
        self.status, self.code = status, code


BAD = Err(502)
GONE = Err(503)
LATE = Err(504)

# fault -> {path: expectation} (one expectation: every path of the upstream's protocol).
HTTP_CASES = {
    "refuse": Err(503, "refuse-http"),
    "down": Err(503, "down-http"),
    "close": GONE,
    "rst": GONE,
    "reset_head": GONE,
    "reset_body": GONE,
    "truncated": GONE,   # closed before the whole answer: UNAVAILABLE (http_client.h)
    # A large answer goes on as it arrives (passthrough), so the client learns of the cut
    # from the close; decoded for a gRPC client, it is still read whole first.
    "truncated_large": {HH: Cut(), GH: GONE},
    "stall": LATE,
    "garbage": BAD,
    "bad_chunk": BAD,
    "chunk_crlf": BAD,
    "html": {HH: Relay(), GH: BAD},
    "excess": Correct(),       # the announced bytes are the answer; the rest is never used
    "excess_late": Correct(),  # and the unasked answer after it never reaches a request
    "ihcl_long": {HH: Relay(), GH: BAD},
    "ihcl_short": {HH: Relay(), GH: BAD},
    "bds_long": {HH: Relay(), GH: BAD},
    "bds_short": {HH: Relay(), GH: BAD},
    "status_500": {HH: Relay(), GH: UpstreamError(500, grpc.StatusCode.INTERNAL)},
}
GRPC_CASES = {
    "refuse": Err(503, "refuse-grpc"),
    "down": Err(503, "down-grpc"),
    "rst": GONE,
    "rst_mid": GONE,
    "tcp_reset": GONE,
    "goaway": GONE,
    "no_status": BAD,
    "no_message": BAD,
    "garbage": {HG: BAD, GG: Relay()},
    "bad_frame": BAD,
    "prefix_long": BAD,
    "prefix_short": BAD,
    "html": BAD,
    "stall": LATE,
    "status": UpstreamError(400, grpc.StatusCode.FAILED_PRECONDITION),
    "unavailable": Err(503, holds=F.ERROR_TEXT),
    # An error told after the whole message: the message is never taken for the answer.
    "status_after": UpstreamError(500, grpc.StatusCode.INTERNAL),
}

# Findings not fixed yet: each case must still fail (so that a fix is noticed and the case
# moves out). None is open. Fixed, with the case that found them: an answer sent unasked on
# an idle keep-alive connection taken for the next request's (http_client.cc watches idle
# connections); a gRPC call ended OK without a message aborting the gateway (fleet_call.cc);
# RST_STREAM, a missing grpc-status and a non-gRPC answer passed on as grpc's INTERNAL /
# UNKNOWN without the upstream's name, and a malformed chunked body answered 503
# (grpc_client.cc toUpstreamStatus, http_client.cc outcomeOf); a length prefix shorter than
# its message waiting out the deadline (ModelInfer now goes through grpc_client_native.cc,
# which reads the gRPC framing itself; grpc 1.51's client still waits, see SECURITY.md).
KNOWN = {}


def expectation(protocol, fault, path):
    e = (HTTP_CASES if protocol == "http" else GRPC_CASES)[fault]
    return e[path] if isinstance(e, dict) else e


# ---- module set-up ---------------------------------------------------------------------------

def gateway_config():
    return dict(http=UP.address("http"), grpc=UP.address("grpc"), refuse=UP.address("refuse"),
                down=free_port(), keys=UPSTREAM_KEYS)


def setUpModule():
    global pb, UP, GW
    pb = grpc_stubs.load()[0]
    with small_asan_quarantine():
        try:
            UP = F.FaultyUpstream().start()
            GW = PROCESSES.start("gateway", Gateway.from_template(GATEWAY, **gateway_config()))
            warm_up()
            close_channels()
            BASELINE.update(settled_figures())
        except BaseException:
            tear_down()
            raise


def warm_up():
    """Every path answers a correct inference; then one pass of every fault the shared gateway
    takes, as the tests take them (a client connection of its own for each, so both workers
    serve some), outcomes not judged (the tests judge them): whatever the gateway builds on
    first use is built before the figures are taken."""
    for protocol, paths in PATHS.items():
        for path in paths:
            for fault in ("ok",) + tuple(HTTP_CASES if protocol == "http" else GRPC_CASES):
                conn = GW.connection()
                try:
                    client = Client(GW, path, conn)
                    sent = UP.poisoned
                    outcome = client.infer(protocol + "_" + fault)
                    assert fault != "ok" or outcome.ok, (path, outcome)
                    if fault == "excess_late":
                        settle_unasked(client, protocol, sent)
                    client.infer(protocol + "_ok")
                finally:
                    conn.close()
        close_channels()
    # A large binary answer relayed as it arrives, on a connection per worker (the buffers
    # the answers take are in the figures: BinaryAnswerAsItArrives sends more).
    for _ in range(2):
        test = BinaryAnswerAsItArrives()
        test.setUp()
        conn, resp = test.send("grpc_ok")
        try:
            assert resp.status == 200 and len(resp.read()) > len(test.values), resp.status
        finally:
            conn.close()
    # And the other way (GrpcAnswerAsItArrives): a gRPC client's large answer from f-http.
    test = GrpcAnswerAsItArrives()
    test.setUp()
    for _ in range(2):
        answer = grpc_channel(GW).unary_unary(MODEL_INFER)(test.request("http_ok"), timeout=30)
        assert len(answer) > len(test.values)


def tear_down():
    close_channels()
    problems = PROCESSES.stop_all()
    if UP is not None:
        UP.stop()
    return problems


def tearDownModule():
    problems = tear_down()
    assert not problems, "\n".join(problems)


# ---- clients ---------------------------------------------------------------------------------

class Outcome:
    """One answer: ok (a correct echo of the values sent), status / code, message, body."""

    def __init__(self, **kw):
        self.ok = False
        self.status = self.code = self.message = self.body = self.headers = None
        self.__dict__.update(kw)

    def __repr__(self):
        return "Outcome(%s)" % ", ".join("%s=%r" % (k, v if not isinstance(v, bytes) else v[:200])
                                         for k, v in sorted(self.__dict__.items()) if v is not None)


class Client:
    """A client of `gateway` on `path`'s client protocol: HTTP on `conn` (kept across
    requests), gRPC on the channel grpc_stubs keeps for the gateway."""

    def __init__(self, gateway, path, conn=None):
        self.gateway, self.path, self.conn = gateway, path, conn
        self.http = path in (HH, HG)

    def infer(self, model):
        values = [next(_values) for _ in range(4)]
        return self._http(model, values) if self.http else self._grpc(model, values)

    def _http(self, model, values):
        body = json.dumps({"inputs": [{"name": "INPUT0", "datatype": "INT32", "shape": [1, 4],
                                       "data": values}]}).encode()
        try:
            self.conn.request("POST", "/v2/models/%s/infer" % model, body=body,
                              headers={"Content-Type": "application/json"})
            resp = self.conn.getresponse()
            data = resp.read()
        except (OSError, http.client.HTTPException) as e:
            self.conn.close()
            return Outcome(error=repr(e))
        headers = {k.lower(): v for k, v in resp.getheaders()}
        outcome = Outcome(status=resp.status, headers=headers, body=data)
        try:
            parsed = json.loads(data)
        except ValueError:
            return outcome
        if not isinstance(parsed, dict):
            return outcome
        if resp.status != 200:
            if set(parsed) == {"error"} and isinstance(parsed["error"], str):
                outcome.message = parsed["error"]
            return outcome
        out = (parsed.get("outputs") or [{}])[0]
        outcome.ok = (parsed.get("model_name") == model and out.get("name") == "OUTPUT0"
                      and out.get("datatype") == "INT32" and out.get("shape") == [1, 4]
                      and out.get("data") == values)
        return outcome

    def _grpc(self, model, values):
        request = pb.ModelInferRequest(model_name=model)
        tensor = request.inputs.add()
        tensor.name, tensor.datatype = "INPUT0", "INT32"
        tensor.shape.extend([1, 4])
        raw = struct.pack("<4i", *values)
        request.raw_input_contents.append(raw)
        call = grpc_channel(self.gateway).unary_unary(MODEL_INFER)
        try:
            answer = call(request.SerializeToString(), timeout=30)
        except grpc.RpcError as e:
            return Outcome(code=e.code(), message=e.details())
        outcome = Outcome(code=grpc.StatusCode.OK, body=answer)
        try:
            resp = pb.ModelInferResponse.FromString(answer)
        except DecodeError:
            return outcome
        outcome.ok = (resp.model_name == model and len(resp.outputs) == 1
                      and resp.outputs[0].name == "OUTPUT0" and resp.outputs[0].datatype == "INT32"
                      and list(resp.outputs[0].shape) == [1, 4]
                      and list(resp.raw_output_contents) == [raw])
        return outcome


_channels = {}


def grpc_channel(gateway):
    address = gateway.address("grpc")
    if address not in _channels or _channels[address][0] is not gateway:
        _channels[address] = (gateway, grpc.insecure_channel(address))
    return _channels[address][1]


def close_channels():
    for _, channel in _channels.values():
        channel.close()
    _channels.clear()


def settle_unasked(client, protocol, before):
    """After an excess_late fault (sent when UP had sent `before` unasked answers): waits
    until UP has sent this one, then sends one ok request per worker (gRPC calls go round
    robin over the workers; an HTTP client connection stays on one), so that the connection
    holding the unasked answer is among the next used. Returns their outcomes."""
    wait_until(lambda: UP.poisoned > before, timeout=10, interval=0.01)
    return [client.infer(protocol + "_ok") for _ in range(2)]


# ---- process figures -------------------------------------------------------------------------

def rss_kb(gateway):
    with open("/proc/%d/status" % gateway.proc.pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def remote_ports():
    """socket inode -> remote port of every TCP socket."""
    table = {}
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(name) as f:
            next(f)
            for line in f:
                parts = line.split()
                table[parts[9]] = int(parts[2].rsplit(":", 1)[1], 16)
    return table


def figures(gateway):
    """RSS, and the open descriptors: "pool" (TCP connections to UP, which the gateway's
    upstream pools open and close as they see fit) and "own" (everything else), with a
    tally by kind for messages."""
    table = remote_ports()
    up_ports = {int(UP.address(k).rsplit(":", 1)[1]) for k in ("http", "grpc", "refuse")}
    path = "/proc/%d/fd" % gateway.proc.pid
    own, pool, kinds = 0, 0, {}
    for name in os.listdir(path):
        try:
            target = os.readlink(os.path.join(path, name))
        except OSError:
            continue
        kind = "socket" if target.startswith("socket:") else target
        if target.startswith("socket:[") and table.get(target[8:-1]) in up_ports:
            pool += 1
            kind = "pooled connection to the upstream"
        else:
            own += 1
        kinds[kind] = kinds.get(kind, 0) + 1
    return {"rss": rss_kb(gateway), "own": own, "pool": pool, "kinds": kinds}


def settled_figures(timeout=10):
    """The figures once the descriptor count has held for a second (closes are asynchronous)."""
    last, since, deadline = None, time.time(), time.time() + timeout
    while time.time() < deadline:
        n = len(os.listdir("/proc/%d/fd" % GW.proc.pid))
        if n != last:
            last, since = n, time.time()
        elif time.time() - since >= 1.0:
            break
        time.sleep(0.1)
    return figures(GW)


# ---- the tests -------------------------------------------------------------------------------

class UpstreamFaults(unittest.TestCase):
    maxDiff = None

    def setUp(self):
        self.conn = GW.connection()

    def tearDown(self):
        self.conn.close()

    def run_fault(self, protocol, fault):
        for path in PATHS[protocol]:
            with self.subTest(path=path):
                key = (protocol, fault, path)
                client = Client(GW, path, self.conn)
                self.run_known(key, lambda: self.check(client, protocol, fault, path))
                # Whatever the fault gave, the same client is served next (HTTP: on the same
                # connection, or a new one http.client opens if the gateway closed it).
                outcome = client.infer(protocol + "_ok")
                self.assertTrue(outcome.ok, "after %s on %s: %r" % (fault, path, outcome))

    def run_known(self, key, check):
        known = KNOWN.get(key)
        if known is None:
            return check()
        # A known finding must still fail; once fixed it must leave KNOWN.
        with self.assertRaises(AssertionError, msg="%s now passes: take it off KNOWN (%s)"
                               % (key, known)) as caught:
            check()
        if TRACE:
            sys.stderr.write("\n    known %s fails: %s\n" % (key, str(caught.exception)[:300]))

    def check(self, client, protocol, fault, path):
        """The fault's request on `client`, judged by its expectation."""
        model = protocol + "_" + fault
        served, sent = UP.count(protocol, fault), UP.poisoned
        started = time.time()
        outcome = client.infer(model)
        if TRACE:
            sys.stderr.write("\n    %-12s %-11s %.2f s %r\n"
                             % (fault, path, time.time() - started, outcome))
        if fault not in ("refuse", "down"):
            self.assertGreater(UP.count(protocol, fault), served, "the fault never reached UP")
        e = expectation(protocol, fault, path)
        if isinstance(e, Err):
            self.assertError(outcome, e, "f-" + protocol, path)
        elif isinstance(e, UpstreamError):
            if client.http:
                self.assertEqual((outcome.status, outcome.message), (e.status, F.ERROR_TEXT),
                                 outcome)
            else:
                self.assertEqual((outcome.code, outcome.message), (e.code, F.ERROR_TEXT), outcome)
        elif isinstance(e, Relay):
            self.assertRelayed(outcome, protocol, fault, path)
        elif isinstance(e, Cut):
            self.assertIn("IncompleteRead", outcome.error or "", outcome)
        else:
            self.assertTrue(outcome.ok, outcome)
            if path == HH:  # exactly the bytes the upstream announced, nothing after them
                self.assertEqual(outcome.body, UP.sent(fault)[2])
            if fault == "excess_late":
                for after in settle_unasked(client, protocol, sent):
                    self.assertTrue(after.ok, "after an unasked answer: %r" % after)

    def assertError(self, outcome, e, default_upstream, path):
        upstream = "upstream '%s'" % (e.upstream or default_upstream)
        if path in (HH, HG):
            self.assertEqual(outcome.status, e.status, outcome)
            self.assertEqual(outcome.headers.get("content-type"), "application/json", outcome)
            self.assertIsNotNone(outcome.message, "not {\"error\": string}: %r" % outcome)
        else:
            self.assertEqual(outcome.code, e.code(), outcome)
        self.assertIsInstance(outcome.message, str, outcome)
        self.assertIn(upstream, outcome.message, outcome)
        if e.holds:
            self.assertIn(e.holds, outcome.message, outcome)

    def assertRelayed(self, outcome, protocol, fault, path):
        if path == GG:  # the message bytes as UP sent them; the client's decode fails
            self.assertEqual((outcome.code, outcome.body), (grpc.StatusCode.OK, F.GARBAGE), outcome)
            with self.assertRaises(DecodeError):
                pb.ModelInferResponse.FromString(outcome.body)
            return
        status, headers, body = UP.sent(fault)
        self.assertEqual((outcome.status, outcome.body), (status, body), outcome)
        for name in ("content-type", "inference-header-content-length"):
            self.assertEqual(outcome.headers.get(name), headers.get(name), (name, outcome))

    # ---- after the faults
    def test_zz_resources_back_to_warm_figures(self):
        """Every path answers correctly; then, every client connection closed, the
        descriptors are back to the figures after the warm-up (pooled connections to UP
        within POOL_SLACK) and RSS within 10% of it."""
        for protocol, paths in PATHS.items():
            for path in paths:
                outcome = Client(GW, path, self.conn).infer(protocol + "_ok")
                self.assertTrue(outcome.ok, (path, outcome))
        self.conn.close()
        close_channels()
        base = BASELINE

        def back():
            now = figures(GW)
            return (now["own"] <= base["own"] and now["pool"] <= base["pool"] + POOL_SLACK
                    and now["rss"] <= base["rss"] * 1.10)
        wait_until(back, timeout=10, interval=0.2)
        after = figures(GW)
        sys.stderr.write(
            "\n  gateway after the faults: RSS %d -> %d kB (%+.1f%%), descriptors %d -> %d, "
            "pooled connections to the upstream %d -> %d\n" % (
                base["rss"], after["rss"], 100.0 * (after["rss"] - base["rss"]) / base["rss"],
                base["own"], after["own"], base["pool"], after["pool"]))
        more = {k: v - base["kinds"].get(k, 0) for k, v in after["kinds"].items()
                if v > base["kinds"].get(k, 0)}
        with self.subTest(check="descriptors"):
            self.assertLessEqual(after["own"], base["own"], "more descriptors than after the "
                                 "warm-up: %r" % more)
        with self.subTest(check="pooled connections"):
            self.assertLessEqual(after["pool"], base["pool"] + POOL_SLACK, more)
        with self.subTest(check="RSS"):
            self.assertLessEqual(after["rss"], base["rss"] * 1.10, "RSS %d kB, %d kB after the "
                                 "warm-up" % (after["rss"], base["rss"]))
        self.assertTrue(GW.alive())


def add_fault_tests():
    for protocol, cases in (("http", HTTP_CASES), ("grpc", GRPC_CASES)):
        for fault in cases:
            def test(self, protocol=protocol, fault=fault):
                self.run_fault(protocol, fault)
            test.__name__ = "test_%s_%s" % (protocol, fault)
            test.__doc__ = "%s upstream, fault %r: %s" % (protocol, fault, ", ".join(
                "%s %s" % (path, describe(expectation(protocol, fault, path)))
                for path in PATHS[protocol]))
            setattr(UpstreamFaults, test.__name__, test)


def describe(e):
    if isinstance(e, Err):
        return "%d / %s" % (e.status, e.code().name)
    if isinstance(e, UpstreamError):
        return "the upstream's %d / %s" % (e.status, e.code.name)
    if isinstance(e, Cut):
        return "relayed as it arrived, then closed short"
    return "relayed as sent" if isinstance(e, Relay) else "a correct answer"


add_fault_tests()


@functools.lru_cache(maxsize=None)
def fp32_tensor(floats):
    """The bytes of an FP32 tensor of `floats` values, made once per size."""
    return struct.pack("<%df" % floats, *(float(i % 977) * 0.5 for i in range(floats)))


class BinaryAnswerAsItArrives(unittest.TestCase):
    """HTTP binary client -> gRPC upstream (HG) with a 4 MiB answer asked as a binary output:
    the gateway starts its client's answer once the upstream's message head is in
    (gateway/frontends/http_binary_relay.h). UP holds its answer half-way until the test
    has the response's head (faulty_upstream.py, hold()), so a gateway that read the whole
    message first could not have answered: UP's `held` then says the hold timed out."""

    FLOATS = 1 << 20

    def setUp(self):
        self.values = fp32_tensor(self.FLOATS)

    def tearDown(self):
        UP.disarm()

    def send(self, model, binary=True):
        """binary: OUTPUT0 asked binary; False: asked JSON; "all": every output binary
        (binary_data_output, no output named)."""
        header = {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, self.FLOATS],
                              "parameters": {"binary_data_size": len(self.values)}}]}
        if binary == "all":
            header["parameters"] = {"binary_data_output": True}
        else:
            header["outputs"] = [{"name": "OUTPUT0", "parameters": {"binary_data": binary}}]
        text = json.dumps(header).encode()
        conn = GW.connection()
        conn.request("POST", "/v2/models/%s/infer" % model, body=text + self.values,
                     headers={"Content-Type": "application/octet-stream",
                              "Inference-Header-Content-Length": str(len(text))})
        return conn, conn.getresponse()

    def held_answer(self, model, binary=True, timeout=30):
        """`model`'s answer with UP holding its message half-way (hold(timeout)) until the
        response's head is here: (the response, its body or the IncompleteRead that cut it,
        UP's `held` for this hold: [True] when the head came before the message was whole)."""
        UP.hold(timeout)
        before = len(UP.held)
        conn, resp = self.send(model, binary)
        UP.release()
        return resp, self.body_or_cut(conn, resp), UP.held[before:]

    @staticmethod
    def body_or_cut(conn, resp):
        """The response's body, or the IncompleteRead that cut it; the connection closed."""
        try:
            return resp.read()
        except http.client.IncompleteRead as e:
            return e
        finally:
            conn.close()

    def assertServedAfter(self):
        conn = GW.connection()
        try:
            outcome = Client(GW, HG, conn).infer("grpc_ok")
        finally:
            conn.close()
        self.assertTrue(outcome.ok, outcome)

    def test_the_answer_begins_before_the_message_is_whole(self):
        """One output; and with an empty output after it (its raw entry the message's last
        bytes), asked by binary_data_output."""
        output0 = {"name": "OUTPUT0", "datatype": "FP32", "shape": [1, self.FLOATS],
                   "parameters": {"binary_data_size": len(self.values)}}
        empty = {"name": "EMPTY", "datatype": "INT8", "shape": [0], "parameters": {"binary_data_size": 0}}
        for model, binary, outputs in (("grpc_ok", True, [output0]), ("grpc_ok_empty", "all", [output0, empty])):
            with self.subTest(model=model):
                resp, body, held = self.held_answer(model, binary)
                self.assertEqual(held, [True], "the head came only once UP's message was whole")
                self.assertIsInstance(body, bytes, body)
                self.assertEqual(resp.status, 200, body[:300])
                self.assertEqual(resp.getheader("Content-Type"), "application/octet-stream")
                length = int(resp.getheader("Inference-Header-Content-Length"))
                self.assertEqual(int(resp.getheader("Content-Length")), len(body))
                self.assertEqual(json.loads(body[:length]),
                                 {"model_name": model, "model_version": "1", "outputs": outputs})
                self.assertTrue(body[length:] == self.values, "the tensor differs")
                self.assertServedAfter()

    def test_an_entry_framed_otherwise_cuts_the_answer_and_cancels_the_upstream_call(self):
        """UP's message lays out OUTPUT0 and OUTPUT1 by their shapes, but its first raw entry
        is 4 bytes short (the second 4 long, so that the sizes add up), and UP sends only
        half of it. The gateway has begun the answer when it finds the entry framed
        otherwise: the client's answer is cut short, and the upstream call is cancelled at
        once (UP's stream reset) instead of waiting for the rest, which would come only with
        the 10 s timeout. The garbage counts against UP's endpoint (passive health), as an
        answer read whole and found so would."""
        before = UP.resets["grpc"]
        failures = endpoint_failures("f-grpc")
        conn, resp = self.send("grpc_misframed", "all")
        body = self.body_or_cut(conn, resp)
        self.assertEqual(resp.status, 200)
        self.assertIsInstance(body, http.client.IncompleteRead, body)
        self.assertTrue(wait_until(lambda: UP.resets["grpc"] == before + 1, timeout=5),
                        "the upstream call was not cancelled")
        self.assertTrue(wait_until(lambda: endpoint_failures("f-grpc") == failures + 1, timeout=5),
                        (failures, endpoint_failures("f-grpc")))
        self.assertServedAfter()

    def test_an_upstream_failure_after_the_head_cuts_the_answer(self):
        """Reset mid-message, or an error status after the whole message: the client has
        the head and some of the body, then the close (never a complete answer). The
        gateway's metrics count it as cut, not as the 200 its head said."""
        for fault, binary in (("rst_mid", True), ("status_after", True), ("status_after_empty", "all")):
            with self.subTest(fault=fault):
                model = "grpc_" + fault
                before = requests_counted(model, "cut")
                resp, cut, held = self.held_answer(model, binary)
                self.assertEqual(resp.status, 200)
                self.assertIsInstance(cut, http.client.IncompleteRead, cut)
                self.assertEqual(held, [True])
                self.assertLess(len(cut.partial), int(resp.getheader("Content-Length")))
                self.assertTrue(wait_until(lambda: requests_counted(model, "cut") == before + 1, timeout=10),
                                "the cut answer was not counted as code=\"cut\"")
                self.assertServedAfter()

    def test_json_outputs_wait_for_the_whole_message(self):
        resp, body, held = self.held_answer("grpc_ok", binary=False, timeout=1.5)
        self.assertEqual(held, [False], "a JSON answer began before its message was whole")
        self.assertIsInstance(body, bytes, body)
        self.assertEqual(resp.status, 200, body[:300])
        out = json.loads(body)["outputs"][0]
        self.assertEqual(out["shape"], [1, self.FLOATS])
        self.assertEqual(struct.pack("<%df" % self.FLOATS, *out["data"]), self.values)

    def test_a_client_that_leaves_mid_answer_leaves_the_gateway_serving(self):
        UP.hold(30)
        conn, resp = self.send("grpc_ok")
        self.assertEqual(resp.status, 200)
        resp.read(1000)
        conn.close()
        UP.release()
        self.assertServedAfter()


def requests_counted(model, code):
    """infergate_requests_total for `model` and `code`, from the gateway's /metrics."""
    status, _, body = GW.request("GET", "/metrics", listener="metrics")
    assert status == 200, status
    total = 0.0
    for line in body.decode().splitlines():
        if (line.startswith("infergate_requests_total{") and 'model="%s"' % model in line
                and 'code="%s"' % code in line):
            total += float(line.rsplit(" ", 1)[1])
    return total


def endpoint_failures(upstream):
    """infergate_upstream_endpoint_failures_total of `upstream`'s endpoints, from /metrics."""
    status, _, body = GW.request("GET", "/metrics", listener="metrics")
    assert status == 200, status
    return sum(float(line.rsplit(" ", 1)[1]) for line in body.decode().splitlines()
               if line.startswith("infergate_upstream_endpoint_failures_total{")
               and 'upstream="%s"' % upstream in line)


class PassiveHealth(unittest.TestCase):
    """What an upstream's answer tells passive health on a path that decodes it."""

    def test_garbage_behind_an_ok_status_counts_against_the_endpoint(self):
        """HTTP -> gRPC: UP's answer is a framed message of bytes that are no protobuf, with
        grpc-status 0. The client gets 502 naming the upstream, and the attempt counts as a
        failure of UP's endpoint (as a broken frame does), not as the success its status
        said. A good answer after it counts as none."""
        before = endpoint_failures("f-grpc")
        conn = GW.connection()
        try:
            garbage = Client(GW, HG, conn).infer("grpc_garbage")
            ok = Client(GW, HG, conn).infer("grpc_ok")
        finally:
            conn.close()
        self.assertFalse(garbage.ok, garbage)
        self.assertEqual(garbage.status, 502, garbage)
        self.assertTrue(ok.ok, ok)
        self.assertEqual(endpoint_failures("f-grpc"), before + 1)

    def test_a_200_whose_body_does_not_read_counts_against_the_endpoint(self):
        """gRPC -> HTTP: UP answers 200 with a binary body whose Inference-Header-Content-Length
        runs past its end. The client gets UNAVAILABLE naming the upstream, and the attempt
        counts as a failure of UP's endpoint, not as the success its status said; a good
        answer after it counts as none."""
        before = endpoint_failures("f-http")
        garbage = Client(GW, GH).infer("http_ihcl_long")
        self.assertEqual(endpoint_failures("f-http"), before + 1)
        ok = Client(GW, GH).infer("http_ok")
        self.assertFalse(garbage.ok, garbage)
        self.assertEqual(garbage.code, grpc.StatusCode.UNAVAILABLE, garbage)
        self.assertIn("f-http", garbage.message)
        self.assertTrue(ok.ok, ok)
        self.assertEqual(endpoint_failures("f-http"), before + 1)

    def test_an_answer_a_renaming_route_cannot_rename_counts_against_the_endpoint(self):
        """A route that aliases the model reads the answer to show the client its own name:
        gRPC passthrough, UP's message is no protobuf behind grpc-status 0; HTTP passthrough,
        UP's 200 is an HTML page. Each client gets the gateway's 502 / UNAVAILABLE naming the
        upstream, and each attempt counts as a failure of UP's endpoint."""
        for path, model, upstream in ((GG, "grpc_alias_garbage", "f-grpc"), (HH, "http_alias_html", "f-http")):
            with self.subTest(model=model):
                before = endpoint_failures(upstream)
                conn = GW.connection() if path == HH else None
                try:
                    outcome = Client(GW, path, conn).infer(model)
                finally:
                    if conn:
                        conn.close()
                self.assertFalse(outcome.ok, outcome)
                if path == HH:
                    self.assertEqual(outcome.status, 502, outcome)
                else:
                    self.assertEqual(outcome.code, grpc.StatusCode.UNAVAILABLE, outcome)
                self.assertIn(upstream, outcome.message)
                self.assertEqual(endpoint_failures(upstream), before + 1)

    def test_a_streamed_request_whose_200_does_not_read_counts_against_the_endpoint(self):
        """ModelStreamInfer -> HTTP: the same answer to one request of a stream gets its
        in-band error naming the upstream and counts against UP's endpoint; the stream's
        next request is answered, and counts as no failure."""
        before = endpoint_failures("f-http")
        requests = []
        for i, model in enumerate(("http_ihcl_long", "http_ok")):
            request = pb.ModelInferRequest(model_name=model, id="r%d" % i)
            tensor = request.inputs.add()
            tensor.name, tensor.datatype = "INPUT0", "INT32"
            tensor.shape.extend([1, 4])
            request.raw_input_contents.append(struct.pack("<4i", 1, 2, 3, 4))
            requests.append(request.SerializeToString())

        def paced():  # the second goes once the first is answered: one answer at a time
            yield requests[0]
            answered.wait(30)
            yield requests[1]

        answered = threading.Event()
        call = grpc_channel(GW).stream_stream(MODEL_STREAM_INFER)
        got = []
        for raw in call(paced(), timeout=30):  # ends once both are answered
            got.append(pb.ModelStreamInferResponse.FromString(raw))
            answered.set()
        self.assertEqual(len(got), 2, got)
        self.assertIn("f-http", got[0].error_message)
        self.assertEqual(got[1].error_message, "", got[1])
        self.assertEqual(got[1].infer_response.raw_output_contents[0], struct.pack("<4i", 1, 2, 3, 4))
        self.assertEqual(endpoint_failures("f-http"), before + 1)


class HeldGrpcAnswer:
    """A gRPC client's 1 MiB ModelInfer whose answer UP holds half-way until the test has
    the first DATA bytes of the gateway's answer (a raw HTTP/2 client: grpcio shows a message
    only whole), so a gateway that took the upstream's whole answer first could not have
    answered: UP's `held` then says the hold timed out. Mixed into the test cases below,
    each naming OK_MODEL, a model whose answer UP sends whole and well."""

    FLOATS = 1 << 18

    def setUp(self):
        self.values = fp32_tensor(self.FLOATS)

    def tearDown(self):
        UP.disarm()

    def assertCutUnavailable(self, model, upstream):
        """`model`'s answer breaks off mid-message at UP: the client has the HEADERS and part
        of the message, then UNAVAILABLE naming `upstream`, never a whole message; grpcio,
        without the hold, reports the gateway's status, not an answer."""
        headers, data, trailers, reset, held = self.held_answer(model)
        self.assertEqual(held, [True])
        self.assertEqual(headers.get(":status"), "200")
        self.assertGreater(len(data), 5)
        (length,) = struct.unpack(">I", data[1:5])
        self.assertLess(len(data), 5 + length, "a whole message came")
        self.assertIsNone(reset)
        self.assertEqual(trailers.get("grpc-status"), str(grpc.StatusCode.UNAVAILABLE.value[0]), trailers)
        self.assertIn(upstream, trailers.get("grpc-message", ""))
        with self.assertRaises(grpc.RpcError) as raised:
            grpc_channel(GW).unary_unary(MODEL_INFER)(self.request(model), timeout=30)
        self.assertEqual(raised.exception.code(), grpc.StatusCode.UNAVAILABLE, raised.exception.details())
        self.assertIn(upstream, raised.exception.details())
        self.assertServedAfter()

    def test_a_deadline_mid_answer_ends_it_with_its_status(self):
        headers, data, trailers, reset, held = self.held_answer(
            self.OK_MODEL, timeout=30, release=False, metadata=[("grpc-timeout", "1500m")])
        self.assertEqual(headers.get(":status"), "200")
        (length,) = struct.unpack(">I", data[1:5])
        self.assertLess(len(data), 5 + length)
        self.assertEqual(trailers.get("grpc-status"), str(grpc.StatusCode.DEADLINE_EXCEEDED.value[0]), trailers)
        self.assertServedAfter()

    def test_a_client_that_resets_mid_answer_leaves_the_gateway_serving(self):
        def leave(conn, sock, sid):
            conn.reset_stream(sid, h2.errors.ErrorCodes.CANCEL)
            sock.sendall(conn.data_to_send())
            raise ConnectionAbortedError("left")

        UP.hold(30)
        with self.assertRaises(ConnectionAbortedError):
            h2_model_infer(GW.address("grpc"), self.request(self.OK_MODEL), leave)
        UP.release()
        self.assertServedAfter()

    def request(self, model):
        request = pb.ModelInferRequest(model_name=model)
        tensor = request.inputs.add()
        tensor.name, tensor.datatype = "INPUT0", "FP32"
        tensor.shape.extend([1, self.FLOATS])
        request.raw_input_contents.append(self.values)
        return request.SerializeToString()

    def held_answer(self, model, timeout=30, release=True, metadata=()):
        """`model`'s answer over raw HTTP/2 with UP holding its body half-way (hold(timeout))
        until the first DATA bytes are here (then released, unless `release` is False): what
        h2_model_infer returns, and UP's `held` for this hold."""
        UP.hold(timeout)
        before = len(UP.held)
        first = (lambda *_: UP.release()) if release else None
        try:
            answer = h2_model_infer(GW.address("grpc"), self.request(model), first, metadata)
        finally:
            UP.release()
        return answer + (UP.held[before:],)


class GrpcAnswerAsItArrives(HeldGrpcAnswer, unittest.TestCase):
    """gRPC client -> HTTP upstream (GH) with a 1 MiB answer: the gateway sends its client the
    ModelInferResponse while the upstream's binary body is still arriving
    (gateway/frontends/grpc_answer_relay.h, GrpcAnswerRelay)."""

    OK_MODEL = "http_ok"

    def assertServedAfter(self):
        outcome = Client(GW, GH).infer("http_ok")
        self.assertTrue(outcome.ok, outcome)

    def test_the_answer_begins_before_the_upstream_body_is_whole(self):
        """One output; and an empty one after it (its raw entry the message's last bytes)."""
        for model, outputs in (("http_ok", ["OUTPUT0"]), ("http_ok_empty", ["OUTPUT0", "EMPTY"])):
            with self.subTest(model=model):
                headers, data, trailers, reset, held = self.held_answer(model)
                self.assertEqual(held, [True], "the answer began only once UP's body was whole")
                self.assertIsNone(reset)
                self.assertEqual(headers.get(":status"), "200")
                self.assertEqual(trailers.get("grpc-status"), "0", trailers)
                self.assertEqual(data[0], 0)
                (length,) = struct.unpack(">I", data[1:5])
                self.assertEqual(len(data), 5 + length)
                answer = pb.ModelInferResponse.FromString(data[5:])
                self.assertEqual(answer.model_name, model)
                self.assertEqual([o.name for o in answer.outputs], outputs)
                self.assertEqual((answer.outputs[0].datatype, list(answer.outputs[0].shape)),
                                 ("FP32", [1, self.FLOATS]))
                self.assertTrue(answer.raw_output_contents[0] == self.values, "the tensor differs")
                self.assertEqual(list(answer.raw_output_contents[1:]), [b""] * (len(outputs) - 1))
        # grpcio takes the same answer (no hold: it may come either way).
        call = grpc_channel(GW).unary_unary(MODEL_INFER)
        answer = pb.ModelInferResponse.FromString(call(self.request("http_ok_empty"), timeout=30))
        self.assertEqual([bytes(r) == v for r, v in zip(answer.raw_output_contents, (self.values, b""))],
                         [True, True])

    def test_an_upstream_reset_after_the_head_cuts_the_answer(self):
        """The client has the HEADERS and some of the message, then the gateway's status for
        the reset, never a whole message; grpcio reports an error, not an answer."""
        self.assertCutUnavailable("http_reset_binary", "f-http")




class GrpcPassthroughAsItArrives(HeldGrpcAnswer, unittest.TestCase):
    """gRPC client -> gRPC upstream (GG) with a 1 MiB answer: the gateway passes the
    upstream's message on, byte for byte, while it is still arriving
    (gateway/frontends/grpc_answer_relay.h, PassthroughAnswerRelay)."""

    OK_MODEL = "grpc_ok"

    def upstream_message(self, model, empty_tail=False):
        """The message UP answers `model`'s request with: what the client must get, as it is."""
        request = pb.ModelInferRequest.FromString(self.request(model))
        return UP._grpc_echo(request, empty_tail).SerializeToString()

    def assertServedAfter(self):
        outcome = Client(GW, GG).infer("grpc_ok")
        self.assertTrue(outcome.ok, outcome)

    def test_the_upstreams_message_goes_on_before_it_is_whole(self):
        for model, empty_tail in (("grpc_ok", False), ("grpc_ok_empty", True)):
            with self.subTest(model=model):
                headers, data, trailers, reset, held = self.held_answer(model)
                self.assertEqual(held, [True], "the answer began only once UP's message was whole")
                self.assertIsNone(reset)
                self.assertEqual(headers.get(":status"), "200")
                self.assertEqual(trailers.get("grpc-status"), "0", trailers)
                expected = self.upstream_message(model, empty_tail)
                self.assertEqual(data[:5], b"\0" + struct.pack(">I", len(expected)))
                self.assertTrue(data[5:] == expected, "the message is not the upstream's, byte for byte")
        # grpcio takes the same answer (no hold: it may come either way).
        answer = grpc_channel(GW).unary_unary(MODEL_INFER)(self.request("grpc_ok_empty"), timeout=30)
        self.assertTrue(answer == self.upstream_message("grpc_ok_empty", True))

    def test_an_upstream_reset_mid_message_cuts_the_answer(self):
        """The client has the HEADERS and part of the message, then UNAVAILABLE naming the
        upstream: never a whole message."""
        self.assertCutUnavailable("grpc_rst_mid", "f-grpc")

    def test_an_error_status_after_the_message_is_the_clients_status(self):
        """UP sends the whole message, then grpc-status 13: the client's call ends with the
        upstream's error, as when the answer is taken whole."""
        headers, data, trailers, reset, held = self.held_answer("grpc_status_after")
        self.assertEqual(held, [True])
        self.assertEqual(headers.get(":status"), "200")
        self.assertEqual(trailers.get("grpc-status"), str(grpc.StatusCode.INTERNAL.value[0]), trailers)
        with self.assertRaises(grpc.RpcError) as raised:
            grpc_channel(GW).unary_unary(MODEL_INFER)(self.request("grpc_status_after"), timeout=30)
        self.assertEqual(raised.exception.code(), grpc.StatusCode.INTERNAL)
        self.assertEqual(raised.exception.details(), F.ERROR_TEXT)
        self.assertServedAfter()

    def test_a_renamed_model_waits_for_the_whole_message(self):
        """A route that rewrites the model's name changes the message: taken whole, renamed."""
        headers, data, trailers, reset, held = self.held_answer("grpc_alias_ok", timeout=1.5)
        self.assertEqual(held, [False], "a renamed answer began before its message was whole")
        self.assertEqual(trailers.get("grpc-status"), "0", trailers)
        answer = pb.ModelInferResponse.FromString(data[5:])
        self.assertEqual(answer.model_name, "grpc_alias_ok")
        self.assertTrue(answer.raw_output_contents[0] == self.values, "the tensor differs")



if __name__ == "__main__":
    unittest.main()
