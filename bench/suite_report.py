#!/usr/bin/python3
"""The benchmark suite's report: its CSVs in; summary.md, summary.json and plots out.

Run with Debian's /usr/bin/python3 (standard library and python3-matplotlib).

  suite_report.py summarize DIR
      reads DIR/{paths,sizes,openloop,rss}.csv (load rows), DIR/copy.csv (memcpy and
      loopback times) and DIR/meta.json, any of which may be missing (its sections then say
      "not run" and its targets are NOT RUN), and writes into DIR summary.md, summary.json,
      latency_vs_concurrency.png, throughput_vs_concurrency.png, latency_vs_size.png and
      openloop.png (each only when it has data). Exit 0 when no target missed, 1 when one
      did, 2 on unreadable input.
  suite_report.py compare NEW_SUMMARY_JSON OLD_SUMMARY_JSON [--all]
      prints the figures present in both summaries that are worse in NEW by more than their
      spread: the medians differ by more than the larger of the two min..max ranges (by more
      than 5% of the old median when both ranges are zero). Only the stable figures
      (instructions, copies, rss, and the ratios taken within a round) unless --all: raw
      latencies and rates drift between runs with the machine's other load. Exit 1 when one
      is, 0 when none, 2 on unreadable input.

Besides these, suite_once.py adds the once-run scenarios (instructions.csv, copies.csv,
external.json) to the figures, the targets and summary.md.

Rows are paired within a round (same kind, size, concurrency and round: a gateway's p50
minus the direct p50 is its added p50), then each figure is the median, min and max over
rounds. A row with no completed request or with errors is a failed run: its figures are left
out and a target depending on it is a MISS ("failed run").

Figure names (sizes in bytes, rates in requests/s, PATH as in PATHS below):
  paths.PATH.SIZE.cCONC.{direct_,,nginx_}{p50,p99}_us  p50 or p99 via direct, infergate, nginx
  paths.PATH.SIZE.cCONC.{,nginx_}added_p50_us    p50 minus the direct p50
  paths.PATH.SIZE.cCONC.ratio                    infergate added / nginx added
  paths.PATH.SIZE.cCONC.{direct_,,nginx_}rps     and rps_ratio: infergate / nginx
  paths.PATH.SIZE.cCONC.{,nginx_}cpu_us_per_req  and cpu_ratio: infergate / nginx
  sizes.KIND.SIZE.{direct_,nginx_,,ig_http_}p50_us   the empty prefix is infergate via ig_grpc
  sizes.KIND.SIZE.{nginx_,,ig_http_}added_p50_us
  sizes.KIND.SIZE.{,ig_http_}added_minus_floor_us    added minus memcpy + loopback, per round
  copy.SIZE.{memcpy,loopback,rtt,floor}_us           floor = memcpy + loopback
  rss.VIA.{idle,load}_kb                 the proxy's peak RSS (the largest over a round's rows)
  openloop.VIA.KIND.RATE.p99_us and openloop.VIA.KIND.knee_rps
"""
import csv
import json
import math
import operator
import os
import statistics
import sys
from typing import NamedTuple

import matplotlib

matplotlib.use("Agg")
from matplotlib import ticker  # noqa: E402  (after the backend is chosen)
from matplotlib.figure import Figure  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import suite_once  # noqa: E402  (beside this file)

LOAD_SCENARIOS = ("paths", "sizes", "openloop", "rss")
LOAD_COLUMNS = ("scenario", "round", "kind", "size_bytes", "concurrency", "rate", "via",
                "requests", "errors", "rps", "p50_us", "p90_us", "p99_us", "p999_us", "max_us",
                "proxy_cpu_us_per_req", "proxy_rss_kb", "upstream_cpu_us_per_req", "phase")
COPY_COLUMNS = ("scenario", "round", "size_bytes", "memcpy_us", "loopback_us", "rtt_us")
TEXT_COLUMNS = ("scenario", "kind", "via", "phase")
WHOLE_COLUMNS = ("round", "size_bytes", "concurrency")  # they name figures: no "64.0"
KINDS = ("json", "bin", "grpc")
VIAS = ("direct", "nginx", "ig_http", "ig_grpc")
GATEWAYS = ("ig_http", "ig_grpc")

# path -> (the client's kind, infergate's via); its baselines: the same kind via direct, nginx
PATHS = {
    "grpc_passthrough": ("grpc", "ig_grpc"),
    "http_passthrough": ("bin", "ig_http"),
    "http_passthrough_json": ("json", "ig_http"),
    "http_json_to_grpc": ("json", "ig_grpc"),
    "http_bin_to_grpc": ("bin", "ig_grpc"),
    "grpc_to_http_bin": ("grpc", "ig_http"),
}
SMALL = 64
BIG = 67108864
KNEE_P99_US = 10000
# sizes' figure prefix per via: the sizes scenario measures infergate forwarding to gRPC
SIZE_ROLES = {"direct": "direct_", "nginx": "nginx_", "ig_grpc": "", "ig_http": "ig_http_"}


class InputError(Exception):
    """Unreadable or malformed input: exit status 2."""


# ---- reading ------------------------------------------------------------------------------


def read_csv(path, columns):
    """Rows as dicts (numbers parsed, empty fields None), or None when the file is absent."""
    if not os.path.exists(path):
        return None
    try:
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            missing = [c for c in columns if c not in (reader.fieldnames or ())]
            if missing:
                raise InputError(f"{path}: no column {', '.join(missing)}")
            return [parse_row(path, reader.line_num, raw, columns) for raw in reader]
    except (OSError, csv.Error, UnicodeDecodeError) as e:
        raise InputError(f"{path}: {e}") from None


def parse_row(path, line, raw, columns):
    row = {}
    for column in columns:
        text = (raw.get(column) or "").strip()
        if column in TEXT_COLUMNS:
            row[column] = text
        elif not text:
            row[column] = None
        else:
            try:
                number = float(text)
            except ValueError:
                number = math.nan
            if not math.isfinite(number):  # nan would pass into summary.json as bad JSON
                raise InputError(f"{path}:{line}: {column} {text!r} is not a number")
            row[column] = int(number) if column in WHOLE_COLUMNS else number
    if row["round"] is None:
        raise InputError(f"{path}:{line}: no round")
    if "via" in row and (row["via"] not in VIAS or row["kind"] not in KINDS + ("",)):
        raise InputError(f"{path}:{line}: unknown kind {row['kind']!r} or via {row['via']!r}")
    return row


def read_json_object(path):
    try:
        with open(path) as f:
            value = json.load(f)
    except (OSError, ValueError) as e:
        raise InputError(f"{path}: {e}") from None
    if not isinstance(value, dict):
        raise InputError(f"{path}: not a JSON object")
    return value


def failed(row):
    """No completed request, or errors; an idle rss row completes none by design."""
    if row["phase"] == "idle":
        return bool(row["errors"])
    return not row["requests"] or bool(row["errors"])


class LoadRuns:
    """One load CSV, keyed so that rows of the same point and round can be paired."""

    def __init__(self, rows):
        # point = (kind, size, concurrency, rate, phase); absent numbers count as 0
        self.raw = rows
        self.rows = {(r["kind"], r["size_bytes"] or 0, r["concurrency"] or 0, r["rate"] or 0,
                      r["phase"], r["via"], r["round"]): r for r in rows}
        self.rounds = sorted({r["round"] for r in rows})

    def points(self, kind=None, via=None):
        return sorted({key[:5] for key in self.rows
                       if kind in (None, key[0]) and via in (None, key[5])})

    def has(self, point, via):
        return any(point + (via, rd) in self.rows for rd in self.rounds)

    def pairs(self, point, vias):
        """[(round, [row per via])] for the rounds where each via ran and none failed, and
        whether one of them failed in some round."""
        out, any_failed = [], False
        for rd in self.rounds:
            rows = [self.rows.get(point + (via, rd)) for via in vias]
            if any(r is not None and failed(r) for r in rows):
                any_failed = True
            elif None not in rows:
                out.append((rd, rows))
        return out, any_failed


# ---- figures ------------------------------------------------------------------------------


class Figures:
    """Named figures with their spread over rounds; which ones a failed run touched; which
    ones had rows at all (those without a value show as n/a, not as "not run")."""

    def __init__(self):
        self.table, self.failed, self.seen = {}, set(), set()

    def add(self, name, values, unit, better, any_failed=False):
        self.seen.add(name)
        if any_failed:
            self.failed.add(name)
        values = [v for v in values if v is not None]
        if values:
            self.table[name] = {"median": statistics.median(values), "min": min(values),
                                "max": max(values), "unit": unit, "better": better,
                                "rounds": len(values)}

    def get(self, name):
        return self.table.get(name)


def value(column):
    return lambda row: row[column]


def difference(column):
    return lambda a, b: None if a[column] is None or b[column] is None else a[column] - b[column]


def quotient(column):
    def divide(a, b):
        return a[column] / b[column] if a[column] is not None and (b[column] or 0) > 0 else None
    return divide


def added_ratio(gateway, direct, nginx):
    """Infergate's added p50 over nginx's; undefined when nginx added nothing measurable."""
    ours, theirs = difference("p50_us")(gateway, direct), difference("p50_us")(nginx, direct)
    return ours / theirs if ours is not None and theirs is not None and theirs > 0 else None


GATEWAY = "gateway"  # stands for the path's infergate via in PATH_FIGURES
# (name suffix, vias paired per round, their combination, unit, which way is better)
PATH_FIGURES = (
    ("direct_p50_us", ("direct",), value("p50_us"), "us", "lower"),
    ("p50_us", (GATEWAY,), value("p50_us"), "us", "lower"),
    ("nginx_p50_us", ("nginx",), value("p50_us"), "us", "lower"),
    ("direct_p99_us", ("direct",), value("p99_us"), "us", "lower"),
    ("p99_us", (GATEWAY,), value("p99_us"), "us", "lower"),
    ("nginx_p99_us", ("nginx",), value("p99_us"), "us", "lower"),
    ("added_p50_us", (GATEWAY, "direct"), difference("p50_us"), "us", "lower"),
    ("nginx_added_p50_us", ("nginx", "direct"), difference("p50_us"), "us", "lower"),
    ("ratio", (GATEWAY, "direct", "nginx"), added_ratio, "ratio", "lower"),
    ("direct_rps", ("direct",), value("rps"), "rps", "higher"),
    ("rps", (GATEWAY,), value("rps"), "rps", "higher"),
    ("nginx_rps", ("nginx",), value("rps"), "rps", "higher"),
    ("rps_ratio", (GATEWAY, "nginx"), quotient("rps"), "ratio", "higher"),
    ("cpu_us_per_req", (GATEWAY,), value("proxy_cpu_us_per_req"), "us", "lower"),
    ("nginx_cpu_us_per_req", ("nginx",), value("proxy_cpu_us_per_req"), "us", "lower"),
    ("cpu_ratio", (GATEWAY, "nginx"), quotient("proxy_cpu_us_per_req"), "ratio", "lower"),
)


def path_figures(figures, runs):
    for path, (kind, gateway) in PATHS.items():
        for point in runs.points(kind, gateway):
            prefix = f"paths.{path}.{point[1]}.c{point[2]}."
            for suffix, vias, combine, unit, better in PATH_FIGURES:
                vias = tuple(gateway if via == GATEWAY else via for via in vias)
                pairs, any_failed = runs.pairs(point, vias)
                figures.add(prefix + suffix, [combine(*rows) for _, rows in pairs], unit,
                            better, any_failed)


def copy_figures(figures, rows):
    """copy.* figures; returns the floor (memcpy + loopback) per size and round."""
    floors = {}
    for size in sorted({r["size_bytes"] for r in rows}):
        mine = [r for r in rows if r["size_bytes"] == size]
        for column in ("memcpy_us", "loopback_us", "rtt_us"):
            figures.add(f"copy.{size}.{column}", [r[column] for r in mine], "us", "lower")
        floors[size] = {r["round"]: r["memcpy_us"] + r["loopback_us"] for r in mine
                        if r["memcpy_us"] is not None and r["loopback_us"] is not None}
        figures.add(f"copy.{size}.floor_us", floors[size].values(), "us", "lower")
    return floors


def size_figures(figures, runs, floors):
    for point in runs.points():
        kind, size = point[:2]
        for via, role in SIZE_ROLES.items():
            if not runs.has(point, via):
                continue
            prefix = f"sizes.{kind}.{size}.{role}"
            pairs, any_failed = runs.pairs(point, (via,))
            figures.add(prefix + "p50_us", [rows[0]["p50_us"] for _, rows in pairs], "us",
                        "lower", any_failed)
            if via == "direct":
                continue
            pairs, any_failed = runs.pairs(point, (via, "direct"))
            added = {rd: difference("p50_us")(*rows) for rd, rows in pairs}
            figures.add(prefix + "added_p50_us", added.values(), "us", "lower", any_failed)
            if via in GATEWAYS and size in floors:
                floor = floors[size]  # the same round's: both share the machine's state
                figures.add(prefix + "added_minus_floor_us",
                            [a - floor[rd] for rd, a in added.items()
                             if a is not None and rd in floor], "us", "lower", any_failed)


def rss_figures(figures, rows):
    """The proxy's peak RSS per via and phase: per round the largest over its rows (kinds)."""
    peaks, failed_runs = {}, set()
    for r in rows:
        key = (r["via"], r["phase"])
        if failed(r):
            failed_runs.add(key)
        elif r["proxy_rss_kb"] is not None:
            per_round = peaks.setdefault(key, {})
            per_round[r["round"]] = max(per_round.get(r["round"], 0), r["proxy_rss_kb"])
    for via in VIAS:
        for phase in ("idle", "load"):
            if (via, phase) in peaks or (via, phase) in failed_runs:
                figures.add(f"rss.{via}.{phase}_kb", peaks.get((via, phase), {}).values(),
                            "kB", "lower", (via, phase) in failed_runs)


def openloop_series(runs):
    """[(via, kind, [points by offered rate])] for each via and kind present."""
    series = []
    for via in VIAS:
        for kind in KINDS:
            points = sorted((p for p in runs.points(kind, via) if p[3] > 0), key=lambda p: p[3])
            if points:
                series.append((via, kind, points))
    return series


def openloop_figures(figures, runs):
    """p99 per offered rate, and the knee: the lowest rate whose median p99 passes 10 ms.
    A rate at which every round failed counts as past the knee: it could not be served."""
    for via, kind, points in openloop_series(runs):
        knee = None
        for point in points:
            name = f"openloop.{via}.{kind}.{number_name(point[3])}.p99_us"
            pairs, any_failed = runs.pairs(point, (via,))
            figures.add(name, [rows[0]["p99_us"] for _, rows in pairs], "us", "lower",
                        any_failed)
            p99 = figures.get(name)
            if knee is None and (p99["median"] > KNEE_P99_US if p99 else any_failed):
                knee = point[3]
        if knee is not None:
            figures.add(f"openloop.{via}.{kind}.knee_rps", [knee], "req/s", "higher")


# ---- targets ------------------------------------------------------------------------------


class Target(NamedTuple):
    name: str
    what: str
    figure: str
    op: str
    limit: float
    needs: tuple  # the CSVs (scenario names) it reads
    context: tuple = ()  # figures shown beside the measured one


COMPARISONS = {"<=": operator.le, "<": operator.lt, ">=": operator.ge}
RSS_LIMIT_KB = {"idle": 30 * 1024, "load": 100 * 1024}
PASSTHROUGHS = ("http_passthrough", "grpc_passthrough")
TARGETS = (
    *(Target(f"T1a {p}", "64 B, c=1: infergate added p50 / nginx added p50",
             f"paths.{p}.64.c1.ratio", "<=", 0.75, ("paths",),
             (f"paths.{p}.64.c1.added_p50_us", f"paths.{p}.64.c1.nginx_added_p50_us"))
      for p in PASSTHROUGHS),
    *(Target(f"T1b {p}", "64 B, c=64: infergate rps / nginx rps",
             f"paths.{p}.64.c64.rps_ratio", ">=", 1.0, ("paths",),
             (f"paths.{p}.64.c64.rps", f"paths.{p}.64.c64.nginx_rps")) for p in PASSTHROUGHS),
    *(Target(f"T1c {p}", "64 B, c=64: infergate proxy CPU per request / nginx's",
             f"paths.{p}.64.c64.cpu_ratio", "<", 1.0, ("paths",),
             (f"paths.{p}.64.c64.cpu_us_per_req", f"paths.{p}.64.c64.nginx_cpu_us_per_req"))
      for p in PASSTHROUGHS),
    Target("T2 http_json_to_grpc", "64 B, c=1: infergate added p50 / nginx added p50",
           "paths.http_json_to_grpc.64.c1.ratio", "<=", 1.3, ("paths",),
           ("paths.http_json_to_grpc.64.c1.added_p50_us",
            "paths.http_json_to_grpc.64.c1.nginx_added_p50_us")),
    Target("T3 bin via ig_grpc 64 MiB", "c=1: infergate added p50 minus memcpy + loopback",
           f"sizes.bin.{BIG}.added_minus_floor_us", "<=", 0.0, ("sizes", "copy"),
           (f"sizes.bin.{BIG}.added_p50_us", f"copy.{BIG}.floor_us")),
    *(Target(f"T4 {via} {phase}", f"proxy peak RSS, {phase}", f"rss.{via}.{phase}_kb", "<=",
             RSS_LIMIT_KB[phase], ("rss",)) for via in GATEWAYS for phase in ("idle", "load")),
)


def unit_of(name):
    return "us" if name.endswith("_us") else "kB" if name.endswith("_kb") else "ratio"


def judge(target, figures, present):
    figure = figures.get(target.figure)
    measured = figure["median"] if figure else None
    missing = [f"{name}.csv" for name in target.needs if name not in present]
    if missing:
        verdict, why = "NOT RUN", f"{' and '.join(missing)} not run"
    elif target.figure in figures.failed:
        verdict, why = "MISS", "failed run"
    elif figure is None and target.figure in figures.seen:
        verdict, why = "MISS", "no usable round (a baseline missing, or nginx added <= 0)"
    elif figure is None:
        verdict, why = "NOT RUN", "no rows"
    else:
        passed = COMPARISONS[target.op](measured, target.limit)
        verdict, why = ("PASS" if passed else "MISS"), f"median of {figure['rounds']} rounds"
    shown = [f"{name.rsplit('.', 1)[1]} {show(figures.get(name))}" for name in target.context
             if figures.get(name)]
    return {"name": target.name, "what": target.what, "figure": target.figure,
            "measured": measured, "op": target.op, "limit": target.limit,
            "unit": unit_of(target.figure), "verdict": verdict,
            "why": "; ".join([why] + shown)}


# ---- formatting ---------------------------------------------------------------------------


def number_name(x):
    return str(int(x)) if float(x).is_integer() else str(x)


def size_name(size):
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale and size % scale == 0:
            return f"{size // scale} {unit}"
    return f"{size} B"


def scale_for(unit, largest):
    """(divisor, decimals, unit shown): us below 1000, ms with 2 decimals above."""
    if unit == "us":
        if largest >= 1000:
            return 1000, 2, " ms"
        return 1, 1 if largest < 10 else 0, " us"
    if unit == "kB":
        return 1024, 1, " MiB"
    if unit == "ratio":
        return 1, 2, ""
    return 1, 0, ""


def show_value(x, unit):
    divisor, decimals, shown = scale_for(unit, abs(x))
    return f"{x / divisor:,.{decimals}f}{shown}"


def show(figure):
    """`median (min..max) unit`, in one scale; the range only where the rounds differ."""
    if figure is None:
        return "-"
    divisor, decimals, shown = scale_for(figure["unit"],
                                         max(abs(figure["min"]), abs(figure["max"])))
    text = f"{figure['median'] / divisor:,.{decimals}f}"
    if figure["min"] != figure["max"]:
        text += (f" ({figure['min'] / divisor:,.{decimals}f}.."
                 f"{figure['max'] / divisor:,.{decimals}f})")
    return text + shown


def cell(figures, name):
    """A figure's text; n/a where rows ran but gave no value (nginx added <= 0, say)."""
    if name in figures.table:
        return show(figures.get(name)) + (" (failed runs)" if name in figures.failed else "")
    return "n/a" if name in figures.seen else "-"


def table(header, rows):
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)] + \
        ["| " + " | ".join(row) + " |" for row in rows]


# ---- summary.md ---------------------------------------------------------------------------


def meta_lines(meta):
    seconds = meta.get("seconds")
    duration = f"{int(seconds) // 60} min {int(seconds) % 60} s" if seconds is not None else "?"
    return [f"- command: `{meta.get('command', '?')}`{' (quick)' if meta.get('quick') else ''}",
            f"- machine: {meta.get('machine', '?')}",
            f"- load average: {meta.get('load_start', '?')} at the start, "
            f"{meta.get('load_end', '?')} at the end",
            f"- git: {meta.get('git', '?')}; started {meta.get('started', '?')}; took {duration}",
            f"- infergate's malloc: {meta.get('malloc', '?')}",
            ""]


def target_lines(figures, targets):
    met = sum(t["verdict"] == "PASS" for t in targets)
    not_run = sum(t["verdict"] == "NOT RUN" for t in targets)
    rows = []
    for t in targets:
        measured = show(figures.get(t["figure"])) if t["figure"] else f"exit {t['measured']}"
        verdict = {"PASS": "PASS", "MISS": "**MISS**"}.get(t["verdict"], t["verdict"])
        rows.append([t["name"], t["what"], measured,
                     f"{t['op']} {show_value(t['limit'], t['unit'])}" if t["figure"] else "exit 0",
                     f"{verdict} ({t['why']})"])
    return ["## Targets", "", f"**{met} of {len(targets)} targets met** ({not_run} not run).",
            ""] + table(["target", "what", "measured", "limit", "verdict"], rows) + [""]


def paths_lines(figures, runs):
    out = ["## Paths", ""]
    if runs is None:
        return out + ["not run", ""]
    out += [f"{len(runs.rounds)} rounds; each value the median over rounds (min..max). added: "
            "the p50 minus the direct p50 of the same request in the same round; ratio: "
            "infergate added / nginx added per round (n/a: nginx added nothing measurable); "
            "CPU: the proxy's user+sys time per request.", ""]
    header = ["path", "c", "direct p50", "infergate p50", "nginx p50", "infergate added",
              "nginx added", "ratio", "infergate rps", "nginx rps", "rps ratio",
              "infergate CPU us/req", "nginx CPU us/req", "CPU ratio"]
    suffixes = ("direct_p50_us", "p50_us", "nginx_p50_us", "added_p50_us", "nginx_added_p50_us",
                "ratio", "rps", "nginx_rps", "rps_ratio", "cpu_us_per_req",
                "nginx_cpu_us_per_req", "cpu_ratio")
    for size in sorted({point[1] for point in runs.points()}):
        rows = []
        for path, (kind, gateway) in PATHS.items():
            for point in runs.points(kind, gateway):
                if point[1] == size:
                    prefix = f"paths.{path}.{size}.c{point[2]}."
                    rows.append([path, str(point[2])] +
                                [cell(figures, prefix + suffix) for suffix in suffixes])
        out += [f"### {size_name(size)} tensors", ""] + table(header, rows) + [""]
    return out


def sizes_lines(figures, runs, copies):
    out = ["## Sizes", ""]
    if copies:
        out += ["The floor, measured in the same rounds: one memcpy into a warm buffer and one "
                "loopback TCP transfer of the size.", ""]
        out += table(["size", "memcpy", "loopback", "floor: memcpy + loopback", "rtt"],
                     [[size_name(size)] + [cell(figures, f"copy.{size}.{column}_us") for column
                                           in ("memcpy", "loopback", "floor", "rtt")]
                      for size in sorted({r["size_bytes"] for r in copies})]) + [""]
    if runs is None:
        return out + ["not run", ""]
    rows = []
    for kind in KINDS:
        for gateway in GATEWAYS:
            sizes = sorted({p[1] for p in runs.points(kind) if runs.has(p, gateway)})
            role = SIZE_ROLES[gateway]
            for size in sizes:
                prefix = f"sizes.{kind}.{size}."
                rows.append([kind, gateway, size_name(size)] + [
                    cell(figures, prefix + name) for name in (
                        "direct_p50_us", "nginx_p50_us", role + "p50_us", "nginx_added_p50_us",
                        role + "added_p50_us", role + "added_minus_floor_us")])
    out += [f"{len(runs.rounds)} rounds, c=1.", ""]
    return out + table(["request", "infergate via", "size", "direct p50", "nginx p50",
                        "infergate p50", "nginx added", "infergate added",
                        "infergate added - floor"], rows) + [""]


def rss_lines(figures, rows):
    out = ["## Memory (rss)", ""]
    if rows is None:
        return out + ["not run", ""]
    out += ["The proxy's peak VmRSS, idle and under 256 concurrent small requests "
            "(infergate's limits: 30 MiB idle, 100 MiB under load; nginx: no target).", ""]
    vias = [via for via in VIAS if f"rss.{via}.idle_kb" in figures.seen
            or f"rss.{via}.load_kb" in figures.seen]
    return out + table(["via", "idle", "under load"],
                       [[via, cell(figures, f"rss.{via}.idle_kb"),
                         cell(figures, f"rss.{via}.load_kb")] for via in vias]) + [""]


def openloop_lines(figures, runs):
    out = ["## Open loop", ""]
    if runs is None:
        return out + ["not run", ""]
    series = openloop_series(runs)
    rates = sorted({p[3] for _, _, points in series for p in points})
    out += ["p99 per offered rate (median over rounds); the knee: the lowest rate whose p99 "
            f"passes {KNEE_P99_US / 1000:g} ms (or where every round failed).", ""]
    rows = [[f"{rate:,.0f}"] + [cell(figures, f"openloop.{via}.{kind}.{number_name(rate)}.p99_us")
                                for via, kind, _ in series] for rate in rates]
    knees = []
    for via, kind, points in series:
        knee = figures.get(f"openloop.{via}.{kind}.knee_rps")
        knees.append(f"**{show(knee)}**" if knee else f"> {points[-1][3]:,.0f}")
    rows.append(["knee (req/s)"] + knees)
    return out + table(["offered req/s"] + [f"{via} {kind}" for via, kind, _ in series],
                       rows) + [""]


def markdown(meta, figures, targets, loads, copies):
    title = f"# Benchmark suite: infergate against direct and nginx ({meta.get('machine', '?')})"
    return "\n".join([title, ""] + meta_lines(meta) + target_lines(figures, targets) +
                     paths_lines(figures, loads["paths"]) +
                     sizes_lines(figures, loads["sizes"], copies) +
                     rss_lines(figures, loads["rss"] and loads["rss"].raw) +
                     openloop_lines(figures, loads["openloop"]))


# ---- plots --------------------------------------------------------------------------------

COLOURS = {"direct": "tab:blue", "infergate": "tab:red", "nginx": "tab:green",
           "floor": "tab:grey"}
ROLES = (("direct", "direct_"), ("infergate", ""), ("nginx", "nginx_"))


def draw(ax, xs, names, figures, divisor=1, **style):
    """A line through the figures' medians, error bars min..max; missing figures skipped."""
    found = [(x, figures.get(name)) for x, name in zip(xs, names) if figures.get(name)]
    if not found:
        return
    medians = [f["median"] / divisor for _, f in found]
    errors = [[m - f["min"] / divisor for m, (_, f) in zip(medians, found)],
              [f["max"] / divisor - m for m, (_, f) in zip(medians, found)]]
    ax.errorbar([x for x, _ in found], medians, yerr=errors, capsize=3, marker="o",
                markersize=3, **style)


def plain_log_y(ax):
    """A log y axis labelled 200, 500, 1000 rather than 2x10^2; the minor ticks (2 and 5 of
    each decade) labelled only when the axis spans less than two decades."""
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda y, _: f"{y:g}"))

    def minor(y, _):
        low, high = ax.get_ylim()
        leading = round(y / 10 ** math.floor(math.log10(y)))
        return f"{y:g}" if high / low < 100 and leading in (2, 5) else ""
    ax.yaxis.set_minor_formatter(ticker.FuncFormatter(minor))


def finish(fig, ax, directory, name, title, xlabel, ylabel):
    """The common end of the one-axis plots: log y, labels, grid, legend, title; saved."""
    plain_log_y(ax)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    ax.set_title(title)
    fig.savefig(os.path.join(directory, name), dpi=150)


def plot_paths(directory, figures, runs, git, latency):
    fig = Figure(figsize=(15, 8.5))
    axes = fig.subplots(2, 3).flatten()
    for ax, (path, (kind, gateway)) in zip(axes, PATHS.items()):
        concs = [p[2] for p in runs.points(kind, gateway) if p[1] == SMALL]
        stats = (("p50", "-"), ("p99", "--")) if latency else (("rps", "-"),)
        for role, prefix in ROLES:
            for stat, line in stats:
                suffix = f"{stat}_us" if latency else stat
                draw(ax, concs, [f"paths.{path}.{SMALL}.c{c}.{prefix}{suffix}" for c in concs],
                     figures, color=COLOURS[role], linestyle=line, label=f"{role} {stat}")
        ax.set_title(f"{path} ({kind} via {gateway})")
        if not concs:
            ax.text(0.5, 0.5, "not run", transform=ax.transAxes, ha="center")
        ax.set_xscale("log", base=2)
        ax.set_xticks(concs or [1])
        ax.set_xticklabels([str(c) for c in concs or [1]])
        ax.set_xlabel("concurrency (requests in flight)")
        plain_log_y(ax)
        ax.set_ylabel("latency (us)" if latency else "throughput (requests/s)")
        ax.grid(True, which="both", alpha=0.3)
    handles, labels = max((ax.get_legend_handles_labels() for ax in axes), key=lambda h: len(h[0]))
    if labels:
        fig.legend(handles, labels, loc="lower center", ncol=len(labels))
    what = "latency (p50 solid, p99 dashed)" if latency else "throughput"
    fig.suptitle(f"paths: {what} vs concurrency, 64 B tensors, median and min..max over rounds "
                 f"(git {git})")
    fig.tight_layout(rect=(0, 0.05, 1, 1))  # room for the legend below the plots
    name = ("latency" if latency else "throughput") + "_vs_concurrency.png"
    fig.savefig(os.path.join(directory, name), dpi=150)


def plot_sizes(directory, figures, sizes, git):
    fig = Figure(figsize=(8, 5.5), layout="constrained")
    ax = fig.subplots()
    for role, prefix in ROLES:
        label = "infergate (bin via ig_grpc)" if role == "infergate" else role
        draw(ax, sizes, [f"sizes.bin.{s}.{prefix}p50_us" for s in sizes], figures, 1000,
             color=COLOURS[role], label=label)
    draw(ax, sizes, [f"copy.{s}.floor_us" for s in sizes], figures, 1000,
         color=COLOURS["floor"], linestyle=":", label="floor: memcpy + loopback")
    ax.set_xscale("log")
    ax.set_xticks(sizes, [size_name(s) for s in sizes])
    ax.xaxis.set_minor_formatter(ticker.NullFormatter())
    finish(fig, ax, directory, "latency_vs_size.png",
           f"sizes: p50 vs tensor size, HTTP binary, c=1 (git {git})", "tensor bytes",
           "p50 latency (ms)")


def plot_openloop(directory, figures, series, git):
    fig = Figure(figsize=(8, 5.5), layout="constrained")
    ax = fig.subplots()
    for via, kind, points in series:
        rates = [p[3] for p in points]
        draw(ax, rates, [f"openloop.{via}.{kind}.{number_name(r)}.p99_us" for r in rates],
             figures, 1000, label=f"{via} ({kind})")
    ax.axhline(KNEE_P99_US / 1000, color="black", linestyle="--", linewidth=1,
               label=f"{KNEE_P99_US / 1000:g} ms")
    finish(fig, ax, directory, "openloop.png", f"openloop: p99 vs offered rate (git {git})",
           "offered rate (requests/s)", "p99 latency (ms)")


def plots(directory, figures, loads, git):
    """Each plot whose data is there."""
    if loads["paths"]:
        for latency in (True, False):
            plot_paths(directory, figures, loads["paths"], git, latency)
    sizes = sorted({p[1] for p in loads["sizes"].points("bin")}) if loads["sizes"] else []
    if sizes:
        plot_sizes(directory, figures, sizes, git)
    series = openloop_series(loads["openloop"]) if loads["openloop"] else []
    if series:
        plot_openloop(directory, figures, series, git)


# ---- summarize and compare ----------------------------------------------------------------


def summarize(directory):
    """Reads DIR's CSVs and meta.json; writes summary.md, summary.json and the plots into
    DIR; returns the summary ({"meta", "figures", "targets"}). Raises InputError."""
    if not os.path.isdir(directory):
        raise InputError(f"{directory}: not a directory")
    meta_path = os.path.join(directory, "meta.json")
    meta = read_json_object(meta_path) if os.path.exists(meta_path) else {}
    loads = {}
    for scenario in LOAD_SCENARIOS:
        rows = read_csv(os.path.join(directory, scenario + ".csv"), LOAD_COLUMNS)
        loads[scenario] = LoadRuns(rows) if rows else None  # header only: not run either
    copies = read_csv(os.path.join(directory, "copy.csv"), COPY_COLUMNS) or None
    once = any(os.path.exists(os.path.join(directory, name))
               for name in ("instructions.csv", "copies.csv", "external.json"))
    if copies is None and not any(loads.values()) and not once:
        raise InputError(f"{directory}: none of {', '.join(LOAD_SCENARIOS)}, copy .csv, "
                         "nor a once-run scenario")

    figures = Figures()
    floors = copy_figures(figures, copies) if copies else {}
    if loads["paths"]:
        path_figures(figures, loads["paths"])
    if loads["sizes"]:
        size_figures(figures, loads["sizes"], floors)
    if loads["rss"]:
        rss_figures(figures, loads["rss"].raw)
    if loads["openloop"]:
        openloop_figures(figures, loads["openloop"])
    present = {name for name, runs in loads.items() if runs} | ({"copy"} if copies else set())
    suite_once.add_figures(directory, figures)
    targets = [judge(target, figures, present) for target in TARGETS]
    targets += suite_once.targets(directory)

    summary = {"meta": meta, "figures": figures.table, "targets": targets}
    with open(os.path.join(directory, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
        f.write("\n")
    with open(os.path.join(directory, "summary.md"), "w") as f:
        f.write("\n".join([markdown(meta, figures, targets, loads, copies)] +
                          suite_once.lines(directory, figures, show)) + "\n")
    plots(directory, figures, loads, meta.get("git", "?"))
    return summary


def load_summary(path):
    summary = read_json_object(path)
    try:
        for name, figure in summary["figures"].items():
            if figure["better"] not in ("lower", "higher") or not all(
                    isinstance(figure[k], (int, float)) for k in ("median", "min", "max")):
                raise InputError(f"{path}: figure {name} is malformed")
    except (KeyError, TypeError, AttributeError) as e:
        raise InputError(f"{path}: not a summary ({e!r})") from None
    return summary


# The figures that hold still between two runs of the same tree on a shared machine:
# counts (instructions, copies), memory, and ratios taken within a round (infergate against
# direct and nginx measured beside it). Raw latencies and rates drift with the machine's
# other load by more than a run's own spread shows; `compare --all` weighs them too.
STABLE_PREFIXES = ("instructions.", "copies.", "rss.")
STABLE_SUFFIXES = (".ratio", ".rps_ratio", ".cpu_ratio")


def is_stable(name):
    return name.startswith(STABLE_PREFIXES) or name.endswith(STABLE_SUFFIXES)


def compare(new, old, everything=False):
    """The figures of both summaries (dicts or summary.json paths) worse in NEW by more than
    their spread: ([{"figure", "old", "new", "change_pct", "spread", "unit"}], how many were
    compared). Only the stable figures (is_stable) unless `everything`."""
    new, old = (load_summary(s) if isinstance(s, str) else s for s in (new, old))
    flagged, compared = [], 0
    for name in sorted(set(new["figures"]) & set(old["figures"])):
        if not everything and not is_stable(name):
            continue
        before, after = old["figures"][name], new["figures"][name]
        compared += 1
        change = after["median"] - before["median"]
        spread = max(before["max"] - before["min"], after["max"] - after["min"])
        # single rounds have no spread: then only a change past 5% counts
        threshold = spread if spread > 0 else 0.05 * abs(before["median"])
        worse = change > 0 if before["better"] == "lower" else change < 0
        if worse and abs(change) > threshold:
            flagged.append({"figure": name, "old": before["median"], "new": after["median"],
                            "change_pct": 100 * change / abs(before["median"])
                            if before["median"] else None,
                            "spread": spread, "unit": before.get("unit", "")})
    return flagged, compared


def comparison_text(flagged, compared):
    rows = [[f["figure"], show_value(f["old"], f["unit"]), show_value(f["new"], f["unit"]),
             f"{f['change_pct']:+.1f}%" if f["change_pct"] is not None else "n/a",
             show_value(f["spread"], f["unit"]), "FLAG"] for f in flagged]
    lines = table(["figure", "old", "new", "change", "spread", ""], rows) if rows else []
    return "\n".join(lines + [f"{len(flagged)} of {compared} figures present in both are worse "
                              "by more than their spread."])


def main(argv):
    try:
        if len(argv) == 3 and argv[1] == "summarize":
            summary = summarize(argv[2])
            for t in summary["targets"]:
                print(f"{t['verdict']:7} {t['name']}: {t['why']}")
            print(f"wrote {os.path.join(argv[2], 'summary.md')} and summary.json")
            return 1 if any(t["verdict"] == "MISS" for t in summary["targets"]) else 0
        if len(argv) in (4, 5) and argv[1] == "compare" and argv[4:] in ([], ["--all"]):
            flagged, compared = compare(argv[2], argv[3], everything=argv[4:] == ["--all"])
            print(comparison_text(flagged, compared))
            return 1 if flagged else 0
    except InputError as e:
        print(f"suite_report.py: {e}", file=sys.stderr)
        return 2
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
