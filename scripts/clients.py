"""The compatibility matrix of the real agent CLIs.

Installs the newest release of each agent CLI (npm and PyPI), starts a
Switchboard on echo, and runs each CLI headless on every wire it offers,
set up by `admin.py connect` (scripts/connect.py), never by hand: a plain
answer, then a round of the CLI's own file-writing tool (echo answers the
prompt, a call of that tool; the CLI writes the file and sends the result
back). Keys off and on. Prints a table of client, version, wire, keys,
plain answer, tool round, and the first request the server refused.

    python scripts/clients.py                          # everything (about a gigabyte of CLIs)
    python scripts/clients.py --only pi,kilo --keys off
    python scripts/clients.py --out docs/clients.md    # the committed report

Not part of `make test`: the suite replays what these clients send
(../shared/fixtures) and drives two pinned CLIs; this finds the next
release that breaks us.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scripts import connect  # noqa: E402
from scripts.children import stop_on_signals  # noqa: E402
from scripts.embedded_redis import EmbeddedRedis  # noqa: E402
from scripts.processes import ROOT, stack_env, start_stack, stop_together  # noqa: E402

FILE, TEXT = "made-by-agent.txt", "written by the agent"
PLAIN = "the switchboard matrix says hello"
KEY = "sb-matrix-" + os.urandom(8).hex()
RUN_TIMEOUT = 180


def invoke(tool: str, **parameters: str) -> str:
    """What echo's reply must hold for the emulation to call `tool`."""
    inner = "".join(f'<parameter name="{name}">{value}</parameter>' for name, value in parameters.items())
    return f'<invoke name="{tool}">{inner}</invoke>'


def patch(path: Path) -> str:
    return f"*** Begin Patch\n*** Add File: {path}\n+{TEXT}\n*** End Patch\n"


@dataclass(frozen=True)
class Agent:
    client: str  # connect's name for it
    package: str  # "npm:<name>" or "pypi:<name>"
    binary: str
    argv: Callable[[str], list[str]]  # its headless command for a prompt (None: the prompt goes on stdin)
    tool_round: Callable[[Path], str]  # the prompt that makes it write the file
    stdin: bool = False
    wires: tuple[str, ...] = ()  # default: every wire connect knows for it
    env: dict = field(default_factory=dict)
    label: str = ""  # a variant's row name (Copilot CLI with a Codex-family model id)
    blocked: str = ""  # why it cannot pass yet (said in the table; it still runs)


AGENTS = [
    Agent("claude-code", "npm:@anthropic-ai/claude-code", "claude", lambda p: ["-p", p, "--allowedTools", "Write"],
          lambda f: invoke("Write", file_path=str(f), content=TEXT), env={"DISABLE_AUTOUPDATER": "1"}),
    Agent("codex", "npm:@openai/codex", "codex",
          lambda p: ["exec", "--skip-git-repo-check", "--sandbox", "workspace-write", p],
          lambda f: invoke("exec_command", cmd=f"printf '{TEXT}' > {f}")),
    Agent("copilot-cli", "npm:@github/copilot", "copilot", lambda p: ["-p", p, "--allow-all-tools", "-s"],
          lambda f: invoke("create", path=str(f), file_text=TEXT), env={"COPILOT_AUTO_UPDATE": "false"}),
    Agent("copilot-cli", "npm:@github/copilot", "copilot", lambda p: ["-p", p, "--allow-all-tools", "-s"],
          lambda f: invoke("apply_patch", input=patch(f)), wires=("chat",), label="copilot-cli (gpt-5.1-codex)",
          env={"COPILOT_AUTO_UPDATE": "false", "COPILOT_MODEL": "gpt-5.1-codex",
               "COPILOT_PROVIDER_WIRE_MODEL": "echo"}),
    Agent("pi", "npm:@earendil-works/pi-coding-agent", "pi", lambda p: ["-p", p],
          lambda f: invoke("write", path=str(f), content=TEXT)),
    Agent("opencode", "npm:opencode-ai", "opencode", lambda p: ["run"],
          lambda f: invoke("write", filePath=str(f), content=TEXT), stdin=True),
    # Kilo 7.7 quotes a message given as an argument when it has spaces: it goes on stdin
    Agent("kilo", "npm:@kilocode/cli", "kilo", lambda p: ["run", "--auto"],
          lambda f: invoke("write", filePath=str(f), content=TEXT), stdin=True,
          env={"KILO_DISABLE_MODELS_FETCH": "1", "KILO_DISABLE_AUTOUPDATE": "1"}),
    Agent("qwen-code", "npm:@qwen-code/qwen-code", "qwen", lambda p: ["-p", p, "--yolo"],
          lambda f: invoke("write_file", file_path=str(f), content=TEXT)),
    Agent("gemini-cli", "npm:@google/gemini-cli", "gemini", lambda p: ["-p", p, "--yolo"],
          lambda f: invoke("write_file", file_path=str(f), content=TEXT),
          env={"GEMINI_CLI_TRUST_WORKSPACE": "true"}),
    Agent("continue", "npm:@continuedev/cli", "cn", lambda p: ["-p", p, "--auto"],
          lambda f: invoke("Write", filepath=str(f), content=TEXT)),
    Agent("cline", "npm:cline", "cline", lambda p: [p], lambda f: invoke("editor", path=str(f), new_text=TEXT)),
    Agent("aider", "pypi:aider-chat", "aider",
          lambda p: ["--message", p, "--yes-always", "--no-git", "--edit-format", "whole", "--no-check-update",
                     "--no-analytics", "--no-show-release-notes", "--no-pretty", "--no-stream"],
          lambda f: f"{f.name}\n```\n{TEXT}\n```\n"),
    Agent("vibe", "pypi:mistral-vibe", "vibe", lambda p: ["-p", p, "--agent", "auto-approve"],
          lambda f: invoke("write_file", path=str(f), content=TEXT)),
]


# --- installing ------------------------------------------------------------------------------
def install(agents: list[Agent], where: Path) -> dict[str, str]:
    """The newest release of each package: its version, or why it failed."""
    versions: dict[str, str] = {}
    npm = sorted({a.package[4:] for a in agents if a.package.startswith("npm:")})
    if npm:
        where.mkdir(parents=True, exist_ok=True)
        extra = ["node@22"] if any(a.client == "pi" for a in agents) else []  # Pi needs Node 22 or newer
        for package in npm + extra:  # one at a time: one that fails (no platform build yet) spoils no other
            versions[f"npm:{package}"] = _npm_install(package, where / "npm")
    for package in sorted({a.package[5:] for a in agents if a.package.startswith("pypi:")}):
        versions[f"pypi:{package}"] = _pip_install(package, where / "pypi" / package)
    return versions


def _npm_install(package: str, prefix: Path) -> str:
    """Its newest release; if that does not install (a release published
    before its platform builds, as Kilo's 7.8.1 was), the one before, and
    the row says so."""
    name, _, wanted = package.rpartition("@") if package.rfind("@") > 0 else (package, "", "latest")
    failed = _npm(name, wanted, prefix)
    if failed and wanted == "latest":
        newest, before = _npm_versions(name)
        if before and not _npm(name, before, prefix):
            return f"{before} ({newest}: install failed: {failed})"
    if failed:
        return "install failed: " + failed
    root = prefix / "node_modules" / name
    if (root / "install.cjs").exists():  # Claude Code puts its platform build in place so
        subprocess.run(["node", "install.cjs"], cwd=root, capture_output=True, timeout=300)
    return json.loads((root / "package.json").read_text())["version"]


def _npm(name: str, version: str, prefix: Path) -> str:
    """Installs it; what went wrong ("" when nothing did)."""
    done = subprocess.run(["npm", "install", "--prefix", str(prefix), "--no-audit", "--no-fund", "--loglevel=error",
                           f"{name}@{version}"], capture_output=True, text=True, timeout=1200)
    return _npm_error(done.stderr) if done.returncode else ""


def _npm_versions(name: str) -> tuple[str, str | None]:
    """Its newest release and the one before (releases, not pre-releases)."""
    done = subprocess.run(["npm", "view", name, "versions", "--json"], capture_output=True, text=True, timeout=120)
    releases = [v for v in json.loads(done.stdout or "[]") if re.fullmatch(r"\d+\.\d+\.\d+", v)]
    return (releases[-1], releases[-2]) if len(releases) > 1 else (releases[-1] if releases else "?", None)


def _npm_error(text: str) -> str:
    """npm's own words, not its pointer to a log."""
    lines = [line.strip() for line in text.splitlines() if "error" in line and "complete log" not in line]
    telling = [line for word in ("No matching", "not found", "E404", "ETARGET") for line in lines if word in line]
    return re.sub(r"^(npm error )+", "", (telling or lines or ["(nothing said)"])[0])[:200]


def _pythons() -> list[str]:
    """This Python, then newer ones (Mistral Vibe needs 3.12 or newer,
    Aider 0.86 runs on none newer than 3.12): on PATH, or among pyenv's
    versions (whose shims answer only for the global one)."""
    found = [shutil.which(f"python3.{minor}") for minor in (14, 13, 12)]
    found += sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.1[2-9]*/bin/python3")), reverse=True)
    usable = [p for p in filter(None, found)
              if subprocess.run([p, "-c", "import venv"], capture_output=True).returncode == 0]
    return [sys.executable] + usable


def _pip_install(package: str, venv: Path) -> str:
    """In the first Python it installs in (a release may refuse a Python,
    or fail to build on it: Aider 0.86 on 3.13); what the first said, else."""
    failed, current = "", _version_of(venv / "bin" / "python")
    for python in sorted(_pythons(), key=lambda p: _version_of(Path(p)) != current):  # the venv's own first
        if _version_of(venv / "bin" / "python") != _version_of(Path(python)):  # none yet, or of another Python
            subprocess.run([python, "-m", "venv", "--clear", str(venv)], check=True, timeout=300)
        done = subprocess.run([str(venv / "bin" / "pip"), "install", "--quiet", "--upgrade", package],
                              capture_output=True, text=True, timeout=1800)
        if not done.returncode:
            shown = subprocess.run([str(venv / "bin" / "pip"), "show", package], capture_output=True, text=True)
            return re.search(r"^Version: (.+)$", shown.stdout, re.M).group(1)
        needs = re.findall(r"Requires-Python (\S+)", done.stderr)  # pip's reason when no release fits this Python
        failed = failed or (f"it needs Python {needs[-1]}" if needs else _last_line(done.stderr))
    return "install failed: " + failed


def _version_of(python: Path) -> str:
    if not python.exists():
        return ""
    return subprocess.run([str(python), "--version"], capture_output=True, text=True).stdout.strip()


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:200] if lines else "(nothing said)"


def binary_path(agent: Agent, where: Path) -> Path:
    if agent.package.startswith("npm:"):
        return where / "npm" / "node_modules" / ".bin" / agent.binary
    return where / "pypi" / agent.package[5:] / "bin" / agent.binary


# --- running ---------------------------------------------------------------------------------
@dataclass
class Row:
    client: str
    version: str
    wire: str
    keys: str
    plain: str = "-"
    tool: str = "-"
    failing: str = ""  # the first request the server refused, or what the CLI said
    waiting: str = ""  # the open issue it waits on: reported apart, not counted


class Server:
    """A Switchboard on echo (the default registry), keys off or on; its
    access log tells the first request it refused since a mark."""

    def __init__(self, keys: bool):
        self.redis = EmbeddedRedis()
        extra = {"SWITCHBOARD_API_KEYS": f"matrix:{KEY}"} if keys else {}
        self.worker, self.web, self.base = start_stack(stack_env(self.redis.url, **extra), concurrency=8)
        self.mark = 0

    def since_mark(self) -> str:
        """The first answer of 400 or more since the mark, as "METHOD path status"."""
        lines = self.web.output()[self.mark:].splitlines()
        for line in lines:
            try:
                entry = json.loads(line[line.index("{"):])
            except ValueError:
                continue
            if isinstance(entry.get("status"), int) and entry["status"] >= 400:
                return f'{entry.get("method")} {entry.get("path")} {entry["status"]}'
        return ""

    def set_mark(self) -> None:
        self.mark = len(self.web.output())

    def stop(self) -> None:
        stop_together([self.worker, self.web])
        self.redis.stop()


def run_cli(agent: Agent, where: Path, home: Path, work: Path, prompt: str, env: dict) -> tuple[int, str]:
    """One headless run in its own home and folder; (exit code, output)."""
    argv = [str(binary_path(agent, where)), *agent.argv(prompt)]
    path = os.pathsep.join([str(where / "npm" / "node_modules" / ".bin"), os.environ["PATH"]])
    full = {"PATH": path, "HOME": str(home), "TERM": "dumb", "NO_COLOR": "1", "CODEX_HOME": str(home / ".codex"),
            **env}
    with subprocess.Popen(argv, cwd=work, env=full, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, start_new_session=True) as process:
        try:
            output, _ = process.communicate(prompt + "\n" if agent.stdin else "", timeout=RUN_TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            output, _ = process.communicate()
            return -1, (output or "") + f"\n(timed out after {RUN_TIMEOUT} s)"
        except BaseException:  # stopped (Ctrl-C, SIGTERM): the CLI, in a session of its own, goes too
            os.killpg(process.pid, signal.SIGKILL)
            raise
    _stop_left_behind(work)
    return process.returncode, output


def _stop_left_behind(work: Path) -> None:
    """A CLI's daemon that outlives it (Cline's hub) in its folder: stopped."""
    for process in psutil.process_iter(["cwd", "cmdline"]):
        try:
            cmdline = " ".join(process.info["cmdline"] or [])
            if (process.info["cwd"] or "").startswith(str(work)) or str(work) in cmdline:
                process.kill()
        except psutil.Error:
            pass


def set_up(agent: Agent, server: Server, wire: str, keyed: bool, home: Path) -> dict:
    """`admin.py connect`'s files under `home`; the variables of its env blocks."""
    setup = connect.Setup(server=server.base, models=(connect.Model("echo", 131072, 8192),), model="echo",
                          small_model="echo", key=KEY if keyed else None, wire=wire)
    outputs = connect.build(agent.client, setup)
    connect.write(outputs, home, force=False)
    env = {}
    for output in outputs:
        if isinstance(output, connect.EnvBlock):
            env |= output.variables
    if agent.client == "codex" and wire == "websocket":  # its built-in provider: the key is logged in
        subprocess.run([str(binary_path(agent, WHERE)), "login", "--with-api-key"], input=setup.api_key, text=True,
                       env={"PATH": os.environ["PATH"], "HOME": str(home), "CODEX_HOME": str(home / ".codex")},
                       capture_output=True, timeout=60)
    return env | agent.env


def check(agent: Agent, where: Path, server: Server, wire: str, keyed: bool, row: Row) -> Row:
    with tempfile.TemporaryDirectory(prefix=f"matrix-{agent.client}-") as scratch:
        home, work = Path(scratch) / "home", Path(scratch) / "work"
        home.mkdir()
        work.mkdir()
        env = set_up(agent, server, wire, keyed, home)
        server.set_mark()
        code, output = run_cli(agent, where, home, work, PLAIN, env)
        row.plain = "pass" if code == 0 and PLAIN in output else "FAIL"
        refused = server.since_mark()
        server.set_mark()
        target = work / FILE
        code, tool_output = run_cli(agent, where, home, work, agent.tool_round(target), env)
        row.tool = "pass" if target.exists() and target.read_text().strip() == TEXT else "FAIL"
        refused = refused or server.since_mark()
        if "FAIL" in (row.plain, row.tool):
            said = output if row.plain == "FAIL" else tool_output
            row.failing = refused or "none refused; it said: " + _last_line(said)
    return row


def matrix(agents: list[Agent], where: Path, versions: dict[str, str], keys: list[str]) -> list[Row]:
    rows = []
    for keys_on in [k == "on" for k in keys]:
        server = Server(keys_on)
        try:
            for agent in agents:
                version = versions.get(agent.package, "?")
                for wire in agent.wires or connect.CLIENTS[agent.client].wires:
                    row = Row(agent.label or agent.client, version, wire or "-", "on" if keys_on else "off")
                    if version.startswith("install failed"):
                        row.failing = version
                    else:
                        check(agent, where, server, wire, keys_on, row)
                    row.waiting = agent.blocked
                    print(_line(row), flush=True)
                    rows.append(row)
        finally:
            server.stop()
    return rows


# --- the report --------------------------------------------------------------------------------
HEADER = ("client", "version", "wire", "keys", "plain answer", "tool round", "first failing request")


def _line(row: Row) -> str:
    return "| " + " | ".join([row.client, row.version, row.wire, row.keys, row.plain, row.tool,
                              row.failing.replace("|", "\\|")]) + " |"


def report(rows: list[Row], started: datetime, seconds: float) -> str:
    counted = [r for r in rows if not r.waiting]
    passed = sum(r.plain == r.tool == "pass" for r in counted)
    head = (f"# Agent CLIs against Switchboard\n\nThe last run of `python scripts/clients.py` "
            f"({started:%Y-%m-%d %H:%M} UTC, {seconds / 60:.0f} min; commit {_commit()}): the newest release of each "
            f"agent CLI, headless against a Switchboard on echo, set up by `scripts/admin.py connect`. "
            f"A plain answer, then a round of the CLI's own file-writing tool (the file really written), on every "
            f"wire it offers, keys off and on. {passed} of {len(counted)} rows pass both.\n\n")
    text = head + _table(counted)
    waiting = [r for r in rows if r.waiting]
    if waiting:
        text += "\n## Waiting on an open issue (not counted)\n\n" + "".join(
            f"- {r.client}: {r.waiting}\n" for r in {r.client: r for r in waiting}.values()) + "\n" + _table(waiting)
    return text


def _table(rows: list[Row]) -> str:
    return "| " + " | ".join(HEADER) + " |\n|" + "---|" * len(HEADER) + "\n" + "".join(_line(r) + "\n" for r in rows)


def _commit() -> str:
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    return done.stdout.strip() or "?"


def main(argv: list[str] | None = None) -> None:
    global WHERE
    top = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    top.add_argument("--only", help="clients, comma-separated (connect's names)")
    top.add_argument("--keys", default="off,on", help="off, on, or both (default)")
    top.add_argument("--dir", type=Path, default=Path.home() / ".cache" / "switchboard-clients",
                     help="where the CLIs are installed")
    top.add_argument("--no-install", action="store_true", help="use what --dir holds")
    top.add_argument("--out", type=Path, help="write the report there (docs/clients.md)")
    options = top.parse_args(argv)
    stop_on_signals()  # Ctrl-C or SIGTERM stops the Switchboard and Redis it started
    only = set(options.only.split(",")) if options.only else None
    agents = [a for a in AGENTS if only is None or a.client in only]
    WHERE = options.dir
    started, clock = datetime.now(timezone.utc), time.monotonic()
    versions = _installed(agents, options.dir) if options.no_install else install(agents, options.dir)
    print("| " + " | ".join(HEADER) + " |", flush=True)
    rows = matrix(agents, options.dir, versions, options.keys.split(","))
    if options.out:
        options.out.write_text(report(rows, started, time.monotonic() - clock))


def _installed(agents: list[Agent], where: Path) -> dict[str, str]:
    versions = {}
    for agent in agents:
        if agent.package.startswith("npm:"):
            manifest = where / "npm" / "node_modules" / agent.package[4:] / "package.json"
            versions[agent.package] = json.loads(manifest.read_text())["version"] if manifest.exists() else \
                "install failed: not installed"
        else:
            versions[agent.package] = _pip_version(agent.package[5:], where / "pypi" / agent.package[5:])
    return versions


def _pip_version(package: str, venv: Path) -> str:
    shown = subprocess.run([str(venv / "bin" / "pip"), "show", package], capture_output=True, text=True)
    found = re.search(r"^Version: (.+)$", shown.stdout, re.M)
    return found.group(1) if found else "install failed: not installed"


WHERE = Path.home() / ".cache" / "switchboard-clients"

if __name__ == "__main__":
    main()
