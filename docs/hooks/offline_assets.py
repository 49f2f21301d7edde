"""MkDocs hook: a site that reads with no network at all.

Material's ``offline`` plugin makes the search work from ``file://`` with the iframe-worker shim, which it
loads from unpkg.com; each page is pointed here at the copy vendored in ``docs/assets/`` instead. (The theme's
web fonts are off in mkdocs.yml for the same reason.) A build whose pages still name another host fails.
"""

from __future__ import annotations

import posixpath
import re

SHIM = "https://unpkg.com/iframe-worker/shim"
LOCAL = "assets/iframe-worker-shim.js"
_EXTERNAL = re.compile(r"""<(?:script|link)\b[^>]*\b(?:src|href)=["'](https?://[^"']+)["']""")


def on_post_page(output: str, page, config) -> str:
    here = posixpath.dirname(page.file.dest_uri)
    output = output.replace(SHIM, posixpath.relpath(LOCAL, here or "."))
    loaded = _EXTERNAL.findall(output)
    if loaded:
        raise RuntimeError(f"{page.file.src_uri} loads {loaded[0]}: the site must read with no network")
    return output
