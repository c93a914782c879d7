#!/usr/bin/python3
"""Runs codec_bench and prints its figures next to the project's codec targets.

    bench/codec_ratios.py                      # build/release/bench/codec_bench, 5 repetitions
    bench/codec_ratios.py --repetitions 9 --json-out run.json
    bench/codec_ratios.py --json-in run.json   # re-print a saved run, without running

Targets (bench/README.md):
  - JSON FP32 decode >= 3x the RapidJSON DOM baseline (Triton's parser) and >= 500 MB/s
    of JSON text;
  - binary-tensor and protobuf paths within 2x of memcpy: bytes/s >= 0.5x a memcpy of
    64 MiB into a warm buffer.

Figures are medians over the repetitions, from CPU time (Google Benchmark's default for
bytes_per_second). MB = 10^6 bytes. Exit status: 0 when every target passes, 1 when one
fails, 2 when the benchmark could not be run or read.

Standard library only.
"""

import argparse
import json
import os
import signal
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_BINARY = os.path.join(REPO, "build", "release", "bench", "codec_bench")

MEMCPY = "BM_Memcpy64MiB"
RAPIDJSON = "BM_JsonDecodeFp32_RapidJsonDom"
RAPIDJSON_WARM = "BM_JsonDecodeFp32_RapidJsonDomWarmPool"
JSON_FP32 = "BM_JsonDecodeFp32_Infergate"

# (benchmark, what it measures, target kind). Kinds: "json3x" (>= 3x RapidJSON and
# >= 500 MB/s), "memcpy" (>= 0.5x memcpy), None (reported, no target).
ROWS = [
    (MEMCPY, "memcpy 64 MiB, warm destination (reference)", None),
    (JSON_FP32, "JSON decode, 1M FP32", "json3x"),
    (RAPIDJSON, "  RapidJSON DOM (Triton) baseline", None),
    (RAPIDJSON_WARM, "  RapidJSON DOM, warm pool baseline", None),
    ("BM_JsonDecodeInt64_Infergate", "JSON decode, 1M INT64", "int64"),
    ("BM_JsonDecodeInt64_RapidJsonDom", "  RapidJSON DOM (Triton) baseline", None),
    ("BM_JsonDecodeInt64_RapidJsonDomWarmPool", "  RapidJSON DOM, warm pool baseline", None),
    ("BM_JsonEncodeFp32Int64Response_Infergate", "JSON encode, 1M FP32 + 1M INT64", None),
    ("BM_BinaryDecode64MiB_Infergate", "binary decode, 64 MiB", "memcpy"),
    ("BM_BinaryEncode64MiB_Infergate", "binary encode + copy out, 64 MiB", "memcpy"),
    ("BM_ProtobufEncode64MiB_Infergate", "protobuf encode + toByteBuffer, 64 MiB", "memcpy"),
    ("BM_ProtobufDecode64MiB_Infergate", "protobuf decode from Buffer, 64 MiB", "memcpy"),
    ("BM_ProtobufFromByteBuffer64MiB_SingleSlice", "fromByteBuffer, 1 slice, 64 MiB", "memcpy"),
    ("BM_ProtobufFromByteBuffer64MiB_MultiSlice", "fromByteBuffer, 16 KiB slices (info)",
     "memcpy-info"),
]


def run_benchmark(binary, repetitions, extra):
    if not os.access(binary, os.X_OK):
        sys.exit(f"codec_ratios: {binary} not found; build it first (bench/README.md)")
    cmd = [binary, "--benchmark_format=json", f"--benchmark_repetitions={repetitions}"]
    if repetitions > 1:
        # Interleaved repetitions: a burst of load from a neighbour on the shared cores
        # then lands on a benchmark and its baseline alike, not on one of them.
        cmd += ["--benchmark_report_aggregates_only=true",
                "--benchmark_enable_random_interleaving=true"]
    cmd += extra
    print("running: " + " ".join(cmd), file=sys.stderr, flush=True)
    done = subprocess.run(cmd, stdout=subprocess.PIPE, check=False)
    if done.returncode != 0:
        print(f"codec_ratios: codec_bench exited with {done.returncode}", file=sys.stderr)
        sys.exit(2)
    return json.loads(done.stdout)


def medians(report):
    """{benchmark name: row}, the median aggregate when there is one, else the run itself."""
    rows = {}
    for b in report.get("benchmarks", []):
        name = b.get("run_name", b["name"])
        if b.get("error_occurred"):
            rows[name] = {"error": b.get("error_message", "error")}
            continue
        kind = b.get("run_type", "iteration")
        if kind == "aggregate" and b.get("aggregate_name") != "median":
            continue
        if kind == "iteration" and name in rows:
            continue  # keep the first of plain repetitions; aggregates win below
        if kind == "aggregate" or name not in rows:
            rows[name] = b
    return rows


def ms(b):
    unit = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}[b.get("time_unit", "ns")]
    return b["cpu_time"] * unit


def mbps(b):
    return b.get("bytes_per_second", 0.0) / 1e6


def num(x):
    """A figure short enough for the table: 1 decimal, or 3 digits past a million."""
    return f"{x:.1f}" if x < 1e6 else f"{x:.3g}"


def times(ratio):
    return f"{ratio:.2f}x" if ratio < 100 else f"{ratio:.3g}x (zero-copy)"


def verdict(ok):
    return "PASS" if ok else "FAIL"


def print_table(report):
    rows = medians(report)
    ctx = report.get("context", {})
    loads = ctx.get("load_avg", [])
    print(f"host: {ctx.get('host_name', '?')}, {ctx.get('num_cpus', '?')} CPUs at "
          f"{ctx.get('mhz_per_cpu', '?')} MHz, load average at start: "
          + ", ".join(f"{x:.2f}" for x in loads))
    memcpy = rows.get(MEMCPY)
    rapid = rows.get(RAPIDJSON)
    rapid_warm = rows.get(RAPIDJSON_WARM)
    header = f"{'benchmark':<44} {'ms':>9} {'MB/s':>11} {'faults':>8}  ratio / target"
    print(header)
    print("-" * (len(header) + 24))
    failures = 0
    for name, label, kind in ROWS:
        b = rows.get(name)
        if b is None:
            print(f"{label:<44} {'(not run)':>9}")
            if kind in ("json3x", "memcpy"):
                failures += 1
            continue
        if "error" in b:
            print(f"{label:<44} error: {b['error']}")
            failures += 1
            continue
        faults = b.get("faults")
        faults_text = f"{faults:8.0f}" if faults is not None else f"{'':8}"
        line = f"{label:<44} {ms(b):9.4g} {num(mbps(b)):>11} {faults_text}  "
        notes = []
        if kind == "json3x" and rapid and "error" not in rapid:
            ratio = b["bytes_per_second"] / rapid["bytes_per_second"]
            notes.append(f"{ratio:.2f}x RapidJSON DOM (>= 3x: {verdict(ratio >= 3.0)})")
            notes.append(f"{mbps(b):.0f} MB/s (>= 500: {verdict(mbps(b) >= 500.0)})")
            failures += (ratio < 3.0) + (mbps(b) < 500.0)
            if rapid_warm and "error" not in rapid_warm:
                notes.append(f"{b['bytes_per_second'] / rapid_warm['bytes_per_second']:.2f}x "
                             "warm-pool DOM (info)")
        elif kind == "int64":
            base = rows.get("BM_JsonDecodeInt64_RapidJsonDom")
            if base and "error" not in base:
                notes.append(f"{b['bytes_per_second'] / base['bytes_per_second']:.2f}x "
                             "RapidJSON DOM (info)")
        elif kind in ("memcpy", "memcpy-info") and memcpy and "error" not in memcpy:
            ratio = b["bytes_per_second"] / memcpy["bytes_per_second"]
            if kind == "memcpy":
                notes.append(f"{times(ratio)} memcpy (>= 0.5x: {verdict(ratio >= 0.5)})")
                failures += ratio < 0.5
            else:
                notes.append(f"{times(ratio)} memcpy (no target)")
        elif name == MEMCPY:
            notes.append("1.00x (reference)")
        print(line + "; ".join(notes))
    print()
    print(f"{'every target met' if failures == 0 else f'{failures} target check(s) failed'}"
          " (medians; MB = 10^6 bytes; faults = minor page faults per iteration)")
    return failures


def main():
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `| head` ends quietly
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--binary", default=DEFAULT_BINARY, help="path of codec_bench")
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--json-in", help="print a saved --benchmark_format=json run instead")
    parser.add_argument("--json-out", help="also save the raw benchmark JSON here")
    args, extra = parser.parse_known_args()
    if args.json_in:
        with open(args.json_in) as f:
            report = json.load(f)
    else:
        print("load average before the run: "
              + ", ".join(f"{x:.2f}" for x in os.getloadavg())
              + " (2 shared cores: prefer a quiet machine)", file=sys.stderr, flush=True)
        report = run_benchmark(args.binary, args.repetitions, extra)
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(report, f, indent=1)
    sys.exit(1 if print_table(report) else 0)


if __name__ == "__main__":
    main()
