"""How often the guard's detection (guard/detect.py) fires on ordinary
source: `python scripts/guard_corpus.py [FOLDER ...]` (default: this tree,
its agents' node_modules included, and the installed site-packages; no
hidden folder, no file twice) scans every text file of the usual source
kinds, as an agent would send it, and prints the megabytes read, the
findings per kind, their rate per 10 MB, the time taken, and where each
finding is (file, line, kind; the value masked). Every finding in such a
corpus is a false alarm unless it is one of the test fixtures' own
secrets, which the listing lets a reader tell apart."""
from __future__ import annotations

import argparse
import sys
import sysconfig
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from guard.detect import find  # noqa: E402

SUFFIXES = {".py", ".js", ".mjs", ".ts", ".json", ".toml", ".yaml", ".yml", ".md", ".txt", ".cfg", ".ini", ".html",
            ".css", ".sh", ".c", ".h", ".go", ".rs", ".java", ".lock"}
LARGEST = 2_000_000  # bytes: a file larger than this is data, not source


def files(folders: list[Path]):
    seen = set()
    for folder in folders:
        for path in folder.rglob("*"):
            relative = path.relative_to(folder).parts
            if path.suffix in SUFFIXES and path.is_file() and not path.is_symlink() and \
                    path.stat().st_size <= LARGEST and not any(part.startswith(".") for part in relative) and \
                    path.resolve() not in seen:
                seen.add(path.resolve())
                yield path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", nargs="*", type=Path)
    options = parser.parse_args()
    root = Path(__file__).resolve().parents[1]
    folders = options.folders or [p for p in (root, Path(sysconfig.get_paths()["purelib"])) if p.exists()]
    read, kinds, where, started = 0, Counter(), [], time.perf_counter()
    for path in files(folders):
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        read += len(text.encode())
        for finding in find(text):
            kinds[finding.kind] += 1
            line = text.count("\n", 0, finding.start) + 1
            value = finding.value(text)
            where.append(f"{path}:{line}: {finding.kind} {value[:4]}…({len(value)})")
    seconds = time.perf_counter() - started
    total = sum(kinds.values())
    print(f"read {read / 1e6:.1f} MB in {seconds:.1f} s ({read / 1e6 / seconds:.1f} MB/s); {total} findings, "
          f"{total / (read / 1e7):.2f} per 10 MB")
    for kind, count in kinds.most_common():
        print(f"  {kind}: {count}")
    print("\n".join(where))


if __name__ == "__main__":
    main()
