"""nas.cli: the ``nas`` command line, the top floor: each command parses its options, builds what it runs
from the layers below, and calls one function there (:mod:`nas.cli.commands`); the live view of a training
(:mod:`nas.cli.train_view`).
"""
