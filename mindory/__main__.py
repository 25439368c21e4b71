"""``python -m mindory``: the same as the ``mindory`` command."""

from mindory.cli import main

main()
