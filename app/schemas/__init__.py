"""Pydantic wire models per API. Requests ignore unknown fields (clients such
as Copilot send extras like `copilot_cache_control`); responses are built by
the translate modules."""
