"""An infergate process for the bench drivers (bench/soak.py, bench/fleet_failover.py,
bench/suite.py).

It is started with `--config PATH`, prints one JSON ready line naming its bound addresses
(every listener may be port 0) and logs to standard error; `ready_at` is the monotonic
time that line arrived. Its standard error goes to `<scratch>/<label>.err`, its standard
output (with `keep_stdout`) to `<scratch>/<label>.out`.
"""
import json
import os
import signal
import subprocess
import threading
import time


class InfergateProcess:
    def __init__(self, binary, label, config_path, scratch, keep_stdout=False, wrapper=(),
                 env=None):
        """`wrapper`: a command the binary runs under (["valgrind", "--tool=callgrind"]);
        `env`: variables added to this process's environment."""
        self.label = label
        self.err = open(os.path.join(scratch, label + ".err"), "a")
        self.out = open(os.path.join(scratch, label + ".out"), "a") if keep_stdout else None
        self.proc = subprocess.Popen([*wrapper, binary, "--config", config_path],
                                     stdout=subprocess.PIPE, stderr=self.err, text=True,
                                     env=dict(os.environ, **env) if env else None)
        self.pid = self.proc.pid
        self.addresses = None
        self.ready_at = None
        self._ready = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.proc.stdout:
            if self.addresses is None and '"event":"ready"' in line:
                self.ready_at = time.monotonic()
                self.addresses = json.loads(line)
                self._ready.set()
            if self.out is not None:
                self.out.write(line)
                self.out.flush()
        self._ready.set()  # exited

    def wait_ready(self, timeout=30):
        self._ready.wait(timeout)
        return self.addresses is not None

    def address(self, listener):
        return self.addresses[listener]

    def port(self, listener):
        return int(self.addresses[listener].rsplit(":", 1)[1])

    def kill(self):
        """SIGKILL; the time of the signal and the time it was reaped (its sockets closed
        by then)."""
        t = time.monotonic()
        self.proc.kill()
        self.proc.wait()
        return t, time.monotonic()

    def stop(self, timeout=30):
        """SIGTERM and wait: the exit status (None when it had to be killed)."""
        code = self.proc.poll()
        if code is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                code = self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                code = None
        self._reader.join(5)
        self.err.close()
        if self.out is not None:
            self.out.close()
        return code


def start_with_config(binary, label, text, scratch):
    """An InfergateProcess of `binary` running the config `text` (written to
    `<scratch>/<label>.yaml`), once it is ready; RuntimeError naming the scratch directory
    when it did not start."""
    path = os.path.join(scratch, label + ".yaml")
    with open(path, "w") as f:
        f.write(text)
    process = InfergateProcess(binary, label, path, scratch)
    if not process.wait_ready():
        raise RuntimeError("%s did not start (see %s)" % (label, scratch))
    return process


def cpu_seconds(pid):
    """utime + stime of every thread of `pid` so far (/proc, clock ticks), in seconds."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def write_results(out, stem, rows, table, argv):
    """A driver's results: `<out>/<stem>.json` (the rows) and `<out>/<stem>.md` (the command
    `argv`, then the Markdown `table`)."""
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, stem + ".json"), "w") as f:
        json.dump(rows, f, indent=1)
    with open(os.path.join(out, stem + ".md"), "w") as f:
        f.write("`%s`\n\n%s\n" % (" ".join(argv), table))
