"""`python -m workers -P gevent -c 100 -Q upstream-completion,upstream`: a
worker, started by Celery's own `worker` command with all of its options,
but without the umbrella `celery` command around it. That one imports every
subcommand, and `celery amqp`'s interactive shell brings prompt_toolkit and
pygments into the process: 16 MB resident in every worker, which never reads
a terminal."""
from celery import maybe_patch_concurrency

maybe_patch_concurrency()  # first: with -P gevent, the monkey patches precede every import that opens a socket

from celery.bin.base import CLIContext  # noqa: E402
from celery.bin.worker import worker  # noqa: E402

from queue_config import app  # noqa: E402


def main() -> None:
    worker.main(prog_name="python -m workers", obj=CLIContext(app=app, no_color=None, workdir=None, quiet=False))


if __name__ == "__main__":
    main()
