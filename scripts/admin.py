"""The operator's command line, against the same keys file and Redis as the
server (SWITCHBOARD_KEYS_FILE, REDIS_URL; or --keys-file, --redis-url):

    python scripts/admin.py keys add alice --models 'smollm2*' --daily-tokens 200000
    python scripts/admin.py keys add ops --admin          # may open /admin
    python scripts/admin.py keys revoke alice
    python scripts/admin.py keys list
    python scripts/admin.py budget reset carol           # carol may spend her whole daily budget again today
    python scripts/admin.py ps                            # what runs now, like `ollama ps`
    python scripts/admin.py usage [--day 2026-11-23] [--json]
    python scripts/admin.py usage --from 2026-11-01 --to 2026-11-30 --format csv   # per day, for billing
    python scripts/admin.py connect pi --url http://office-box:11434 --key sb-... [--wire responses] [--write]
    python scripts/admin.py login --url https://switchboard.office   # a person: sign in once (office sign-in)
    python scripts/admin.py token                         # ...and print a key valid for a while (agents' helper)

A new key is printed once; the file keeps only its SHA-256 digest. The file
is edited with tomlkit, so the operator's comments and layout stay; web
processes read it again when it changes (within a second).
"""
from __future__ import annotations

import argparse
import getpass
import json
import os
import secrets
import socket
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Callable

import tomlkit
from redis.exceptions import RedisError

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# A person's own commands (login, token) need none of the operator's modules below, and an agent's helper
# runs `token` each time it needs a key: they start before those are imported.
if __name__ == "__main__" and sys.argv[1:2] in (["login"], ["token"]):
    from scripts.credentials import main as person_main
    person_main(sys.argv[1:])
    raise SystemExit(0)

from app.console import snapshot  # noqa: E402
from catalog.registry import load_registry  # noqa: E402
from identity.keys import BY_HAND_AUTHOR, digest, public_view, read_keys_file  # noqa: E402
from ledger import audit, usage  # noqa: E402
from protocol.connection import RedisTarget, redis_client  # noqa: E402
from protocol.keys import configure  # noqa: E402
from scripts import connect, credentials  # noqa: E402
from settings import settings_from_environment  # noqa: E402

KEY_PREFIX = "sb-"


def new_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


# --- keys ---------------------------------------------------------------------------------
def _document(path: Path) -> tomlkit.TOMLDocument:
    return tomlkit.parse(path.read_text()) if path.exists() else tomlkit.document()


Announce = Callable[[list], None]


def _write(path: Path, document: tomlkit.TOMLDocument, announce: Announce = lambda keys: None) -> None:
    """Replace the file whole (a web process never reads half of it), and
    only with one the server accepts; `announce` is told its keys first
    (the audit log's author)."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(tomlkit.dumps(document))
    os.chmod(temporary, 0o600)
    try:
        keys = read_keys_file(temporary)
    except (ValueError, KeyError) as error:
        temporary.unlink()
        raise SystemExit(f"not written: {error}") from None
    announce(keys)
    temporary.replace(path)


def add_key(path: Path, name: str, options: argparse.Namespace, announce: Announce = lambda keys: None) -> str:
    document = _document(path)
    keys = document.setdefault("keys", tomlkit.table(is_super_table=True))
    if name in keys:
        raise SystemExit(f'a key named "{name}" is already in {path}; revoke it first')
    key = new_key()
    table = tomlkit.table()
    table["sha256"] = digest(key)
    for field in ("models", "max_concurrent", "requests_per_minute", "weight", "daily_tokens", "mcp_servers"):
        value = getattr(options, field)
        if value is not None:
            table[field] = value
    for flag in ("admin", "log_bodies"):
        if getattr(options, flag, False):
            table[flag] = True
    keys[name] = table
    _write(path, document, announce)
    return key


def revoke_key(path: Path, name: str, announce: Announce = lambda keys: None) -> None:
    document = _document(path)
    if name not in document.get("keys", {}):
        raise SystemExit(f'no key named "{name}" in {path}')
    del document["keys"][name]
    _write(path, document, announce)


def author(options: argparse.Namespace, path: Path) -> Announce:
    """Logs the change in the audit log before the file is replaced (with
    this operator and machine as its author), after any change made by hand
    that no process logged yet; with Redis away, the web processes log it
    when they read the file (as a change by hand)."""
    def announce(keys: list) -> None:
        before = public_view(read_keys_file(path)) if path.exists() else {}
        host = socket.gethostname()
        try:
            redis, settings = _redis(options)
            audit.record_change(redis, "keys", before, audit.Author(BY_HAND_AUTHOR, host), settings.audit_log_days)
            audit.record_change(redis, "keys", public_view(keys),
                                audit.Author(f"{getpass.getuser()} with scripts/admin.py", host),
                                settings.audit_log_days)
        except RedisError as error:
            print(f"(not in the audit log yet: {error}; web processes will log it as a change by hand)",
                  file=sys.stderr)
    return announce


def list_keys(path: Path) -> list[dict]:
    return [{"name": k.name, "models": list(k.models), "max_concurrent": k.max_concurrent,
             "requests_per_minute": k.requests_per_minute, "weight": k.weight, "daily_tokens": k.daily_tokens,
             "mcp_servers": list(k.mcp_servers), "admin": k.admin, "log_bodies": k.log_bodies}
            for k in read_keys_file(path)]


# --- what runs, who used what -----------------------------------------------------------------
def _table(headers: list[str], rows: list[list]) -> str:
    cells = [headers] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells)


def ps_text(status: dict) -> str:
    loaded = [[m["name"], m["pool"], m["context_length"], f'{m["expires_in"]} s' if m["expires_in"] else "-"]
              for m in status["models"] if m["loaded"]]
    workers = [[w["host"], w["pid"], ",".join(w["queues"]), w["busy"], max(w["slots"] - w["busy"], 0)]
               for w in status["workers"]]
    queues = [[q["pool"], q["waiting"]] for q in status["queues"]]
    deployments = [[d["model"], d["name"], d["state"] + (f' ({d["rest_seconds"]} s)' if d["rest_seconds"] else ""),
                    f'{d["in_flight"]}/{d["max"] or "-"}' + (f' +{d["waiting"]} in line' if d.get("waiting") else ""),
                    d["requests"], d["failures"]]
                   for d in status["deployments"]]
    return "\n\n".join([_table(["MODEL", "POOL", "CONTEXT", "UNTIL"], loaded),
                        *([_table(["MODEL", "DEPLOYMENT", "STATE", "IN FLIGHT", "REQUESTS", "FAILURES"], deployments)]
                          if deployments else []),
                        _table(["HOST", "PID", "QUEUES", "BUSY", "FREE"], workers),
                        _table(["POOL", "WAITING"], queues),
                        f"active streams: {status['active_streams']}"])


def usage_text(day: str, report: dict) -> str:
    rows = [[person, model] + [counts[m] for m in usage.METRICS]
            for person, models in sorted(report.items()) for model, counts in sorted(models.items())]
    return f"usage on {day} (UTC)\n" + _table(["PERSON", "MODEL", "REQUESTS", "PROMPT", "COMPLETION", "ERRORS",
                                               "ABORTS"], rows)


# --- the command line ----------------------------------------------------------------------------
def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="scripts/admin.py", description="Switchboard's operator tool.")
    top.add_argument("--keys-file", type=Path, help="default: $SWITCHBOARD_KEYS_FILE")
    top.add_argument("--redis-url", help="default: $REDIS_URL")
    commands = top.add_subparsers(dest="command", required=True)
    keys = commands.add_parser("keys", help="add, revoke or list API keys").add_subparsers(dest="action",
                                                                                           required=True)
    add = keys.add_parser("add", help="add a key and print it (once)")
    add.add_argument("name")
    add.add_argument("--models", nargs="+", help="fnmatch patterns (default: all)")
    add.add_argument("--max-concurrent", type=int)
    add.add_argument("--requests-per-minute", type=int)
    add.add_argument("--weight", type=float)
    add.add_argument("--daily-tokens", type=int)
    add.add_argument("--mcp-servers", nargs="+")
    add.add_argument("--admin", action="store_true", help="may open the console and read all usage")
    add.add_argument("--log-bodies", action="store_true", help="keep its prompts and replies in the request log")
    keys.add_parser("revoke", help="remove a key").add_argument("name")
    keys.add_parser("list", help="the keys and their limits (never the keys)")
    budget = commands.add_parser("budget", help="reset a person's daily token budget for today").add_subparsers(
        dest="action", required=True)
    budget.add_parser("reset", help="their tokens so far today stop counting against it (usage keeps them)"
                      ).add_argument("person")
    commands.add_parser("ps", help="what runs now")
    report = commands.add_parser("usage", help="usage per person and model: a day, or per day over a range")
    report.add_argument("--day", help="a UTC date (default: today)")
    report.add_argument("--json", action="store_true", help="the day's report as JSON")
    report.add_argument("--from", dest="first", help="with --to: the first UTC date of a range (per day rows)")
    report.add_argument("--to", dest="last", help="the last UTC date of the range (default: today)")
    report.add_argument("--format", choices=("table", "csv", "json"), default="table",
                        help="a range's rows as a table, CSV or JSON (with the estimated cost where the registry "
                             "gives a price)")
    link = commands.add_parser("connect", help="print (or --write) a client's config for this server: its "
                                               "URL, your key and every model it may use, with their windows")
    link.add_argument("client", choices=list(connect.CLIENTS))
    link.add_argument("--url", help="the server as clients reach it (default: http://<this host>:11434)")
    link.add_argument("--key", help="your key (default: a placeholder; no key is ever taken from elsewhere)")
    link.add_argument("--sign-in", action="store_true",
                      help="the key from `admin.py token` after `admin.py login` (Claude Code, Codex): renewed by "
                           "the client itself, never written in its config")
    link.add_argument("--model", help="the model it starts with (default: the registry's first chat model)")
    link.add_argument("--small-model", help="for its background calls (default: a background model, else --model)")
    link.add_argument("--wire", help="the API it speaks, for a client with several (default: its first)")
    link.add_argument("--write", action="store_true", help="write the files under your home instead of printing")
    link.add_argument("--force", action="store_true", help="with --write: replace files, keeping each as .bak")
    link.add_argument("--home", type=Path, default=Path.home(), help=argparse.SUPPRESS)
    credentials.add_commands(commands)
    return top


def connect_setup(options: argparse.Namespace, registry, keys_file: Path | None) -> connect.Setup:
    """The models the key may use: all, when the server has no keys file."""
    allowed = lambda name: True  # noqa: E731
    if options.key and keys_file is not None and keys_file.exists():
        key = next((k for k in read_keys_file(keys_file) if k.sha256 == digest(options.key)), None)
        if key is None:
            raise SystemExit(f"--key: not a key of this server (not in {keys_file})")
        allowed = key.allows
    models = connect.served_models(registry, allowed)
    if not models:
        raise SystemExit("no chat model this key may use")
    names = [m.name for m in models]
    for flag, name in (("--model", options.model), ("--small-model", options.small_model)):
        if name is not None and name not in names:
            raise SystemExit(f"{flag}: {name!r} is not a chat model this key may use ({', '.join(names)})")
    model = options.model or names[0]
    models = tuple(sorted(models, key=lambda m: m.name != model))  # the first is the one a list-reading client starts with
    return connect.Setup(server=(options.url or f"http://{socket.gethostname()}:11434").rstrip("/"), models=models,
                         model=model, small_model=options.small_model or connect.pick_small_model(
                             registry, models, model), key=options.key, wire=options.wire or "",
                         helper=_helper(options))


def _helper(options: argparse.Namespace) -> tuple[str, ...]:
    """`admin.py token` as this machine runs it, for the client to call."""
    if not options.sign_in:
        return ()
    server = (options.url or f"http://{socket.gethostname()}:11434").rstrip("/")
    return (sys.executable, str(Path(__file__).resolve()), "token", "--url", server)


def run_connect(options: argparse.Namespace) -> None:
    keys_file = options.keys_file or (Path(os.environ["SWITCHBOARD_KEYS_FILE"])
                                      if os.environ.get("SWITCHBOARD_KEYS_FILE") else None)
    setup = connect_setup(options, load_registry(settings_from_environment().models_path), keys_file)
    try:
        outputs = connect.build(options.client, setup)
    except ValueError as error:
        raise SystemExit(str(error)) from None
    if not options.write:
        print(connect.shown(outputs), end="")
        return
    try:
        print("\n".join(connect.write(outputs, options.home, options.force)))
    except FileExistsError as error:
        raise SystemExit(str(error)) from None


def _keys_file(options: argparse.Namespace) -> Path:
    path = options.keys_file or (Path(os.environ["SWITCHBOARD_KEYS_FILE"])
                                 if os.environ.get("SWITCHBOARD_KEYS_FILE") else None)
    if path is None:
        raise SystemExit("no keys file: set SWITCHBOARD_KEYS_FILE or pass --keys-file")
    return path


def _redis(options: argparse.Namespace):
    settings = settings_from_environment()
    target = RedisTarget.of(settings)
    if options.redis_url:
        target = replace(target, url=options.redis_url)
    configure(target.url)
    return redis_client(target, "switchboard-admin", 2), settings


def main(argv: list[str] | None = None) -> None:
    options = parser().parse_args(argv)
    if options.command in ("login", "token"):
        return credentials.run(options)
    if options.command == "connect":
        return run_connect(options)
    if options.command == "keys":
        path = _keys_file(options)
        if options.action == "add":
            print(add_key(path, options.name, options, author(options, path)))
            print(f'(key "{options.name}" added to {path}; it is shown only now)', file=sys.stderr)
        elif options.action == "revoke":
            revoke_key(path, options.name, author(options, path))
            print(f'key "{options.name}" revoked', file=sys.stderr)
        else:
            print(json.dumps(list_keys(path), indent=2))
        return
    redis, settings = _redis(options)
    if options.command == "ps":
        print(ps_text(snapshot(redis, load_registry(settings.models_path))))
    elif options.command == "budget":
        print(reset_budget(redis, settings, options.person))
    elif options.first or options.last:
        print(usage_export(redis, load_registry(settings.models_path), options), end="")
    else:
        day = options.day or usage.today()
        report = usage.usage(redis, day)
        print(json.dumps({"day": day, "by_person_and_model": report}, indent=2) if options.json
              else usage_text(day, report))


def reset_budget(redis, settings, person: str) -> str:
    """Reset it, and say so in the audit log (who, from where, what they had used)."""
    used = usage.reset_budget(redis, person)
    audit.append(redis, [{"time": time.time(), "who": f"{getpass.getuser()} with scripts/admin.py",
                          "from": socket.gethostname(), "action": "budget reset", "target": person,
                          "details": {"tokens_used_today": used}}], settings.audit_log_days)
    return f"{person}'s daily budget reset ({used} tokens used today until now, still in their usage)"


def usage_export(redis, registry, options: argparse.Namespace) -> str:
    last = options.last or usage.today()
    try:
        rows = usage.rows(redis, options.first or last, last, registry.prices())
    except ValueError as error:
        raise SystemExit(f"--from/--to: {error} (dates like 2026-11-01)") from None
    if options.format == "json":
        return json.dumps(rows, indent=2) + "\n"
    if options.format == "csv":
        return usage.as_csv(rows)
    return _table(list(usage.COLUMNS), [[row[c] if row[c] is not None else "-" for c in usage.COLUMNS]
                                         for row in rows]) + "\n"


if __name__ == "__main__":
    main()
