#!/usr/bin/python3
"""forwarding.sh's helper: request files, the correctness guard, CSV rows and the report.

Run with Debian's /usr/bin/python3 (python3-protobuf and python3-grpcio for `requests` and
`check`; the other modes need the standard library only).

  forwarding_report.py requests DIR
      compiles codecs/proto into DIR/proto and writes the request files into DIR:
      {small,big}.json (HTTP JSON), {small,big}.bin (binary extension; the JSON header's
      length in {small,big}.bin.hlen), {small,big}.pb (serialized ModelInferRequest with
      raw_input_contents). small: `simple`, INT32 INPUT0/INPUT1 [1,16]; big: `identity_fp32`,
      FP32 INPUT0 [1,1048576] (4 MiB).
  forwarding_report.py check KIND SIZE DIR LABEL=PORT...
      sends DIR/SIZE.KIND once to each LABEL=PORT (KIND json, bin: HTTP; grpc: gRPC), the
      first label being the reference (direct); decodes every answer into (name, datatype,
      shape, bytes) per output and compares it with the reference's. One JSON line per
      label: {"label","ok","why"}. Exit 0 when all match, 1 when one differs or fails, 2
      when the reference itself is wrong (setup).
  forwarding_report.py row ROUND SIZE CONC CASE PROXY_CPU UPSTREAM_CPU MACHINE_BUSY < json
      loadgen's JSON -> one CSV line
  forwarding_report.py costs ROUND < copy_costs-json
      copy_costs' JSON -> CSV lines (case copy.*; the figure in p50_us)
  forwarding_report.py table CSV --command C --machine M --load L [--broken FILE]
      CSV -> Markdown; exit 1 if a target is missed
"""
import argparse
import array
import csv
import glob
import http.client
import json
import os
import statistics
import struct
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIG_ELEMENTS = 1 << 20
MODEL = {"small": "simple", "big": "identity_fp32"}

# ---- request files ------------------------------------------------------------------------


def load_pb(directory):
    """grpc_service_pb2, compiled into DIR/proto by `requests` (or now)."""
    out = os.path.join(directory, "proto")
    if not glob.glob(os.path.join(out, "grpc_service_pb2.py")):
        os.makedirs(out, exist_ok=True)
        proto_dir = os.path.join(ROOT, "codecs", "proto")
        subprocess.run(["protoc", "-I", proto_dir, "--python_out", out,
                        "grpc_service.proto", "model_config.proto"], check=True)
    sys.path.insert(0, out)
    import grpc_service_pb2  # pylint: disable=import-outside-toplevel,import-error
    return grpc_service_pb2


def request_tensors(size):
    """[(name, datatype, shape, values as a list, raw little-endian bytes)]."""
    if size == "small":
        a = array.array("i", range(16))
        b = array.array("i", [1] * 16)
        return [("INPUT0", "INT32", [1, 16], a.tolist(), a.tobytes()),
                ("INPUT1", "INT32", [1, 16], b.tolist(), b.tobytes())]
    # i*0.001-500 rounded to float32; tolist() widens each to the double that Python's
    # json writes with shortest round-trip digits, as Triton's clients do.
    values = array.array("f", (i * 0.001 - 500.0 for i in range(BIG_ELEMENTS)))
    return [("INPUT0", "FP32", [1, BIG_ELEMENTS], values.tolist(), values.tobytes())]


def write_requests(directory):
    pb = load_pb(directory)
    for size in ("small", "big"):
        tensors = request_tensors(size)
        body = {"inputs": [{"name": n, "datatype": d, "shape": s, "data": v}
                           for n, d, s, v, _ in tensors]}
        with open(os.path.join(directory, size + ".json"), "w") as f:
            json.dump(body, f, separators=(",", ":"))
        header = json.dumps({
            "inputs": [{"name": n, "datatype": d, "shape": s,
                        "parameters": {"binary_data_size": len(raw)}}
                       for n, d, s, _, raw in tensors],
            "parameters": {"binary_data_output": True}}, separators=(",", ":")).encode()
        with open(os.path.join(directory, size + ".bin"), "wb") as f:
            f.write(header)
            for *_, raw in tensors:
                f.write(raw)
        with open(os.path.join(directory, size + ".bin.hlen"), "w") as f:
            f.write(f"{len(header)}\n")
        request = pb.ModelInferRequest(model_name=MODEL[size])
        for n, d, s, _, raw in tensors:
            request.inputs.add(name=n, datatype=d, shape=s)
            request.raw_input_contents.append(raw)
        with open(os.path.join(directory, size + ".pb"), "wb") as f:
            f.write(request.SerializeToString())
    return 0


# ---- the correctness guard ----------------------------------------------------------------

PACK = {"BOOL": "?", "UINT8": "B", "UINT16": "H", "UINT32": "I", "UINT64": "Q", "INT8": "b",
        "INT16": "h", "INT32": "i", "INT64": "q", "FP32": "f", "FP64": "d"}
TYPED_FIELD = {"BOOL": "bool_contents", "INT8": "int_contents", "INT16": "int_contents",
               "INT32": "int_contents", "INT64": "int64_contents", "UINT8": "uint_contents",
               "UINT16": "uint_contents", "UINT32": "uint_contents",
               "UINT64": "uint64_contents", "FP32": "fp32_contents", "FP64": "fp64_contents"}


class Mismatch(Exception):
    pass


def pack(datatype, values):
    if datatype not in PACK:
        raise Mismatch(f"datatype {datatype} not comparable here")
    return struct.pack(f"<{len(values)}{PACK[datatype]}", *values)


def flatten(data):
    out = []
    for x in data:
        out.extend(flatten(x) if isinstance(x, list) else [x])
    return out


def decode_http(status, headers, body):
    """An HTTP /infer answer -> (model_name, {name: (datatype, shape, bytes)})."""
    if status != 200:
        raise Mismatch(f"HTTP {status}: {body[:300]!r}")
    hlen = headers.get("inference-header-content-length")
    header = json.loads(body[:int(hlen)] if hlen is not None else body)
    binary, offset, outputs = body[int(hlen):] if hlen is not None else b"", 0, {}
    for out in header.get("outputs", []):
        size = (out.get("parameters") or {}).get("binary_data_size")
        if size is not None:
            data = binary[offset:offset + size]
            offset += size
        else:
            data = pack(out["datatype"], flatten(out["data"]))
        outputs[out["name"]] = (out["datatype"], tuple(out["shape"]), data)
    return header.get("model_name"), outputs


def decode_grpc(pb, raw):
    response = pb.ModelInferResponse()
    response.ParseFromString(raw)
    outputs = {}
    for i, out in enumerate(response.outputs):
        if i < len(response.raw_output_contents):
            data = response.raw_output_contents[i]
        else:
            data = pack(out.datatype, list(getattr(out.contents, TYPED_FIELD[out.datatype])))
        outputs[out.name] = (out.datatype, tuple(out.shape), bytes(data))
    return response.model_name, outputs


def infer_http(port, model, body, headers, timeout=60):
    """POST /v2/models/MODEL/infer on one fresh connection; the answer decoded (decode_http)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("POST", f"/v2/models/{model}/infer", body=body, headers=headers)
        response = conn.getresponse()
        data = response.read()
        return decode_http(response.status, {k.lower(): v for k, v in response.getheaders()},
                           data)
    finally:
        conn.close()


def infer_grpc(pb, port, request, timeout=60):
    """ModelInfer with a serialized request on its own channel; the answer decoded
    (decode_grpc). A failed call raises Mismatch naming its code."""
    import grpc  # pylint: disable=import-outside-toplevel
    options = [("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", -1)]
    with grpc.insecure_channel(f"127.0.0.1:{port}", options=options) as channel:
        call = channel.unary_unary("/inference.GRPCInferenceService/ModelInfer")
        try:
            raw = call(request, timeout=timeout)
        except grpc.RpcError as e:
            raise Mismatch(f"gRPC {e.code().name}: {e.details()}") from None
    return decode_grpc(pb, raw)


def ask_http(kind, size, directory, port):
    with open(os.path.join(directory, f"{size}.{kind}"), "rb") as f:
        body = f.read()
    headers = {"Content-Type": "application/json"}
    if kind == "bin":
        with open(os.path.join(directory, size + ".bin.hlen")) as f:
            headers = {"Content-Type": "application/octet-stream",
                       "Inference-Header-Content-Length": f.read().strip()}
    return infer_http(port, MODEL[size], body, headers)


def ask_grpc(pb, size, directory, port):
    with open(os.path.join(directory, size + ".pb"), "rb") as f:
        return infer_grpc(pb, port, f.read())


def expected(size):
    """What the model must answer: simple's sum and difference, identity's input."""
    tensors = request_tensors(size)
    if size == "small":
        a, b = tensors[0][3], tensors[1][3]
        return {"OUTPUT0": ("INT32", (1, 16), pack("INT32", [x + y for x, y in zip(a, b)])),
                "OUTPUT1": ("INT32", (1, 16), pack("INT32", [x - y for x, y in zip(a, b)]))}
    return {"OUTPUT0": ("FP32", (1, BIG_ELEMENTS), tensors[0][4])}


def differences(reference, outputs):
    if sorted(reference) != sorted(outputs):
        return f"outputs {sorted(outputs)} instead of {sorted(reference)}"
    for name, (dtype, shape, data) in reference.items():
        got_dtype, got_shape, got = outputs[name]
        if (got_dtype, got_shape) != (dtype, shape):
            return f"{name}: {got_dtype} {list(got_shape)} instead of {dtype} {list(shape)}"
        if got != data:
            first = next((i for i, (x, y) in enumerate(zip(got, data)) if x != y),
                         min(len(got), len(data)))
            return (f"{name}: {len(got)} bytes instead of {len(data)}, first difference at "
                    f"byte {first}")
    return None


def check(kind, size, directory, targets):
    pb = load_pb(directory) if kind == "grpc" else None
    status = 0
    reference = None
    for i, target in enumerate(targets):
        label, port = target.split("=")
        try:
            if kind == "grpc":
                model, outputs = ask_grpc(pb, size, directory, int(port))
            else:
                model, outputs = ask_http(kind, size, directory, int(port))
            if model != MODEL[size]:
                raise Mismatch(f"model_name {model!r} instead of {MODEL[size]!r}")
            if i == 0:
                why = differences(expected(size), outputs)
                reference = outputs
                why = f"the model's answer is wrong: {why}" if why else None
            else:
                why = differences(reference, outputs)
                why = f"differs from {targets[0].split('=')[0]}: {why}" if why else None
        except Exception as e:  # pylint: disable=broad-except  # any failure is a finding
            why = f"{type(e).__name__}: {e}" if not isinstance(e, Mismatch) else str(e)
        print(json.dumps({"label": label, "ok": why is None, "why": why}), flush=True)
        if why is not None:
            if i == 0:
                return 2
            status = 1
    return status


# ---- CSV ----------------------------------------------------------------------------------

COLUMNS = ["round", "size", "concurrency", "case", "requests", "errors", "rps", "p50_us",
           "p90_us", "p99_us", "p999_us", "max_us", "client_cpu_pct", "proxy_cpu_pct",
           "upstream_cpu_pct", "machine_busy_pct", "error_kinds"]
RESULT_FIELDS = ["requests", "errors", "rps", "p50_us", "p90_us", "p99_us", "p999_us",
                 "max_us", "client_cpu_pct"]


def row(argv):
    try:
        result = json.loads(sys.stdin.read())
    except ValueError:
        result = {"errors": 1, "error_kinds": {"no_result": 1}}
    if not result.get("requests"):  # nothing completed inside the window: no latency
        result["error_kinds"] = dict(result.get("error_kinds", {}), none_completed=1)
        for field in ("rps", "p50_us", "p90_us", "p99_us", "p999_us", "max_us"):
            result[field] = ""
    kinds = ";".join(f"{k}={v}" for k, v in sorted(result.get("error_kinds", {}).items()))
    round_, size, conc, case, proxy_cpu, upstream_cpu, machine_busy = argv
    csv.writer(sys.stdout, lineterminator="\n").writerow(
        [round_, size, conc, case] + [str(result.get(f, "")) for f in RESULT_FIELDS]
        + [proxy_cpu, upstream_cpu, machine_busy, kinds])
    return 0


def costs(argv):
    result = json.loads(sys.stdin.read())
    writer = csv.writer(sys.stdout, lineterminator="\n")
    for name in ("memcpy", "memcpy_cold_cache", "loopback", "rtt_1byte"):
        line = {c: "" for c in COLUMNS}
        line.update({"round": argv[0], "size": "big" if result["bytes"] >= 1 << 20 else "small",
                     "concurrency": 1, "case": "copy." + name, "p50_us": result[name + "_us"],
                     "max_us": result[name + "_max_us"]})
        writer.writerow([line[c] for c in COLUMNS])
    return 0


# ---- the report ---------------------------------------------------------------------------

CLIENTS = {"json": "HTTP JSON", "bin": "HTTP binary", "grpc": "gRPC"}
VIAS = {"direct": "direct", "nginx": "nginx", "ig_http": "infergate -> HTTP upstream",
        "ig_grpc": "infergate -> gRPC upstream"}
# (gateway case, nginx case on the client's protocol, kind, max added-p50 ratio)
TARGETS = [
    ("grpc.ig_grpc", "grpc.nginx", "gRPC -> gRPC passthrough", 1.0),
    ("bin.ig_http", "bin.nginx", "HTTP -> HTTP passthrough (binary body)", 1.0),
    ("json.ig_http", "json.nginx", "HTTP -> HTTP passthrough (JSON body)", 1.0),
    ("json.ig_grpc", "json.nginx", "HTTP JSON -> gRPC", 1.3),
    ("bin.ig_grpc", "bin.nginx", "HTTP binary -> gRPC", 1.3),
    ("grpc.ig_http", "grpc.nginx", "gRPC -> HTTP binary", 1.3),
]
# The 4 MiB floor applies where 4 MiB travel as 4 MiB (not to JSON text, ~19 MB of it).
FLOOR_CASES = ["grpc.ig_grpc", "bin.ig_http", "bin.ig_grpc", "grpc.ig_http"]
SIZES = {"small": "`simple` (2 x INT32 [1,16])", "big": "4 MiB (`identity_fp32` FP32 [1,1048576])"}


def fmt(value, digits=0):
    if value is None:
        return "-"
    return f"{value:,.{digits}f}"


def med(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def num(r, field):
    return float(r[field]) if r and r.get(field) not in ("", None) else None


class Runs:
    def __init__(self, rows):
        self.by_key = {}
        for r in rows:
            self.by_key[(r["size"], int(r["concurrency"]), r["case"], r["round"])] = r
        self.rounds = sorted({r["round"] for r in rows}, key=int)

    def get(self, size, conc, case, round_):
        return self.by_key.get((size, conc, case, round_))

    def values(self, size, conc, case, field):
        return [num(self.get(size, conc, case, rd), field) for rd in self.rounds]

    def median(self, size, conc, case, field):
        return med(self.values(size, conc, case, field))

    def added(self, size, conc, case):
        """Per round: the case's p50 minus the direct p50 of the same request, same round."""
        direct = case.split(".")[0] + ".direct"
        out = []
        for rd in self.rounds:
            a = num(self.get(size, conc, case, rd), "p50_us")
            b = num(self.get(size, conc, direct, rd), "p50_us")
            out.append(a - b if a is not None and b is not None else None)
        return out

    def cpu_per_request(self, size, conc, case):
        """The proxy's CPU microseconds per request, median over rounds."""
        return med([cpu * 1e4 / rps if cpu is not None and rps else None
                    for cpu, rps in zip(self.values(size, conc, case, "proxy_cpu_pct"),
                                        self.values(size, conc, case, "rps"))])

    def errors(self, size, conc, case):
        """Failed requests, plus one per run that completed none."""
        return sum(int(r["errors"] or 0) + ("none_completed" in r["error_kinds"])
                   for rd in self.rounds if (r := self.get(size, conc, case, rd)))

    def present(self, size, conc, case):
        return any(self.get(size, conc, case, rd) for rd in self.rounds)


def table(args):
    with open(args.csv) as f:
        rows = list(csv.DictReader(f))
    broken = {}
    if args.broken and os.path.exists(args.broken):
        with open(args.broken) as f:
            for line in f:
                if line.strip():
                    case, size, why = line.rstrip("\n").split(" ", 2)
                    broken[(case, size)] = why
    runs = Runs([r for r in rows if not r["case"].startswith("copy.")])
    copies = Runs([r for r in rows if r["case"].startswith("copy.")])
    concs = sorted({int(r["concurrency"]) for r in rows if not r["case"].startswith("copy.")})
    out = [f"# Forwarding: infergate against direct and nginx ({args.machine})", "",
           f"`{args.command}`: {len(runs.rounds)} interleaved rounds, medians; load average "
           f"{args.load}. Upstream: infergate `protocol: builtin` (2 workers); gateways: "
           "infergate with every model routed to the upstream's gRPC or HTTP address "
           "(2 workers each); nginx: `proxy_pass` with upstream keep-alive (HTTP) and "
           "`grpc_pass` (gRPC), 2 workers (BASELINES.md). `added p50` = the p50 minus the "
           "direct p50 of the same request in the same round, median over rounds.", ""]

    memcpy = copies.median("big", 1, "copy.memcpy", "p50_us")
    loopback = copies.median("big", 1, "copy.loopback", "p50_us")
    floor = memcpy + loopback if memcpy is not None and loopback is not None else None
    if floor is not None:
        out += ["## The 4 MiB floor, measured in this run (`copy_costs`, once per round)", "",
                "| what | median us | per round |", "|---|---:|---|"]
        for name, label in (("memcpy", "memcpy 4 MiB, warm buffer (cache-hot)"),
                            ("memcpy_cold_cache", "memcpy 4 MiB, warm buffers from memory (no target)"),
                            ("loopback", "TCP loopback, 4 MiB one way"),
                            ("rtt_1byte", "TCP loopback, 1-byte round trip (no target)")):
            values = copies.values("big", 1, "copy." + name, "p50_us")
            out.append(f"| {label} | {fmt(med(values))} | "
                       f"{', '.join(fmt(v) for v in values if v is not None)} |")
        out += [f"| **floor: loopback + memcpy** | **{fmt(floor)}** | |", ""]

    out += ["## Runs", "",
            "| size | c | request | via | req/s | p50 us | p99 us | added p50 us | "
            "proxy CPU % | proxy CPU us/req | upstream CPU % | machine busy % | errors |",
            "|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for size in ("small", "big"):
        for conc in concs:
            for client in CLIENTS:
                for via in VIAS:
                    case = f"{client}.{via}"
                    if (case, size) in broken:
                        out.append(f"| {size} | {conc} | {CLIENTS[client]} | {VIAS[via]} | "
                                   f"broken: {broken[(case, size)]} | | | | | | | | |")
                        continue
                    if not runs.present(size, conc, case):
                        continue
                    added = med(runs.added(size, conc, case)) if via != "direct" else None
                    out.append(
                        f"| {size} | {conc} | {CLIENTS[client]} | {VIAS[via]} | "
                        f"{fmt(runs.median(size, conc, case, 'rps'))} | "
                        f"{fmt(runs.median(size, conc, case, 'p50_us'))} | "
                        f"{fmt(runs.median(size, conc, case, 'p99_us'))} | "
                        f"{fmt(added) if via != 'direct' else ''} | "
                        f"{fmt(runs.median(size, conc, case, 'proxy_cpu_pct'))} | "
                        f"{fmt(runs.cpu_per_request(size, conc, case), 1)} | "
                        f"{fmt(runs.median(size, conc, case, 'upstream_cpu_pct'))} | "
                        f"{fmt(runs.median(size, conc, case, 'machine_busy_pct'))} | "
                        f"{runs.errors(size, conc, case)} |")

    out += ["", "## Targets", "",
            "| path | size | c | infergate added p50 us | nginx added p50 us | ratio | "
            "target | req/s infergate / nginx (per round) | median | target | verdict |",
            "|---|---|---:|---:|---:|---:|---|---|---:|---|---|"]
    missed = False
    targets_at = len(out)
    for size in ("small", "big"):
        for conc in concs:
            for ig, ng, name, limit in TARGETS:
                if (ig, size) in broken:
                    missed = True
                    out.append(f"| {name} | {size} | {conc} | | | | <= {limit}x | | | | "
                               f"**MISS** (broken: {broken[(ig, size)]}) |")
                    continue
                if not runs.present(size, conc, ig) or not runs.present(size, conc, ng):
                    continue
                a, b = med(runs.added(size, conc, ig)), med(runs.added(size, conc, ng))
                ok = a is not None and b is not None and a <= limit * b
                ratio = f"{a / b:.2f}x" if a is not None and b and b > 0 else "n/a"
                why = []
                if not ok:
                    why.append("latency")
                through, through_med, through_target = "", "", ""
                if limit == 1.0:  # passthrough: throughput too
                    per_round = []
                    for rd in runs.rounds:
                        x = num(runs.get(size, conc, ig, rd), "rps")
                        y = num(runs.get(size, conc, ng, rd), "rps")
                        if x is not None and y:
                            per_round.append(x / y)
                    t = med(per_round)
                    through = ", ".join(f"{x:.2f}" for x in per_round)
                    through_med = f"{t:.2f}x" if t is not None else "-"
                    through_target = ">= 1.0x"
                    if t is None or t < 1.0:
                        ok = False
                        why.append("throughput")
                if runs.errors(size, conc, ig):
                    ok = False
                    why.append("errors")
                missed |= not ok
                verdict = "PASS" if ok else f"**MISS** ({', '.join(why)})"
                out.append(f"| {name} | {size} | {conc} | {fmt(a)} | {fmt(b)} | {ratio} | "
                           f"<= {limit}x | {through} | {through_med} | {through_target} | "
                           f"{verdict} |")

    if floor is not None and any(runs.present("big", 1, ig) or (ig, "big") in broken
                                 for ig in FLOOR_CASES):
        out += ["", "## 4 MiB at c=1: infergate's added p50 against loopback + memcpy", "",
                "| path | infergate added p50 us | per round | floor us | ratio | nginx added "
                "p50 us (same client protocol) | verdict |", "|---|---:|---|---:|---:|---:|---|"]
        for ig, ng, name, _ in TARGETS:
            if ig not in FLOOR_CASES:
                continue
            if (ig, "big") in broken:
                missed = True
                out.append(f"| {name} | | | {fmt(floor)} | | | **MISS** (broken) |")
                continue
            if not runs.present("big", 1, ig):
                continue
            per_round = runs.added("big", 1, ig)
            a = med(per_round)
            ok = a is not None and a <= floor and not runs.errors("big", 1, ig)
            missed |= not ok
            out.append(f"| {name} | {fmt(a)} | {', '.join(fmt(v) for v in per_round)} | "
                       f"{fmt(floor)} | {a / floor:.2f}x | {fmt(med(runs.added('big', 1, ng)))} | "
                       f"{'PASS' if ok else '**MISS**'} |")

    verdicts = [line for line in out[targets_at:] if line.endswith("|") and
                ("PASS |" in line or "**MISS**" in line)]
    met = sum("PASS |" in line for line in verdicts)
    out[targets_at - 2:targets_at - 2] = [f"**{met} of {len(verdicts)} targets met.**", ""]
    out += ["", "proxy CPU %: the gateway's process, or nginx's master and workers (100 = one "
            "core); proxy CPU us/req = proxy CPU time / requests; upstream CPU %: the builtin "
            "upstream's process; machine busy %: every process, 100 = all cores (other "
            "processes on the machine show there). Sampled from /proc over the measured "
            "window. A ratio target is met when infergate's added p50 <= limit x nginx's "
            "(n/a: nginx added nothing measurable); throughput is the median of per-round "
            "ratios of runs taken back to back. A case with errors (or a run that completed "
            "no request) misses its targets. 4 MiB JSON requests (~19 MB of text, ~0.1 s of "
            "parsing and encoding per request) run at c=1 only and have no 4 MiB floor. The "
            "floor counts one 4 MiB transfer, while `identity_fp32` answers its 4 MiB input: "
            "a proxy hop carries 4 MiB each way."]
    print("\n".join(out))
    return 1 if missed else 0


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    if mode == "requests":
        return write_requests(sys.argv[2])
    if mode == "check":
        kind, size, directory, *targets = sys.argv[2:]
        return check(kind, size, directory, targets)
    if mode == "row":
        return row(sys.argv[2:9])
    if mode == "costs":
        return costs(sys.argv[2:3])
    if mode == "table":
        parser = argparse.ArgumentParser()
        parser.add_argument("csv")
        parser.add_argument("--command", required=True)
        parser.add_argument("--machine", required=True)
        parser.add_argument("--load", required=True)
        parser.add_argument("--broken")
        return table(parser.parse_args(sys.argv[2:]))
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
