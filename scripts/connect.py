"""`admin.py connect`'s side on the person's machine: the set-ups
catalog/agent_setups.py builds, printed or written under their home."""
from __future__ import annotations

from pathlib import Path

from catalog.agent_setups import (  # noqa: F401 (admin.py and the tests reach the builders here)
    CLIENTS, HELPER_CLIENTS, KEY_VARIABLE, PLACEHOLDER_KEY, Client, ConfigFile, EnvBlock, Model, Output, Setup, build,
    pick_small_model, served_models,
)


def write(outputs: Output, home: Path, force: bool) -> list[str]:
    """Each file in its place under `home`. An existing file is never
    replaced without `force`; with it, it is kept as `<name>.bak`. Returns
    what was done, a line each."""
    targets = [(home / o.path.removeprefix("~/"), o) for o in outputs]
    existing = [str(path) for path, _ in targets if path.exists()]
    if existing and not force:
        raise FileExistsError("not written: " + ", ".join(existing) + " already exist (--force replaces them, "
                                                                      "keeping each as .bak)")
    done = []
    for path, output in targets:
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists():
            path.replace(path.with_name(path.name + ".bak"))
            done.append(f"kept the old {path} as {path.name}.bak")
        path.write_text(output.text)
        path.chmod(0o600)  # it may hold the key
        done.append(f"wrote {path}" + (f" (source it: . {path})" if isinstance(output, EnvBlock) else ""))
    return done


def shown(outputs: Output) -> str:
    """What is printed without --write: each file's path and text."""
    parts = []
    for output in outputs:
        title = f"# {output.path}" + (f": {output.about}" if output.about else "")
        if isinstance(output, EnvBlock):
            title += " (or run these lines in your shell)"
        parts.append(f"{title}\n{output.text}")
    return "\n".join(parts)
