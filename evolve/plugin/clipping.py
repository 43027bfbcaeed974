"""Shortening a long text for storage or a prompt without losing its ends.

The end of a prompt holds the instructions and the end of a reply its conclusion, so a long
text keeps its head and its tail and loses its middle, cut at line breaks where one is near.
"""

from __future__ import annotations


def middle_truncate(text: str, limit: int) -> str:
    """`text` if it has at most `limit` characters; else its head and tail, cut at line breaks
    where one is near, around a "[... N characters omitted ...]" line, at most `limit`
    characters in all (only a `limit` too small for the marker cuts the end instead)."""
    if len(text) <= limit:
        return text
    room = limit - len(_marker(len(text))) - 2  # the marker's line and the breaks around it
    if room < 2:
        return text[:limit]
    head, tail = _head(text, (room + 1) // 2), _tail(text, room // 2)
    omitted = len(text) - len(head) - len(tail)
    shown = head.removesuffix("\n")  # the marker's own line break stands for it
    return f"{shown}\n{_marker(omitted)}\n{tail}"


def _marker(omitted: int) -> str:
    return f"[... {omitted} characters omitted ...]"


def _head(text: str, size: int) -> str:
    """The first `size` characters, shortened to end at a line break in their second half."""
    cut = text.rfind("\n", size // 2, size)
    return text[: cut + 1] if cut != -1 else text[:size]


def _tail(text: str, size: int) -> str:
    """The last `size` characters, shortened to start after a line break in their first half."""
    if size == 0:
        return ""
    start = len(text) - size
    cut = text.find("\n", start, start + size // 2)
    return text[cut + 1 :] if cut != -1 else text[start:]
