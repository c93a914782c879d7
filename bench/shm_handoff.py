#!/usr/bin/python3
"""shm_handoff.sh's helper: request files, client shared-memory objects, the correctness
guard, the handoff counters, CSV rows and the report.

Run with Debian's /usr/bin/python3 (python3-numpy; python3-grpcio for the guard's one gRPC
request; everything else is the standard library).

  shm_handoff.py prepare SCRATCH --sizes 1,16,64 --prefix PREFIX --infergate BIN
      for each size M (MiB; S = M x 1048576 bytes, N = S / 4 FP32 elements):
        SCRATCH/bin_M.body    HTTP binary-tensor body: JSON header + S raw bytes, INPUT0
                              FP32 [1,N] of `identity_fp32`, OUTPUT0 asked binary
        SCRATCH/bin_M.hlen    the JSON header's length (Inference-Header-Content-Length)
        SCRATCH/shm_M.json    a JSON body whose INPUT0 is bytes [0, S) of region shm_M and
                              whose OUTPUT0 goes to bytes [S, 2S) of it
        /dev/shm/PREFIXM      the POSIX object behind region shm_M (2S bytes; the input
                              at 0, the same values as bin_M.body; the output half filled
                              with a sentinel); its key is listed in SCRATCH/objects.txt
                              as soon as it exists, for `cleanup`
        SCRATCH/shm_M.pb      shm_M.json as a serialized ModelInferRequest (`infergate
                              transcode`), for U's gRPC listener
  shm_handoff.py wait-pool SCRATCH [--timeout 30]
      polls G_handoff's GET /admin/upstreams until its endpoint's handoff.pool_ready
  shm_handoff.py register SCRATCH
      registers every region (POST /v2/systemsharedmemory/region/shm_M/register, offset
      0, byte size 2S) at U, G_inline and G_handoff; each success is listed in
      SCRATCH/registered.txt, for `cleanup`
  shm_handoff.py guard SCRATCH
      the correctness guard, which also warms G_handoff up: for each size and case, the
      request once (G_handoff's cases: again until one goes by reference, judged by the
      counters' deltas of that one request; at most 40 tries), every answer checked: its
      output bytes must equal the input (binary: the answer's OUTPUT0; shm: the region's
      output half, reset to a sentinel before each request, with no data in the answer).
      One JSON line per check; SCRATCH/guard.json for the report. Exit 0 all good,
      3 a gateway answered wrong or failed, 2 the upstream itself did (setup), 4 (not
      fatal) a case of G_handoff never went by reference.
  shm_handoff.py prime SCRATCH CASE SIZE OUT
      before a run of a G_handoff case: one request of it, checked as by `guard` (exit 3
      when it fails or is wrong); G_handoff's counters after it into OUT, and whether it went by
      reference (one JSON line: {"by_reference", "inline_retries"})
  shm_handoff.py row SCRATCH ROUND SIZE CASE BEFORE PRIME GW_CPU U_CPU < loadgen-json
      one CSV line; BEFORE: the counters `prime` wrote, PRIME: its JSON line (both "-"
      for a case not through G_handoff); the deltas are taken against the counters now
  shm_handoff.py paired SCRATCH ROUND SIZE [--seconds 3]
      the shm request to G_handoff and straight to U alternately, request by request, from
      one Python client on two keep-alive connections: two CSV lines (cases pair_shm_g,
      pair_shm_direct), the pass-through's added latency with the machine's drifts
      cancelled (no target; a cross-check of the loadgen runs)
  shm_handoff.py costs ROUND SIZE < copy_costs-json
      copy_costs' JSON -> CSV lines (cases copy.*; the median in p50_us)
  shm_handoff.py cleanup SCRATCH
      unregisters what `register` registered (G_handoff unregisters its copies at U in
      turn), unlinks what `prepare` made; never fails
  shm_handoff.py table CSV --guard FILE --command C --machine M --load L --build B
      CSV -> Markdown on stdout; exit 1 when a target is missed

SCRATCH/state.json (written by shm_handoff.sh once the processes are up) gives the ports:
{"sizes": [1, 16, 64], "http": {"u": P, "g_inline": P, "g_handoff": P}, "grpc": {"u": P},
 "metrics": {"g_handoff": P}}.
"""
import argparse
import csv
import http.client
import json
import os
import statistics
import subprocess
import sys
import time
from multiprocessing import resource_tracker, shared_memory

MIB = 1 << 20
MODEL = "identity_fp32"
UPSTREAM = "u"
SENTINEL = 0xA5

# case -> (request kind, server, label). Order: as the runs interleave them.
CASES = {
    "inline": ("bin", "g_inline",
               "binary body via G_inline: the tensor forwarded inline over gRPC"),
    "handoff": ("bin", "g_handoff",
                "binary body via G_handoff: input and output through pool slots"),
    "shm_g": ("shm", "g_handoff",
              "client shm via G_handoff: the region passed through by reference"),
    "shm_direct": ("shm", "u", "client shm straight to U (HTTP)"),
    # Not in a target: where the pass-through's added latency goes (U's gRPC frontend,
    # which the gateway calls, against its HTTP one).
    "shm_direct_grpc": ("shm_grpc", "u", "client shm straight to U's gRPC listener (the "
                        "same request as a ModelInferRequest; no target)"),
    "shm_inline": ("shm", "g_inline", "client shm via G_inline: the gateway reads the "
                   "region, forwards it inline, writes the output back"),
    "direct": ("bin", "u", "binary body straight to U"),
}
COUNTERS = ["pool_bytes_in", "pool_bytes_out", "passthrough_bytes", "inline_bytes",
            "pool_full", "inline_retries", "region_registrations", "refusals"]
RESULT_FIELDS = ["requests", "errors", "rps", "p50_us", "p90_us", "p99_us", "max_us",
                 "mean_us", "min_us", "unfinished", "duration_s"]
COLUMNS = (["round", "size_mib", "case"] + RESULT_FIELDS + ["gw_cpu_pct", "u_cpu_pct"]
           + ["d_" + c for c in COUNTERS] + ["prime_by_reference", "prime_inline_retries",
                                               "error_kinds"])


class SetupError(Exception):
    pass


class Wrong(Exception):
    pass


# ---- shared-memory objects ----------------------------------------------------------------
# Python 3.11's SharedMemory registers every object it makes or opens with the resource
# tracker, which unlinks them when this (short-lived) process exits: each is taken off the
# tracker at once, and `cleanup` unlinks them.

def shm_open(key, size=0):
    """The object `key` ("/name"), made with `size` bytes when size > 0, else opened."""
    obj = shared_memory.SharedMemory(name=key.lstrip("/"), create=size > 0, size=size)
    resource_tracker.unregister(obj._name, "shared_memory")  # pylint: disable=protected-access
    return obj


def shm_unlink(key):
    try:
        os.unlink("/dev/shm/" + key.lstrip("/"))
        return True
    except FileNotFoundError:
        return False


def input_values(size_mib):
    import numpy as np  # pylint: disable=import-outside-toplevel
    n = size_mib * MIB // 4
    # Distinct finite values (a shifted ramp, different per size), so that a slot or region
    # holding another request's bytes, or a stale half, shows.
    return (np.arange(n, dtype=np.float32) * np.float32(0.001)
            - np.float32(500.0 + size_mib)).astype("<f4")


def region_name(size_mib):
    return f"shm_{size_mib}"


def load_state(scratch):
    with open(os.path.join(scratch, "state.json")) as f:
        return json.load(f)


def prepare(args):
    sizes = [int(s) for s in args.sizes.split(",")]
    for m in sizes:
        s = m * MIB
        values = input_values(m)
        raw = values.tobytes()
        header = json.dumps({
            "inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, s // 4],
                        "parameters": {"binary_data_size": s}}],
            "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": True}}]},
            separators=(",", ":")).encode()
        with open(os.path.join(args.scratch, f"bin_{m}.body"), "wb") as f:
            f.write(header)
            f.write(raw)
        with open(os.path.join(args.scratch, f"bin_{m}.hlen"), "w") as f:
            f.write(f"{len(header)}\n")
        name = region_name(m)
        body = {
            "inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, s // 4],
                        "parameters": {"shared_memory_region": name,
                                       "shared_memory_byte_size": s,
                                       "shared_memory_offset": 0}}],
            "outputs": [{"name": "OUTPUT0",
                         "parameters": {"shared_memory_region": name,
                                        "shared_memory_byte_size": s,
                                        "shared_memory_offset": s}}]}
        with open(os.path.join(args.scratch, f"shm_{m}.json"), "w") as f:
            json.dump(body, f, separators=(",", ":"))
        with open(os.path.join(args.scratch, f"shm_{m}.json"), "rb") as f_in, \
                open(os.path.join(args.scratch, f"shm_{m}.pb"), "wb") as f_out:
            subprocess.run([args.infergate, "transcode", "--from", "json", "--to", "protobuf",
                            "--model", MODEL], stdin=f_in, stdout=f_out, check=True)
        key = f"/{args.prefix}{m}"
        with open(os.path.join(args.scratch, "objects.txt"), "a") as f:
            f.write(key + "\n")  # listed first: cleanup unlinks it whatever happens next
        obj = shm_open(key, 2 * s)
        obj.buf[:s] = raw
        obj.buf[s:2 * s] = bytes([SENTINEL]) * s
        obj.close()
        with open(os.path.join(args.scratch, f"shm_{m}.key"), "w") as f:
            f.write(key + "\n")
    return 0


# ---- HTTP --------------------------------------------------------------------------------

def http_call(port, method, path, body=None, headers=None, timeout=120):
    """(status, lowercase headers, body bytes)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        r = conn.getresponse()
        data = r.read()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, data
    finally:
        conn.close()


def admin_counters(state):
    status, _, data = http_call(state["metrics"]["g_handoff"], "GET", "/admin/upstreams",
                                timeout=10)
    if status != 200:
        raise SetupError(f"/admin/upstreams: HTTP {status}")
    for u in json.loads(data)["upstreams"]:
        if u["name"] == UPSTREAM:
            e = u["endpoints"][0]
            if "handoff" not in e:
                raise SetupError(f"G_handoff's endpoint {e['address']} has no handoff section")
            return dict(e["handoff"], health=e["health"], routable=e["routable"])
    raise SetupError(f"no upstream {UPSTREAM!r} in G_handoff's /admin/upstreams")


def wait_pool(args):
    state = load_state(args.scratch)
    deadline = time.monotonic() + args.timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = admin_counters(state)
            if last.get("pool_ready"):
                print(json.dumps(last))
                return 0
        except (OSError, SetupError, ValueError) as e:
            last = str(e)
        time.sleep(0.1)
    print(f"shm_handoff.py: G_handoff's pool not ready after {args.timeout} s: {last}",
          file=sys.stderr)
    return 2


def register(args):
    state = load_state(args.scratch)
    for server in ("u", "g_inline", "g_handoff"):
        port = state["http"][server]
        for m in state["sizes"]:
            with open(os.path.join(args.scratch, f"shm_{m}.key")) as f:
                key = f.read().strip()
            name = region_name(m)
            body = json.dumps({"key": key, "offset": 0, "byte_size": 2 * m * MIB})
            status, _, data = http_call(port, "POST",
                                        f"/v2/systemsharedmemory/region/{name}/register", body,
                                        {"Content-Type": "application/json"})
            if status != 200:
                print(f"shm_handoff.py: register {name} ({key}) at {server}: HTTP {status} "
                      f"{data[:300]!r}", file=sys.stderr)
                return 2
            with open(os.path.join(args.scratch, "registered.txt"), "a") as f:
                f.write(f"{server} {port} {name}\n")
    return 0


def cleanup(args):
    """Best effort, every step whatever the others did."""
    path = os.path.join(args.scratch, "registered.txt")
    if os.path.exists(path):
        with open(path) as f:
            entries = [line.split() for line in f if line.strip()]
        # The gateways first: G_handoff unregisters its copies at U before U goes.
        for server, port, name in sorted(entries, key=lambda e: e[0] == "u"):
            try:
                status, _, _ = http_call(int(port), "POST",
                                         f"/v2/systemsharedmemory/region/{name}/unregister",
                                         timeout=5)
                if status != 200:
                    print(f"shm_handoff.py: unregister {name} at {server}: HTTP {status}",
                          file=sys.stderr)
            except OSError as e:
                print(f"shm_handoff.py: unregister {name} at {server}: {e}", file=sys.stderr)
        os.unlink(path)
    path = os.path.join(args.scratch, "objects.txt")
    if os.path.exists(path):
        with open(path) as f:
            for key in f.read().split():
                shm_unlink(key)
        os.unlink(path)
    return 0


# ---- the correctness guard ----------------------------------------------------------------

def send(state, case, m, scratch):
    """One request of `case` at size m: (status, headers, body)."""
    kind, server, _ = CASES[case]
    port = state["http"][server]
    path = f"/v2/models/{MODEL}/infer"
    if kind == "bin":
        with open(os.path.join(scratch, f"bin_{m}.body"), "rb") as f:
            body = f.read()
        with open(os.path.join(scratch, f"bin_{m}.hlen")) as f:
            hlen = f.read().strip()
        return http_call(port, "POST", path, body, {
            "Content-Type": "application/octet-stream", "Inference-Header-Content-Length": hlen})
    if kind == "shm_grpc":
        return grpc_call(state["grpc"][server], os.path.join(scratch, f"shm_{m}.pb"))
    with open(os.path.join(scratch, f"shm_{m}.json"), "rb") as f:
        body = f.read()
    return http_call(port, "POST", path, body, {"Content-Type": "application/json"})


def grpc_call(port, request_file):
    """ModelInfer with a serialized request, the answer left serialized: (status, {},
    body) as http_call's, status 200 for OK."""
    import grpc  # pylint: disable=import-outside-toplevel
    with open(request_file, "rb") as f:
        request = f.read()
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        infer = channel.unary_unary("/inference.GRPCInferenceService/ModelInfer")
        try:
            return 200, {}, infer(request, timeout=120)
        except grpc.RpcError as e:
            return f"gRPC {e.code().name}", {}, (e.details() or "").encode()


def verify(case, m, answer, obj):
    """Raises Wrong unless the answer (and, for shm, the region's output half) is the
    identity of the input."""
    status, headers, body = answer
    if status != 200:
        raise Wrong(f"HTTP {status}: {body[:300]!r}")
    s = m * MIB
    expected = input_values(m).tobytes()
    kind = CASES[case][0]
    if kind == "shm_grpc":  # a ModelInferResponse naming OUTPUT0, with no contents
        if b"OUTPUT0" not in body or len(body) > 1024:
            raise Wrong(f"a ModelInferResponse of {len(body)} bytes: {body[:200]!r}")
        got = bytes(obj.buf[s:2 * s])
        if got != expected:
            raise Wrong("OUTPUT0's bytes in the region differ from the input")
        return
    hlen = headers.get("inference-header-content-length")
    try:
        header = json.loads(body[:int(hlen)] if hlen is not None else body)
    except ValueError as e:
        raise Wrong(f"the answer's JSON header does not parse: {e}: {body[:200]!r}") from e
    outputs = header.get("outputs") or []
    if [o.get("name") for o in outputs] != ["OUTPUT0"]:
        raise Wrong(f"outputs {[o.get('name') for o in outputs]}, expected ['OUTPUT0']")
    out = outputs[0]
    if out.get("datatype") != "FP32" or out.get("shape") != [1, s // 4]:
        raise Wrong(f"OUTPUT0 is {out.get('datatype')} {out.get('shape')}, "
                    f"expected FP32 [1, {s // 4}]")
    params = out.get("parameters") or {}
    if kind == "bin":
        if hlen is None or params.get("binary_data_size") != s:
            raise Wrong(f"OUTPUT0 not binary with {s} bytes: header length {hlen}, "
                        f"parameters {params}")
        got = body[int(hlen):int(hlen) + s]
        if len(body) != int(hlen) + s:
            raise Wrong(f"body of {len(body)} bytes, expected {int(hlen) + s}")
    else:
        # As Triton: no data, and nothing about the region (least of all the name under
        # which the gateway registered it with U).
        if "data" in out or hlen is not None or "binary_data_size" in params:
            raise Wrong("OUTPUT0 was also answered inline")
        named = params.get("shared_memory_region")
        if named is not None and named != region_name(m):
            raise Wrong(f"OUTPUT0's parameters {params} name a region the client never did")
        got = bytes(obj.buf[s:2 * s])
    if got != expected:
        if len(got) != len(expected):
            raise Wrong(f"OUTPUT0 has {len(got)} bytes, expected {len(expected)}")
        import numpy as np  # pylint: disable=import-outside-toplevel
        a, b = np.frombuffer(got, np.uint8), np.frombuffer(expected, np.uint8)
        differ = np.flatnonzero(a != b)
        raise Wrong(f"OUTPUT0's bytes differ from the input: {differ.size} of {s} bytes, "
                    f"the first at byte {differ[0]}")


def by_reference(case, m, delta):
    """Whether G_handoff's counters' delta for one request says it went by reference."""
    s = m * MIB
    if delta["inline_bytes"] or delta["pool_full"] or delta["inline_retries"]:
        return False
    if case == "handoff":
        return delta["pool_bytes_in"] == s and delta["pool_bytes_out"] == s
    return delta["passthrough_bytes"] == 2 * s  # shm_g: the input and the output


def counters_delta(before, after):
    return {c: after.get(c, 0) - before.get(c, 0) for c in COUNTERS}


def guard(args):
    state = load_state(args.scratch)
    results = []
    wrong = upstream_wrong = never = False
    for m in state["sizes"]:
        with open(os.path.join(args.scratch, f"shm_{m}.key")) as f:
            obj = shm_open(f.read().strip())
        try:
            for case in CASES:
                kind, server, _ = CASES[case]
                through_handoff = server == "g_handoff"
                tries, referenced, why, delta = 0, None, None, None
                try:
                    while True:
                        tries += 1
                        if kind.startswith("shm"):
                            obj.buf[m * MIB:2 * m * MIB] = bytes([SENTINEL]) * (m * MIB)
                        before = admin_counters(state) if through_handoff else None
                        answer = send(state, case, m, args.scratch)
                        verify(case, m, answer, obj)  # every answer, primed or not
                        if not through_handoff:
                            break
                        delta = counters_delta(before, admin_counters(state))
                        referenced = by_reference(case, m, delta)
                        if referenced or tries >= 40:
                            break
                        time.sleep(0.05 * min(tries, 5))  # the registrar's turn
                except Wrong as e:
                    why = str(e)
                except OSError as e:
                    why = f"{type(e).__name__}: {e}"
                ok = why is None
                r = {"size_mib": m, "case": case, "ok": ok, "why": why, "tries": tries,
                     "by_reference": referenced, "delta": delta}
                results.append(r)
                print(json.dumps(r), flush=True)
                if not ok:
                    if server == "u":
                        upstream_wrong = True
                    else:
                        wrong = True
                elif referenced is False:
                    never = True
        finally:
            obj.close()
    with open(os.path.join(args.scratch, "guard.json"), "w") as f:
        json.dump(results, f)
    return 2 if upstream_wrong else 3 if wrong else 4 if never else 0


def prime(args):
    """One request of the case before its run, checked: the first of this size after
    another size is where G_handoff learns the output's new size (a too-small slot: the
    attempt fails at U and is sent again inline). Writes the counters after it to OUT
    (the run's `before`), prints its own delta's verdict."""
    state = load_state(args.scratch)
    m = int(args.size)
    with open(os.path.join(args.scratch, f"shm_{m}.key")) as f:
        obj = shm_open(f.read().strip())
    try:
        if CASES[args.case][0].startswith("shm"):
            obj.buf[m * MIB:2 * m * MIB] = bytes([SENTINEL]) * (m * MIB)
        before = admin_counters(state)
        answer = send(state, args.case, m, args.scratch)
        verify(args.case, m, answer, obj)
        after = admin_counters(state)
    except (Wrong, OSError) as e:
        print(f"shm_handoff.py prime: {args.case} {m} MiB: {e}", file=sys.stderr)
        return 3
    finally:
        obj.close()
    with open(args.out, "w") as f:
        json.dump(after, f)
    delta = counters_delta(before, after)
    print(json.dumps({"by_reference": by_reference(args.case, m, delta),
                      "inline_retries": delta["inline_retries"]}))
    return 0


# ---- CSV rows -----------------------------------------------------------------------------

def row(args):
    try:
        result = json.loads(sys.stdin.read())
    except ValueError:
        result = {"errors": 1, "error_kinds": {"no_result": 1}}
    if not result.get("requests"):  # nothing completed inside the window: no latency
        result["error_kinds"] = dict(result.get("error_kinds", {}), none_completed=1)
        for field in RESULT_FIELDS[2:-2]:
            result[field] = ""
    line = {c: "" for c in COLUMNS}
    line.update({"round": args.round, "size_mib": args.size, "case": args.case,
                 "gw_cpu_pct": args.gw_cpu, "u_cpu_pct": args.u_cpu,
                 "error_kinds": ";".join(f"{k}={v}" for k, v in
                                         sorted(result.get("error_kinds", {}).items()))})
    line.update({f: result.get(f, "") for f in RESULT_FIELDS})
    if args.before != "-":
        with open(args.before) as f:
            before = json.load(f)
        delta = counters_delta(before, admin_counters(load_state(args.scratch)))
        line.update({"d_" + c: v for c, v in delta.items()})
    if args.prime != "-":
        with open(args.prime) as f:
            primed = json.load(f)
        line.update({"prime_by_reference": int(primed["by_reference"]),
                     "prime_inline_retries": primed["inline_retries"]})
    csv.writer(sys.stdout, lineterminator="\n").writerow([line[c] for c in COLUMNS])
    return 0


def percentile(sorted_values, q):
    """The q-th percentile (0-100) of sorted values, nearest rank."""
    if not sorted_values:
        return None
    k = max(0, min(len(sorted_values) - 1, int(round(q / 100 * len(sorted_values) + 0.5)) - 1))
    return sorted_values[k]


def paired(args):
    """The shm request to G_handoff and straight to U, alternately on two keep-alive
    connections (which goes first alternates too), for --seconds and at least 20 of each:
    both see the same moments of the machine, so a drift of its other load between two
    loadgen runs does not enter the difference. Two CSV lines (cases pair_shm_g,
    pair_shm_direct). The latencies include this Python client's own time (the same in
    both)."""
    state = load_state(args.scratch)
    m = int(args.size)
    with open(os.path.join(args.scratch, f"shm_{m}.json"), "rb") as f:
        body = f.read()
    path = f"/v2/models/{MODEL}/infer"
    headers = {"Content-Type": "application/json"}
    arms = {"pair_shm_g": state["http"]["g_handoff"], "pair_shm_direct": state["http"]["u"]}
    conns = {k: http.client.HTTPConnection("127.0.0.1", port, timeout=60)
             for k, port in arms.items()}
    latencies = {k: [] for k in arms}
    errors = {k: 0 for k in arms}

    def one(k, record=True):
        t0 = time.perf_counter_ns()
        try:
            conns[k].request("POST", path, body=body, headers=headers)
            r = conns[k].getresponse()
            r.read()
            ok = r.status == 200
        except OSError:
            conns[k].close()
            ok = False
        dt = (time.perf_counter_ns() - t0) / 1000
        if record:
            if ok:
                latencies[k].append(dt)
            else:
                errors[k] += 1

    for _ in range(5):  # connections up, both servers warm
        for k in arms:
            one(k, record=False)
    start = time.monotonic()
    i = 0
    while (time.monotonic() - start < args.seconds or min(map(len, latencies.values())) < 20) \
            and time.monotonic() - start < 4 * args.seconds + 30:
        for k in (list(arms) if i % 2 == 0 else list(arms)[::-1]):
            one(k)
        i += 1
    elapsed = time.monotonic() - start
    for c in conns.values():
        c.close()
    writer = csv.writer(sys.stdout, lineterminator="\n")
    for k in arms:
        v = sorted(latencies[k])
        line = {c: "" for c in COLUMNS}
        line.update({"round": args.round, "size_mib": m, "case": k, "requests": len(v),
                     "errors": errors[k], "duration_s": f"{elapsed:.1f}",
                     "error_kinds": f"failed={errors[k]}" if errors[k] else ""})
        if v:
            line.update({"rps": f"{len(v) / elapsed:.1f}", "p50_us": f"{percentile(v, 50):.0f}",
                         "p90_us": f"{percentile(v, 90):.0f}", "p99_us": f"{percentile(v, 99):.0f}",
                         "max_us": f"{v[-1]:.0f}", "min_us": f"{v[0]:.0f}",
                         "mean_us": f"{statistics.fmean(v):.0f}"})
        writer.writerow([line[c] for c in COLUMNS])
    return 0


def costs(args):
    result = json.loads(sys.stdin.read())
    writer = csv.writer(sys.stdout, lineterminator="\n")
    for name in ("memcpy", "memcpy_cold_cache", "loopback", "rtt_1byte"):
        line = {c: "" for c in COLUMNS}
        line.update({"round": args.round, "size_mib": args.size, "case": "copy." + name,
                     "requests": result["iterations"], "p50_us": result[name + "_us"],
                     "min_us": result[name + "_min_us"], "max_us": result[name + "_max_us"]})
        writer.writerow([line[c] for c in COLUMNS])
    return 0


# ---- the report ---------------------------------------------------------------------------

HANDOFF_RATIO = 0.6      # handoff p50 <= 0.6 x inline p50 ...
HANDOFF_FROM_MIB = 16    # ... at 16 MiB and above
ADDED_SPREAD = 0.20      # pass-through's added p50 within 20% of the smallest size's


def fmt(value, digits=0):
    if value is None:
        return "-"
    return f"{value:,.{digits}f}"


def fms(us):
    """Microseconds as milliseconds, 2 decimals."""
    return "-" if us is None else f"{us / 1000:,.2f}"


def med(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def num(r, field):
    return float(r[field]) if r and r.get(field) not in ("", None) else None


class Runs:
    def __init__(self, rows):
        self.by_key = {(int(r["size_mib"]), r["case"], r["round"]): r for r in rows}
        self.rounds = sorted({r["round"] for r in rows}, key=int)
        self.sizes = sorted({int(r["size_mib"]) for r in rows})

    def get(self, m, case, rd):
        return self.by_key.get((m, case, rd))

    def values(self, m, case, field):
        return [num(self.get(m, case, rd), field) for rd in self.rounds]

    def median(self, m, case, field):
        return med(self.values(m, case, field))

    def per_round(self, m, a, b, op, field="p50_us"):
        out = []
        for rd in self.rounds:
            x, y = num(self.get(m, a, rd), field), num(self.get(m, b, rd), field)
            out.append(op(x, y) if x is not None and y is not None and (y or op is sub) else None)
        return out

    def errors(self, m, case):
        return sum(int(r["errors"] or 0) + ("none_completed" in r["error_kinds"])
                   for rd in self.rounds if (r := self.get(m, case, rd)))

    def total(self, m, case, field):
        return sum(int(float(r[field])) for rd in self.rounds
                   if (r := self.get(m, case, rd)) and r.get(field) not in ("", None))

    def present(self, m, case):
        return any(self.get(m, case, rd) for rd in self.rounds)


def sub(x, y):
    return x - y


def div(x, y):
    return x / y


def size_label(m):
    return f"{m} MiB"


def table(args):
    with open(args.csv) as f:
        rows = list(csv.DictReader(f))
    guard_results = []
    if args.guard and os.path.exists(args.guard):
        with open(args.guard) as f:
            guard_results = json.load(f)
    runs = Runs([r for r in rows if not r["case"].startswith("copy.")])
    copies = Runs([r for r in rows if r["case"].startswith("copy.")])
    sizes = runs.sizes
    cases = [c for c in CASES if any(runs.present(m, c) for m in sizes)]
    out = [f"# Shared-memory handoff: inline, handoff pool, client-shm pass-through "
           f"({args.machine})", "",
           f"`{args.command}`: {len(runs.rounds)} interleaved "
           f"{'round' if len(runs.rounds) == 1 else 'rounds, medians over rounds'}; "
           f"load average {args.load}; gateway {args.build}.", "",
           "All on loopback. U: infergate `protocol: builtin` (`identity_fp32`, 2 workers, "
           "client shm on). G_inline and G_handoff: infergate (2 workers) routing every "
           f"model to U's {'HTTP' if args.upstream == 'http' else 'gRPC'} address, "
           "`colocated: true`; G_handoff with `handoff: "
           "{min_bytes: 65536, pool_bytes: 402653184, kind: system, passthrough: true}`. "
           "One client (bench/loadgen), closed loop, concurrency 1. Binary: the "
           "binary-tensor extension, FP32 [1, S/4] in, OUTPUT0 asked binary. shm: a small "
           "JSON body whose input and output are in one client region (input at 0, output "
           "at S) registered at U and at both gateways under the same name. Cases:", ""]
    for c in cases:
        out.append(f"- `{c}`: {CASES[c][2]}")
    out.append("")

    # Latencies.
    out += ["## p50 (p90), ms", "",
            "| size | " + " | ".join(f"`{c}`" for c in cases)
            + " | memcpy (warm) | memcpy (from memory) | loopback, one way |",
            "|---|" + "---:|" * (len(cases) + 3)]
    few = []
    for m in sizes:
        cells = []
        for c in cases:
            if not runs.present(m, c):
                cells.append("")
                continue
            e = runs.errors(m, c)
            cells.append(f"{fms(runs.median(m, c, 'p50_us'))} ({fms(runs.median(m, c, 'p90_us'))})"
                         + (f" **{e} errors**" if e else ""))
            n = [v for v in runs.values(m, c, "requests") if v is not None]
            if n and min(n) < 10:
                few.append(f"{c} {size_label(m)} ({int(min(n))})")
        for name in ("memcpy", "memcpy_cold_cache", "loopback"):
            cells.append(fms(copies.median(m, "copy." + name, "p50_us")))
        out.append(f"| {size_label(m)} | " + " | ".join(cells) + " |")
    out += ["", "Requests measured per run (median over rounds): " + "; ".join(
        f"{size_label(m)}: " + ", ".join(
            f"`{c}` {fmt(runs.median(m, c, 'requests'))}" for c in cases if runs.present(m, c))
        for m in sizes) + "."]
    if few:
        out += ["", "**Runs with fewer than 10 requests** (their percentiles are a handful "
                "of samples; use a longer `--duration`): " + ", ".join(few) + "."]
    out.append("")

    missed = False
    verdicts = []

    # Target 1: handoff / inline.
    out += ["## Target: handoff end to end <= 0.6x inline at 16 and 64 MiB", "",
            "| size | `inline` p50 ms | `handoff` p50 ms | handoff / inline, per round | "
            "median | handoff - inline, ms | target | verdict |",
            "|---|---:|---:|---|---:|---:|---|---|"]
    for m in sizes:
        if not (runs.present(m, "inline") and runs.present(m, "handoff")):
            continue
        ratios = runs.per_round(m, "handoff", "inline", div)
        diffs = runs.per_round(m, "handoff", "inline", sub)
        r = med(ratios)
        applies = m >= HANDOFF_FROM_MIB
        why = []
        if r is None or r > HANDOFF_RATIO:
            why.append("ratio")
        if runs.errors(m, "handoff") or runs.errors(m, "inline"):
            why.append("errors")
        if not went_by_reference(runs, m, "handoff"):
            why.append("not by reference")
        if applies:
            verdict = "PASS" if not why else f"**MISS** ({', '.join(why)})"
            missed |= bool(why)
            verdicts.append(verdict)
        else:
            verdict = "(no target)"
        out.append(f"| {size_label(m)} | {fms(runs.median(m, 'inline', 'p50_us'))} | "
                   f"{fms(runs.median(m, 'handoff', 'p50_us'))} | "
                   f"{', '.join(f'{x:.2f}' for x in ratios if x is not None)} | "
                   f"{'-' if r is None else f'{r:.2f}x'} | {fms(med(diffs))} | "
                   f"{'<= 0.6x' if applies else ''} | {verdict} |")

    # Target 2: pass-through's gateway-added latency independent of the size.
    base_m = sizes[0] if sizes else None
    added = {m: runs.per_round(m, "shm_g", "shm_direct", sub) for m in sizes
             if runs.present(m, "shm_g") and runs.present(m, "shm_direct")}
    if added:
        base = med(added.get(base_m, []))
        out += ["", f"## Target: client-shm pass-through, gateway-added p50 within 20% from "
                f"{size_label(base_m)} to {size_label(sizes[-1])}", "",
                "Added = `shm_g` p50 - `shm_direct` p50, per round, median over rounds. For "
                "the record (no target): the same difference between the fastest requests "
                "of the runs (less exposed to the machine's other load); the same p50 "
                "difference from one Python client alternating the two request by request "
                "(`shm_handoff.py paired`: the machine's drifts between two runs cancel; its "
                "own latency is in both arms); and the split at "
                "U's gRPC listener, which the gateway calls: U's gRPC - U's HTTP "
                "(`shm_direct_grpc` - `shm_direct`) and what is left to the gateway "
                "(`shm_g` - `shm_direct_grpc`).", "",
                "| size | `shm_g` p50 us | `shm_direct` p50 us | added p50 us, per round | "
                f"added, median | vs {size_label(base_m)} | added, fastest request us | "
                f"added, paired client us (vs {size_label(base_m)}) | "
                "`shm_direct_grpc` p50 us | U's gRPC - HTTP us | G - U's gRPC us |",
                "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
        deviations = []
        for m, per_round in added.items():
            a = med(per_round)
            dev = (a - base) / base if a is not None and base else None
            if m != base_m:
                deviations.append(dev)
            grpc_split = ["-", "-", "-"]
            if runs.present(m, "shm_direct_grpc"):
                grpc_split = [
                    fmt(runs.median(m, "shm_direct_grpc", "p50_us")),
                    fmt(med(runs.per_round(m, "shm_direct_grpc", "shm_direct", sub))),
                    fmt(med(runs.per_round(m, "shm_g", "shm_direct_grpc", sub)))]
            fastest = med(runs.per_round(m, "shm_g", "shm_direct", sub, "min_us"))
            out.append(f"| {size_label(m)} | {fmt(runs.median(m, 'shm_g', 'p50_us'))} | "
                       f"{fmt(runs.median(m, 'shm_direct', 'p50_us'))} | "
                       f"{', '.join(fmt(x) for x in per_round if x is not None)} | {fmt(a)} | "
                       f"{'' if m == base_m else ('-' if dev is None else f'{dev:+.0%}')} | "
                       f"{fmt(fastest)} | {paired_cell(runs, m, base_m)} | "
                       + " | ".join(grpc_split) + " |")
        why = []
        spread = max((abs(d) for d in deviations if d is not None), default=None)
        if base is None or base <= 0 or spread is None or spread > ADDED_SPREAD \
                or None in deviations or len(added) < 2:
            why.append("spread")
        if any(runs.errors(m, c) for m in added for c in ("shm_g", "shm_direct")):
            why.append("errors")
        if any(not went_by_reference(runs, m, "shm_g") for m in added):
            why.append("not by reference")
        verdict = "PASS" if not why else f"**MISS** ({', '.join(why)})"
        missed |= bool(why)
        verdicts.append(verdict)
        out += ["", f"Largest deviation from the {size_label(base_m)} value: "
                f"{'-' if spread is None else f'{spread:.0%}'} (target <= 20%): {verdict}."]

    # Counters.
    out += ["", "## G_handoff's counters over the runs (GET /admin/upstreams, deltas)", "",
            "Each run of a G_handoff case starts with one checked request (`first request`: "
            "whether it went by reference; the counters' deltas below start after it). The "
            "deltas are summed over the rounds' runs, warm-up included, in units of the "
            "tensor size S; `requests` counts the measured window only, so by reference a "
            "delta is a little above requests x 1 (pool in, pool out) or requests x 2 "
            "(passthrough: input and output), and inline is 0.", "",
            "| size | case | first request | requests | pool in / S | pool out / S | "
            "passthrough / S | inline / S | pool full | inline retries | verdict |",
            "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for m in sizes:
        for c in ("handoff", "shm_g"):
            if not runs.present(m, c):
                continue
            s = m * MIB
            cells = [fmt(runs.total(m, c, "d_" + k) / s, 1) for k in
                     ("pool_bytes_in", "pool_bytes_out", "passthrough_bytes", "inline_bytes")]
            ok = went_by_reference(runs, m, c)
            primes = [(num(r, "prime_by_reference"), num(r, "prime_inline_retries"))
                      for rd in runs.rounds if (r := runs.get(m, c, rd))]
            first = ", ".join("by reference" if ref else
                              "retried inline" if retries else "inline" if ref == 0 else "-"
                              for ref, retries in primes)
            out.append(f"| {size_label(m)} | `{c}` | {first} | {runs.total(m, c, 'requests')} | "
                       + " | ".join(cells)
                       + f" | {runs.total(m, c, 'd_pool_full')} | "
                       f"{runs.total(m, c, 'd_inline_retries')} | "
                       f"{'by reference' if ok else '**went inline**'} |")

    # The guard.
    if guard_results:
        out += ["", "## Correctness guard (before the runs)", "",
                "Every answer compared with the input; G_handoff's cases sent until one went "
                "by reference (its counters' delta shown).", "",
                "| size | case | ok | requests until by reference | that request's counters |",
                "|---|---|---|---:|---|"]
        for g in guard_results:
            d = g.get("delta") or {}
            shown = ", ".join(f"{k} {v / MIB:g} MiB" if "bytes" in k else f"{k} {v}"
                              for k, v in d.items() if v)
            tries = g["tries"] if g["by_reference"] else \
                f"never ({g['tries']})" if g["by_reference"] is False else ""
            out.append(f"| {size_label(g['size_mib'])} | `{g['case']}` | "
                       f"{'yes' if g['ok'] else '**no**: ' + (g['why'] or '')} | {tries} | "
                       f"{shown} |")

    # CPU.
    out += ["", "## CPU over the measured window, ms per request (gateway / U; median over "
            "rounds)", "",
            "| size | " + " | ".join(f"`{c}`" for c in cases) + " |",
            "|---|" + "---:|" * len(cases)]
    for m in sizes:
        cells = []
        for c in cases:
            g = cpu_per_request(runs, m, c, "gw_cpu_pct")
            u = cpu_per_request(runs, m, c, "u_cpu_pct")
            cells.append(f"{'-' if g is None else f'{g:.2f}'} / {'-' if u is None else f'{u:.2f}'}")
        out.append(f"| {size_label(m)} | " + " | ".join(cells) + " |")

    met = sum(v == "PASS" for v in verdicts)
    out[2:2] = [f"**{met} of {len(verdicts)} targets met.**", ""]
    out += ["", "p50/p90: loadgen's latency percentiles, median of the rounds' values. Limits "
            "(bench/copy_costs, once per size per round, median of its iterations): memcpy "
            "into a warm buffer (from 16 MiB on, source and destination exceed the caches: "
            "warm and from-memory agree), and one transfer of S bytes over loopback TCP "
            "between two threads. `identity_fp32` answers its input, so S travels each way: "
            "`inline` = 4 loopback transfers (client -> G -> U -> G -> client), `handoff` = 2 "
            "plus G's copy into the pool and U's from the input slot into the output slot, "
            "the shm cases none (U copies the input into the output in the client's region). "
            "CPU per request = the process's CPU over the measured window / requests (an idle "
            "process's own timers count too, which shows at low request rates). A case that "
            "went inline during its runs (the counters grew `inline_bytes`, `pool_full` or "
            "`inline_retries`, or fell short of requests x the by-reference bytes) misses its "
            "target, as does one with errors."]
    print("\n".join(out))
    return 1 if missed else 0


def paired_cell(runs, m, base_m):
    """The paired client's added p50 (median over rounds) and its deviation from base_m's."""
    if not runs.present(m, "pair_shm_g"):
        return "-"
    a = med(runs.per_round(m, "pair_shm_g", "pair_shm_direct", sub))
    b = med(runs.per_round(base_m, "pair_shm_g", "pair_shm_direct", sub))
    if a is None:
        return "-"
    if m == base_m or not b:
        return fmt(a)
    return f"{fmt(a)} ({(a - b) / b:+.0%})"


def went_by_reference(runs, m, case):
    """Every run of the case: nothing inline, the by-reference bytes at least those of the
    requests measured."""
    s = m * MIB
    for rd in runs.rounds:
        r = runs.get(m, case, rd)
        if r is None:
            continue
        if any(num(r, "d_" + k) for k in ("inline_bytes", "pool_full", "inline_retries")):
            return False
        n = num(r, "requests") or 0
        if case == "handoff":
            if any((num(r, "d_" + k) or 0) < n * s for k in ("pool_bytes_in", "pool_bytes_out")):
                return False
        elif (num(r, "d_passthrough_bytes") or 0) < 2 * n * s:
            return False
    return True


def cpu_per_request(runs, m, case, field):
    """ms of CPU per request: CPU % x 10 / req/s."""
    return med([cpu * 10 / rps if cpu is not None and rps else None
                for cpu, rps in zip(runs.values(m, case, field), runs.values(m, case, "rps"))])


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub_ = parser.add_subparsers(dest="mode", required=True)
    p = sub_.add_parser("prepare")
    p.add_argument("scratch")
    p.add_argument("--sizes", required=True)
    p.add_argument("--prefix", required=True)
    p.add_argument("--infergate", required=True)
    p = sub_.add_parser("wait-pool")
    p.add_argument("scratch")
    p.add_argument("--timeout", type=float, default=30)
    for mode in ("register", "guard", "cleanup"):
        sub_.add_parser(mode).add_argument("scratch")
    p = sub_.add_parser("prime")
    for a in ("scratch", "case", "size", "out"):
        p.add_argument(a)
    p = sub_.add_parser("row")
    for a in ("scratch", "round", "size", "case", "before", "prime", "gw_cpu", "u_cpu"):
        p.add_argument(a)
    p = sub_.add_parser("paired")
    for a in ("scratch", "round", "size"):
        p.add_argument(a)
    p.add_argument("--seconds", type=float, default=3)
    p = sub_.add_parser("costs")
    p.add_argument("round")
    p.add_argument("size")
    p = sub_.add_parser("table")
    p.add_argument("csv")
    p.add_argument("--guard")
    for a in ("--command", "--machine", "--load", "--build"):
        p.add_argument(a, required=True)
    p.add_argument("--upstream", default="grpc")
    args = parser.parse_args()
    try:
        return {"prepare": prepare, "wait-pool": wait_pool, "register": register,
                "guard": guard, "prime": prime, "cleanup": cleanup, "row": row,
                "costs": costs, "paired": paired, "table": table}[args.mode](args)
    except SetupError as e:
        print(f"shm_handoff.py {args.mode}: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
