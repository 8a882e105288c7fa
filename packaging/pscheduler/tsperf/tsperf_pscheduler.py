"""tsperf as a perfSONAR pScheduler tool: the logic behind the plugin's six executables.

Two tests: `throughput`, and `disk-to-disk` (one participant: a file the far tsserver serves,
source tsperf://HOST[:PORT]/NAME, copied into dest whole and durably, every byte verified;
its result the copy's time, bytes-sent and throughput in bits a second).

Each executable (enumerate, can-run, duration, participant-data, run, merged-results) reads
the JSON pScheduler sends on stdin and writes its answer on stdout, exit 0; an input it cannot
read is an error on stderr and exit 1. Only the standard library is used.

The throughput test's spec is mapped onto tsclient's flags; tsclient's --json result onto the
throughput result schema (intervals of streams with throughput-bits, retransmits, rtt,
start, end, omitted, stream-id, and a summary). tsclient sends from the source (participant
0) to a tsserver on the destination: with two participants, participant 1 runs
`tsserver --once` for the test on the port it names in its participant data; a single-ended
test uses the tsserver already running on the destination (tsserver.service, port 7433, or
$TSPERF_PSCHEDULER_PORT). $TSPERF_BIN_DIR names where tsclient and tsserver are (default: PATH).
"""

import json
import math
import os
import re
import shutil
import subprocess
import sys
import time

NAME = "tsperf"
VERSION = "1.0"
TESTS = ["throughput", "disk-to-disk"]
# The port participant 1's tsserver --once listens on (the service's is 7433).
ONCE_PORT = 7435
DEFAULT_PORT = 7433
# What the throughput spec may say that tsperf has no equivalent for, and why.
UNSUPPORTED = {
    "udp": "tsperf is TCP only (use iperf3 for UDP)",
    "mss": "tsperf does not set the MSS",
    "flow-label": "tsperf does not set IPv6 flow labels",
    "dscp": "tsperf does not set DSCP",
    "ip-tos": "tsperf does not set the TOS byte",
    "client-cpu-affinity": "tsperf does not pin CPUs",
    "server-cpu-affinity": "tsperf does not pin CPUs",
    "fq-rate": "tsperf paces with bandwidth (SO_MAX_PACING_RATE), not fq-rate",
    "reverse-connections": "tsperf's client always connects from the source",
    "loopback": "tsperf measures between two hosts",
}
DEFAULT_DURATION = 10


class InputError(Exception):
    """JSON from pScheduler that cannot be used: said on stderr, exit 1."""


def iso_seconds(text):
    """Seconds of an ISO 8601 duration such as PT10S, PT1M30S or P0DT0H0M5.5S."""
    m = re.fullmatch(
        r"P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?", str(text)
    )
    if not m or text in ("P", "PT"):
        raise InputError(f"duration {text!r}: expected an ISO 8601 duration such as PT10S")
    d, h, mi, s = (float(g) if g else 0.0 for g in m.groups())
    return ((d * 24 + h) * 60 + mi) * 60 + s


def iso_duration(seconds):
    """An ISO 8601 duration of whole seconds, rounded up: PT12S."""
    return f"PT{int(math.ceil(seconds))}S"


def size(value):
    """A byte count the spec gives as a number or a string with an SI suffix (64K, 1M)."""
    if isinstance(value, (int, float)):
        return int(value)
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([kKmMgGtT]?)", str(value).strip())
    if not m:
        raise InputError(f"size {value!r}: expected a number such as 262144 or 256K")
    scale = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}[m.group(2).lower()]
    return int(float(m.group(1)) * scale)


def reasons(spec):
    """Why tsperf cannot run `spec` (empty: it can)."""
    out = [why for key, why in UNSUPPORTED.items() if spec.get(key)]
    if spec.get("parallel") is not None and not 1 <= int(spec["parallel"]) <= 128:
        out.append(f"parallel {spec['parallel']}: tsperf runs 1 to 128 streams")
    if spec.get("duration") is not None:
        try:
            if iso_seconds(spec["duration"]) <= 0:
                out.append("duration: must be more than 0 s")
        except InputError as e:
            out.append(str(e))
    return out


def duration_of(spec):
    """The test's time: its duration, its omitted start, and time to start and report."""
    secs = iso_seconds(spec["duration"]) if spec.get("duration") else DEFAULT_DURATION
    omit = iso_seconds(spec["omit"]) if spec.get("omit") else 0.0
    return secs + omit + 5


def client_args(spec, host, port):
    """tsclient's command line for the throughput `spec` against host:port."""
    secs = iso_seconds(spec["duration"]) if spec.get("duration") else DEFAULT_DURATION
    args = ["--json", "--host", host, "--port", str(port), "--time", f"{secs:g}"]
    interval = iso_seconds(spec["interval"]) if spec.get("interval") else 1.0
    args += ["--interval", f"{interval:g}"]
    if spec.get("omit"):
        args += ["--omit", f"{iso_seconds(spec['omit']):g}"]
    if spec.get("parallel") and int(spec["parallel"]) > 1:
        args += ["--parallel", str(int(spec["parallel"]))]
    if spec.get("reverse"):
        args.append("--reverse")
    if spec.get("bandwidth"):
        args += ["-b", str(size(spec["bandwidth"]))]
    if spec.get("window-size"):
        args += ["-w", str(size(spec["window-size"]))]
    if spec.get("buffer-length"):
        args += ["--chunk", str(size(spec["buffer-length"]))]
    if spec.get("congestion"):
        args += ["--congestion", str(spec["congestion"])]
    if spec.get("no-delay"):
        args.append("-N")
    if spec.get("zero-copy") and not spec.get("reverse"):
        args += ["--io", "sendfile"]
    if spec.get("ip-version") in (4, 6):
        args.append(f"-{spec['ip-version']}")
    if spec.get("local-address"):
        args += ["-B", str(spec["local-address"])]
    return args


def program(name):
    """The tsperf program `name`: in $TSPERF_BIN_DIR, else on PATH, else /usr/bin."""
    d = os.environ.get("TSPERF_BIN_DIR")
    if d:
        return os.path.join(d, name)
    return shutil.which(name) or os.path.join("/usr/bin", name)


def stream_intervals(s, omit_s):
    """One stream's intervals as (start, end, bytes, retransmits, rtt_us, omitted)."""
    for i in s.get("intervals", []):
        yield (
            i["start_s"],
            i["end_s"],
            i["bytes"],
            i.get("retransmits"),
            i.get("rtt_us"),
            omit_s > 0 and i["end_s"] <= omit_s + 0.01,
        )


def stream_json(entry, stream_id, start, end, nbytes, retrans, rtt_us, omitted):
    out = {
        "stream-id": stream_id,
        "start": round(start, 6),
        "end": round(end, 6),
        "throughput-bytes": nbytes,
        "throughput-bits": nbytes * 8 / max(end - start, 1e-9),
        "omitted": bool(omitted),
    }
    if retrans is not None:
        out["retransmits"] = retrans
    if rtt_us is not None:
        out["rtt"] = rtt_us
    return out


def streams_of(result):
    """The per-stream objects of tsclient's result (one for a lone stream)."""
    mode = result.get("mode")
    if mode in ("parallel", "parallel-reverse"):
        return [s for s in result.get("streams", []) if "intervals" in s or "bytes" in s]
    return [result]


def throughput_result(result):
    """tsclient's --json result as pScheduler's throughput result."""
    if result.get("error") and not result.get("verified"):
        return {"succeeded": False, "error": result["error"], "diags": json.dumps(result)}
    streams = streams_of(result)
    omit_s = (streams[0].get("timed") or {}).get("omit_s", 0.0) if streams else 0.0
    # The streams sample together: their k-th intervals make the k-th interval.
    by_index = {}
    for n, s in enumerate(streams, start=1):
        for k, (start, end, b, r, rtt, om) in enumerate(stream_intervals(s, omit_s)):
            by_index.setdefault(k, []).append(stream_json(s, n, start, end, b, r, rtt, om))
    intervals = []
    for key in sorted(by_index):
        ss = by_index[key]
        start, end = min(x["start"] for x in ss), max(x["end"] for x in ss)
        total = sum(x["throughput-bytes"] for x in ss)
        summary = stream_json(None, 0, start, end, total, None, None, ss[0]["omitted"])
        del summary["stream-id"]
        retr = [x["retransmits"] for x in ss if "retransmits" in x]
        if retr:
            summary["retransmits"] = sum(retr)
        intervals.append({"streams": ss, "summary": summary})
    summary_streams = []
    for n, s in enumerate(streams, start=1):
        tcp = (s.get("tcp") or {}).get("client" if s.get("mode") != "reverse" else "server", {})
        summary_streams.append(
            stream_json(
                s, n, 0.0, s.get("elapsed_s", 0.0), s.get("bytes", 0),
                tcp.get("total_retrans"), tcp.get("rtt_us"), False,
            )
        )
    total = result.get("sum", result)
    whole = stream_json(
        None, 0, 0.0, total.get("elapsed_s", 0.0), total.get("bytes", 0), None, None, False
    )
    del whole["stream-id"]
    if total.get("mib_per_s") is not None:
        # tsclient's own rate: without a timed run's omitted start (--omit).
        whole["throughput-bits"] = total["mib_per_s"] * 1048576 * 8
    retr = [x["retransmits"] for x in summary_streams if "retransmits" in x]
    if retr:
        whole["retransmits"] = sum(retr)
    verified = bool(total.get("verified"))
    out = {
        "succeeded": verified,
        "intervals": intervals,
        "summary": {"streams": summary_streams, "summary": whole},
        "diags": "tsclient verified every byte (xxh3 at both ends)"
        if verified
        else "NOT VERIFIED: the destination did not count every byte or its checksum differs",
    }
    if not verified:
        out["error"] = result.get("error") or "the transfer was not verified"
    return out


def disk_source(source):
    """The host, port and name of a disk-to-disk source, tsperf://HOST[:PORT]/NAME: a file
    the far tsserver serves (tsserver --serve DIR)."""
    m = re.fullmatch(r"tsperf://(\[[^\]]+\]|[^/:]+)(?::(\d+))?/([^/]+)", str(source))
    if not m:
        raise InputError(
            f"source {source!r}: expected tsperf://HOST[:PORT]/NAME, a file the far "
            "tsserver serves (tsserver --serve DIR)"
        )
    return m.group(1).strip("[]"), int(m.group(2) or DEFAULT_PORT), m.group(3)


def disk_reasons(spec):
    """Why tsperf cannot run the disk-to-disk `spec` (empty: it can)."""
    out = []
    try:
        disk_source(spec.get("source"))
    except InputError as e:
        out.append(str(e))
    if spec.get("parallel") not in (None, 1):
        out.append("parallel: a saved file comes over one stream")
    if spec.get("max-size") is not None:
        out.append("max-size: tsperf copies the whole served file")
    if not spec.get("dest"):
        out.append("no dest: expected a directory or a file path to save to")
    return out


def disk_to_disk(spec):
    """Copies the served file to dest (saved whole, durably) and reports the copy."""
    host, port, name = disk_source(spec.get("source"))
    dest = str(spec["dest"])
    folder = dest if os.path.isdir(dest) else (os.path.dirname(dest) or ".")
    limit = iso_seconds(spec["timeout"]) if spec.get("timeout") else 300
    cmd = [program("tsclient"), "--json", "--host", host, "--port", str(port),
           "--reverse", name, "--save", folder]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=limit)
    except subprocess.TimeoutExpired:
        return {"succeeded": False, "time": iso_duration(limit),
                "error": f"the copy did not end within {limit:g} s", "diags": " ".join(cmd)}
    try:
        result = json.loads(done.stdout)
    except ValueError:
        result = {}
    elapsed = float(result.get("elapsed_s") or 0.0)
    out = {
        "schema": 1,
        "succeeded": bool(result.get("verified")) and done.returncode == 0,
        "time": f"PT{elapsed:.6f}S",
        "bytes-sent": float(result.get("bytes") or 0),
        "throughput": float(result.get("bytes") or 0) * 8 / max(elapsed, 1e-9),
        "diags": " ".join(cmd) + "\n" + done.stderr,
    }
    saved = (result.get("client") or {}).get("saved_to")
    if out["succeeded"] and saved and not os.path.isdir(dest) and saved != dest:
        os.replace(saved, dest)
        saved = dest
    if out["succeeded"] and spec.get("cleanup") and saved:
        os.remove(saved)
    if not out["succeeded"]:
        out["error"] = result.get("error") or done.stderr.strip() or "the copy failed"
    return {k: out.get(k) for k in ("succeeded", "error", "diags")} | {"result": out}


def run(inp):
    """Runs the test: participant 1 serves once, participant 0 runs tsclient."""
    participant = int(inp.get("participant", 0))
    spec = inp.get("test", {}).get("spec", {})
    if inp.get("test", {}).get("type") == "disk-to-disk":
        return disk_to_disk(spec)
    started = time.time()
    pdata = inp.get("participant-data") or []
    port = next((int(p["port"]) for p in pdata if isinstance(p, dict) and "port" in p), None)
    if participant == 1:
        limit = duration_of(spec)
        cmd = [program("tsserver"), "--once", "--port", str(port or ONCE_PORT), "--log", "none"]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=limit)
        except subprocess.TimeoutExpired:
            return {"succeeded": False, "error": f"no client came within {limit:.0f} s"}
        return {
            "succeeded": done.returncode == 0,
            "diags": " ".join(cmd) + "\n" + done.stderr,
            "result": {},
        }
    dest = spec.get("dest") or inp.get("dest")
    if not dest:
        raise InputError("the spec has no dest")
    if port is not None:
        time.sleep(float(os.environ.get("TSPERF_PSCHEDULER_DELAY", "1")))
    port = port or int(os.environ.get("TSPERF_PSCHEDULER_PORT", DEFAULT_PORT))
    args = client_args(spec, dest, port)
    cmd = [program("tsclient")] + args
    try:
        done = subprocess.run(
            cmd, capture_output=True, text=True, timeout=duration_of(spec) + 10
        )
    except subprocess.TimeoutExpired:
        return {"succeeded": False, "error": "tsclient did not end in time", "diags": " ".join(cmd)}
    try:
        result = json.loads(done.stdout)
    except ValueError:
        return {
            "succeeded": False,
            "error": (done.stderr.strip() or f"tsclient exited {done.returncode}"),
            "diags": " ".join(cmd),
        }
    out = throughput_result(result)
    out["diags"] = " ".join(cmd) + "\n" + out.get("diags", "")
    return {
        "succeeded": out["succeeded"],
        "error": out.get("error"),
        "diags": out["diags"],
        "result": {k: v for k, v in out.items() if k not in ("diags",)},
        "duration": iso_duration(time.time() - started),
    }


def merged(inp):
    """The merged result: the source's (participant 0's) measured result."""
    results = inp.get("results") or []
    if not results:
        raise InputError("no results to merge")
    first = results[0] or {}
    res = first.get("result", first) if isinstance(first, dict) else {}
    if not res:
        return {"succeeded": False, "error": "participant 0 measured nothing"}
    return res


def answer(method, inp):
    if method == "enumerate":
        return {
            "schema": 1,
            "name": NAME,
            "description": "tsperf: TCP throughput, every byte counted and checksummed at "
            "the destination, with the stage that limited it",
            "version": VERSION,
            "tests": TESTS,
            "preference": 0,
        }
    if method == "can-run":
        if inp.get("type") not in TESTS:
            return {"can-run": False, "reasons": [f"unsupported test type {inp.get('type')!r}"]}
        spec = inp.get("spec") or {}
        why = disk_reasons(spec) if inp["type"] == "disk-to-disk" else reasons(spec)
        return {"can-run": True} if not why else {"can-run": False, "reasons": why}
    if method == "duration":
        if "source" in inp and "dest" in inp:
            return {"duration": iso_duration(iso_seconds(inp.get("timeout") or "PT300S"))}
        return {"duration": iso_duration(duration_of(inp))}
    if method == "participant-data":
        if "source" in (inp.get("spec") or {}):
            return {}
        if int(inp.get("participant", 0)) == 1:
            return {"port": ONCE_PORT}
        return {}
    if method == "run":
        return run(inp)
    if method == "merged-results":
        return merged(inp)
    raise InputError(f"unknown method {method!r}")


def main(method):
    """Reads stdin's JSON (none for enumerate), answers on stdout; exit 1 on bad input."""
    try:
        text = sys.stdin.read() if method != "enumerate" else ""
        inp = json.loads(text) if text.strip() else {}
        if not isinstance(inp, dict):
            raise InputError("expected a JSON object on stdin")
        out = answer(method, inp)
    except (InputError, ValueError, KeyError, TypeError) as e:
        sys.stderr.write(f"tsperf {method}: {e}\n")
        sys.exit(1)
    json.dump(out, sys.stdout, indent=2)
    sys.stdout.write("\n")
