"""Print the SHA-256 digest of an API key, for the keys file: the server
stores digests, never keys. Usage: python scripts/hash_key.py (reads stdin)."""
import getpass
import hashlib
import sys

key = sys.stdin.readline().strip() if not sys.stdin.isatty() else getpass.getpass("API key: ")
print(hashlib.sha256(key.encode()).hexdigest())
