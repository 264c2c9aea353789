"""A config's name in a narrow cell: one rule for wrapping, shortening and cutting it.

A spec config's label ('ngram-mod,draft-mtp (n-max 2, n-min 1)') breaks at its own seams: after
a chain's commas, before its details' parenthesis, after the details' commas; a piece still too
wide breaks at its spaces. A word wider than the cell then has its types' family prefixes
shortened ('draft-' to 'dr-', 'ngram-' to 'ng-'), and only then is anything cut, with '…'; so is
the last line allowed when more would follow. The whole name is always in the server bar.
"""

from __future__ import annotations

from rich.cells import cell_len, set_cell_size

FAMILIES = (("draft-", "dr-"), ("ngram-", "ng-"))
"""Spec type prefixes and their short forms, for a name wider than its cell (`shorten`)."""


def shorten(name: str) -> str:
    """``name`` with each type's family prefix shortened: 'draft-eagle3' -> 'dr-eagle3',
    'ngram-simple,draft-mtp' -> 'ng-simple,dr-mtp'."""
    parts = []
    for part in name.split(","):
        for long, short in FAMILIES:
            if part.startswith(long):
                part = short + part.removeprefix(long)
                break
        parts.append(part)
    return ",".join(parts)


def fit(value: str, width: int, *, right: bool = False) -> str:
    """``value`` padded to ``width`` cells, or cut with an ellipsis."""
    if cell_len(value) > width:
        return set_cell_size(value, max(0, width - 1)) + "…" if width else ""
    pad = " " * (width - cell_len(value))
    return pad + value if right else value + pad


def _seams(label: str) -> list[tuple[str, str]]:
    """(glue, piece) pairs: the label cut after each comma and before a parenthesis, with the
    space that was there as the glue (a chain's commas have none)."""
    out: list[tuple[str, str]] = []
    glue, piece, index = "", "", 0
    while index < len(label):
        char, after = label[index], label[index + 1 : index + 2]
        if char == ",":
            out.append((glue, piece + ","))
            glue, piece = ("", "") if after != " " else (" ", "")
            index += after == " "  # (that space is the next piece's glue)
        elif char == " " and after == "(":
            out.append((glue, piece))
            glue, piece = " ", ""
        else:
            piece += char
        index += 1
    out.append((glue, piece))
    return [(glue, piece) for glue, piece in out if piece]


def wrap_label(label: str, width: int, lines: int) -> list[str]:
    """``label`` in at most ``lines`` lines of at most ``width`` cells, by the module's rule."""
    if width <= 0:
        return [""]
    pieces: list[tuple[str, str]] = []
    for glue, piece in _seams(label):
        if cell_len(piece) <= width:
            pieces.append((glue, piece))
            continue
        for index, word in enumerate(piece.split(" ")):
            if cell_len(word) > width:
                word = fit(shorten(word), width).rstrip()
            pieces.append((glue if index == 0 else " ", word))
    out: list[str] = []
    for glue, piece in pieces:
        if out and cell_len(out[-1] + glue + piece) <= width:
            out[-1] += glue + piece
        else:
            out.append(piece)
    if len(out) > lines:  # (the last line kept says that more would follow)
        last = out[lines - 1]
        if cell_len(last) + 2 <= width:
            last += " …"
        else:
            last = set_cell_size(last, max(0, width - 1)).rstrip() + "…"
        out = [*out[: lines - 1], last]
    return out or [""]
