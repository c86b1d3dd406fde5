from tests.unit.scripted import scripted  # noqa: F401  (fixture for route tests)
