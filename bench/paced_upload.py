#!/usr/bin/python3
"""What a large gRPC request costs after its client's last byte, from a client slower than
loopback.

On loopback a client sends as fast as the CPUs copy, and on this 2-vCPU machine the client,
the gateway and the upstream share two cores: whether the gateway sends a message on as it
arrives or whole after it, the copies take the same CPU time (bench/README.md). A client
across a network is slower than that. Its upload then leaves the CPUs idle between pieces,
and what the gateway adds shows after the last byte: a gateway that reads the message whole
first only then starts the upstream's transfer of all of it; one that sends it on as it
arrives (`stream_requests: true`) has little left to send.

The client here is a raw HTTP/2 one (python h2): one ModelInfer with an INT32 [1, N] tensor,
its framed message sent in 1 MiB DATA pieces with --gap-ms between them (a paced upload).
The request is identity_fp32's with one raw_input_contents entry more than it has inputs
(a 4-byte one after the tensor): the upstream can only refuse it once the whole message is
in, and its answer is a status of a few bytes, so that what the clock sees after the last byte is the request's way to the
upstream, not this Python client reading a large answer (it reads at about 250 MB/s, as
slow as the transfer being measured). Every arm must give direct's status. For each
request it records the time from the last request byte sent to the status ("after the
last byte") and the whole exchange. Arms, each on a fresh connection per request, in
interleaved rounds:

  direct          U's gRPC listener
  nginx           BASELINES.md's grpc_pass to it
  ig_grpc         the suite's gateway toward U's gRPC listener (messages read whole first)
  ig_grpc_stream  the same with `stream_requests: true` (messages sent on as they arrive)

Printed per size: each arm's median "after the last byte" and its excess over direct's, and
the streamed arm's excess over the whole-first arm's, round by round.

  /usr/bin/python3 bench/paced_upload.py --sizes 16,64 --rounds 5 --build-dir build/reltest
"""
import argparse
import os
import socket
import statistics
import struct
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import forwarding_report  # noqa: E402
import stream_requests  # noqa: E402
import suite  # noqa: E402

import h2.config  # noqa: E402
import h2.connection  # noqa: E402
import h2.events  # noqa: E402
import h2.settings  # noqa: E402

MIB = 1 << 20
ARMS = ("direct", "nginx", "ig_grpc", "ig_grpc_stream")
MODEL_INFER = "/inference.GRPCInferenceService/ModelInfer"
PIECE = MIB


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sizes", default="16,64", help="tensor sizes in MiB, comma-separated")
    p.add_argument("--gap-ms", type=float, default=2.0, help="pause after each 1 MiB piece of the upload")
    p.add_argument("--requests", type=int, default=3, help="requests per arm, size and round")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--build-dir", default=os.path.join(suite.ROOT, "build", "release"))
    return p.parse_args()


def model_infer(pb, values):
    """identity_fp32's request for an FP32 [1, `values`] tensor, with one raw_input_contents
    entry more than it has inputs (the last, of 4 bytes)."""
    req = pb.ModelInferRequest(model_name="identity_fp32")
    t = req.inputs.add()
    t.name, t.datatype = "INPUT0", "FP32"
    t.shape.extend([1, values])
    req.raw_input_contents.extend([bytes(values * 4), bytes(4)])
    return req.SerializeToString()


def paced_call(port, message, gap_s):
    """One ModelInfer, paced: (seconds from the last request byte to the status, whole
    exchange seconds, the status and its message)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=60)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
    conn.local_settings = h2.settings.Settings(client=True, initial_values={
        h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: (1 << 31) - 1})
    conn.initiate_connection()
    conn.increment_flow_control_window((1 << 31) - 1 - 65535)
    sid = conn.get_next_available_stream_id()
    conn.send_headers(sid, [(":method", "POST"), (":scheme", "http"), (":path", MODEL_INFER),
                            (":authority", "127.0.0.1:%d" % port), ("content-type", "application/grpc"),
                            ("te", "trailers")])
    framed = b"\0" + struct.pack(">I", len(message)) + message
    state = {"trailers": None, "ended": False}

    def pump(block):
        sock.sendall(conn.data_to_send())
        sock.setblocking(block)
        try:
            chunk = sock.recv(4 << 20)
        except BlockingIOError:
            return
        finally:
            sock.setblocking(True)
        if not chunk:
            raise ConnectionError("closed by the server")
        for event in conn.receive_data(chunk):
            if isinstance(event, h2.events.TrailersReceived):
                state["trailers"] = dict(event.headers)
            elif isinstance(event, h2.events.ResponseReceived) and "grpc-status" in dict(event.headers):
                state["trailers"] = dict(event.headers)  # Trailers-Only
            elif isinstance(event, h2.events.StreamEnded):
                state["ended"] = True
            elif isinstance(event, h2.events.StreamReset):
                raise ConnectionError("stream reset: %s" % event.error_code)

    try:
        started = time.perf_counter()
        sent = 0
        while sent < len(framed):
            end = min(sent + PIECE, len(framed))
            while sent < end:
                room = min(conn.local_flow_control_window(sid), conn.max_outbound_frame_size, end - sent)
                if room == 0:
                    pump(True)
                    continue
                conn.send_data(sid, framed[sent:sent + room])
                sent += room
            if sent == len(framed):
                conn.end_stream(sid)
            sock.sendall(conn.data_to_send())
            pump(False)
            if sent < len(framed) and gap_s > 0:
                time.sleep(gap_s)
        last_byte = time.perf_counter()
        while not state["ended"]:
            pump(True)
        done = time.perf_counter()
    finally:
        sock.close()
    trailers = state["trailers"] or {}
    return done - last_byte, done - started, (trailers.get("grpc-status"), trailers.get("grpc-message"))


def main():
    args = parse_args()
    sizes = [int(s) * MIB for s in args.sizes.split(",")]
    scratch = tempfile.mkdtemp(prefix="infergate-paced-upload.")
    pb = forwarding_report.load_pb(scratch)
    bench = suite.Bench(None, scratch, args.build_dir)
    after = {}  # (size, arm) -> [median seconds after the last byte, one per round]
    whole = {}
    try:
        bench.start()
        stream_requests.start_streaming_gateways(bench, stream_requests.GRPC_PATHS)
        messages = {size: model_infer(pb, size // 4) for size in sizes}
        want = {size: paced_call(bench.ports["direct"][1], messages[size], 0)[2] for size in sizes}
        for size in sizes:
            if want[size][0] != "3":
                raise SystemExit(f"U answered {want[size]}, not INVALID_ARGUMENT")
        for rnd in range(args.rounds):
            order = ARMS[rnd % len(ARMS):] + ARMS[:rnd % len(ARMS)]
            for size in sizes:
                for arm in order:
                    port = bench.ports[arm][1]
                    paced_call(port, messages[size], 0)  # a warm-up: pool blocks, connections
                    runs = [paced_call(port, messages[size], args.gap_ms / 1000) for _ in range(args.requests)]
                    for run in runs:
                        if run[2] != want[size]:
                            raise SystemExit(f"{arm}: {run[2]}, direct: {want[size]}")
                    after.setdefault((size, arm), []).append(statistics.median(r[0] for r in runs))
                    whole.setdefault((size, arm), []).append(statistics.median(r[1] for r in runs))
            print(f"round {rnd + 1} done", flush=True)
    finally:
        bench.stop()

    def ms(seconds):
        return f"{seconds * 1000:.2f}"

    print(f"\n{args.rounds} round(s) of {args.requests} requests per arm and size; 1 MiB pieces with "
          f"{args.gap_ms:g} ms between them; medians over rounds (ms). after: from the last request byte "
          "sent to the status; excess: after minus direct's after in the same round.\n")
    print("| size | arm | whole exchange | after the last byte | excess over direct | "
          "streamed excess - whole-first excess (per round) |")
    print("|---|---|---:|---:|---:|---|")
    for size in sizes:
        direct = after[(size, "direct")]
        for arm in ARMS:
            excess = [a - d for a, d in zip(after[(size, arm)], direct)]
            per_round = ""
            if arm == "ig_grpc_stream":
                per_round = ", ".join(ms(s - w) for s, w in zip(after[(size, arm)], after[(size, "ig_grpc")]))
            print(f"| {size // MIB} MiB | {arm} | {ms(statistics.median(whole[(size, arm)]))} | "
                  f"{ms(statistics.median(after[(size, arm)]))} | "
                  f"{ms(statistics.median(excess)) if arm != 'direct' else ''} | {per_round} |")


if __name__ == "__main__":
    main()
