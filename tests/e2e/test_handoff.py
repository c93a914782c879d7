"""End-to-end: the shared-memory handoff to a colocated upstream (config `handoff`), with
real processes on loopback and POSIX shm objects made here with multiprocessing.shared_memory.

  U       a builtin infergate with client shm on (keys under "/infergate_": the gateways'
          pools and this module's client objects), the colocated upstream of G and G_small
  G       the gateway under test: three colocated upstreams in front of U, each with a
          4 MiB pool, chosen by the header / metadata x-path:
            (none)         -> u-grpc   (U over gRPC)
            x-path: http   -> u-http   (U over HTTP, binary-tensor encoding)
            x-path: httpj  -> u-httpj  (U over HTTP, JSON encoding)
          client shm on at G too (keys under "/infergate_e2eh_")
  G_small a pool of 300 KiB in front of U: room for one 256 KiB tensor at a time
  U_off   a builtin infergate with client shm off (registrations answered 501 /
          UNIMPLEMENTED); G_ref has a handoff toward it, over gRPC and HTTP
  U_r     a builtin infergate with client shm on, on fixed ports, restarted by the tests;
          G_r (gRPC, health checks off: it never notices a restart by itself) and G_r2
          (HTTP, health checks every 100 ms) in front of it
  U_b     a builtin infergate with client shm on, stopped (SIGSTOP) for a while so that
          G_b, probing it every 100 ms, marks it unhealthy, then resumed (SIGCONT)

What happened inside a gateway is read from GET /admin/upstreams on its metrics listener
(per endpoint a "handoff" object: pool_ready, refused, registrations, bytes by how they
travelled); what an upstream holds, from its own /v2/systemsharedmemory/status. Tensor
bytes are compared with numpy. Every process must exit 0 on SIGTERM without a sanitizer
report; no client shm object made here and no pool of a gateway may be left in /dev/shm.
"""
import concurrent.futures
import glob
import json
import os
import signal
import unittest

import numpy as np

import grpc_stubs
import shm_helpers
from grpc_stubs import stub_of
from harness import LOOPBACK_HEAD, Gateway, Processes, free_port, wait_until
from shm_helpers import (SENTINEL, In, Out, ShmObjects, datatype_of, endpoint, grpc_infer_request,
                         handoff, headers_of, http_binary_infer, http_infer, http_infer_body,
                         http_register, http_status, http_unregister, metadata_of, model_of,
                         stop_processes, tear_down)

U = G = G_SMALL = U_OFF = G_REF = U_R = G_R = G_R2 = U_B = G_B = None
U_R_PORTS = {}
PROCESSES = Processes()
_gateway_pids = {}      # label -> pid of every gateway with a handoff (for the pool check)

PREFIX = "infergate_e2eh_%d_" % os.getpid()
OBJECTS = ShmObjects(PREFIX)

KIB = 1024
SIZE = 256 * KIB        # the tensors of most tests
MIN_BYTES = 65536
POOL_BYTES = 4 * 1024 * KIB
SMALL_POOL = 300 * KIB  # one SIZE tensor, not two

# The upstreams' client shm: the gateways' pools and this module's client objects.
UPSTREAM_SHM = """shm:
  enabled: true
  allowed_key_prefixes: ["/infergate_"]
"""

HANDOFF = "{ min_bytes: %d, pool_bytes: $pool, kind: system, passthrough: true }" % MIN_BYTES

# Client shm at a gateway: this module's objects.
CLIENT_SHM = """shm:
  enabled: true
  allowed_key_prefixes: ["/infergate_e2eh_"]
"""


def colocated(name, protocol, endpoint, http_format=None, health_check=None):
    """A colocated upstream with the handoff (its pool $pool bytes), for a gateway's
    upstreams: list."""
    return "".join((
        "  - name: %s\n" % name,
        "    protocol: %s\n" % protocol,
        "    http_format: %s\n" % http_format if http_format else "",
        '    endpoints: ["%s"]\n' % endpoint,
        "    colocated: true\n",
        "    timeout_ms: 30000\n",
        "    health_check: %s\n" % health_check if health_check else "",
        "    handoff: %s\n" % HANDOFF))


def route(upstream, path=None):
    """Every model to `upstream`; with `path`, only when the x-path header says so."""
    match = '{ model: "*", headers: { x-path: %s } }' % path if path else '{ model: "*" }'
    return "  - match: %s\n    upstream: %s\n" % (match, upstream)


def gateway_template(upstreams, routes, shm=""):
    """A gateway on loopback ports 0: `upstreams` and `routes` (lists of the above), then
    `shm` (a whole section)."""
    return LOOPBACK_HEAD + "upstreams:\n" + "".join(upstreams) + "routes:\n" + "".join(routes) + shm


G_TEMPLATE = gateway_template(
    [colocated("u-grpc", "grpc", "$u_grpc"), colocated("u-http", "http", "$u_http"),
     colocated("u-httpj", "http", "$u_http", http_format="json")],
    [route("u-http", "http"), route("u-httpj", "httpj"), route("u-grpc")],
    CLIENT_SHM + "  max_regions: 64\n")

G_SMALL_TEMPLATE = gateway_template([colocated("u-grpc", "grpc", "$u_grpc")], [route("u-grpc")])

G_REF_TEMPLATE = gateway_template(
    [colocated("u-grpc", "grpc", "$u_grpc"), colocated("u-http", "http", "$u_http")],
    [route("u-http", "http"), route("u-grpc")], CLIENT_SHM)

# One colocated upstream `u` of $protocol at $address, health checks as $health says.
G_ONE_TEMPLATE = gateway_template(
    [colocated("u", "$protocol", "$address", health_check="$health")], [route("u")])


# ---- module set-up -----------------------------------------------------------------------

def shm_upstream(http="127.0.0.1:0", grpc_address="127.0.0.1:0"):
    return Gateway.builtin_upstream(http=http, grpc=grpc_address, extra=UPSTREAM_SHM)


def _start_u_r():
    """U_r, on its fixed ports."""
    return PROCESSES.start("U_r", shm_upstream(http="127.0.0.1:%d" % U_R_PORTS["http"],
                                               grpc_address="127.0.0.1:%d" % U_R_PORTS["grpc"]))


def _start_gateway(label, gateway):
    PROCESSES.start(label, gateway)
    _gateway_pids[label] = gateway.proc.pid
    return gateway


def setUpModule():
    global U, G, G_SMALL, U_OFF, G_REF, U_R, G_R, G_R2, U_B, G_B
    grpc_stubs.load()
    try:
        U = PROCESSES.start("U", shm_upstream())
        U_OFF = PROCESSES.start("U_off", Gateway.builtin_upstream())
        U_R_PORTS.update(http=free_port(), grpc=free_port())
        U_R = _start_u_r()
        U_B = PROCESSES.start("U_b", shm_upstream())
        pool = POOL_BYTES  # G, G_ref, G_r, G_r2, G_b
        G = _start_gateway("G", Gateway.from_template(
            G_TEMPLATE, u_grpc=U.address("grpc"), u_http=U.address("http"), pool=pool))
        G_SMALL = _start_gateway("G_small", Gateway.from_template(
            G_SMALL_TEMPLATE, u_grpc=U.address("grpc"), pool=SMALL_POOL))
        G_REF = _start_gateway("G_ref", Gateway.from_template(
            G_REF_TEMPLATE, u_grpc=U_OFF.address("grpc"), u_http=U_OFF.address("http"), pool=pool))
        G_R = _start_gateway("G_r", Gateway.from_template(
            G_ONE_TEMPLATE, protocol="grpc", address=U_R.address("grpc"),
            health="{ enabled: false }", pool=pool))
        G_R2 = _start_gateway("G_r2", Gateway.from_template(
            G_ONE_TEMPLATE, protocol="http", address=U_R.address("http"),
            health="{ interval_ms: 100, timeout_ms: 500, healthy_threshold: 1, unhealthy_threshold: 2 }",
            pool=pool))
        G_B = _start_gateway("G_b", Gateway.from_template(
            G_ONE_TEMPLATE, protocol="grpc", address=U_B.address("grpc"),
            health="{ interval_ms: 100, timeout_ms: 100, healthy_threshold: 1, unhealthy_threshold: 2 }",
            pool=pool))
        # Every pool registered before the first measured request.
        for gw, names in ((G, ("u-grpc", "u-http", "u-httpj")), (G_SMALL, ("u-grpc",)),
                          (G_R, ("u",)), (G_R2, ("u",)), (G_B, ("u",))):
            for name in names:
                assert wait_until(lambda: handoff(gw, name)["pool_ready"], timeout=20), \
                    "%s %s: %s" % (gw.label, name, handoff(gw, name))
        for name in ("u-grpc", "u-http"):
            assert wait_until(lambda: handoff(G_REF, name)["refused"], timeout=20), handoff(G_REF, name)
    except BaseException:
        stop_processes(PROCESSES)
        raise


def tearDownModule():
    problems = tear_down(PROCESSES, OBJECTS, "client shared-memory objects")
    for label, pid in _gateway_pids.items():
        pools = pool_objects(pid)
        if pools:
            problems.append("%s (pid %d) left its pools in /dev/shm: %s" % (label, pid, pools))
    assert not problems, "\n".join(problems)


def pool_objects(pid):
    return sorted(os.path.basename(p) for p in glob.glob("/dev/shm/infergate_pool_%d_*" % pid))


# ---- what the processes say --------------------------------------------------------------

def regions_at(upstream):
    """name -> (key, offset, byte_size) of the system regions `upstream` has registered."""
    status, body = http_status(upstream)
    assert status == 200, body
    return {r["name"]: (r["key"], r["offset"], r["byte_size"]) for r in body}


def passthrough_regions_at(upstream, gw):
    own = "infergate_r%d_" % gw.proc.pid
    return {n: r for n, r in regions_at(upstream).items() if n.startswith(own)}


def delta(before, after):
    return {k: after[k] - before[k] for k in after if isinstance(after[k], int) and not isinstance(after[k], bool)}


def moved(before, after):
    """(pool_bytes_in, pool_bytes_out, inline_bytes, inline_retries) from handoff state
    `before` to `after`."""
    d = delta(before, after)
    return (d["pool_bytes_in"], d["pool_bytes_out"], d["inline_bytes"], d["inline_retries"])


# ---- requests of identity_<type> ----------------------------------------------------------

def input_of(values):
    """INPUT0 of identity_<type>: `values` inline, shape [1, N]."""
    return In("INPUT0", datatype_of(values), [1, len(values)], values)


def tensor(nbytes, dtype, seed):
    """A [1, N] tensor of `nbytes` bytes: random values (finite for floats)."""
    dtype = np.dtype(dtype)
    count = nbytes // dtype.itemsize
    rng = np.random.default_rng(seed)
    if dtype.kind == "f":
        return rng.standard_normal(count).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, size=count, endpoint=True, dtype=np.int64).astype(dtype)


def http_json_infer(gw, values, path=None, outputs=None):
    """An HTTP JSON request of identity_<type> -> the output as a numpy array."""
    body = http_infer_body([input_of(values)])
    if outputs is not None:
        body["outputs"] = outputs
    status, _, data = gw.request("POST", "/v2/models/%s/infer" % model_of(values),
                                 body=json.dumps(body), headers=headers_of(path))
    assert status == 200, (status, data[:500])
    answer = json.loads(data)
    out = answer["outputs"][0]
    assert (out["name"], out["shape"], out["datatype"]) == ("OUTPUT0", [1, len(values)], datatype_of(values)), out
    return np.array(out["data"], dtype=values.dtype)


def grpc_infer(gw, values, path=None, name_output=True):
    """ModelInfer of identity_<type> -> the output as a numpy array."""
    req = grpc_infer_request(model_of(values), [input_of(values)], [Out("OUTPUT0")] if name_output else ())
    resp = stub_of(gw).ModelInfer(req, metadata=metadata_of(path), timeout=30)
    assert [o.name for o in resp.outputs] == ["OUTPUT0"], resp.outputs
    assert list(resp.outputs[0].shape) == [1, len(values)]
    assert len(resp.raw_output_contents) == 1
    return np.frombuffer(resp.raw_output_contents[0], dtype=values.dtype)


class HandoffCase(unittest.TestCase):
    """Exact results, checked on every answer."""

    def assertSame(self, got, want):
        self.assertEqual(got.dtype, want.dtype)
        self.assertEqual(got.shape, want.shape)
        self.assertTrue(np.array_equal(got.view(np.uint8), want.view(np.uint8)),
                        "output differs from input at %s" % np.flatnonzero(got != want)[:10])


# ---- 1-3. the pool -----------------------------------------------------------------------

class PoolTest(HandoffCase):

    def assertThroughPool(self, gw, upstream, send, values_of, requests=3, in_place=False):
        """`requests` requests of SIZE bytes: every input through the pool, every output
        but the first (its size unknown yet) too. `in_place`: each input was read from the
        client's socket straight into the pool (an HTTP binary-tensor body), else copied
        there."""
        before = handoff(gw, upstream)
        for i in range(requests):
            values = values_of(i)
            self.assertSame(send(values), values)
        after = handoff(gw, upstream)
        d = delta(before, after)
        self.assertTrue(after["pool_ready"], after)
        self.assertEqual(d["pool_bytes_in"], requests * SIZE, after)
        self.assertEqual(d["pool_bytes_in_place"], requests * SIZE if in_place else 0, after)
        self.assertEqual(d["pool_bytes_out"], (requests - 1) * SIZE, after)
        self.assertEqual(d["inline_bytes"], SIZE, after)  # the first output only
        self.assertEqual((d["pool_full"], d["inline_retries"], d["passthrough_bytes"]), (0, 0, 0), after)
        self.assertEqual(after["pool_registrations"], 1, after)
        self.assertEqual(after["refusals"], 0, after)

    def test_1_http_clients_to_the_grpc_upstream(self):
        with self.subTest(client="binary"):
            self.assertThroughPool(G, "u-grpc", lambda v: http_binary_infer(G, v),
                                   lambda i: tensor(SIZE, "<f4", 100 + i), in_place=True)
        with self.subTest(client="json"):
            # No output named: every output is asked for by name once they are known.
            self.assertThroughPool(G, "u-grpc", lambda v: http_json_infer(G, v),
                                   lambda i: tensor(SIZE, "<i4", 110 + i))
        # U lists the pool under the gateway's name, over the object G created.
        pool = handoff(G, "u-grpc")["pool"]
        self.assertTrue(pool.startswith("infergate_pool_%d_" % G.proc.pid), pool)
        key, offset, size = regions_at(U)[pool]
        self.assertTrue(key.startswith("/infergate_pool_%d_" % G.proc.pid), key)
        self.assertEqual((offset, size), (0, POOL_BYTES))
        self.assertTrue(os.path.exists("/dev/shm" + key), key)

    def test_2_grpc_client_to_the_http_upstreams(self):
        for n, upstream, path in ((0, "u-http", "http"), (1, "u-httpj", "httpj")):
            with self.subTest(upstream=upstream, outputs="named"):
                self.assertThroughPool(G, upstream, lambda v: grpc_infer(G, v, path),
                                       lambda i: tensor(SIZE, "<f4", 200 + 10 * n + i))
            with self.subTest(upstream=upstream, outputs="all"):
                self.assertThroughPool(G, upstream, lambda v: grpc_infer(G, v, path, name_output=False),
                                       lambda i: tensor(SIZE, "<i4", 220 + 10 * n + i))
        # Three pools of G, each registered under its own name.
        pools = {handoff(G, u)["pool"] for u in ("u-grpc", "u-http", "u-httpj")}
        self.assertEqual(len(pools), 3)
        self.assertLessEqual(pools, set(regions_at(U)))
        self.assertEqual(len(pool_objects(G.proc.pid)), 3, pool_objects(G.proc.pid))

    def test_3_same_protocol_requests(self):
        # gRPC client -> gRPC upstream and HTTP binary client -> HTTP upstream: a message
        # of at least min_bytes is decoded for the handoff.
        cases = (("u-grpc", lambda v: grpc_infer(G, v), "<f8", False),
                 ("u-http", lambda v: http_binary_infer(G, v, "http"), "<f8", True),
                 ("u-httpj", lambda v: http_json_infer(G, v, "httpj"), "<f8", False))
        for n, (upstream, send, dtype, in_place) in enumerate(cases):
            with self.subTest(upstream=upstream, size="big"):
                self.assertThroughPool(G, upstream, send, lambda i: tensor(SIZE, dtype, 300 + 10 * n + i),
                                       in_place=in_place)
            with self.subTest(upstream=upstream, size="small"):
                # Below min_bytes: passed through as it came, the handoff untouched.
                before = handoff(G, upstream)
                for i in range(3):
                    values = tensor(MIN_BYTES // 4, dtype, 350 + 10 * n + i)
                    self.assertSame(send(values), values)
                self.assertEqual(handoff(G, upstream), before)


# ---- 4. client regions passed by reference ----------------------------------------------

class PassthroughTest(shm_helpers.ObjectsMixin, HandoffCase):

    shm_objects = OBJECTS

    def gateway(self):
        return G

    def infer(self, client, path, in_ref, out_ref, count, datatype):
        """identity with its input and output in client regions; the response names the
        output's region, not its bytes."""
        model = "identity_%s" % datatype.lower()
        inputs, outputs = [In("INPUT0", datatype, [1, count], shm=in_ref)], [Out("OUTPUT0", shm=out_ref)]
        if client == "http":
            status, body = http_infer(G, model, inputs, outputs, path=path)
            self.assertEqual(status, 200, body)
            self.assertEqual(body["outputs"],
                             [{"name": "OUTPUT0", "datatype": datatype, "shape": [1, count]}])
            return
        resp = stub_of(G).ModelInfer(grpc_infer_request(model, inputs, outputs),
                                     metadata=metadata_of(path), timeout=30)
        self.assertEqual(list(resp.raw_output_contents), [b""])
        self.assertEqual((resp.outputs[0].name, list(resp.outputs[0].shape)), ("OUTPUT0", [1, count]))

    def run_case(self, client, path, upstream, seed):
        count = SIZE // 4
        in_obj, out_obj = self.make(SIZE + 8192), self.make(SIZE + 8192)
        in_name, out_name = "in_%s_%s" % (client, upstream), "out_%s_%s" % (client, upstream)

        def register(in_key):
            # Regions at page and non-page offsets of their objects; tensors at offsets inside.
            self.assertEqual(http_register(G, in_name, in_key, SIZE + 100, offset=4096)[0], 200)
            self.assertEqual(http_register(G, out_name, out_obj.key, SIZE + 200, offset=1000)[0], 200)

        register(in_obj.key)
        in_ref, out_ref = (in_name, SIZE, 64), (out_name, SIZE, 128)
        before = handoff(G, upstream)
        before_regions = passthrough_regions_at(U, G)

        def one(i, source=in_obj, check_around=True):
            values = tensor(SIZE, "<u4", seed + i)
            source.write(4096 + 64, values.tobytes())
            out_obj.fill()
            self.infer(client, path, in_ref, out_ref, count, "UINT32")
            self.assertSame(np.frombuffer(out_obj.read(1000 + 128, SIZE), dtype="<u4"), values)
            if check_around:
                self.assertEqual(out_obj.read(1000 + 128 - 8, 8) + out_obj.read(1000 + 128 + SIZE, 8),
                                 bytes([SENTINEL]) * 16, "bytes around the output written")

        def assertRegisteredUpstream():
            self.assertTrue(wait_until(lambda: len(passthrough_regions_at(U, G)) == len(before_regions) + 2,
                                       timeout=10), regions_at(U))

        def assertGoneUpstream():
            self.assertTrue(wait_until(lambda: passthrough_regions_at(U, G) == before_regions, timeout=10),
                            passthrough_regions_at(U, G))

        # The first request goes inline (the gateway reads and writes the regions itself)
        # and queues their registration with the upstream.
        one(0)
        first = handoff(G, upstream)
        d = delta(before, first)
        # The input read by the gateway goes through the pool; the output (its size not
        # known yet) comes back inline and the gateway writes it into the region. (That
        # output is not counted in inline_bytes: a gap in the gateway's accounting,
        # reported; not asserted here.)
        self.assertEqual((d["passthrough_bytes"], d["pool_bytes_in"], d["pool_bytes_out"]), (0, SIZE, 0), first)
        assertRegisteredUpstream()
        new = {n: r for n, r in passthrough_regions_at(U, G).items() if n not in before_regions}
        self.assertEqual(sorted(new.values()), sorted([(in_obj.key, 4096, SIZE + 100),
                                                       (out_obj.key, 1000, SIZE + 200)]))
        self.assertTrue(wait_until(lambda: handoff(G, upstream)["region_registrations"]
                                   == before["region_registrations"] + 2, timeout=10))
        # Then by reference: zero copies, the upstream reads and writes the client's objects.
        mid = handoff(G, upstream)
        for i in range(1, 4):
            one(i)
        after = handoff(G, upstream)
        d = delta(mid, after)
        self.assertEqual(d["passthrough_bytes"], 3 * 2 * SIZE, after)
        self.assertEqual((d["inline_bytes"], d["pool_bytes_in"], d["pool_bytes_out"], d["inline_retries"]),
                         (0, 0, 0, 0), after)
        # Unregistered at the gateway: gone from the upstream within a few seconds.
        self.assertEqual(http_unregister(G, in_name)[0], 200)
        self.assertEqual(http_unregister(G, out_name)[0], 200)
        assertGoneUpstream()
        # The name registered again over another object: a new registration upstream, never
        # the old one (the first request inline again, reading the new object).
        other = self.make(SIZE + 8192)
        register(other.key)
        in_obj.write(4096 + 64, bytes(SIZE))
        one(50, source=other, check_around=False)
        assertRegisteredUpstream()
        one(51, source=other, check_around=False)
        self.assertEqual(http_unregister(G)[0], 200)
        assertGoneUpstream()

    def test_4_client_regions_passed_through(self):
        for n, (client, path, upstream) in enumerate((("http", None, "u-grpc"), ("grpc", None, "u-grpc"),
                                                      ("grpc", "http", "u-http"), ("http", "httpj", "u-httpj"))):
            with self.subTest(client=client, upstream=upstream):
                self.run_case(client, path, upstream, 400 + 100 * n)


# ---- 5. a full pool ----------------------------------------------------------------------

class PoolFullTest(HandoffCase):

    def test_5_pool_full_goes_inline(self):
        # Learns OUTPUT0's size: the input through the pool, the output inline.
        values = tensor(SIZE, "<f4", 500)
        before = handoff(G_SMALL, "u-grpc")
        self.assertSame(http_binary_infer(G_SMALL, values), values)
        d = delta(before, handoff(G_SMALL, "u-grpc"))
        self.assertEqual((d["pool_bytes_in"], d["pool_bytes_in_place"], d["inline_bytes"], d["pool_full"]),
                         (SIZE, SIZE, SIZE, 0))
        # Now the output's slot finds no room next to the input's: inline.
        before = handoff(G_SMALL, "u-grpc")
        values = tensor(SIZE, "<f4", 501)
        self.assertSame(http_binary_infer(G_SMALL, values), values)
        d = delta(before, handoff(G_SMALL, "u-grpc"))
        self.assertEqual((d["pool_bytes_in"], d["pool_bytes_out"], d["inline_bytes"], d["pool_full"]),
                         (SIZE, 0, SIZE, 1))
        # Eight at once: a slot for one input at a time; the others inline, all exact.
        before = handoff(G_SMALL, "u-grpc")
        inputs = [tensor(SIZE, "<f4", 510 + i) for i in range(8)]
        senders = [lambda v: http_binary_infer(G_SMALL, v), lambda v: grpc_infer(G_SMALL, v)]
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            outputs = list(pool.map(lambda iv: senders[iv[0] % 2](iv[1]), enumerate(inputs)))
        for got, want in zip(outputs, inputs):
            self.assertSame(got, want)
        after = handoff(G_SMALL, "u-grpc")
        self.assertLessEqual(after["pool_bytes_in_use"], after["pool_bytes"], after)
        d = delta(before, after)
        self.assertGreaterEqual(d["pool_full"], 8, after)  # at least every output
        self.assertEqual(d["pool_bytes_in"] + d["pool_bytes_out"] + d["inline_bytes"], 16 * SIZE, after)
        self.assertEqual(d["inline_retries"], 0, after)
        # Every slot given back: a request alone goes through the pool again. A slot is
        # freed when its request object goes, which may be a moment after the client has
        # read the answer (seen under ThreadSanitizer), so a few tries; a slot never given
        # back fails every one.
        values = tensor(SIZE, "<f4", 520)

        def through_the_pool():
            before = handoff(G_SMALL, "u-grpc")
            self.assertSame(http_binary_infer(G_SMALL, values), values)
            return delta(before, handoff(G_SMALL, "u-grpc"))["pool_bytes_in"] == SIZE
        self.assertTrue(wait_until(through_the_pool, timeout=5, interval=0.1))
        self.assertTrue(wait_until(lambda: handoff(G_SMALL, "u-grpc")["pool_slots_in_use"] == 0,
                                   timeout=5), handoff(G_SMALL, "u-grpc"))
        # A tensor bigger than the whole pool: inline, twice (its output then known, and
        # too big as well).
        for i, want_full in ((0, 1), (1, 2)):
            values = tensor(512 * KIB, "<i4", 530 + i)
            before = handoff(G_SMALL, "u-grpc")
            self.assertSame(http_binary_infer(G_SMALL, values), values)
            d = delta(before, handoff(G_SMALL, "u-grpc"))
            self.assertEqual((d["pool_bytes_in"], d["pool_bytes_out"], d["inline_bytes"], d["pool_full"]),
                             (0, 0, 2 * 512 * KIB, want_full))


# ---- 6. an upstream that refuses client shared memory -----------------------------------

def metric_samples(gw, name):
    """{labels text: value} of metric `name` on gw's /metrics."""
    status, _, body = gw.request("GET", "/metrics", listener="metrics")
    assert status == 200, body
    out = {}
    for line in body.decode().splitlines():
        if line.startswith(name + "{"):
            labels, value = line[len(name):].rsplit(" ", 1)
            out[labels] = float(value)
    return out


class MetricsTest(HandoffCase):

    def test_prometheus_shows_the_handoff_as_the_admin_api_does(self):
        values = tensor(SIZE, "int8", 950)  # a model no other test uses: sizes are learned per model
        self.assertSame(grpc_infer(G, values), values)
        state = handoff(G, "u-grpc")
        ep = endpoint(G, "u-grpc")["address"]
        where = 'upstream="u-grpc",endpoint="%s"' % ep
        samples = metric_samples(G, "infergate_shm_handoff_bytes_total")
        for path, key in (("pool_in", "pool_bytes_in"), ("pool_out", "pool_bytes_out"),
                          ("passthrough", "passthrough_bytes"), ("inline", "inline_bytes")):
            self.assertEqual(samples['{%s,path="%s"}' % (where, path)], state[key], path)
        self.assertEqual(metric_samples(G, "infergate_shm_handoff_pool_ready")["{%s}" % where], 1)
        # The pool's size as configured, and nothing of it held once the answers are in.
        self.assertGreater(state["pool_bytes"], 0)
        self.assertEqual(metric_samples(G, "infergate_shm_handoff_pool_bytes")["{%s}" % where],
                         state["pool_bytes"])
        self.assertTrue(wait_until(lambda: metric_samples(
            G, "infergate_shm_handoff_pool_bytes_in_use")["{%s}" % where] == 0, timeout=5))
        refused = metric_samples(G_REF, "infergate_shm_handoff_refused")
        self.assertEqual(set(refused.values()), {1.0}, refused)


class RefusedTest(HandoffCase):

    def test_6_refused_upstream_gets_everything_inline(self):
        cases = (("u-grpc", None, lambda v: http_json_infer(G_REF, v), lambda v: grpc_infer(G_REF, v)),
                 ("u-http", "http", lambda v: grpc_infer(G_REF, v, "http"),
                  lambda v: http_binary_infer(G_REF, v, "http")))
        for n, (upstream, path, other_protocol, send) in enumerate(cases):
            with self.subTest(upstream=upstream):
                before = handoff(G_REF, upstream)
                self.assertTrue(before["refused"], before)
                self.assertFalse(before["pool_ready"], before)
                self.assertEqual(before["pool_registrations"], 0, before)
                # Decoded (the other protocol): every tensor inline.
                for i in range(2):
                    values = tensor(SIZE, "<f4", 600 + 10 * n + i)
                    self.assertSame(other_protocol(values), values)
                after = handoff(G_REF, upstream)
                d = delta(before, after)
                self.assertEqual(d["inline_bytes"], 2 * 2 * SIZE, after)
                self.assertEqual((d["pool_bytes_in"], d["pool_bytes_out"], d["pool_full"],
                                  d["inline_retries"], d["refusals"]), (0, 0, 0, 0, 0), after)
                # Same protocol, big: passed through as it came, not decoded.
                values = tensor(SIZE, "<f4", 620 + n)
                self.assertSame(send(values), values)
                self.assertEqual(handoff(G_REF, upstream), after)
                # Client regions: read and written by the gateway itself.
                obj = OBJECTS.make(2 * SIZE)
                try:
                    self.assertEqual(http_register(G_REF, "r", obj.key, 2 * SIZE, offset=0)[0], 200)
                    values = tensor(SIZE, "<i4", 630 + n)
                    obj.write(0, values.tobytes())
                    inputs = [In("INPUT0", "INT32", [1, SIZE // 4], shm=("r", SIZE, 0))]
                    outputs = [Out("OUTPUT0", shm=("r", SIZE, SIZE))]
                    for _ in range(2):
                        status, body = http_infer(G_REF, "identity_int32", inputs, outputs, path=path)
                        self.assertEqual(status, 200, body)
                        self.assertSame(np.frombuffer(obj.read(SIZE, SIZE), dtype="<i4"), values)
                        obj.write(SIZE, bytes(SIZE))
                    self.assertEqual(delta(after, handoff(G_REF, upstream))["passthrough_bytes"], 0)
                finally:
                    http_unregister(G_REF)
                    obj.close()
        # U_off never got a region.
        self.assertEqual(regions_at(U_OFF), {})
        # One line per endpoint, naming the upstream and Triton's flag.
        lines = [l for l in G_REF.stderr_lines if "--allow-client-shm=true" in l]
        self.assertEqual(len(lines), 2, "".join(G_REF.stderr_lines))
        self.assertTrue(any('"upstream":"u-grpc"' in l for l in lines), lines)
        self.assertTrue(any('"upstream":"u-http"' in l for l in lines), lines)


# ---- 7. the upstream restarts ------------------------------------------------------------

def restart_u_r(wait_for=None):
    """Stops U_r and starts a new one on the same ports; `wait_for`, a predicate that must
    hold while it is down."""
    global U_R
    problems = PROCESSES.stop(U_R)
    if wait_for is not None:
        assert wait_until(wait_for, timeout=20), "never held while U_r was down"
    U_R = _start_u_r()
    return problems


class RestartTest(HandoffCase):

    def test_7a_restart_unnoticed_retries_inline_and_registers_again(self):
        # G_r has no health checks: the first request after the restart finds the pool
        # unknown upstream, is sent again inline, and the pool is registered again.
        for i in range(2):
            values = tensor(SIZE, "<f4", 700 + i)
            self.assertSame(grpc_infer(G_R, values), values)
        before = handoff(G_R, "u")
        self.assertEqual(before["pool_registrations"], 1, before)
        self.assertEqual(restart_u_r(), [])
        self.assertEqual(regions_at(U_R), {})
        values = tensor(SIZE, "<f4", 710)
        self.assertSame(grpc_infer(G_R, values), values)
        after = handoff(G_R, "u")
        self.assertEqual(delta(before, after)["inline_retries"], 1, after)
        self.assertTrue(wait_until(lambda: handoff(G_R, "u")["pool_ready"], timeout=10), handoff(G_R, "u"))
        after = handoff(G_R, "u")
        self.assertEqual(after["pool_registrations"], 2, after)
        self.assertIn(after["pool"], regions_at(U_R))
        # Through the pool again, both ways.
        values = tensor(SIZE, "<f4", 711)
        self.assertSame(grpc_infer(G_R, values), values)
        self.assertEqual(moved(after, handoff(G_R, "u")), (SIZE, SIZE, 0, 0))

    def test_7b_restart_noticed_by_health_checks(self):
        # G_r2 probes every 100 ms: it sees U_r down, forgets its registration, and
        # registers the pool with the new U_r once it answers. 7a restarted U_r: G_r2's
        # probes may not have seen the new one answer yet.
        self.assertTrue(wait_until(lambda: endpoint(G_R2, "u")["health"] == "healthy", timeout=10),
                        endpoint(G_R2, "u"))
        for i in range(2):
            values = tensor(SIZE, "<i4", 720 + i)
            self.assertSame(http_json_infer(G_R2, values), values)
        self.assertTrue(wait_until(lambda: handoff(G_R2, "u")["pool_ready"], timeout=10))
        before = handoff(G_R2, "u")
        restart_u_r(wait_for=lambda: endpoint(G_R2, "u")["health"] == "unhealthy"
                    and not handoff(G_R2, "u")["pool_ready"])
        self.assertTrue(wait_until(lambda: handoff(G_R2, "u")["pool_ready"], timeout=10), handoff(G_R2, "u"))
        after = handoff(G_R2, "u")
        self.assertEqual(after["pool_registrations"], before["pool_registrations"] + 1, after)
        self.assertIn(after["pool"], regions_at(U_R))
        values = tensor(SIZE, "<i4", 730)
        self.assertSame(http_json_infer(G_R2, values), values)
        self.assertEqual(moved(after, handoff(G_R2, "u")), (SIZE, SIZE, 0, 0))
        # G_r (no health checks) still recovers on its first request.
        values = tensor(SIZE, "<f4", 731)
        self.assertSame(grpc_infer(G_R, values), values)
        self.assertTrue(wait_until(lambda: handoff(G_R, "u")["pool_ready"], timeout=10), handoff(G_R, "u"))
        self.assertIn(handoff(G_R, "u")["pool"], regions_at(U_R))

    def test_7c_unhealthy_without_restart_registers_again(self):
        """U_b stops answering (SIGSTOP) long enough for G_b to mark it unhealthy, then
        resumes: it never lost the pool. G_b presumed it lost and registers it again; U_b
        answers "already in manager", which the registrar takes as registered (the name
        is the gateway's own, unique per endpoint and registration): the pool is ready
        again, not refused round after round."""
        before = handoff(G_B, "u")
        self.assertTrue(before["pool_ready"], before)
        U_B.proc.send_signal(signal.SIGSTOP)
        try:
            self.assertTrue(wait_until(lambda: endpoint(G_B, "u")["health"] == "unhealthy"
                                       and not handoff(G_B, "u")["pool_ready"], timeout=20))
        finally:
            U_B.proc.send_signal(signal.SIGCONT)
        self.assertTrue(wait_until(lambda: endpoint(G_B, "u")["health"] == "healthy", timeout=20))
        # Requests answer right meanwhile (inline).
        values = tensor(SIZE, "<f4", 740)
        self.assertSame(grpc_infer(G_B, values), values)
        self.assertTrue(wait_until(lambda: handoff(G_B, "u")["pool_ready"], timeout=5), handoff(G_B, "u"))


# ---- 8. an output bigger than its learned slot -------------------------------------------

class OutputGrowthTest(HandoffCase):

    def test_8_a_bigger_request_gets_a_bigger_output_slot(self):
        """Output slots take the learned size, but at least the request's biggest input:
        an identity-like model's bigger request never outgrows its slot (an output that
        still does is sent again inline: HandoffRequestTest covers that path)."""
        for n, (upstream, path) in enumerate((("u-grpc", None), ("u-http", "http"), ("u-httpj", "httpj"))):
            with self.subTest(upstream=upstream):
                small, big = 128 * KIB, 512 * KIB
                seed = 800 + 20 * n
                # 128 KiB learned (the first inline, the second through a slot).
                for i in range(2):
                    values = tensor(small, "<u2", seed + i)
                    self.assertSame(grpc_infer(G, values, path), values)
                before = handoff(G, upstream)
                # 512 KiB: its output slot is sized by its input, not the 128 KiB learned; the
                # next one too; smaller again: the 512 KiB slot holds it.
                for i, nbytes in ((2, big), (3, big), (4, small)):
                    values = tensor(nbytes, "<u2", seed + i)
                    self.assertSame(grpc_infer(G, values, path), values)
                    after = handoff(G, upstream)
                    self.assertEqual(moved(before, after), (nbytes, nbytes, 0, 0), after)
                    before = after
                self.assertTrue(handoff(G, upstream)["pool_ready"])


# ---- 9. pools exist while the gateways run -----------------------------------------------

class PoolObjectsTest(unittest.TestCase):

    def test_9_one_pool_object_per_colocated_endpoint(self):
        want = {"G": 3, "G_small": 1, "G_ref": 2, "G_r": 1, "G_r2": 1, "G_b": 1}
        for label, pid in _gateway_pids.items():
            with self.subTest(gateway=label):
                objects = pool_objects(pid)
                self.assertEqual(len(objects), want[label], objects)
        # The tests' own client objects: only while a test holds them.
        self.assertEqual(OBJECTS.still_there(), [])


if __name__ == "__main__":
    unittest.main()
