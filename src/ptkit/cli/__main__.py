"""``python -m ptkit.cli``: the ``ptkit`` command (as ``python -m ptkit``)."""

from ptkit.cli import main

main()
