"""``python -m ptkit``: the ``ptkit`` command."""

from ptkit.cli import main

main()
