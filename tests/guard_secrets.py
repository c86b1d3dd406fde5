"""Secrets as an agent reads them from a project (made up, but shaped as the
real ones: the guard's detectors must find them), shared by the guard's
tests: a cloud key pair, a private key, a database URL with its password."""
from __future__ import annotations

AWS_KEY_ID = "AKIAQ3EGRH5LZ6NR4TUV"
AWS_SECRET = "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"
PRIVATE_KEY = ("-----BEGIN OPENSSH PRIVATE KEY-----\n"
               "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n"
               "QyNTUxOQAAACDq1Hq8mR7XoY3kVt0Qe9Lw5pZ2cJxN4sGfA8uBvT6yKwAAAJgh3f4dId3+\n"
               "-----END OPENSSH PRIVATE KEY-----")
DB_PASSWORD = "Vq7Lm2Xr9Tz4Np"
DATABASE_URL = f"postgres://app:{DB_PASSWORD}@db.internal:5432/app"
VALUES = (AWS_KEY_ID, AWS_SECRET, PRIVATE_KEY, DB_PASSWORD)
# A project's environment file, as a tool result shows it.
ENV_FILE = (f"AWS_ACCESS_KEY_ID={AWS_KEY_ID}\nAWS_SECRET_ACCESS_KEY={AWS_SECRET}\nDATABASE_URL={DATABASE_URL}\n"
            f"DEPLOY_KEY=\"{PRIVATE_KEY}\"\n")


def leaked(text: str) -> list[str]:
    """Which of the secrets (or the private key's body) `text` holds, in any form a JSON body carries them."""
    body_line = PRIVATE_KEY.splitlines()[1]
    return [value for value in (*VALUES, body_line) if value in text or value.replace("\n", "\\n") in text]
