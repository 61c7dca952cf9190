"""How the operator commands print: the three output formats, and the building blocks of the views
people read.

``--output`` picks the format:

- ``table``: Rich tables, fields and panels for people. On a terminal they fit its width, a row
  one line all the same: ids whole, longer text cut with an ellipsis (:class:`Rows`); anywhere
  else they are drawn as wide as their widest line, so a row is one line and no cell is folded or
  cut (``inbots agents list --output table | grep``).
- ``tsv``: a header line of the API's field names, then one line per record. Nested objects are
  dotted columns (``deliveries.failed``), lists of plain values are joined with commas, lists of
  records (a delivery's attempts, a thread's messages) are left to ``json``. A tab, a line break,
  a carriage return or a backslash inside a value is written ``\\t``, ``\\n``, ``\\r``, ``\\\\``;
  a value holding a double quote is quoted as in CSV, so ``csv`` with a tab delimiter reads it.
- ``json``: the API's answer, verbatim.

Without ``--output``, a list prints ``table`` on a terminal and ``tsv`` anywhere else; any other
answer prints ``table`` (never wrapped off a terminal).
"""

from __future__ import annotations

import csv
import io
import json
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from rich import box
from rich.console import Console, ConsoleOptions, ConsoleRenderable, RenderableType, RenderResult
from rich.measure import Measurement
from rich.style import StyleType
from rich.table import Table
from rich.text import Text

Json = dict[str, Any]

out = Console(soft_wrap=True)

MORE = "more: --all for every page"
# Lists of records inside an answer, by name, so that an empty one is known too: a tsv row is one
# line, so these are left to --output json.
NESTED_RECORDS = frozenset({"attempts", "messages", "deliveries"})
_TSV_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})
_UNBOUNDED = 1_000_000  # a width no answer reaches: measuring against it finds the natural one


class Output(StrEnum):
    TABLE = "table"
    JSON = "json"
    TSV = "tsv"


def on_terminal() -> bool:
    """Whether stdout is a terminal (a person reading), rather than a pipe or a file."""
    return sys.stdout.isatty()


# ---------------------------------------------------------------------------------------------
# printing an answer


def show_list(
    page: Json, human: Callable[[list[Json]], Table], output: Output | None = None
) -> None:
    """A page of a list (``{"items": [...], "next_cursor": ...}``) in the chosen format."""
    chosen = output or (Output.TABLE if on_terminal() else Output.TSV)
    more = bool(page.get("next_cursor"))
    if chosen is Output.JSON:
        print_json(page)
    elif chosen is Output.TSV:
        print_tsv(page["items"])
        if more:  # tsv has no place for the cursor; say so where a script's output is not
            print(MORE, file=sys.stderr)
    else:
        grid = human(page["items"])
        if more:
            grid.caption = MORE
        print_human(grid)


def show_record(
    answer: Json, human: Callable[[Json], RenderableType], output: Output | None = None
) -> None:
    """One answer (a record, or what a command did) in the chosen format."""
    if output is Output.JSON:
        print_json(answer)
    elif output is Output.TSV:
        print_tsv([answer])
    else:
        print_human(human(answer))


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def print_tsv(records: Sequence[Json]) -> None:
    rows = [_flat(record) for record in records]
    header = list(dict.fromkeys(key for row in rows for key in row))
    writer = csv.writer(sys.stdout, delimiter="\t", lineterminator="\n")
    if header:
        writer.writerow(header)
    for row in rows:
        writer.writerow([tsv_cell(row.get(key)) for key in header])


def tsv_cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(tsv_cell(item) for item in value)
    return str(value).translate(_TSV_ESCAPES)


def _flat(record: Json, prefix: str = "") -> Json:
    row: Json = {}
    for key, value in record.items():
        if isinstance(value, dict):
            row |= _flat(value, f"{prefix}{key}.")
        elif isinstance(value, list) and (
            key in NESTED_RECORDS or any(isinstance(item, dict) for item in value)
        ):
            continue
        else:
            row[prefix + key] = value
    return row


def print_human(renderable: RenderableType) -> None:
    """For people. Off a terminal the page is as wide as its widest line needs (at least what
    Rich would use: ``COLUMNS``, else 80), so tables never fold or cut a cell."""
    if on_terminal():
        out.print(renderable)
        return
    probe = Console(width=_UNBOUNDED, file=io.StringIO())
    widest = Measurement.get(probe, probe.options, renderable).maximum
    Console(width=max(out.width, widest), soft_wrap=True).print(renderable)


def say(line: str) -> None:
    """One plain sentence on stdout (what a command did, when it answers nothing else)."""
    out.print(line, markup=False, highlight=False)


# ---------------------------------------------------------------------------------------------
# building blocks of the views


# An Inbots id (``msg_`` and 26 base32 characters, :mod:`inbots.kit.ids`): a cell holding one is
# kept whole, whatever its column is called.
_ID = re.compile(r"[a-z]{2,4}_[0-9a-z]{26}")
_SHORT = 12  # a column whose cells are all this short (a time, a count, a state) is never cut


class Rows(Table):
    """A table whose every row is one line. A column holding ids is never wrapped or cut (it
    keeps the ids' width, so one can be pasted into the next command), nor is a column of short
    values (a time, a count, a state); the other text is cut with an ellipsis to what the
    terminal leaves it. Cells are taken as plain text, never as Rich markup."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.ids: set[int] = set()  # the columns holding ids
        self.long: set[int] = set()  # the columns holding text longer than _SHORT

    def add_row(
        self,
        *renderables: RenderableType | None,
        style: StyleType | None = None,
        end_section: bool = False,
    ) -> None:
        cells = [self._one_line(i, value) for i, value in enumerate(renderables)]
        super().add_row(*cells, style=style, end_section=end_section)

    def _one_line(self, index: int, value: RenderableType | None) -> RenderableType | None:
        text = Text(value) if isinstance(value, str) else value
        if index >= len(self.columns) or not isinstance(text, Text):
            return value
        column = self.columns[index]
        if _ID.fullmatch(text.plain):
            self.ids.add(index)
            column.min_width = max(column.min_width or 0, text.cell_len)
            text.no_wrap, text.overflow = True, "ignore"
        else:
            if text.cell_len > _SHORT:
                self.long.add(index)
            if text.no_wrap is None:
                text.no_wrap, text.overflow = True, "ellipsis"
        # Rich shrinks only the columns that may wrap: those of longer free text.
        column.no_wrap = index in self.ids or index not in self.long
        return text


def table(columns: Sequence[str], title: str | None = None) -> Table:
    """A table for people, one line a row (:class:`Rows`): ids whole, other text cut to fit."""
    grid = Rows(title=title, box=box.SIMPLE_HEAD, header_style="bold", title_justify="left")
    for column in columns:
        grid.add_column(
            Text(column, no_wrap=True, overflow="ellipsis"),
            overflow="ellipsis",
            no_wrap=True,  # until a cell of longer text comes
            min_width=len(column),
        )
    return grid


def fields(rows: Iterable[tuple[str, Any]]) -> Table:
    """A two-column grid of labels and values (plain values or anything Rich renders)."""
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    for label, value in rows:
        grid.add_row(label, value if isinstance(value, ConsoleRenderable) else Text(plain(value)))
    return grid


class Prose:
    """Text to read, like a message body: it wraps (and folds a word too long for a line) to the
    width it is given, where the console's soft wrap would crop it inside a panel; and it asks
    for no width, so off a terminal a long paragraph does not stretch the page its tables set."""

    def __init__(self, text: str, style: str = "") -> None:
        self.text = Text(text, style=style, no_wrap=False, overflow="fold")

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield self.text

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement(1, 1)


def plain(value: Any) -> str:
    """A value for people: a dash for nothing, yes or no, lists joined with commas."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):
        return ", ".join(map(plain, value)) or "—"
    return str(value)


def cell(value: Any) -> str:
    """A value for a table cell: :func:`plain`, on one line, so a row stays one line (a tab is
    a space too: Rich expands it to the next tab stop, which can push a cell past its width)."""
    return " ".join(plain(value).splitlines()).replace("\t", " ")


def when(value: str | None) -> str:
    """An RFC 3339 stamp as ``YYYY-MM-DD HH:MM:SS`` (UTC), or a dash."""
    return value[:19].replace("T", " ") if value else "—"


def ago(value: str | None) -> str:
    """How long ago an RFC 3339 stamp was, compactly (``42s ago``, ``5m ago``, ``2d ago``)."""
    if not value:
        return "—"
    elapsed = (datetime.now(UTC) - datetime.fromisoformat(value)).total_seconds()
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if elapsed >= size:
            return f"{int(elapsed // size)}{unit} ago"
    return f"{max(int(elapsed), 0)}s ago"


def seconds(value: float | None) -> str:
    if value is None:
        return "—"
    minutes, secs = divmod(int(value), 60)
    return f"{minutes} min {secs} s" if minutes else f"{value:.1f} s"


def mask(secret: str) -> str:
    return secret[:10] + "…" if len(secret) > 10 else "…"
