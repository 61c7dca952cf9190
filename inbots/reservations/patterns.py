"""Whether two path patterns can match a common path: the one rule reservations, their check,
``GET /v1/reservations?path=`` and the git guard all judge conflicts by.

A pattern is a repository-relative path split on ``/``. In a segment ``*`` matches any run of
characters but ``/`` (empty too); a segment that is exactly ``**`` matches any number of whole
segments, none included; a trailing ``/`` means the directory and all inside it (``src/api/`` is
``src/api/**``). Any other character matches itself (``?`` and ``[`` too). Empty and ``.``
segments are dropped. So ``src/api/**`` covers ``src/api`` itself as well as everything under it.

Pure: no database, no settings. :func:`overlaps` decides by walking both patterns at once
(memoised, quadratic in their lengths), never by listing paths.
"""

from __future__ import annotations

from functools import lru_cache

GLOBSTAR = "**"


def segments(pattern: str) -> tuple[str, ...]:
    """``pattern`` as its segments: empty and ``.`` ones dropped, a trailing ``/`` read as
    ``/**``, runs of ``**`` segments made one."""
    parts = [p for p in pattern.split("/") if p not in ("", ".")]
    if pattern.endswith("/"):
        parts.append(GLOBSTAR)
    out: list[str] = []
    for part in parts:
        if part == GLOBSTAR and out and out[-1] == GLOBSTAR:
            continue
        out.append(part)
    return tuple(out)


@lru_cache(maxsize=4096)
def _segments_meet(p: str, q: str) -> bool:
    """Whether two segment patterns (``*`` wildcards only) have a common non-empty match. Any
    common match is non-empty: segments of a pattern are never empty, and two all-``*``
    segments share every string."""
    memo: dict[tuple[int, int], bool] = {}

    def meet(i: int, j: int) -> bool:
        key = (i, j)
        if key in memo:
            return memo[key]
        if i == len(p) and j == len(q):
            found = True
        elif i < len(p) and p[i] == "*":
            # The star matches nothing more, or takes q's next character (or q's star's share).
            found = meet(i + 1, j) or (j < len(q) and meet(i, j + 1))
        elif j < len(q) and q[j] == "*":
            found = meet(i, j + 1) or (i < len(p) and meet(i + 1, j))
        elif i < len(p) and j < len(q):
            found = p[i] == q[j] and meet(i + 1, j + 1)
        else:
            found = False
        memo[key] = found
        return found

    return meet(0, 0)


def _meet(a: tuple[str, ...], b: tuple[str, ...]) -> bool:
    memo: dict[tuple[int, int], bool] = {}

    def meet(i: int, j: int) -> bool:
        key = (i, j)
        if key in memo:
            return memo[key]
        if i == len(a) and j == len(b):
            found = True
        elif i < len(a) and a[i] == GLOBSTAR:
            # ``**`` stops here, or takes the path segment b[j] stands for (every other segment
            # pattern matches some segment).
            found = meet(i + 1, j) or (j < len(b) and meet(i, j + 1))
        elif j < len(b) and b[j] == GLOBSTAR:
            found = meet(i, j + 1) or (i < len(a) and meet(i + 1, j))
        elif i < len(a) and j < len(b):
            found = _segments_meet(a[i], b[j]) and meet(i + 1, j + 1)
        else:
            found = False
        memo[key] = found
        return found

    return meet(0, 0)


def overlaps(first: str, second: str) -> bool:
    """Whether some path matches both patterns: equal patterns, a literal path inside a glob, a
    glob inside a directory glob, two globs that cross (``src/*.py`` and ``src/a*``)."""
    return _meet(segments(first), segments(second))
