"""The plain Kubernetes manifests (deploy/kubernetes/): every object has what the API server
requires of its kind, the objects refer to each other correctly (selectors, ports, volumes,
ConfigMaps, scale targets), the infergate config they carry passes `infergate validate`, and
that config agrees with the pod around it: ports, probes, mounted secrets, drain time, the
shared /dev/shm of the sidecar shape and the headless Service of the fleet shape.

No cluster is needed (none can run here); the server-side schema is not checked beyond the
required fields of each kind used."""
import re
import unittest

import yaml

from deploy_files import (container, gateway_config_text, gateway_deployment, labels_match,
                          manifest, memory_bytes, objects, one, pod_spec, validate)
from deploy_files import path as repo_path

# The fields the API server requires of each kind these manifests use (besides apiVersion,
# kind and metadata.name), as dotted paths.
REQUIRED = {
    ("v1", "ConfigMap"): ["data"],
    ("v1", "ServiceAccount"): [],
    ("v1", "Service"): ["spec.ports"],
    ("apps/v1", "Deployment"): ["spec.selector.matchLabels", "spec.template.metadata.labels",
                                "spec.template.spec.containers"],
    ("policy/v1", "PodDisruptionBudget"): ["spec.selector.matchLabels"],
    ("networking.k8s.io/v1", "NetworkPolicy"): ["spec.podSelector"],
    ("autoscaling/v2", "HorizontalPodAutoscaler"): ["spec.scaleTargetRef.kind",
                                                    "spec.scaleTargetRef.name",
                                                    "spec.maxReplicas"],
    ("monitoring.coreos.com/v1", "ServiceMonitor"): ["spec.selector.matchLabels",
                                                     "spec.endpoints"],
}
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


def dig(obj, dotted):
    for part in dotted.split("."):
        if not isinstance(obj, dict) or part not in obj:
            return None
        obj = obj[part]
    return obj


def pods(docs):
    """(Deployment, pod labels) of every Deployment."""
    return [(d, d["spec"]["template"]["metadata"]["labels"]) for d in objects(docs, "Deployment")]


def gateway_config(docs):
    return yaml.safe_load(gateway_config_text(docs))


def mount_of(c, path):
    """The volumeMount of container `c` under which `path` lies (the longest match)."""
    best = None
    for m in c.get("volumeMounts", []):
        root = m["mountPath"].rstrip("/") + "/"
        if path.startswith(root) and (best is None or len(root) > len(best["mountPath"])):
            best = m
    return best


def volume(deployment, name):
    found = [v for v in pod_spec(deployment).get("volumes", []) if v["name"] == name]
    return found[0] if len(found) == 1 else None


def port_of(address):
    return int(address.rsplit(":", 1)[1])


class EveryShape:
    """Checks made on both manifests; `docs` is set by the subclass."""
    shape = None

    @classmethod
    def setUpClass(cls):
        cls.docs = manifest(cls.shape)
        cls.config = gateway_config(cls.docs)
        cls.gateway = gateway_deployment(cls.docs)
        cls.infergate = container(cls.gateway, "infergate")

    def test_every_object_has_the_required_fields(self):
        seen = set()
        for d in self.docs:
            key = (d.get("apiVersion"), d.get("kind"))
            self.assertIn(key, REQUIRED, "unexpected apiVersion/kind %s" % (key,))
            name = dig(d, "metadata.name")
            self.assertTrue(name and DNS_LABEL.match(name), "%s name %r" % (key, name))
            self.assertEqual(dig(d, "metadata.namespace"), "inference", name)
            for field in REQUIRED[key]:
                self.assertIsNotNone(dig(d, field), "%s %s lacks %s" % (key[1], name, field))
            self.assertNotIn((d["kind"], name), seen, "%s %s twice" % (d["kind"], name))
            seen.add((d["kind"], name))

    def test_deployments_select_their_own_pods_and_mount_declared_volumes(self):
        configmaps = {c["metadata"]["name"] for c in objects(self.docs, "ConfigMap")}
        for d, labels in pods(self.docs):
            name = d["metadata"]["name"]
            self.assertTrue(labels_match(d["spec"]["selector"]["matchLabels"], labels), name)
            volumes = {v["name"]: v for v in pod_spec(d).get("volumes", [])}
            for c in pod_spec(d)["containers"]:
                self.assertTrue(c.get("image"), "%s/%s has no image" % (name, c["name"]))
                ports = {p["name"] for p in c.get("ports", []) if "name" in p}
                for m in c.get("volumeMounts", []):
                    self.assertIn(m["name"], volumes, "%s/%s mounts an undeclared volume"
                                  % (name, c["name"]))
                    self.assertNotIn("subPath", m, "a subPath mount never sees updates")
                for probe in ("readinessProbe", "livenessProbe"):
                    port = dig(c, probe + ".httpGet.port")
                    if isinstance(port, str):
                        self.assertIn(port, ports, "%s/%s %s port" % (name, c["name"], probe))
            for v in volumes.values():
                if "configMap" in v:
                    self.assertIn(v["configMap"]["name"], configmaps, name)

    def test_services_and_policies_select_existing_pods(self):
        all_pods = pods(self.docs)
        for s in objects(self.docs, "Service"):
            selected = [(d, l) for d, l in all_pods if labels_match(s["spec"]["selector"], l)]
            self.assertEqual(len(selected), 1, "Service %s selects %d Deployments"
                             % (s["metadata"]["name"], len(selected)))
            deployment = selected[0][0]
            named = {p["name"] for c in pod_spec(deployment)["containers"]
                     for p in c.get("ports", []) if "name" in p}
            for p in s["spec"]["ports"]:
                if isinstance(p.get("targetPort"), str):
                    self.assertIn(p["targetPort"], named, "Service %s" % s["metadata"]["name"])
        for kind, path in (("PodDisruptionBudget", "spec.selector.matchLabels"),
                           ("NetworkPolicy", "spec.podSelector.matchLabels")):
            for o in objects(self.docs, kind):
                selector = dig(o, path)
                self.assertTrue(any(labels_match(selector, l) for _, l in all_pods),
                                "%s %s selects no pod" % (kind, o["metadata"]["name"]))

    def test_the_embedded_config_validates(self):
        code, out = validate(gateway_config_text(self.docs))
        self.assertEqual(code, 0, out)
        self.assertIn(": OK", out)

    def test_the_config_listens_on_the_container_ports_and_the_probes_match_its_tls(self):
        ports = {p["name"]: p["containerPort"] for p in self.infergate["ports"]}
        listeners = self.config["listeners"]
        self.assertEqual({name: port_of(listeners[name]["address"]) for name in ports}, ports)
        scheme = "HTTPS" if "tls" in listeners["http"] else "HTTP"
        ready = self.infergate["readinessProbe"]["httpGet"]
        live = self.infergate["livenessProbe"]["httpGet"]
        self.assertEqual((ready["path"], ready["port"], ready.get("scheme", "HTTP")),
                         ("/v2/health/ready", "http", scheme))
        self.assertEqual((live["path"], live["port"], live.get("scheme", "HTTP")),
                         ("/v2/health/live", "http", scheme))
        # The kubelet's probes carry no credentials.
        if "auth" in self.config:
            self.assertEqual(self.config["auth"]["api_groups"]["health"], "public")

    def test_every_file_the_config_names_is_a_mounted_secret_key(self):
        files = []
        for listener in ("http", "grpc"):
            tls = self.config["listeners"][listener].get("tls")
            if tls:
                files += [(tls["cert"], "tls.crt"), (tls["key"], "tls.key")]
        for p in self.config.get("auth", {}).get("principals", []):
            if "api_keys_file" in p:
                files.append((p["api_keys_file"], None))
        self.assertTrue(files)
        with open(repo_path("deploy", "kubernetes", self.shape + ".yaml")) as f:
            header = f.read().split("\napiVersion:", 1)[0]
        for file_path, key in files:
            m = mount_of(self.infergate, file_path)
            self.assertIsNotNone(m, "%s is not under a mount of the infergate container"
                                 % file_path)
            v = volume(self.gateway, m["name"])
            self.assertIn("secret", v, "%s should come from a Secret" % file_path)
            name = file_path[len(m["mountPath"].rstrip("/")) + 1:]
            self.assertNotIn("/", name)
            if key:
                self.assertEqual(name, key, "a kubernetes.io/tls Secret holds tls.crt and tls.key")
            # The manifest's header tells how to make the Secret.
            self.assertIn("create secret", header)
            self.assertIn(v["secret"]["secretName"], header)

    def test_the_config_is_a_whole_directory_mount_and_is_watched(self):
        m = mount_of(self.infergate, "/etc/infergate/infergate.yaml")
        self.assertEqual(m["mountPath"], "/etc/infergate")
        self.assertIn("configMap", volume(self.gateway, m["name"]))
        self.assertEqual(self.infergate["args"], ["--config", "/etc/infergate/infergate.yaml"])
        self.assertIs(self.config["lifecycle"]["watch_config"], True)

    def test_termination_leaves_time_for_the_pre_stop_pause_and_the_drain(self):
        spec = pod_spec(self.gateway)
        pause = int(self.infergate["lifecycle"]["preStop"]["exec"]["command"][1])
        drain_s = self.config["lifecycle"]["drain_timeout_ms"] / 1000
        self.assertGreater(spec["terminationGracePeriodSeconds"], pause + drain_s)

    def test_the_memory_limit_holds_the_buffers_the_config_allows(self):
        """Every open HTTP connection holds a 64 KiB read buffer (kReadChunk,
        gateway/http/http_connection.cc); the handoff pool's pages are charged to this
        container too; 64 MiB is left for the rest of the gateway."""
        limit = memory_bytes(self.infergate["resources"]["limits"]["memory"])
        connections = self.config.get("limits", {}).get("max_connections", 10000)
        pools = sum(u.get("handoff", {}).get("pool_bytes", 0) for u in self.config["upstreams"])
        self.assertGreaterEqual(limit, connections * 64 * 1024 + pools + 64 * 1024 * 1024)

    def test_event_loops_follow_the_cpus_the_pod_gets(self):
        """workers: 0 follows a CPU limit (cgroup quota); without one it would start one
        loop per CPU of the node, so the config must say how many."""
        has_cpu_limit = "cpu" in self.infergate["resources"].get("limits", {})
        self.assertTrue(has_cpu_limit or self.config.get("workers", 0) > 0)

    def test_runs_as_non_root_without_privileges(self):
        spec = pod_spec(self.gateway)
        self.assertIs(spec["securityContext"]["runAsNonRoot"], True)
        self.assertEqual(spec["securityContext"]["runAsUser"], 1000)
        sc = self.infergate["securityContext"]
        self.assertIs(sc["allowPrivilegeEscalation"], False)
        self.assertIs(sc["readOnlyRootFilesystem"], True)
        self.assertEqual(sc["capabilities"]["drop"], ["ALL"])

    def test_the_metrics_port_is_open_only_to_monitoring(self):
        policy = [p for p in objects(self.docs, "NetworkPolicy")
                  if labels_match(p["spec"]["podSelector"]["matchLabels"],
                                  self.gateway["spec"]["template"]["metadata"]["labels"])]
        self.assertEqual(len(policy), 1)
        for rule in policy[0]["spec"]["ingress"]:
            ports = {p["port"] for p in rule["ports"]}
            if 8002 in ports:
                self.assertIn("from", rule, "the metrics port must not be open to all")
                self.assertEqual(rule["from"][0]["namespaceSelector"]["matchLabels"],
                                 {"kubernetes.io/metadata.name": "monitoring"})


class Sidecar(EveryShape, unittest.TestCase):
    shape = "sidecar"

    def test_triton_moves_to_8100_and_listens_on_loopback_only(self):
        triton = container(self.gateway, "triton")
        args = triton["args"]
        for flag in ("--http-port=8100", "--grpc-port=8101", "--metrics-port=8102",
                     "--http-address=127.0.0.1", "--grpc-address=127.0.0.1",
                     "--allow-client-shm=true"):
            self.assertIn(flag, args)
        upstream = self.config["upstreams"][0]
        self.assertEqual(upstream["protocol"], "grpc")
        self.assertEqual(upstream["endpoints"], ["127.0.0.1:8101"])

    def test_both_containers_share_a_memory_backed_dev_shm_large_enough_for_the_pool(self):
        upstream = self.config["upstreams"][0]
        self.assertIs(upstream["colocated"], True)
        pool = upstream["handoff"]["pool_bytes"]
        mounts = {c["name"]: mount_of(c, "/dev/shm/x") for c in pod_spec(self.gateway)["containers"]}
        self.assertEqual(set(mounts), {"triton", "infergate"})
        names = {m["name"] for m in mounts.values()}
        self.assertEqual(len(names), 1, "one volume for both")
        self.assertTrue(all(m["mountPath"] == "/dev/shm" for m in mounts.values()))
        shm = volume(self.gateway, names.pop())["emptyDir"]
        self.assertEqual(shm["medium"], "Memory")
        self.assertGreaterEqual(memory_bytes(shm["sizeLimit"]), pool)
        # tmpfs pages are charged to the container that first touches them: the gateway.
        limit = memory_bytes(self.infergate["resources"]["limits"]["memory"])
        self.assertGreater(limit, pool)

    def test_both_containers_run_as_one_user(self):
        spec = pod_spec(self.gateway)
        for c in spec["containers"]:
            self.assertNotIn("runAsUser", c.get("securityContext", {}), c["name"])
        self.assertEqual(spec["securityContext"]["runAsUser"], 1000)

    def test_the_service_exposes_infergate_not_triton(self):
        service = one(self.docs, "Service")
        self.assertEqual({(p["port"], p["targetPort"]) for p in service["spec"]["ports"]},
                         {(8000, "http"), (8001, "grpc"), (8002, "metrics")})


class Fleet(EveryShape, unittest.TestCase):
    shape = "fleet"

    def test_the_upstream_is_the_headless_service_of_the_triton_pods(self):
        upstream = self.config["upstreams"][0]
        (endpoint,) = upstream["endpoints"]
        match = re.match(r"^dns:([a-z0-9-]+)\.([a-z0-9-]+)\.svc\.cluster\.local:(\d+)$", endpoint)
        self.assertIsNotNone(match, endpoint)
        service = one(self.docs, "Service", match.group(1))
        self.assertEqual(service["metadata"]["namespace"], match.group(2))
        self.assertEqual(service["spec"]["clusterIP"], "None")
        self.assertIn(int(match.group(3)), {p["port"] for p in service["spec"]["ports"]})
        triton = [d for d, l in pods(self.docs) if labels_match(service["spec"]["selector"], l)]
        self.assertEqual(len(triton), 1)
        self.assertNotEqual(triton[0]["metadata"]["name"], self.gateway["metadata"]["name"])
        metrics = upstream["load_balancing"]["metrics_port"]
        self.assertIn(metrics, {p["containerPort"] for p in container(triton[0], "triton")["ports"]})

    def test_sequences_keep_to_one_gateway_and_one_replica(self):
        self.assertIs(self.config["upstreams"][0]["affinity"]["sequences"], True)
        front = [s for s in objects(self.docs, "Service") if s["spec"].get("clusterIP") != "None"]
        self.assertEqual(len(front), 1)
        self.assertEqual(front[0]["spec"]["sessionAffinity"], "ClientIP")

    def test_the_autoscaler_scales_the_gateway_on_cpu_against_a_cpu_request(self):
        hpa = one(self.docs, "HorizontalPodAutoscaler")
        self.assertEqual(hpa["spec"]["scaleTargetRef"],
                         {"apiVersion": "apps/v1", "kind": "Deployment",
                          "name": self.gateway["metadata"]["name"]})
        (metric,) = hpa["spec"]["metrics"]
        self.assertEqual(metric["resource"]["name"], "cpu")
        self.assertLessEqual(hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"])
        self.assertIn("cpu", self.infergate["resources"]["requests"])

    def test_disruption_budget_and_service_monitor_cover_the_gateway(self):
        labels = self.gateway["spec"]["template"]["metadata"]["labels"]
        pdb = [p for p in objects(self.docs, "PodDisruptionBudget")
               if labels_match(p["spec"]["selector"]["matchLabels"], labels)]
        self.assertEqual(len(pdb), 1)
        self.assertGreaterEqual(pdb[0]["spec"]["minAvailable"], 1)
        monitor = one(self.docs, "ServiceMonitor")
        services = [s for s in objects(self.docs, "Service")
                    if labels_match(monitor["spec"]["selector"]["matchLabels"],
                                    s["metadata"]["labels"])]
        self.assertEqual(len(services), 1)
        self.assertIn(monitor["spec"]["endpoints"][0]["port"],
                      {p["name"] for p in services[0]["spec"]["ports"]})
        self.assertEqual(monitor["spec"]["endpoints"][0]["path"], "/metrics")

    def test_triton_replicas_accept_only_the_gateways_and_the_scraper(self):
        triton_policy = [p for p in objects(self.docs, "NetworkPolicy")
                         if p["spec"]["podSelector"]["matchLabels"].get("app.kubernetes.io/name")
                         == "triton"]
        self.assertEqual(len(triton_policy), 1)
        sources = [r["from"][0] for r in triton_policy[0]["spec"]["ingress"]]
        self.assertEqual(len(sources), 2)
        gateway_labels = self.gateway["spec"]["template"]["metadata"]["labels"]
        self.assertTrue(labels_match(sources[0]["podSelector"]["matchLabels"], gateway_labels))


class TheChecksCanFail(unittest.TestCase):
    """The checks above on broken copies: each mistake is caught."""

    def test_a_broken_embedded_config_is_refused(self):
        text = gateway_config_text(manifest("fleet")).replace("load_aware", "fastest")
        code, out = validate(text)
        self.assertEqual(code, 1)
        self.assertIn('unknown policy "fastest"', out)

    def test_a_service_selecting_nothing_is_caught(self):
        docs = manifest("sidecar")
        one(docs, "Service")["spec"]["selector"] = {"app.kubernetes.io/name": "nope"}
        case = Sidecar("test_services_and_policies_select_existing_pods")
        case.docs = docs
        with self.assertRaises(AssertionError):
            case.test_services_and_policies_select_existing_pods()

    def test_a_short_grace_period_is_caught(self):
        docs = manifest("fleet")
        pod_spec(gateway_deployment(docs))["terminationGracePeriodSeconds"] = 10
        case = Fleet("test_termination_leaves_time_for_the_pre_stop_pause_and_the_drain")
        case.docs, case.config = docs, gateway_config(docs)
        case.gateway = gateway_deployment(docs)
        case.infergate = container(case.gateway, "infergate")
        with self.assertRaises(AssertionError):
            case.test_termination_leaves_time_for_the_pre_stop_pause_and_the_drain()


if __name__ == "__main__":
    unittest.main()
