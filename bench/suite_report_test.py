#!/usr/bin/python3
"""suite_report.py on synthetic CSVs whose figures are known by construction.

  /usr/bin/python3 -m unittest bench/suite_report_test.py
"""
import contextlib
import csv
import io
import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import suite_report  # noqa: E402

ROUNDS = (1, 2, 3)
BIG = 67108864


def load_row(scenario, rd, kind, via, size=64, conc=1, p50=100.0, **fields):
    row = {"scenario": scenario, "round": rd, "kind": kind, "size_bytes": size,
           "concurrency": conc, "rate": 0, "via": via, "requests": 1000, "errors": 0,
           "rps": 1000, "p50_us": p50, "p99_us": 2 * p50, "phase": ""}
    row.update(fields)
    return row


def write_csv(directory, name, columns, rows):
    with open(os.path.join(directory, name), "w", newline="") as f:
        writer = csv.DictWriter(f, columns, restval="")
        writer.writeheader()
        writer.writerows(rows)


def closed_loop(scenario, kind, gateway, p50s, size=64, conc=1, overrides=None):
    """Rows of one request kind: p50s = {round: (direct, gateway, nginx)}; overrides =
    {(via, round): {column: value}}."""
    rows = []
    for rd, values in p50s.items():
        for via, p50 in zip(("direct", gateway, "nginx"), values):
            rows.append(load_row(scenario, rd, kind, via, size, conc, p50,
                                 **(overrides or {}).get((via, rd), {})))
    return rows


def paths_rows():
    rows = closed_loop("paths", "grpc", "ig_grpc", {1: (100, 130, 150), 2: (100, 140, 150),
                                                    3: (110, 140, 160)})
    rows += closed_loop("paths", "bin", "ig_http", {rd: (100, 190, 150) for rd in ROUNDS})
    # nginx adds nothing over direct: the ratio is undefined
    rows += closed_loop("paths", "json", "ig_grpc", {rd: (100, 120, 100) for rd in ROUNDS})
    rps = {1: 1100, 2: 1200, 3: 900}
    rows += closed_loop("paths", "grpc", "ig_grpc", {rd: (300, 320, 340) for rd in ROUNDS},
                        conc=64, overrides={
                            (via, rd): {"rps": rps[rd] if via == "ig_grpc" else 1000,
                                        "proxy_cpu_us_per_req": cpu}
                            for rd in ROUNDS for via, cpu in (("ig_grpc", 8), ("nginx", 10))})
    # round 2's infergate run had errors
    rows += closed_loop("paths", "bin", "ig_http", {rd: (300, 320, 340) for rd in ROUNDS},
                        conc=64, overrides={("ig_http", 2): {"errors": 3}})
    return rows


def sizes_rows():
    added = {1: 1000, 2: 2000, 3: 3000}
    rows = closed_loop("sizes", "bin", "ig_grpc",
                       {rd: (10000, 10000 + added[rd], 11500) for rd in ROUNDS}, size=BIG)
    return rows + closed_loop("sizes", "bin", "ig_grpc", {rd: (900, 1000, 1100) for rd in ROUNDS},
                              size=4194304)


# floors 3000, 1000, 2000 against added 1000, 2000, 3000: per round -2000, +1000, +1000,
# median +1000; the medians' difference (2000 - 2000) would say 0
COPY_ROWS = [{"scenario": "copy", "round": rd, "size_bytes": BIG, "memcpy_us": m,
              "loopback_us": loop, "rtt_us": 30}
             for rd, m, loop in ((1, 1000, 2000), (2, 400, 600), (3, 800, 1200))]


def rss_rows():
    rows = []
    for rd in ROUNDS:
        for via, idle in (("ig_http", 20000), ("ig_grpc", 40000), ("nginx", 5000)):
            rows.append(load_row("rss", rd, "bin", via, requests="", rps="", p50_us="",
                                 p99_us="", concurrency="", proxy_rss_kb=idle, phase="idle"))
        for kind, via, peak in (("bin", "ig_http", 50000), ("json", "ig_http", 90000),
                                ("grpc", "ig_grpc", 60000)):
            rows.append(load_row("rss", rd, kind, via, conc=256, proxy_rss_kb=peak,
                                 phase="load"))
    return rows


def openloop_rows():
    p99s = {1000: (500, 600, 700), 2000: (9000, 12000, 13000), 4000: (20000,) * 3}
    rows = []
    for rate, per_round in p99s.items():
        for rd, p99 in zip(ROUNDS, per_round):
            rows.append(load_row("openloop", rd, "grpc", "ig_grpc", rate=rate, p99_us=p99))
            rows.append(load_row("openloop", rd, "grpc", "direct", rate=rate, p99_us=1000))
    return rows


def write_suite(directory):
    columns = suite_report.LOAD_COLUMNS
    write_csv(directory, "paths.csv", columns, paths_rows())
    write_csv(directory, "sizes.csv", columns, sizes_rows())
    write_csv(directory, "rss.csv", columns, rss_rows())
    write_csv(directory, "openloop.csv", columns, openloop_rows())
    write_csv(directory, "copy.csv", suite_report.COPY_COLUMNS, COPY_ROWS)
    with open(os.path.join(directory, "meta.json"), "w") as f:
        json.dump({"command": "bench/suite.py", "machine": "test box", "git": "abc1234",
                   "seconds": 125, "quick": False}, f)


def run_main(*args):
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        return suite_report.main(["suite_report.py", *args])


class Summarize(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.dir = cls.tmp.name
        write_suite(cls.dir)
        cls.summary = suite_report.summarize(cls.dir)
        cls.figures = cls.summary["figures"]
        cls.targets = {t["name"]: t for t in cls.summary["targets"]}
        with open(os.path.join(cls.dir, "summary.md")) as f:
            cls.markdown = f.read()

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def assertFigure(self, name, median, low, high):
        figure = self.figures[name]
        for key, expected in (("median", median), ("min", low), ("max", high)):
            self.assertAlmostEqual(figure[key], expected, msg=f"{name} {key}")

    def test_added_p50_pairs_rows_within_a_round(self):
        self.assertFigure("paths.grpc_passthrough.64.c1.added_p50_us", 30, 30, 40)
        self.assertFigure("paths.grpc_passthrough.64.c1.nginx_added_p50_us", 50, 50, 50)
        self.assertFigure("paths.grpc_passthrough.64.c1.ratio", 0.6, 0.6, 0.8)
        self.assertEqual(self.figures["paths.grpc_passthrough.64.c1.ratio"]["better"], "lower")

    def test_ratio_target_passes_and_misses(self):
        self.assertEqual(self.targets["T1a grpc_passthrough"]["verdict"], "PASS")
        self.assertAlmostEqual(self.targets["T1a grpc_passthrough"]["measured"], 0.6)
        self.assertEqual(self.targets["T1a http_passthrough"]["verdict"], "MISS")
        self.assertAlmostEqual(self.targets["T1a http_passthrough"]["measured"], 1.8)

    def test_ratio_is_undefined_when_nginx_adds_nothing(self):
        self.assertNotIn("paths.http_json_to_grpc.64.c1.ratio", self.figures)
        self.assertEqual(self.targets["T2 http_json_to_grpc"]["verdict"], "MISS")
        self.assertIn("no usable round", self.targets["T2 http_json_to_grpc"]["why"])
        self.assertIn("n/a", self.markdown)

    def test_rps_and_cpu_ratios(self):
        self.assertFigure("paths.grpc_passthrough.64.c64.rps_ratio", 1.1, 0.9, 1.2)
        self.assertFigure("paths.grpc_passthrough.64.c64.cpu_ratio", 0.8, 0.8, 0.8)
        self.assertEqual(self.figures["paths.grpc_passthrough.64.c64.rps"]["better"], "higher")
        self.assertEqual(self.targets["T1b grpc_passthrough"]["verdict"], "PASS")
        self.assertEqual(self.targets["T1c grpc_passthrough"]["verdict"], "PASS")

    def test_failed_run_is_left_out_and_misses_its_targets(self):
        self.assertEqual(self.figures["paths.http_passthrough.64.c64.rps_ratio"]["rounds"], 2)
        self.assertTrue(self.targets["T1b http_passthrough"]["why"].startswith("failed run"))
        self.assertEqual(self.targets["T1b http_passthrough"]["verdict"], "MISS")
        # no CPU figures in these rows: the failure still decides
        self.assertEqual(self.targets["T1c http_passthrough"]["verdict"], "MISS")

    def test_floor_is_subtracted_round_by_round(self):
        self.assertFigure("copy.67108864.floor_us", 2000, 1000, 3000)
        self.assertFigure("sizes.bin.67108864.added_p50_us", 2000, 1000, 3000)
        self.assertFigure("sizes.bin.67108864.added_minus_floor_us", 1000, -2000, 1000)
        self.assertEqual(self.targets["T3 bin via ig_grpc 64 MiB"]["verdict"], "MISS")
        self.assertIn("floor_us", self.targets["T3 bin via ig_grpc 64 MiB"]["why"])

    def test_rss_takes_the_largest_row_and_judges_each_gateway(self):
        self.assertFigure("rss.ig_http.load_kb", 90000, 90000, 90000)
        self.assertFigure("rss.nginx.idle_kb", 5000, 5000, 5000)
        verdicts = {name: self.targets[name]["verdict"] for name in
                    ("T4 ig_http idle", "T4 ig_http load", "T4 ig_grpc idle", "T4 ig_grpc load")}
        self.assertEqual(verdicts, {"T4 ig_http idle": "PASS", "T4 ig_http load": "PASS",
                                    "T4 ig_grpc idle": "MISS", "T4 ig_grpc load": "PASS"})

    def test_openloop_knee_uses_the_median_p99_per_rate(self):
        self.assertFigure("openloop.ig_grpc.grpc.2000.p99_us", 12000, 9000, 13000)
        self.assertFigure("openloop.ig_grpc.grpc.knee_rps", 2000, 2000, 2000)
        self.assertNotIn("openloop.direct.grpc.knee_rps", self.figures)
        self.assertIn("> 4,000", self.markdown)

    def test_writes_summary_and_plots(self):
        with open(os.path.join(self.dir, "summary.json")) as f:
            self.assertEqual(json.load(f)["meta"]["git"], "abc1234")
        for name in ("latency_vs_concurrency.png", "throughput_vs_concurrency.png",
                     "latency_vs_size.png", "openloop.png"):
            self.assertGreater(os.path.getsize(os.path.join(self.dir, name)), 10000, name)
        self.assertIn("| 30 (30..40) us |", self.markdown)  # median (min..max)
        self.assertIn("10.00 ms", self.markdown)  # us above 1000 read as ms


class MissingAndBrokenInput(unittest.TestCase):
    def test_missing_csvs_are_not_run_and_exit_zero(self):
        with tempfile.TemporaryDirectory() as directory:
            write_csv(directory, "copy.csv", suite_report.COPY_COLUMNS, COPY_ROWS)
            self.assertEqual(run_main("summarize", directory), 0)
            with open(os.path.join(directory, "summary.json")) as f:
                summary = json.load(f)
            self.assertEqual({t["verdict"] for t in summary["targets"]}, {"NOT RUN"})
            self.assertFalse(os.path.exists(os.path.join(directory, "latency_vs_size.png")))
            with open(os.path.join(directory, "summary.md")) as f:
                self.assertIn("not run", f.read())

    def test_bad_number_is_an_input_error(self):
        with tempfile.TemporaryDirectory() as directory:
            write_csv(directory, "paths.csv", suite_report.LOAD_COLUMNS,
                      [load_row("paths", 1, "grpc", "direct", p50="fast")])
            self.assertEqual(run_main("summarize", directory), 2)
            self.assertEqual(run_main("summarize", os.path.join(directory, "nowhere")), 2)


class OnceRun(unittest.TestCase):
    """instructions.csv, copies.csv and external.json (suite_once.py)."""

    def test_once_figures_targets_and_sections(self):
        with tempfile.TemporaryDirectory() as directory:
            write_csv(directory, "instructions.csv",
                      ["scenario", "path", "kind", "upstream", "size_bytes", "requests",
                       "instructions_per_request"],
                      [{"scenario": "instructions", "path": "grpc_passthrough", "kind": "grpc",
                        "upstream": "grpc", "size_bytes": 64, "requests": 300,
                        "instructions_per_request": 183141},
                       {"scenario": "instructions", "path": "upstream_grpc", "kind": "grpc",
                        "upstream": "builtin", "size_bytes": 64, "requests": 300,
                        "instructions_per_request": 40143},
                       {"scenario": "instructions", "path": "http_passthrough", "kind": "bin",
                        "upstream": "http", "size_bytes": 64, "requests": 300,
                        "instructions_per_request": 23000},
                       {"scenario": "instructions", "path": "nginx_http_passthrough", "kind": "bin",
                        "upstream": "http", "size_bytes": 64, "requests": 300,
                        "instructions_per_request": 20000}])
            write_csv(directory, "copies.csv",
                      ["scenario", "path", "kind", "upstream", "size_bytes", "requests",
                       "memcpy_bytes_per_request", "memcpy_calls_per_request",
                       "copies_per_tensor_byte"],
                      [{"scenario": "copies", "path": "http_passthrough", "kind": "bin",
                        "upstream": "http", "size_bytes": 4194304, "requests": 10,
                        "memcpy_bytes_per_request": 8610333, "memcpy_calls_per_request": 745,
                        "copies_per_tensor_byte": "1.026"}])
            with open(os.path.join(directory, "external.json"), "w") as f:
                json.dump({"shm": {"command": "bench/shm_handoff.sh --quick", "status": 1,
                                   "report": "shm_handoff.md", "csv": "shm_handoff.csv",
                                   "log": "shm_handoff.log"},
                           "tls": {"command": "bench/tls_cost.sh", "status": 0,
                                   "report": "tls_cost.md", "csv": "tls_cost.csv",
                                   "log": "tls_cost.log"}}, f)
            with open(os.path.join(directory, "tls_cost.md"), "w") as f:
                f.write("# TLS cost\n\nTLS keeps 90% of plaintext.\n")
            # The shm script missed a target of its own: the suite misses too.
            self.assertEqual(run_main("summarize", directory), 1)
            with open(os.path.join(directory, "summary.json")) as f:
                summary = json.load(f)
            figures = summary["figures"]
            self.assertEqual(figures["instructions.grpc_passthrough.per_request"]["median"], 183141)
            self.assertEqual(figures["copies.http_passthrough.per_tensor_byte"]["median"], 1.026)
            verdicts = {t["name"]: t["verdict"] for t in summary["targets"]}
            self.assertEqual(verdicts["T5 shm (shm_handoff.sh)"], "MISS")
            self.assertEqual(verdicts["T6 tls (tls_cost.sh)"], "PASS")
            with open(os.path.join(directory, "summary.md")) as f:
                text = f.read()
            self.assertIn("| grpc_passthrough | 183,141 |", text)
            # The upstream's own serving in a table of its own; a row not measured shows "-".
            self.assertIn("| upstream_grpc | 40,143 |", text)
            self.assertIn("| upstream_http_bin | - |", text)
            self.assertNotIn("| upstream_grpc | 40,143 | -", text)
            # nginx's count under the gateway's table, with the HTTP passthrough's ratio to it.
            self.assertIn("(its one process, callgrind): 20,000 instructions per request; "
                          "http_passthrough / nginx: 1.15.", text)
            self.assertNotIn("| nginx_http_passthrough |", text)
            self.assertIn("## TLS cost", text)  # its report carried in, a level down
            self.assertIn("(no report: see shm_handoff.log)", text)


def figure(median, low, high, better="lower"):
    return {"median": median, "min": low, "max": high, "unit": "us", "better": better}


class Compare(unittest.TestCase):
    OLD = {"figures": {
        "beyond_spread": figure(100, 95, 105), "within_spread": figure(100, 90, 110),
        "single_round_small": figure(100, 100, 100), "single_round_big": figure(100, 100, 100),
        "throughput_down": figure(1000, 990, 1010, "higher"),
        "improved": figure(100, 95, 105), "only_old": figure(1, 1, 1)}}
    NEW = {"figures": {
        "beyond_spread": figure(120, 118, 122), "within_spread": figure(108, 100, 115),
        "single_round_small": figure(104, 104, 104), "single_round_big": figure(106, 106, 106),
        "throughput_down": figure(900, 890, 910, "higher"),
        "improved": figure(50, 45, 55), "only_new": figure(1, 1, 1)}}

    def test_flags_only_worse_by_more_than_the_spread(self):
        flagged, compared = suite_report.compare(self.NEW, self.OLD, everything=True)
        self.assertEqual(compared, 6)
        self.assertEqual([f["figure"] for f in flagged],
                         ["beyond_spread", "single_round_big", "throughput_down"])
        self.assertAlmostEqual(flagged[0]["change_pct"], 20)
        self.assertEqual(flagged[0]["spread"], 10)

    def test_weighs_only_stable_figures_unless_asked(self):
        old = {"figures": {"paths.x.64.c1.p50_us": figure(100, 99, 101),
                           "paths.x.64.c1.ratio": figure(1.0, 0.9, 1.1),
                           "instructions.x.per_request": figure(1000, 1000, 1000),
                           "rss.ig_grpc.idle_kb": figure(100, 100, 100)}}
        new = {"figures": {"paths.x.64.c1.p50_us": figure(200, 199, 201),
                           "paths.x.64.c1.ratio": figure(1.5, 1.4, 1.6),
                           "instructions.x.per_request": figure(1100, 1100, 1100),
                           "rss.ig_grpc.idle_kb": figure(101, 101, 101)}}
        flagged, compared = suite_report.compare(new, old)
        self.assertEqual(compared, 3)
        self.assertEqual([f["figure"] for f in flagged],
                         ["instructions.x.per_request", "paths.x.64.c1.ratio"])
        flagged, compared = suite_report.compare(new, old, everything=True)
        self.assertEqual(compared, 4)
        self.assertIn("paths.x.64.c1.p50_us", [f["figure"] for f in flagged])

    def test_cli_exit_status(self):
        with tempfile.TemporaryDirectory() as directory:
            paths = {}
            for name, summary in (("new", self.NEW), ("old", self.OLD), ("same", self.OLD)):
                paths[name] = os.path.join(directory, name + ".json")
                with open(paths[name], "w") as f:
                    json.dump(summary, f)
            self.assertEqual(run_main("compare", paths["new"], paths["old"], "--all"), 1)
            self.assertEqual(run_main("compare", paths["same"], paths["old"], "--all"), 0)
            # None of these names is a stable figure: by default nothing is weighed.
            self.assertEqual(run_main("compare", paths["new"], paths["old"]), 0)
            self.assertEqual(run_main("compare", paths["new"], paths["old"], "--every"), 2)
            self.assertEqual(run_main("compare", paths["new"], directory), 2)


if __name__ == "__main__":
    unittest.main()
