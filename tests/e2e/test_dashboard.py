"""The Grafana dashboard (deploy/grafana/infergate.json) against the metrics the gateway
really exposes.

DashboardJson reads the file only: every panel has a datasource and queries, ids are
unique, panels sit on the 24-column grid without overlapping, the families that matter
are queried, and README.md has a section per row and panel.

LiveMetrics starts real processes on loopback (port 0):

  U   a builtin infergate with client shm on (the handoff pool's keys)
  G   the gateway: every model -> U over gRPC (colocated, shared-memory handoff), or over
      HTTP when the request carries x-upstream: http (header or gRPC metadata)

sends successful infers on both client protocols toward both upstream protocols and one
for a model nobody serves, scrapes G's /metrics and checks that each metric name the
dashboard queries is a family there. A family must have at least one sample: a series
that appears only after its first event (a retry, a shed request) shows "No data" on
the dashboard and fails here, so such series are created at zero when their upstream or
endpoint is. Every process must exit 0 on SIGTERM without a sanitizer report.
"""
import json
import os
import re
import unittest

from prometheus_client.parser import text_string_to_metric_families

import grpc_stubs
from harness import LOOPBACK_HEAD, Gateway, Processes

_HERE = os.path.dirname(os.path.abspath(__file__))
DASHBOARD = os.path.join(_HERE, "..", "..", "deploy", "grafana", "infergate.json")
README = os.path.join(_HERE, "..", "..", "deploy", "grafana", "README.md")

# The families an operator cannot do without; histograms by their family name (queried
# through _bucket, _sum or _count), counters as exposed (with _total).
REQUIRED = ["infergate_requests_total", "infergate_request_duration_seconds",
            "infergate_gateway_overhead_seconds", "infergate_upstream_endpoint_state",
            "infergate_shm_handoff_bytes_total", "infergate_config_reloads_total"]

HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")


# ---- PromQL: the metric names of an expression -----------------------------------------

AGGREGATIONS = {"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count",
                "count_values", "bottomk", "topk", "quantile", "limitk", "limit_ratio"}
FUNCTIONS = {
    "abs", "absent", "absent_over_time", "acos", "acosh", "asin", "asinh", "atan", "atanh",
    "avg_over_time", "ceil", "changes", "clamp", "clamp_max", "clamp_min", "cos", "cosh",
    "count_over_time", "day_of_month", "day_of_week", "day_of_year", "days_in_month", "deg",
    "delta", "deriv", "exp", "floor", "histogram_avg", "histogram_count", "histogram_fraction",
    "histogram_quantile", "histogram_stddev", "histogram_stdvar", "histogram_sum",
    "holt_winters", "double_exponential_smoothing", "hour", "idelta", "increase", "irate",
    "label_join", "label_replace", "last_over_time", "ln", "log10", "log2",
    "mad_over_time", "max_over_time", "min_over_time", "minute", "month", "pi",
    "predict_linear", "present_over_time", "quantile_over_time", "rad", "rate", "resets",
    "round", "scalar", "sgn", "sin", "sinh", "sort", "sort_by_label", "sort_by_label_desc",
    "sort_desc", "sqrt", "stddev_over_time", "stdvar_over_time", "sum_over_time", "tan",
    "tanh", "time", "timestamp", "vector", "year",
    "start", "end",  # the @ modifier's start() and end()
}
# Followed by a parenthesised list of label names.
LABEL_LISTS = {"by", "without", "on", "ignoring", "group_left", "group_right"}
KEYWORDS = {"and", "or", "unless", "bool", "offset", "atan2", "inf", "nan"}

_IDENT = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_STRING = r"""("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)"""
_MATCHER = re.compile(r"\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!=|!~|=)\s*" + _STRING)


def _skip_string(expr, i):
    """The index after the string literal that starts at i."""
    quote = expr[i]
    i += 1
    while i < len(expr):
        if expr[i] == "\\" and quote != "`":
            i += 2
            continue
        if expr[i] == quote:
            return i + 1
        i += 1
    raise ValueError("unterminated string in %r" % expr)


def _skip_to(expr, i, close):
    """The index after the first `close` from i, strings skipped."""
    while i < len(expr):
        if expr[i] in "\"'`":
            i = _skip_string(expr, i)
        elif expr[i] == close:
            return i + 1
        else:
            i += 1
    raise ValueError("missing %r in %r" % (close, expr))


def _matchers(expr, i):
    """(index after the {...} that starts at i, the metric name an exact __name__ matcher
    gives or None)."""
    end = _skip_to(expr, i + 1, "}")
    name = None
    for m in _MATCHER.finditer(expr[i + 1:end - 1]):
        if m.group(1) == "__name__" and m.group(2) == "=":
            name = m.group(3)[1:-1]
    return end, name


def metric_names(expr):
    """The metric names an expression selects, in order of appearance, each once.

    Skipped: strings, comments, label matchers ({...}), ranges and subqueries ([...]),
    Grafana variables ($x, ${x}), numbers and durations, label lists after by / without /
    on / ignoring / group_left / group_right, keywords and aggregation operators. Any other
    identifier followed by "(" is a function and must be a known one (ValueError otherwise:
    a typo in a function name must not pass for a metric)."""
    names = []
    i, n = 0, len(expr)
    while i < n:
        c = expr[i]
        if c in "\"'`":
            i = _skip_string(expr, i)
        elif c == "#":
            nl = expr.find("\n", i)
            i = n if nl < 0 else nl + 1
        elif c == "[":
            i = _skip_to(expr, i + 1, "]")
        elif c == "{":
            i, name = _matchers(expr, i)
            if name:
                names.append(name)
        elif c == "$":
            m = re.compile(r"\$(\{[^}]*\}|[a-zA-Z0-9_]+)").match(expr, i)
            i = m.end() if m else i + 1
        elif c.isdigit() or (c == "." and i + 1 < n and expr[i + 1].isdigit()):
            m = re.compile(r"[0-9a-zA-Z_.]+").match(expr, i)  # 0.99, 1e3, 0x1f, 5m, 1h30m
            i = m.end()
        elif _IDENT.match(expr, i):
            word = _IDENT.match(expr, i).group()
            i += len(word)
            j = i
            while j < n and expr[j].isspace():
                j += 1
            opens = j < n and expr[j] == "("
            lower = word.lower()
            if lower in LABEL_LISTS:
                if opens:
                    i = _skip_to(expr, j + 1, ")")
            elif lower in KEYWORDS or lower in AGGREGATIONS:
                pass  # an aggregation may be followed by its by / without clause
            elif opens:
                if word not in FUNCTIONS:
                    raise ValueError("unknown PromQL function %r in %r" % (word, expr))
            else:
                names.append(word)
        else:
            i += 1
    return list(dict.fromkeys(names))


def variable_expr(query):
    """The PromQL inside a Grafana Prometheus variable query, or None when it selects no
    series (label_names(), label_values(label), metrics(regex))."""
    m = re.fullmatch(r"\s*label_values\((.*),\s*[a-zA-Z_][a-zA-Z0-9_]*\s*\)\s*", query, re.S)
    if m:
        return m.group(1)
    m = re.fullmatch(r"\s*query_result\((.*)\)\s*", query, re.S)
    return m.group(1) if m else None


# ---- the dashboard ---------------------------------------------------------------------

def load_dashboard():
    with open(DASHBOARD) as f:
        return json.load(f)


def all_panels(dashboard):
    """Every panel, those inside collapsed rows too."""
    out = []
    for p in dashboard.get("panels", []):
        out.append(p)
        out.extend(p.get("panels", []))
    return out


def query_panels(dashboard):
    return [p for p in all_panels(dashboard) if p.get("type") != "row"]


def dashboard_exprs(dashboard):
    """[(where, PromQL)]: the panels' targets, the annotations, the variables."""
    out = []
    for p in query_panels(dashboard):
        for t in p.get("targets", []):
            out.append(("panel %s %r target %s" % (p.get("id"), p.get("title"), t.get("refId")),
                        t.get("expr", "")))
    for a in dashboard.get("annotations", {}).get("list", []):
        if a.get("expr"):
            out.append(("annotation %r" % a.get("name"), a["expr"]))
    for v in dashboard.get("templating", {}).get("list", []):
        if v.get("type") == "query":
            query = v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
            expr = variable_expr(query)
            if expr is not None:
                out.append(("variable $%s" % v["name"], expr))
    return out


def dashboard_metric_names(dashboard):
    """{metric name: [where it is used]}."""
    used = {}
    for where, expr in dashboard_exprs(dashboard):
        for name in metric_names(expr):
            used.setdefault(name, []).append(where)
    return used


class PromqlTokenizer(unittest.TestCase):
    def test_finds_metrics_and_skips_everything_else(self):
        cases = [
            ('histogram_quantile(0.99, sum by (model, le) '
             '(rate(a_bucket{model=~"$model", x="b_total"}[$__rate_interval])))', ["a_bucket"]),
            ("sum(rate(a_total[5m] offset 1h)) without (instance) "
             "/ on (job) group_left (version) b_info", ["a_total", "b_info"]),
            ('{__name__="c"} and d @ start() unless e:recorded', ["c", "d", "e:recorded"]),
            ('count_values("by", f) or label_replace(g, "dst", "$1", "src", "(.*)")', ["f", "g"]),
            ("max_over_time(h[1h:5m]) > bool 0.5e3 # i would be a comment", ["h"]),
            ("SUM BY (le) (j) / ignoring(code) group_right k", ["j", "k"]),
            ("sum(rate(l[${__range}])) / sum(rate(l[1m]))", ["l"]),
        ]
        for expr, want in cases:
            self.assertEqual(metric_names(expr), want, expr)

    def test_unknown_function_is_an_error(self):
        with self.assertRaises(ValueError):
            metric_names("histogram_quantil(0.9, a_bucket)")

    def test_variable_queries(self):
        self.assertEqual(variable_expr('label_values(a_total{m=~"$m"}, route)'), 'a_total{m=~"$m"}')
        self.assertEqual(variable_expr("query_result(sum by (x) (b))"), "sum by (x) (b)")
        self.assertIsNone(variable_expr("label_values(model)"))


class DashboardJson(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dashboard = load_dashboard()

    def test_settings_and_variables(self):
        d = self.dashboard
        self.assertGreaterEqual(d["schemaVersion"], 36)
        self.assertEqual(d["refresh"], "10s")
        self.assertIsNone(d.get("id"))
        variables = {v["name"]: v for v in d["templating"]["list"]}
        self.assertEqual(variables["datasource"]["type"], "datasource")
        self.assertEqual(variables["datasource"]["query"], "prometheus")
        for name in ("model", "route", "upstream"):
            v = variables[name]
            self.assertEqual(v["type"], "query", name)
            self.assertEqual(v["datasource"]["uid"], "${datasource}", name)
            self.assertTrue(v["query"]["query"].startswith("label_values("), name)
            self.assertEqual(v["allValue"], ".*", name)  # "All" also matches an empty label

    def test_every_panel_has_a_datasource_and_queries(self):
        problems = []
        for p in query_panels(self.dashboard):
            where = "panel %s %r" % (p.get("id"), p.get("title"))
            if (p.get("datasource") or {}).get("uid") != "${datasource}":
                problems.append("%s: datasource is not ${datasource}" % where)
            targets = p.get("targets") or []
            if not targets:
                problems.append("%s: no targets" % where)
            refs = [t.get("refId") for t in targets]
            if len(set(refs)) != len(refs):
                problems.append("%s: repeated refId %s" % (where, refs))
            for t in targets:
                if not t.get("expr", "").strip():
                    problems.append("%s target %s: empty expr" % (where, t.get("refId")))
                if (t.get("datasource") or {}).get("uid") != "${datasource}":
                    problems.append("%s target %s: datasource is not ${datasource}"
                                    % (where, t.get("refId")))
        self.assertEqual(problems, [])

    def test_panel_ids_are_unique_and_the_grid_has_no_overlap(self):
        panels = all_panels(self.dashboard)
        ids = [p.get("id") for p in panels]
        self.assertTrue(all(isinstance(i, int) for i in ids), ids)
        self.assertEqual(len(set(ids)), len(ids), ids)
        cells = {}
        for p in panels:
            g = p["gridPos"]
            self.assertLessEqual(g["x"] + g["w"], 24, p["title"])
            for x in range(g["x"], g["x"] + g["w"]):
                for y in range(g["y"], g["y"] + g["h"]):
                    self.assertNotIn((x, y), cells,
                                     "%r overlaps %r" % (p["title"], cells.get((x, y))))
                    cells[(x, y)] = p["title"]

    def test_every_expression_parses(self):
        problems = []
        for where, expr in dashboard_exprs(self.dashboard):
            try:
                if not metric_names(expr):
                    problems.append("%s: selects no metric: %s" % (where, expr))
            except ValueError as e:
                problems.append("%s: %s" % (where, e))
        self.assertEqual(problems, [])

    def test_queries_the_families_that_matter(self):
        queried = set()
        for name in dashboard_metric_names(self.dashboard):
            queried.add(name)
            for suffix in HISTOGRAM_SUFFIXES:
                if name.endswith(suffix):
                    queried.add(name[:-len(suffix)])
        missing = [name for name in REQUIRED if name not in queried]
        self.assertEqual(missing, [], "the dashboard does not query these families")

    def test_readme_has_a_section_per_row_and_panel(self):
        with open(README) as f:
            headings = set(re.findall(r"^(#{2,3} .+?)\s*$", f.read(), re.M))
        missing = []
        for p in all_panels(self.dashboard):
            heading = ("## " if p["type"] == "row" else "### ") + p["title"]
            if heading not in headings:
                missing.append(heading)
        self.assertEqual(missing, [], "rows and panels without a section in README.md")


# ---- the live gateway -------------------------------------------------------------------

# Client shm at U: the gateway's handoff pool ("/infergate_pool_<pid>_<word>_<n>").
UPSTREAM_SHM = """shm:
  enabled: true
  allowed_key_prefixes: ["/infergate_"]
"""

GATEWAY_TEMPLATE = LOOPBACK_HEAD + """
upstreams:
  - name: u-grpc
    protocol: grpc
    endpoints: ["$u_grpc"]
    colocated: true
    timeout_ms: 30000
    handoff: { min_bytes: 65536, pool_bytes: 1048576, kind: system }
  - name: u-http
    protocol: http
    endpoints: ["$u_http"]
    timeout_ms: 30000
routes:
  - match: { model: "*", headers: { x-upstream: http } }
    upstream: u-http
  - match: { model: "*" }
    upstream: u-grpc
"""

SIMPLE_JSON = json.dumps({"inputs": [
    {"name": "INPUT0", "shape": [1, 16], "datatype": "INT32", "data": list(range(16))},
    {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32", "data": [1] * 16}]})


def exposed_names(text, families):
    """{name a PromQL selector can use: family}. prometheus_client's parser drops _total
    from a counter's family name (and adds it to the samples of a counter exposed without
    it), so a counter's exposed name comes from its # TYPE line."""
    declared = set(re.findall(r"^# TYPE (\S+) ", text, re.M))
    out = {}
    for f in families:
        if f.type in ("histogram", "gaugehistogram"):
            for suffix in HISTOGRAM_SUFFIXES:
                out[f.name + suffix] = f
        elif f.type == "summary":
            for suffix in ("", "_sum", "_count"):
                out[f.name + suffix] = f
        elif f.type == "counter" and f.name + "_total" in declared:
            out[f.name + "_total"] = f
        else:
            out[f.name] = f
    return out


class LiveMetrics(unittest.TestCase):
    processes = None

    @classmethod
    def setUpClass(cls):
        cls.processes = Processes()
        try:
            u = cls.processes.start("U", Gateway.builtin_upstream(extra=UPSTREAM_SHM))
            g = cls.processes.start("G", Gateway.from_template(
                GATEWAY_TEMPLATE, u_grpc=u.address("grpc"), u_http=u.address("http")))
            # The failure first and three of each success: every series the scrape needs
            # was recorded a few round trips before it, whenever the gateway records.
            cls.unknown = g.request("POST", "/v2/models/no_such_model/infer", SIMPLE_JSON)[0]
            cls.outcomes = []
            for upstream in ("grpc", "http"):
                headers = {"x-upstream": "http"} if upstream == "http" else {}
                for _ in range(3):
                    status, _, body = g.request("POST", "/v2/models/simple/infer", SIMPLE_JSON,
                                                headers)
                    cls.outcomes.append(("http -> " + upstream, status, body[:200]))
                    code, resp = grpc_stubs.grpc_outcome(lambda: grpc_stubs.stub_of(g).ModelInfer(
                        grpc_stubs.simple_infer_request(), metadata=tuple(headers.items())))
                    cls.outcomes.append(("grpc -> " + upstream, code, "" if code == "ok" else resp))
            status, _, body = g.request("GET", "/metrics", listener="metrics")
            cls.scrape_status, cls.scrape = status, body.decode("utf-8", "replace")
        except BaseException:
            grpc_stubs.close_channels()
            cls.processes.stop_all()
            raise

    @classmethod
    def tearDownClass(cls):
        grpc_stubs.close_channels()
        problems = cls.processes.stop_all()
        assert not problems, "\n".join(problems)

    def families(self):
        self.assertEqual(self.scrape_status, 200, self.scrape[:500])
        try:
            return list(text_string_to_metric_families(self.scrape))
        except Exception as e:  # the parser raises ValueError and others on bad text
            self.fail("/metrics does not parse as Prometheus text: %s" % e)

    def test_traffic_went_through(self):
        failed = [o for o in self.outcomes if o[1] not in (200, "ok")]
        self.assertEqual(failed, [])
        self.assertNotEqual(self.unknown, 200)

    def test_scrape_parses(self):
        families = self.families()
        self.assertTrue(families)
        names = [f.name for f in families]
        self.assertEqual(len(set(names)), len(names), "a family appears twice")

    def test_every_metric_the_dashboard_queries_is_exposed(self):
        families = self.families()
        exposed = exposed_names(self.scrape, families)
        by_name = {f.name: f for f in families}
        missing = []
        for name, used_by in sorted(dashboard_metric_names(load_dashboard()).items()):
            family = exposed.get(name)
            if family is None:
                f = by_name.get(name)
                why = ("a %s: query it as %s_bucket, _sum or _count" % (f.type, name)
                       if f is not None and f.type == "histogram" else "not in the scrape")
                missing.append("%s (%s; used by %s)" % (name, why, used_by[0]))
            elif not family.samples:
                missing.append("%s (declared without samples; used by %s)" % (name, used_by[0]))
        if missing:
            self.fail("\n  ".join(["metrics the dashboard queries that /metrics lacks:"] + missing))

    def test_label_values_the_dashboard_relies_on(self):
        # The error panels count code!~"2..|OK" as failures, the health panels read a
        # one-hot state, the handoff panels split bytes by path.
        samples = {}
        for f in self.families():
            for s in f.samples:
                samples.setdefault(s.name, []).append(s.labels)
        problems = []
        requests = samples.get("infergate_requests_total", [])
        codes = {(s.get("protocol"), s.get("code")) for s in requests}
        for want in (("http", "200"), ("grpc", "OK")):
            if want not in codes:
                problems.append("infergate_requests_total: no code %s for protocol %s (have %s)"
                                % (want[1], want[0], sorted(codes)))
        if not any(re.fullmatch(r"[0-9]{3}", c or "") and not c.startswith("2")
                   for p, c in codes if p == "http"):
            problems.append("infergate_requests_total: the unknown model's failure is not counted "
                            "with a non-2xx HTTP code (have %s)" % sorted(codes))
        pairs = {(s.get("protocol"), s.get("upstream_protocol")) for s in requests}
        for p in ("http", "grpc"):
            for u in ("http", "grpc"):
                if (p, u) not in pairs:
                    problems.append("infergate_requests_total: no protocol=%s upstream_protocol=%s"
                                    % (p, u))
        states = {}
        for f in self.families():
            if f.name == "infergate_upstream_endpoint_state":
                for s in f.samples:
                    key = (s.labels.get("upstream"), s.labels.get("endpoint"))
                    states.setdefault(key, {})[s.labels.get("state")] = s.value
        for key, values in states.items():
            if set(values) != {"healthy", "unhealthy", "unknown", "ejected"} or \
                    sorted(values.values()) != [0, 0, 0, 1]:
                problems.append("infergate_upstream_endpoint_state %s is not one-hot over the "
                                "four states: %s" % (key, values))
        paths = {s.get("path") for s in samples.get("infergate_shm_handoff_bytes_total", [])}
        if paths != {"pool_in", "pool_out", "passthrough", "inline"}:
            problems.append("infergate_shm_handoff_bytes_total paths: %s" % sorted(paths))
        if problems:
            self.fail("\n  ".join(["label values the dashboard relies on:"] + problems))


if __name__ == "__main__":
    unittest.main()
