"""The overlap rule of reservations (:mod:`inbots.reservations.patterns`), against a brute-force
reference: every path of up to four segments over a two-letter alphabet, matched one by one."""

from __future__ import annotations

import fnmatch
import itertools
from functools import cache

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inbots.reservations.patterns import overlaps, segments

# Segment patterns over {a, b}: a segment both match never needs more than two letters.
SEGMENTS = ["a", "b", "ab", "*", "a*", "*b", "*a*", "**"]
WITNESS_SEGMENTS = ["".join(p) for n in (1, 2) for p in itertools.product("ab", repeat=n)]
PATHS = [
    "/".join(parts)
    for depth in range(1, 5)
    for parts in itertools.product(WITNESS_SEGMENTS, repeat=depth)
]


@cache
def _matches(pattern: tuple[str, ...], path: tuple[str, ...]) -> bool:
    """The reference: one pattern against one path, by the definition (``**`` any number of whole
    segments, else fnmatch within one segment)."""
    if not pattern:
        return not path
    head, rest = pattern[0], pattern[1:]
    if head == "**":
        return any(_matches(rest, path[k:]) for k in range(len(path) + 1))
    return bool(path) and fnmatch.fnmatchcase(path[0], head) and _matches(rest, path[1:])


def reference(first: str, second: str) -> bool:
    a, b = segments(first), segments(second)
    return any(_matches(a, tuple(p.split("/"))) and _matches(b, tuple(p.split("/"))) for p in PATHS)


# Up to three segments, a trailing slash (the directory and everything inside it: one more
# ``**``) included. Two such patterns that meet share a path of at most four segments: without a
# ``**`` a pattern fixes the depth (three), and with one in each, each has at most two others.
patterns = st.lists(st.sampled_from(SEGMENTS), min_size=1, max_size=3).map("/".join)
directories = st.lists(st.sampled_from(SEGMENTS), min_size=1, max_size=2).map(
    lambda parts: "/".join(parts) + "/"
)
written = st.one_of(patterns, directories)


@settings(max_examples=400, deadline=None)
@given(written, written)
def test_overlap_agrees_with_the_brute_force_reference(first: str, second: str) -> None:
    assert overlaps(first, second) == reference(first, second)


@settings(max_examples=200, deadline=None)
@given(written, written)
def test_overlap_is_symmetric(first: str, second: str) -> None:
    assert overlaps(first, second) == overlaps(second, first)


@settings(max_examples=200, deadline=None)
@given(written)
def test_a_pattern_overlaps_itself(pattern: str) -> None:
    assert overlaps(pattern, pattern)


@pytest.mark.parametrize(
    ("first", "second", "expected"),
    [
        ("src/api/app.py", "src/api/app.py", True),
        ("src/api/app.py", "src/api/**", True),
        ("src/api/app.py", "src/api/", True),
        ("src/api/**", "src/**", True),
        ("src/api/", "src/", True),
        ("docs/*.md", "docs/api.md", True),
        ("docs/*.md", "docs/api/x.md", False),
        ("docs/**/*.md", "docs/api/x.md", True),
        ("src/*.py", "src/a*", True),
        ("src/*.py", "src/*.md", False),
        ("src/api/**", "src/web/**", False),
        ("src/api/app.py", "src/api/app.pyc", False),
        ("**", "anything/at/all", True),
        ("src/api", "src/api/x.py", False),  # a literal is that one path
        ("a/**/b", "a/b", True),
        ("a/**/b", "a/x/y/b", True),
        ("a/**/b", "a/x/y/c", False),
        ("./src/x.py", "src//x.py", True),
    ],
)
def test_known_pairs(first: str, second: str, expected: bool) -> None:
    assert overlaps(first, second) is expected
    assert overlaps(second, first) is expected


def test_the_reference_itself_tells_apart() -> None:
    """The reference is not vacuous: it finds overlaps and disjoint pairs."""
    assert reference("a/*", "*/b") and not reference("a/*", "b/*")
    assert reference("a/**", "**/b/a") and not reference("a*", "b*")
