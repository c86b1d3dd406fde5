"""Typed errors of the worker side; the front end renders them per API."""


class SwitchboardError(Exception):
    """Base class. `status` is the HTTP status a client should see;
    `retry_after`, when set, the seconds it should wait."""

    status = 500
    retry_after: int | None = None


class RegistryError(SwitchboardError):
    """The model registry is invalid; the server refuses to start."""


class UnknownModel(SwitchboardError):
    status = 404

    def __init__(self, name: str):
        super().__init__(f'model "{name}" not found, try pulling it first')
        self.name = name


class UnknownBackend(RegistryError):
    def __init__(self, name: str, known: list[str]):
        super().__init__(f'unknown backend "{name}" (known: {", ".join(sorted(known))})')


class BackendError(SwitchboardError):
    """A job could not be run; the message is safe to show to the client
    (it never contains a key)."""

    def __init__(self, message: str, status: int = 500, retry_after: int | None = None):
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after
