"""End-to-end: the gateway as a fleet router, with real processes on loopback (port 0).

  U1 U2 U3   builtin-only infergates: the replicas most tests spread requests over
  K1 K2 K3   replicas for the kill test (K2 is killed with SIGKILL under load, restarted)
  D1 D2      replicas on 127.0.0.2 and 127.0.0.3, one port: a "dns:" name whose addresses
             come from a hosts file the test rewrites

Each test starts its own gateway(s) in front of them. What happened inside a gateway is
read from its admin API (GET /admin/upstreams on the metrics listener): per endpoint the
finished requests, failures, ejections, readmissions, probe streaks and health; per
upstream the retries, shed requests and sequence bindings. Assertions are on those
states and counters and on every answer, never on elapsed time.

Every process must exit 0 on SIGTERM without a sanitizer report.
"""
import concurrent.futures
import http.server
import json
import os
import signal
import string
import struct
import subprocess
import tempfile
import threading
import time
import unittest

import grpc

import grpc_stubs
from harness import Gateway, free_port, wait_until

pb = pb_grpc = None
U = []       # [U1, U2, U3]
K = []       # [K1, K2, K3]
D = []       # [D1, D2]
D_PORT = 0
_started = []
_channels = {}

FLEET_TEMPLATE = """
listeners:
  http:    { address: "127.0.0.1:0" }
  grpc:    { address: "127.0.0.1:0" }
  metrics: { address: "127.0.0.1:0" }
workers: 2
readiness: { policy: all_routes, probe_interval_ms: 100 }
discovery: { dns_refresh_ms: 100, hosts_file: "$hosts_file" }
lifecycle: { watch_config: true, watch_interval_ms: 100, drain_timeout_ms: 10000 }
upstreams:
  - name: fleet
    protocol: $protocol
    endpoints: [$endpoints]
    timeout_ms: 20000
    load_balancing: { policy: $policy$hash }
    health_check: { interval_ms: 100, timeout_ms: 1000, healthy_threshold: 3, unhealthy_threshold: 2$check }
    outlier: { consecutive_failures: 2, base_ejection_ms: 500, max_ejection_ms: 4000 }
    retry: { max_retries: 2, budget_percent: 50, min_retries_per_second: 50 }
    overload: { max_in_flight: $max_in_flight, max_queue: $max_queue, queue_timeout_ms: 300, retry_after_s: 2$per_endpoint }
$extra
routes:
  - match: { model: "*" }
    upstream: fleet
"""


def fleet_config(endpoints, protocol="grpc", policy="round_robin", hash_header=None,
                 max_in_flight=0, max_queue=1024, hosts_file="/nonexistent", metrics_port=None,
                 check_model=None, per_endpoint=None, colocated=False):
    return string.Template(FLEET_TEMPLATE).substitute(
        protocol=protocol, endpoints=", ".join('"%s"' % e for e in endpoints), policy=policy,
        hash=((", hash_header: %s" % hash_header) if hash_header else "") +
             ((", metrics_port: %d, metrics_interval_ms: 50" % metrics_port) if metrics_port else ""),
        check=(", model: %s" % check_model) if check_model else "",
        per_endpoint=(", max_in_flight_per_endpoint: %d" % per_endpoint) if per_endpoint else "",
        extra="    colocated: true" if colocated else "",
        max_in_flight=max_in_flight, max_queue=max_queue, hosts_file=hosts_file)


def _start(label, process):
    process.label = label
    _started.append(process)
    return process.start()


def setUpModule():
    global pb, pb_grpc, U, K, D, D_PORT
    pb, pb_grpc, _, _ = grpc_stubs.load()
    try:
        U = [_start("U%d" % (i + 1), Gateway.builtin_upstream()) for i in range(3)]
        K = [_start("K%d" % (i + 1), Gateway.builtin_upstream()) for i in range(3)]
        D_PORT = free_port()
        D = [_start("D%d" % (i + 1), Gateway.builtin_upstream(
            grpc="127.0.0.%d:%d" % (i + 2, D_PORT), http="127.0.0.%d:0" % (i + 2)))
             for i in range(2)]
    except Exception:
        _stop_everything()
        raise


def _stop_everything():
    problems = []
    for entry in _channels.values():
        entry[0].close()
    _channels.clear()
    for process in reversed(_started):
        if process.proc is not None:
            for p in process.stop_and_check():
                problems.append("%s: %s" % (process.label, p))
    _started.clear()
    return problems


def tearDownModule():
    problems = _stop_everything()
    assert not problems, "\n".join(problems)


# ---- helpers -----------------------------------------------------------------------------

def start_gateway(label, config):
    g = Gateway(config=config)
    return _start(label, g)


def forget_channel(process):
    """Closes the cached channel to `process`: a later process may be given the same port,
    and must not inherit a channel whose connection state belongs to this one."""
    cached = _channels.pop(process.addresses.get("grpc"), None)
    if cached is not None:
        cached[0].close()


def stop_gateway(test, g):
    forget_channel(g)
    problems = g.stop_and_check()
    _started.remove(g)
    test.assertEqual(problems, [])


def kill9(process):
    forget_channel(process)
    process.proc.kill()
    process.proc.wait()
    process._stderr_thread.join(timeout=10)
    process.proc.stdout.close()
    process.proc.stderr.close()
    process.proc = None
    process.dir.cleanup()
    _started.remove(process)


def admin(g, path, method="GET"):
    status, _, body = g.request(method, path, listener="metrics")
    return status, json.loads(body) if body else None


def endpoints(g, upstream="fleet"):
    """address -> the endpoint's admin record."""
    status, data = admin(g, "/admin/upstreams")
    assert status == 200, data
    for u in data["upstreams"]:
        if u["name"] == upstream:
            return {e["address"]: e for e in u["endpoints"]}, u
    raise AssertionError("no upstream %s in %s" % (upstream, data))


def stub_of(process):
    address = process.address("grpc")
    cached = _channels.get(address)
    if cached is not None and cached[2] is not process:  # another process had this port
        cached[0].close()
        cached = None
    if cached is None:
        channel = grpc.insecure_channel(address)
        _channels[address] = (channel, pb_grpc.GRPCInferenceServiceStub(channel), process)
    return _channels[address][1]


def simple_request(a, b, params=None):
    req = pb.ModelInferRequest(model_name="simple")
    for name, values in (("INPUT0", a), ("INPUT1", b)):
        t = req.inputs.add()
        t.name, t.datatype = name, "INT32"
        t.shape.extend([1, 16])
        req.raw_input_contents.append(struct.pack("<16i", *values))
    for key, value in (params or {}).items():
        if isinstance(value, bool):
            req.parameters[key].bool_param = value
        elif isinstance(value, int):
            req.parameters[key].int64_param = value
        else:
            req.parameters[key].string_param = value
    return req


def grpc_simple(g, seed, timeout=15):
    """One simple ModelInfer; ("ok", None) when the sums are right, else (code, details)."""
    a = [seed + i for i in range(16)]
    b = [1] * 16
    try:
        r = stub_of(g).ModelInfer(simple_request(a, b), timeout=timeout)
    except grpc.RpcError as e:
        return (e.code(), e.details())
    got = struct.unpack("<16i", r.raw_output_contents[0])
    if list(got) != [x + y for x, y in zip(a, b)]:
        return ("wrong", got)
    return ("ok", None)


def assert_grpc_ok(test, g, seed):
    """grpc_simple that, failing, names what the gateway saw: its endpoints and its log."""
    result = grpc_simple(g, seed)
    if result[0] != "ok":
        try:
            seen = endpoints(g)
        except Exception as e:  # noqa: BLE001  (the admin listener's own failure is news too)
            seen = repr(e)
        test.fail("call %d: %r\nendpoints: %r\ngateway log (last 30 lines):\n%s" % (
            seed, result, seen, "".join(g.stderr_lines[-30:])))


def http_simple(g, seed, headers=None):
    body = json.dumps({"inputs": [
        {"name": "INPUT0", "shape": [1, 16], "datatype": "INT32", "data": [seed + i for i in range(16)]},
        {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32", "data": [1] * 16}]}).encode()
    status, hdrs, data = g.request("POST", "/v2/models/simple/infer", body, headers=headers)
    if status != 200:
        return (status, data, hdrs)
    out = json.loads(data)["outputs"][0]["data"]
    return ("ok", None, hdrs) if out == [seed + i + 1 for i in range(16)] else ("wrong", out, hdrs)


def sequence_step_http(g, seq, value, start=False, end=False):
    req = {"parameters": {"sequence_id": seq, "sequence_start": start, "sequence_end": end},
           "inputs": [{"name": "INPUT", "shape": [1, 1], "datatype": "INT32", "data": [value]}]}
    status, _, data = g.request("POST", "/v2/models/simple_sequence/infer", json.dumps(req).encode())
    if status != 200:
        return (status, data)
    return ("ok", json.loads(data)["outputs"][0]["data"][0])


def sequence_step_grpc(g, seq, value, start=False, end=False):
    req = pb.ModelInferRequest(model_name="simple_sequence")
    t = req.inputs.add()
    t.name, t.datatype = "INPUT", "INT32"
    t.shape.extend([1, 1])
    req.raw_input_contents.append(struct.pack("<i", value))
    req.parameters["sequence_id"].int64_param = seq
    req.parameters["sequence_start"].bool_param = start
    req.parameters["sequence_end"].bool_param = end
    try:
        r = stub_of(g).ModelInfer(req, timeout=15)
    except grpc.RpcError as e:
        return (e.code(), e.details())
    return ("ok", struct.unpack("<i", r.raw_output_contents[0])[0])


def healthy_everywhere(g, count):
    eps, _ = endpoints(g)
    return len(eps) == count and all(e["health"] == "healthy" for e in eps.values())


def requests_by_endpoint(g):
    eps, _ = endpoints(g)
    return {a: e["requests"] for a, e in eps.items()}


class FleetTest(unittest.TestCase):
    maxDiff = None  # a sanitizer report in a process's exit problems is read whole
    def grpc_endpoints(self, processes):
        return [p.address("grpc") for p in processes]

    def http_endpoints(self, processes):
        return [p.address("http") for p in processes]

    def test_round_robin_spreads_exactly_over_both_protocols(self):
        for protocol in ("grpc", "http"):
            with self.subTest(protocol=protocol):
                addresses = self.grpc_endpoints(U) if protocol == "grpc" else self.http_endpoints(U)
                g = start_gateway("G_rr_" + protocol, fleet_config(addresses, protocol=protocol))
                try:
                    self.assertTrue(wait_until(lambda: healthy_everywhere(g, 3)))
                    before = requests_by_endpoint(g)
                    for i in range(150):
                        self.assertEqual(http_simple(g, i)[0], "ok")
                        self.assertEqual(grpc_simple(g, i)[0], "ok")
                    after = requests_by_endpoint(g)
                    self.assertEqual({a: after[a] - before[a] for a in addresses},
                                     {a: 100 for a in addresses})
                finally:
                    stop_gateway(self, g)

    def test_least_request_and_load_aware_serve_every_endpoint(self):
        for policy in ("least_request", "load_aware"):
            with self.subTest(policy=policy):
                g = start_gateway("G_" + policy, fleet_config(self.grpc_endpoints(U), policy=policy))
                try:
                    self.assertTrue(wait_until(lambda: healthy_everywhere(g, 3)))
                    before = requests_by_endpoint(g)
                    with concurrent.futures.ThreadPoolExecutor(8) as pool:
                        outcomes = list(pool.map(lambda i: grpc_simple(g, i)[0], range(600)))
                    self.assertEqual(outcomes.count("ok"), 600)
                    after = requests_by_endpoint(g)
                    shares = [after[a] - before[a] for a in before]
                    self.assertEqual(sum(shares), 600)
                    # Power of two choices on equal replicas: each gets a fair part.
                    self.assertTrue(all(s >= 100 for s in shares), shares)
                finally:
                    stop_gateway(self, g)

    def test_hash_header_keeps_a_key_on_one_endpoint(self):
        g = start_gateway("G_hash", fleet_config(self.http_endpoints(U), protocol="http",
                                                 hash_header="x-session"))
        try:
            self.assertTrue(wait_until(lambda: healthy_everywhere(g, 3)))
            homes = {}
            for session in range(12):
                before = requests_by_endpoint(g)
                for i in range(5):
                    self.assertEqual(http_simple(g, i, headers={"x-session": "user-%d" % session})[0], "ok")
                after = requests_by_endpoint(g)
                moved = {a: after[a] - before[a] for a in after if after[a] != before[a]}
                self.assertEqual(len(moved), 1, moved)  # all five on one endpoint
                self.assertEqual(list(moved.values()), [5])
                homes[session] = next(iter(moved))
            self.assertGreaterEqual(len(set(homes.values())), 2, homes)  # keys spread
        finally:
            stop_gateway(self, g)

    def test_sequence_affinity_holds_over_1000_interleaved_sequences(self):
        g = start_gateway("G_affinity", fleet_config(self.grpc_endpoints(U), policy="round_robin"))
        try:
            self.assertTrue(wait_until(lambda: healthy_everywhere(g, 3)))
            ids = list(range(500000, 501000))
            steps = [(1, True, False), (2, False, False), (3, False, False), (4, False, True)]
            wrong = []
            lock = threading.Lock()

            def step(args):
                seq, (value, start, end), total, use_http = args
                fn = sequence_step_http if use_http else sequence_step_grpc
                outcome = fn(g, seq, value, start=start, end=end)
                if outcome != ("ok", total):
                    with lock:
                        wrong.append((seq, value, outcome))

            total = 0
            for n, s in enumerate(steps):
                total += s[0]
                # Every sequence takes its step before any takes the next one, in both client
                # forms: round robin alone would scatter each sequence over the replicas.
                work = [(seq, s, total, (seq + n) % 2 == 0) for seq in ids]
                with concurrent.futures.ThreadPoolExecutor(16) as pool:
                    list(pool.map(step, work))
            self.assertEqual(wrong[:5], [])
            eps, fleet = endpoints(g)
            self.assertEqual(fleet["sequences"], 0)  # every sequence ended: no binding left
            self.assertTrue(all(e["requests"] > 500 for e in eps.values()), eps)
        finally:
            stop_gateway(self, g)

    def test_sigkill_of_an_endpoint_under_load_then_restart(self):
        g = start_gateway("G_kill", fleet_config(self.grpc_endpoints(K), policy="least_request"))
        victim = K[1]
        victim_address = victim.address("grpc")
        victim_port = victim.port("grpc")
        try:
            self.assertTrue(wait_until(lambda: healthy_everywhere(g, 3)))
            outcomes = []
            lock = threading.Lock()
            stop = threading.Event()

            def client(n):
                i = 0
                while not stop.is_set():
                    o = grpc_simple(g, n * 100000 + i, timeout=20)
                    i += 1
                    with lock:
                        outcomes.append(o)

            threads = [threading.Thread(target=client, args=(n,)) for n in range(8)]
            for t in threads:
                t.start()
            wait_until(lambda: len(outcomes) >= 200)
            kill9(victim)
            killed_at = len(outcomes)
            wait_until(lambda: len(outcomes) >= killed_at + 400)
            stop.set()
            for t in threads:
                t.join(timeout=60)
            self.assertFalse(any(t.is_alive() for t in threads), "a request hangs")
            kinds = {}
            for o in outcomes:
                kinds[o[0]] = kinds.get(o[0], 0) + 1
            self.assertNotIn("wrong", kinds)
            # Failures only for requests already sent to the victim when it died (at most one
            # per client), each a clear UNAVAILABLE naming the upstream.
            failed = [o for o in outcomes if o[0] != "ok"]
            self.assertLessEqual(len(failed), 8, failed[:5])
            for code, details in failed:
                self.assertEqual(code, grpc.StatusCode.UNAVAILABLE, details)
                self.assertIn("upstream 'fleet'", details)
            eps, fleet = endpoints(g)
            dead = eps[victim_address]
            self.assertGreaterEqual(dead["ejections"] + (dead["health"] == "unhealthy"), 1, dead)
            self.assertTrue(wait_until(lambda: endpoints(g)[0][victim_address]["health"] == "unhealthy"))
            self.assertFalse(endpoints(g)[0][victim_address]["routable"])
            # Every request now goes to the two others, all answered.
            for i in range(30):
                self.assertEqual(grpc_simple(g, i)[0], "ok")

            # The replica comes back on its port: re-admitted after healthy_threshold good
            # probes in a row (the active verdict), then served again.
            replacement = _start("K2'", Gateway.builtin_upstream(grpc="127.0.0.1:%d" % victim_port))
            K[1] = replacement
            self.assertTrue(wait_until(lambda: endpoints(g)[0][victim_address]["health"] == "healthy"))
            back = endpoints(g)[0][victim_address]
            self.assertGreaterEqual(back["good_streak"], 3)
            self.assertTrue(back["routable"])
            self.assertFalse(back["ejected"])
            before = back["requests"]
            for i in range(60):
                self.assertEqual(grpc_simple(g, i)[0], "ok")
            self.assertGreater(endpoints(g)[0][victim_address]["requests"], before)
        finally:
            stop_gateway(self, g)

    def test_a_sequence_whose_endpoint_died_fails_clearly(self):
        extra = [_start("S%d" % i, Gateway.builtin_upstream()) for i in range(2)]
        g = start_gateway("G_seqdeath", fleet_config(self.grpc_endpoints(extra), policy="round_robin"))
        try:
            self.assertTrue(wait_until(lambda: healthy_everywhere(g, 2)))
            self.assertEqual(sequence_step_grpc(g, 42, 5, start=True), ("ok", 5))
            eps, _ = endpoints(g)
            home = [a for a, e in eps.items() if e["sequences"] == 1]
            self.assertEqual(len(home), 1, eps)
            victim = next(p for p in extra if p.address("grpc") == home[0])
            kill9(victim)
            self.assertTrue(wait_until(lambda: endpoints(g)[0][home[0]]["health"] == "unhealthy"))
            code, details = sequence_step_grpc(g, 42, 1)
            self.assertEqual(code, grpc.StatusCode.UNAVAILABLE)
            self.assertIn("sequence 42", details)
            self.assertIn("state is lost", details)
            self.assertEqual(endpoints(g)[1]["affinity_lost"], 1)
            # Started again, the sequence lives on the survivor.
            self.assertEqual(sequence_step_grpc(g, 42, 7, start=True), ("ok", 7))
            self.assertEqual(sequence_step_http(g, 42, 1, end=True), ("ok", 8))
        finally:
            stop_gateway(self, g)
            for p in extra:
                if p.proc is not None:
                    self.assertEqual(p.stop_and_check(), [])
                    _started.remove(p)

    def test_readiness_follows_the_endpoints_health(self):
        port = free_port()
        g = start_gateway("G_ready", fleet_config(["127.0.0.1:%d" % port]))
        replica = None
        try:
            self.assertEqual(g.request("GET", "/v2/health/ready")[0], 400)  # Triton: 400 when not ready
            replica = _start("R", Gateway.builtin_upstream(grpc="127.0.0.1:%d" % port))
            self.assertTrue(wait_until(lambda: g.request("GET", "/v2/health/ready")[0] == 200))
            self.assertEqual(grpc_simple(g, 1)[0], "ok")
            kill9(replica)
            replica = None
            self.assertTrue(wait_until(lambda: g.request("GET", "/v2/health/ready")[0] == 400))
            self.assertEqual(g.request("GET", "/v2/health/live")[0], 200)
            code, details = grpc_simple(g, 1)
            self.assertEqual(code, grpc.StatusCode.UNAVAILABLE)
            self.assertIn("no healthy endpoint", details)
        finally:
            stop_gateway(self, g)
            if replica is not None:
                self.assertEqual(replica.stop_and_check(), [])
                _started.remove(replica)

    def test_overload_is_shed_at_once_with_retry_after_and_memory_stays_bounded(self):
        g = start_gateway("G_shed", fleet_config(self.http_endpoints(U[:1]), protocol="http",
                                                 max_in_flight=2, max_queue=2))
        try:
            self.assertTrue(wait_until(lambda: healthy_everywhere(g, 1)))

            def slow(i):
                body = json.dumps({"inputs": [
                    {"name": "INPUT0", "shape": [1], "datatype": "INT32", "data": [400]}]}).encode()
                return g.request("POST", "/v2/models/sleep/infer", body)

            with concurrent.futures.ThreadPoolExecutor(12) as pool:
                answers = list(pool.map(slow, range(12)))
            ok = [a for a in answers if a[0] == 200]
            shed = [a for a in answers if a[0] == 503]
            self.assertEqual(len(ok) + len(shed), 12)
            self.assertGreaterEqual(len(ok), 2)
            self.assertGreaterEqual(len(shed), 6)
            for status, headers, body in shed:
                self.assertEqual(headers.get("retry-after"), "2")
                self.assertIn("overloaded", json.loads(body)["error"])
            _, fleet = endpoints(g)
            self.assertEqual(fleet["shed"], len(shed))
            self.assertEqual(fleet["queued"], 0)

            # gRPC clients get UNAVAILABLE, and the wait as trailing metadata.
            def slow_grpc(i):
                req = pb.ModelInferRequest(model_name="sleep")
                t = req.inputs.add()
                t.name, t.datatype = "INPUT0", "INT32"
                t.shape.extend([1])
                req.raw_input_contents.append(struct.pack("<i", 400))
                try:
                    stub_of(g).ModelInfer(req, timeout=15)
                    return ("ok", None, None)
                except grpc.RpcError as e:
                    return (e.code(), e.details(), dict(e.trailing_metadata() or ()))

            with concurrent.futures.ThreadPoolExecutor(12) as pool:
                grpc_answers = list(pool.map(slow_grpc, range(12)))
            refused = [a for a in grpc_answers if a[0] != "ok"]
            self.assertGreaterEqual(len(refused), 6)
            for code, details, trailers in refused:
                self.assertEqual(code, grpc.StatusCode.UNAVAILABLE, details)
                self.assertIn("overloaded", details)
                self.assertEqual(trailers.get("retry-after"), "2")

            # Far more offered than the caps admit: the gateway's memory stays flat.
            def rss_kb():
                with open("/proc/%d/status" % g.proc.pid) as f:
                    for line in f:
                        if line.startswith("VmRSS:"):
                            return int(line.split()[1])

            before = rss_kb()
            with concurrent.futures.ThreadPoolExecutor(48) as pool:
                answers = list(pool.map(slow, range(480)))
            self.assertEqual(sum(1 for a in answers if a[0] not in (200, 503)), 0)
            grown = rss_kb() - before
            self.assertLess(grown, 200 * 1024, "RSS grew by %d KiB" % grown)
        finally:
            stop_gateway(self, g)

    def test_reload_under_load_loses_nothing_and_a_broken_file_keeps_the_old_table(self):
        g = start_gateway("G_reload", fleet_config(self.grpc_endpoints(U[:2])))
        path = os.path.join(g.dir.name, "infergate.yaml")
        try:
            self.assertTrue(wait_until(lambda: healthy_everywhere(g, 2)))
            status, routes = admin(g, "/admin/routes")
            self.assertEqual(status, 200)
            first = routes["generation"]
            outcomes = []
            stop = threading.Event()

            def client(n):
                i = 0
                while not stop.is_set():
                    outcomes.append(grpc_simple(g, n * 100000 + i)[0])
                    outcomes.append(http_simple(g, i)[0])
                    i += 1

            threads = [threading.Thread(target=client, args=(n,)) for n in range(6)]
            for t in threads:
                t.start()
            configs = [fleet_config(self.grpc_endpoints(U), policy="least_request"),
                       fleet_config(self.http_endpoints(U[1:]), protocol="http"),
                       fleet_config(self.grpc_endpoints(U[:2]))]
            generation = first
            for n, text in enumerate(configs * 2):
                with open(path, "w") as f:
                    f.write(text)
                if n % 2 == 0:
                    status, answer = admin(g, "/admin/reload", method="POST")
                    self.assertEqual(status, 200, answer)
                    self.assertGreater(answer["generation"], generation)
                    generation = answer["generation"]
                else:
                    g.proc.send_signal(signal.SIGHUP)
                    self.assertTrue(wait_until(lambda: admin(g, "/admin/routes")[1]["generation"] > generation))
                    generation = admin(g, "/admin/routes")[1]["generation"]
                wait_until(lambda: len(outcomes) > 50 * (n + 1), timeout=10)
            stop.set()
            for t in threads:
                t.join(timeout=60)
            self.assertGreater(len(outcomes), 100)
            self.assertEqual([o for o in outcomes if o != "ok"], [])

            # A broken file: reported, and the old table keeps serving.
            with open(path, "w") as f:
                f.write("listeners: { http: { address: 127.0.0.1:0 }\nupstreams: [\n")
            status, answer = admin(g, "/admin/reload", method="POST")
            self.assertEqual(status, 400)
            self.assertIn("infergate.yaml", answer["error"])
            self.assertEqual(admin(g, "/admin/routes")[1]["generation"], generation)
            self.assertEqual(grpc_simple(g, 3)[0], "ok")
            # One whose listeners differ needs a restart: refused the same way.
            with open(path, "w") as f:
                f.write(configs[0].replace('http:    { address: "127.0.0.1:0" }',
                                           'http:    { address: "127.0.0.1:1" }'))
            status, answer = admin(g, "/admin/reload", method="POST")
            self.assertEqual(status, 400)
            self.assertIn("listeners.http", answer["error"])
            self.assertEqual(http_simple(g, 4)[0], "ok")
            # The file watch: a good file is picked up without being asked.
            with open(path, "w") as f:
                f.write(configs[0])
            self.assertTrue(wait_until(lambda: admin(g, "/admin/routes")[1]["generation"] > generation))
            self.assertTrue(wait_until(lambda: len(endpoints(g)[0]) == 3))
            self.assertTrue(any('"event":"reload","ok":false' in l for l in g.stderr_lines))
        finally:
            stop_gateway(self, g)

    def test_sigterm_drains_requests_in_flight(self):
        g = start_gateway("G_drain", fleet_config(self.grpc_endpoints(U)))
        self.assertTrue(wait_until(lambda: healthy_everywhere(g, 3)))

        def slow(i):
            body = json.dumps({"inputs": [
                {"name": "INPUT0", "shape": [1], "datatype": "INT32", "data": [800]}]}).encode()
            return g.request("POST", "/v2/models/sleep/infer", body)[0]

        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            futures = [pool.submit(slow, i) for i in range(8)]
            # Every request has reached an upstream before the signal.
            self.assertTrue(wait_until(lambda: endpoints(g)[1]["in_flight"] == 8))
            g.proc.send_signal(signal.SIGTERM)
            statuses = [f.result(timeout=30) for f in futures]
        self.assertEqual(statuses, [200] * 8)
        code = g.proc.wait(timeout=30)
        self.assertEqual(code, 0)
        self.assertEqual(g.sanitizer_reports(), [])
        g.proc.stdout.close()
        g.proc.stderr.close()
        g.proc = None
        g.dir.cleanup()
        _started.remove(g)

    def test_dns_names_are_re_resolved(self):
        hosts = tempfile.NamedTemporaryFile("w", suffix=".hosts", delete=False)
        hosts.write("127.0.0.2 fleet.test\n")
        hosts.close()
        try:
            g = start_gateway("G_dns", fleet_config(["dns:fleet.test:%d" % D_PORT],
                                                    hosts_file=hosts.name))
            first, second = "127.0.0.2:%d" % D_PORT, "127.0.0.3:%d" % D_PORT
            try:
                self.assertTrue(wait_until(lambda: healthy_everywhere(g, 1)))
                self.assertEqual(list(endpoints(g)[0]), [first])
                for i in range(10):
                    assert_grpc_ok(self, g, i)
                # A pod appears.
                with open(hosts.name + ".new", "w") as f:
                    f.write("127.0.0.2 fleet.test\n127.0.0.3 fleet.test other\n")
                os.rename(hosts.name + ".new", hosts.name)
                self.assertTrue(wait_until(lambda: healthy_everywhere(g, 2)))
                before = requests_by_endpoint(g)
                for i in range(20):
                    assert_grpc_ok(self, g, i)
                after = requests_by_endpoint(g)
                self.assertEqual({a: after[a] - before[a] for a in after}, {first: 10, second: 10})
                # The first pod goes away: drained from the list, nothing fails.
                with open(hosts.name + ".new", "w") as f:
                    f.write("127.0.0.3 fleet.test\n")
                os.rename(hosts.name + ".new", hosts.name)
                self.assertTrue(wait_until(lambda: list(endpoints(g)[0]) == [second]))
                for i in range(10):
                    assert_grpc_ok(self, g, i)
            finally:
                stop_gateway(self, g)
        finally:
            os.unlink(hosts.name)

    def test_sequences_survive_a_reload(self):
        g = start_gateway("G_seqreload", fleet_config(self.grpc_endpoints(U), policy="round_robin"))
        path = os.path.join(g.dir.name, "infergate.yaml")
        try:
            self.assertTrue(wait_until(lambda: healthy_everywhere(g, 3)))
            ids = list(range(610000, 610030))
            for seq in ids:
                self.assertEqual(sequence_step_grpc(g, seq, 1, start=True), ("ok", 1))
            # The same replicas under another policy: bindings and endpoints carry over.
            with open(path, "w") as f:
                f.write(fleet_config(self.grpc_endpoints(U), policy="least_request"))
            status, answer = admin(g, "/admin/reload", method="POST")
            self.assertEqual(status, 200, answer)
            self.assertEqual(endpoints(g)[1]["sequences"], len(ids))
            for seq in ids:
                self.assertEqual(sequence_step_http(g, seq, 2), ("ok", 3))
                self.assertEqual(sequence_step_grpc(g, seq, 3, end=True), ("ok", 6))
            self.assertEqual(endpoints(g)[1]["sequences"], 0)
        finally:
            stop_gateway(self, g)

    def test_colocated_first_endpoint_takes_the_traffic_until_full(self):
        g = start_gateway("G_colocated", fleet_config(self.http_endpoints(U), protocol="http",
                                                      policy="least_request", colocated=True,
                                                      per_endpoint=2))
        local = U[0].address("http")
        try:
            self.assertTrue(wait_until(lambda: healthy_everywhere(g, 3)))
            before = requests_by_endpoint(g)
            for i in range(30):
                self.assertEqual(http_simple(g, i)[0], "ok")
            after = requests_by_endpoint(g)
            self.assertEqual({a: after[a] - before[a] for a in after if after[a] != before[a]},
                             {local: 30})
            eps, _ = endpoints(g)
            self.assertEqual([eps[a]["tier"] for a in self.http_endpoints(U)], [0, 1, 1])

            # Past its cap (two in flight) the spill-over replicas take the rest.
            def slow(i):
                body = json.dumps({"inputs": [
                    {"name": "INPUT0", "shape": [1], "datatype": "INT32", "data": [300]}]}).encode()
                return g.request("POST", "/v2/models/sleep/infer", body)[0]

            before = requests_by_endpoint(g)
            with concurrent.futures.ThreadPoolExecutor(6) as pool:
                self.assertEqual(list(pool.map(slow, range(6))), [200] * 6)
            after = requests_by_endpoint(g)
            spilled = sum(after[a] - before[a] for a in after if a != local)
            self.assertGreaterEqual(spilled, 2)
            self.assertLessEqual(after[local] - before[local], 4)
        finally:
            stop_gateway(self, g)

    def test_health_checks_can_require_a_model(self):
        for model, health in (("simple", "healthy"), ("no_such_model", "unhealthy")):
            with self.subTest(model=model):
                g = start_gateway("G_check_" + model,
                                  fleet_config(self.grpc_endpoints(U[:1]), check_model=model))
                try:
                    address = U[0].address("grpc")
                    self.assertTrue(wait_until(lambda: endpoints(g)[0][address]["health"] == health))
                    expected = 200 if health == "healthy" else 400
                    self.assertTrue(wait_until(lambda: g.request("GET", "/v2/health/ready")[0] == expected))
                finally:
                    stop_gateway(self, g)

    def test_load_aware_follows_the_queue_the_replicas_report(self):
        metrics_port = free_port()
        reported = {"127.0.0.2": 50, "127.0.0.3": 0}

        class Metrics(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                host = self.server.server_address[0]
                body = ("# HELP nv_inference_pending_request_count pending\n"
                        "# TYPE nv_inference_pending_request_count gauge\n"
                        'nv_inference_pending_request_count{model="simple",version="1"} %d\n'
                        % reported[host]).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        servers = [http.server.ThreadingHTTPServer((host, metrics_port), Metrics) for host in reported]
        for server in servers:
            threading.Thread(target=server.serve_forever, daemon=True).start()
        first, second = "127.0.0.2:%d" % D_PORT, "127.0.0.3:%d" % D_PORT
        g = start_gateway("G_load", fleet_config([first, second], policy="load_aware",
                                                 metrics_port=metrics_port))
        try:
            self.assertTrue(wait_until(lambda: healthy_everywhere(g, 2)))
            # Each endpoint's queue is read on its own scrape: wait for both readings.
            def queues(long, short):
                e = endpoints(g)[0]
                return e[long]["queue"] >= 50 and e[short]["queue"] < 50
            self.assertTrue(wait_until(lambda: queues(first, second)))
            before = requests_by_endpoint(g)
            for i in range(20):
                self.assertEqual(grpc_simple(g, i)[0], "ok")
            after = requests_by_endpoint(g)
            self.assertEqual(after[second] - before[second], 20)
            # The queues turn around: so does the traffic.
            reported.update({"127.0.0.2": 0, "127.0.0.3": 50})
            self.assertTrue(wait_until(lambda: queues(second, first)))
            before = requests_by_endpoint(g)
            for i in range(20):
                self.assertEqual(grpc_simple(g, i)[0], "ok")
            after = requests_by_endpoint(g)
            self.assertEqual(after[first] - before[first], 20)
        finally:
            stop_gateway(self, g)
            for server in servers:
                server.shutdown()
                server.server_close()

    def test_admin_api_is_only_on_the_metrics_listener(self):
        g = start_gateway("G_admin", fleet_config(self.grpc_endpoints(U[:1])))
        try:
            self.assertEqual(g.request("GET", "/admin/upstreams")[0], 404)
            self.assertEqual(g.request("POST", "/admin/reload")[0], 404)
            status, routes = admin(g, "/admin/routes")
            self.assertEqual(status, 200)
            self.assertEqual(routes["routes"][0]["targets"], [{"upstream": "fleet", "weight": 100}])
            self.assertRegex(routes["config_hash"], "^[0-9a-f]{16}$")
            self.assertEqual(admin(g, "/admin/reload")[0], 405)
            self.assertEqual(admin(g, "/admin/nothing")[0], 404)
        finally:
            stop_gateway(self, g)


if __name__ == "__main__":
    unittest.main()
