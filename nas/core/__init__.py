"""nas.core: the network core, the ground floor every other layer stands on.

The architecture encoding (:mod:`nas.core.arch`) and the bounds of every size a user gives
(:mod:`nas.core.bounds`), the token mixers, blocks and stems (:mod:`nas.core.ops`), the model builder
(:mod:`nas.core.model`, :mod:`nas.core.create`), and the small helpers everything shares: files replaced
atomically (:mod:`nas.core.atomic`), the one reader of user files (:mod:`nas.core.userfiles`), how a message
names an option (:mod:`nas.core.option_names`), a rate limit (:mod:`nas.core.throttle`). It imports nothing
of this project's above it (the import-linter contract in ``pyproject.toml``).
"""
