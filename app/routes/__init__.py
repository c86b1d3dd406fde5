"""One blueprint per API."""
