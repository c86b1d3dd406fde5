"""Where the time of one request goes: py-spy samples the web process and
the upstream worker while requests run one at a time, and each sample is
charged to the library its innermost frame is in (ours, Celery/kombu, the
upstream HTTP client, gevent, redis-py, the web framework...). Printed in the report as
CPU milliseconds per request, with the hottest frames."""
from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from scripts.benchkit.client import stream
from scripts.benchkit.relay import web_worker_pid
from scripts.benchkit.stack import Endpoints

RATE = 1000  # samples per second
# Each sample is charged to the innermost frame in one of these libraries (a
# socket send made by redis-py is redis-py's time); a sample with none of
# them is the gevent hub's (its loop, waking greenlets) or the stdlib's.
HTTP = "upstream HTTP"  # httpx until issue 18; http.client and our pool since
COMPONENTS = (  # (path prefix as py-spy prints it, component); the first that matches
    ("workers/backends/http_pool.py", HTTP), ("http/client.py", HTTP),
    ("app/", "switchboard"), ("workers/", "switchboard"), ("celery/", "celery+kombu"), ("kombu/", "celery+kombu"),
    ("httpx/", HTTP), ("httpcore/", HTTP), ("h11/", HTTP), ("redis/", "redis-py"),
    ("flask/", "flask+werkzeug+gunicorn"), ("werkzeug/", "flask+werkzeug+gunicorn"),
    ("gunicorn/", "flask+werkzeug+gunicorn"), ("pydantic", "pydantic"),
)
HUB = "gevent hub, stdlib"


def component_ms(components: dict, name: str) -> float:
    """A component's CPU ms per request (reports written before issue 18's
    change of upstream client call that one httpx)."""
    return components.get(name, components.get("httpx", 0) if name == HTTP else 0)


def py_spy() -> str | None:
    return shutil.which("py-spy", path=str(Path(sys.executable).parent)) or shutil.which("py-spy")


def _location(frame: str) -> str:
    return frame[frame.rfind("(") + 1:]


def component(stack: list[str]) -> str:
    """The component of the innermost frame that belongs to one (frames
    innermost last, as py-spy writes them)."""
    for frame in reversed(stack):
        location = _location(frame)
        for prefix, name in COMPONENTS:
            if location.startswith(prefix):
                return name
    return HUB


def summarize(raw: Path, requests: int) -> dict:
    """Per component, CPU ms per request; and the hottest innermost frames."""
    by_component, by_frame, total = Counter(), Counter(), 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():  # a frame whose name py-spy read as a multi-line text (a proxy's repr)
            continue
        frames = stack.split(";")
        innermost = frames[-1]
        by_component[component(frames)] += int(count)
        by_frame[innermost] += int(count)
        total += int(count)
    per_request = 1000.0 / RATE / max(requests, 1)  # ms of CPU per sample, per request
    return {"cpu_ms_per_request": round(total * per_request, 2),
            "components": {name: round(n * per_request, 2) for name, n in by_component.most_common()},
            "hottest": [(frame, round(n / total * 100, 1)) for frame, n in by_frame.most_common(8)]}


async def _requests(port: int, model: str, seconds: float) -> int:
    body = {"model": model, "stream": True, "messages": [{"role": "user", "content": "Say something."}]}
    count, deadline = 0, time.monotonic() + seconds
    while time.monotonic() < deadline:
        result = await stream(port, "/v1/chat/completions", body)
        if result.error:
            raise RuntimeError(result.error)
        count += 1
    return count


def profile_path(endpoints: Endpoints, seconds: float) -> dict:
    upstream_worker = next(p for p in endpoints.processes if p.name == "worker" and "upstream" in " ".join(p.popen.args))
    targets = {"web": web_worker_pid(endpoints.web.popen.pid), "upstream worker": upstream_worker.popen.pid}
    return profile_pids(targets, endpoints.web_port, seconds)


def profile_pids(targets: dict[str, int], port: int, seconds: float, model: str = "up-instant") -> dict:
    """py-spy on each named process while one client streams `model`
    through the web process on `port`, one request at a time."""
    return profile_in_turns({"only": (targets, port)}, seconds, rounds=1, model=model)["only"]


def profile_in_turns(ways: dict[str, tuple[dict[str, int], int]], seconds: float, rounds: int = 1,
                     model: str = "up-instant") -> dict:
    """profile_pids for several servers (label -> (its processes, its web
    port)), taking turns `rounds` times for `seconds` each; each
    process's samples and requests over its turns are added up, so a slow
    spell of the machine is shared out instead of landing on one server."""
    spy = py_spy()
    if spy is None:
        return {label: {"error": "py-spy is not installed"} for label in ways}
    folder = Path(tempfile.mkdtemp(prefix="switchboard-profile-"))
    requests, errors = dict.fromkeys(ways, 0), {}
    for turn in range(rounds):
        for label, (targets, port) in ways.items():
            got, error = _record(spy, targets, port, seconds, folder / f"{label}-{turn}", model)
            requests[label] += got
            errors.update({(label, name): text for name, text in error.items()})
    results = {}
    for label, (targets, _) in ways.items():
        results[label] = {"requests": requests[label]}
        for name in targets:
            raws = [folder / f"{label}-{turn}" / f"{name}.txt" for turn in range(rounds)]
            if not all(raw.exists() for raw in raws):
                results[label][name] = {"error": errors.get((label, name), "py-spy wrote nothing")}
                continue
            joined = folder / f"{label}-{name}.txt"  # raw samples add up line by line
            joined.write_text("".join(raw.read_text() for raw in raws))
            results[label][name] = summarize(joined, requests[label])
    shutil.rmtree(folder, ignore_errors=True)
    return results


def _record(spy: str, targets: dict[str, int], port: int, seconds: float, folder: Path,
            model: str) -> tuple[int, dict[str, str]]:
    """py-spy's raw samples of each process into folder/<name>.txt while one
    client streams; the requests made, and py-spy's errors by process."""
    folder.mkdir(parents=True)
    spies = {name: subprocess.Popen([spy, "record", "--nonblocking", "-r", str(RATE), "-d", str(int(seconds) + 1),
                                     "-f", "raw", "-p", str(pid), "-o", str(folder / f"{name}.txt")],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
             for name, pid in targets.items()}
    time.sleep(0.5)  # py-spy attaches
    requests = asyncio.run(_requests(port, model, seconds - 0.5))
    errors = {}
    for name, spy_process in spies.items():
        _, error = spy_process.communicate(timeout=60)
        if error:
            errors[name] = error.decode()[-500:]
    return requests, errors
