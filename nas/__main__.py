"""``python -m nas ...`` runs the command line (the same as the ``nas`` script)."""

from nas.cli.commands import main

main()
