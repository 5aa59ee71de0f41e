"""JSON text as JavaScript's ``JSON.stringify`` writes it (the seam's messages and the tool's
output): non-ASCII kept, a lone UTF-16 surrogate escaped (``json.dumps`` writes it raw, which no
UTF-8 encoder accepts)."""

from __future__ import annotations

import json
import re
from typing import Final

_LONE_SURROGATE: Final = re.compile("[\ud800-\udfff]")


def stringify(value: object) -> str:
    """``JSON.stringify(value)``: compact, non-ASCII as it is, lone surrogates escaped."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    if not _LONE_SURROGATE.search(text):
        return text
    # A surrogate pair split over two code points is one character to JavaScript.
    text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    return _LONE_SURROGATE.sub(lambda found: f"\\u{ord(found.group()):04x}", text)
