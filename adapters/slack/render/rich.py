"""Pure builders of ``rich_text`` blocks: asker text shown exactly as typed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from adapters.slack.blockkit import MAX_SECTION_TEXT
from adapters.slack.render.mrkdwn import reveal, shorten

Block = dict[str, Any]
Piece = dict[str, Any]


def words(text: str, **style: bool) -> Piece:
    """One literal ``text`` element, styled with ``bold``/``italic``/``code`` flags."""
    piece: Piece = {"type": "text", "text": reveal(text)}
    chosen = {name: True for name, on in style.items() if on}
    if chosen:
        piece["style"] = chosen
    return piece


def bold(text: str) -> Piece:
    """A bold literal text element."""
    return words(text, bold=True)


def italic(text: str) -> Piece:
    """An italic literal text element."""
    return words(text, italic=True)


def rich_line(pieces: Sequence[Piece]) -> Block:
    """One ``rich_text_section``: a line of pieces (a blank one holds a space)."""
    kept = [piece for piece in pieces if piece["text"]]
    return {"type": "rich_text_section", "elements": kept or [words(" ")]}


def rich_text(*pieces: Piece, limit: int = MAX_SECTION_TEXT) -> Block:
    """A ``rich_text`` block of one line of pieces, their total cut to ``limit`` characters."""
    return {"type": "rich_text", "elements": [rich_line(_cut(list(pieces), limit))]}


def rich_list(items: Sequence[Sequence[Piece]], *, ordered: bool = False, offset: int = 0) -> Block:
    """A bulleted or numbered ``rich_text_list``: a wrapped line stays under its own bullet."""
    listed: Block = {
        "type": "rich_text_list",
        "style": "ordered" if ordered else "bullet",
        "elements": [rich_line(line) for line in items],
    }
    if ordered and offset:
        listed["offset"] = offset
    return listed


def _cut(pieces: list[Piece], limit: int) -> list[Piece]:
    """``pieces`` with their text cut so that it totals at most ``limit`` characters."""
    out: list[Piece] = []
    left = limit
    for piece in pieces:
        text = piece["text"]
        if len(text) > left:
            out.append({**piece, "text": shorten(text, left)})
            break
        out.append(piece)
        left -= len(text)
    return out
