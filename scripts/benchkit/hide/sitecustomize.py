"""Put on PYTHONPATH of an older source tree's processes by the scaling
benchmark (scale.py): libraries that the newer tree added and that other
packages pick up by themselves when installed (redis-py uses hiredis's
parser) are made unimportable, so the older tree runs as it did."""
import sys

for name in ("hiredis",):
    sys.modules[name] = None  # `import hiredis` raises ImportError
