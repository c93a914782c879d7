"""suite_report.py's part for the scenarios bench/run runs once, after the rounds:
instructions per request (instructions.csv), memcpy bytes per tensor byte (copies.csv),
and the scenarios that are scripts of their own (external.json: shm_handoff.sh,
tls_cost.sh), whose own reports are carried into summary.md and whose exit status is
their verdict.

Figures: `instructions.PATH.per_request` (instructions, lower is better) and
`copies.PATH.per_tensor_byte` (ratio, lower is better). One run each: their spread is
zero, and `compare` flags a change past 5% (they do not drift with machine noise).
"""
import csv
import json
import os

INSTRUCTION_PATHS = ("grpc_passthrough", "http_passthrough", "http_json_to_grpc",
                     "http_bin_to_grpc", "grpc_to_http_bin")
UPSTREAM_INSTRUCTION_PATHS = ("upstream_grpc", "upstream_http_bin")
NGINX_INSTRUCTION_PATH = "nginx_http_passthrough"  # nginx's proxy_pass, the same request
EXTERNAL_NAMES = {"shm": "T5 shm (shm_handoff.sh)", "tls": "T6 tls (tls_cost.sh)"}


def read_rows(path):
    if not os.path.exists(path):
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def read_external(directory):
    path = os.path.join(directory, "external.json")
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        return json.load(f)


def add_figures(directory, figures):
    """Adds the once-run figures to `figures` (suite_report.Figures)."""
    for row in read_rows(os.path.join(directory, "instructions.csv")):
        figures.add(f"instructions.{row['path']}.per_request",
                    [float(row["instructions_per_request"])], "instructions", "lower")
    for row in read_rows(os.path.join(directory, "copies.csv")):
        figures.add(f"copies.{row['path']}.per_tensor_byte",
                    [float(row["copies_per_tensor_byte"])], "ratio", "lower")


def targets(directory):
    """The scripts' verdicts: their exit status (0 every target of theirs met, 1 one
    missed), their report named."""
    out = []
    for scenario, run in sorted(read_external(directory).items()):
        verdict = {0: "PASS", 1: "MISS"}.get(run["status"], "MISS")
        out.append({"name": EXTERNAL_NAMES.get(scenario, scenario),
                    "what": f"the targets of `{run['command']}`", "figure": None,
                    "measured": run["status"], "op": "==", "limit": 0, "unit": "exit status",
                    "verdict": verdict, "why": f"exit {run['status']}; see {run['report']}"})
    return out


def lines(directory, figures, show):
    """summary.md's sections for the once-run scenarios."""
    out = []
    instructions = {p: figures.get(f"instructions.{p}.per_request") for p in INSTRUCTION_PATHS}
    copies = {p: figures.get(f"copies.{p}.per_tensor_byte") for p in INSTRUCTION_PATHS}
    if any(instructions.values()) or any(copies.values()):
        out += ["## Per request, on each path (one run: these do not drift with machine noise)", "",
                "| path | instructions per 64 B request (gateway process, callgrind) | "
                "memcpy bytes per tensor byte carried, 4 MiB (input + output) |", "|---|---|---|"]
        for p in INSTRUCTION_PATHS:
            count = f"{instructions[p]['median']:,.0f}" if instructions[p] else "-"
            out.append(f"| {p} | {count} | {show(copies[p])} |")
        out.append("")
        nginx = figures.get(f"instructions.{NGINX_INSTRUCTION_PATH}.per_request")
        if nginx:
            line = (f"nginx's `proxy_pass` carrying http_passthrough's request (its one process, "
                    f"callgrind): {nginx['median']:,.0f} instructions per request")
            if instructions["http_passthrough"] and nginx["median"] > 0:
                ratio = instructions["http_passthrough"]["median"] / nginx["median"]
                line += f"; http_passthrough / nginx: {ratio:.2f}"
            out += [line + ".", ""]
    served = {p: figures.get(f"instructions.{p}.per_request") for p in UPSTREAM_INSTRUCTION_PATHS}
    if any(served.values()):
        out += ["The upstream's own serving of the same 64 B request (an infergate serving the "
                "builtin model, 1 worker, no gateway): the server side of a hop, which a "
                "transcoding path pays on U's gRPC listener where nginx's arm pays its HTTP one.", "",
                "| upstream listener | instructions per 64 B request (callgrind) |", "|---|---|"]
        for p in UPSTREAM_INSTRUCTION_PATHS:
            out.append(f"| {p} | {served[p]['median']:,.0f} |" if served[p] else f"| {p} | - |")
        out.append("")
    for scenario, run in sorted(read_external(directory).items()):
        out += [f"## {scenario}: `{run['command']}` (exit {run['status']})", ""]
        report = os.path.join(directory, run["report"])
        if os.path.exists(report):
            with open(report) as f:
                # Its headings one level down, under this one.
                out += [("#" + line) if line.startswith("#") else line for line in f.read().splitlines()]
        else:
            out.append(f"(no report: see {run['log']})")
        out.append("")
    return out
