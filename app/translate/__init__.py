"""Pure conversions between the API dialects and the internal job and events.
No Flask, Redis or Celery here: these functions are tested on plain data."""
