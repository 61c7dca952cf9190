"""The derived state of a delivery in SQL: the rules of :mod:`inbots.deliveries.state` turned into
a ``CASE`` expression (:func:`state_sql`) and a ``WHERE`` clause (:func:`state_filter`)."""

from __future__ import annotations

import functools
from typing import Any

from sqlalchemy import ColumnElement, and_, case, false, literal, not_, or_, true

from inbots.deliveries.state import RULES, Rule


def _condition(rule: Rule, entity: Any) -> ColumnElement[bool]:
    if rule.stamp is None:
        return true()
    column = getattr(entity, rule.stamp)
    parts = [column.is_not(None)]
    for name in rule.newer_than:
        other = getattr(entity, name)
        parts.append(or_(other.is_(None), column > other))
    parts += [getattr(entity, name).is_(None) for name in rule.unless]
    return and_(*parts)


# Both are built once per entity (and state): an expression is immutable, and building one
# again is some hundred attribute operations per request for the operator's views.


@functools.cache
def state_sql(entity: Any) -> ColumnElement[str]:
    """A SQL expression evaluating to the state, for selecting it alongside a row."""
    whens = [(_condition(rule, entity), literal(rule.state)) for rule in RULES[:-1]]
    return case(*whens, else_=literal(RULES[-1].state))


@functools.cache
def state_filter(entity: Any, state: str) -> ColumnElement[bool]:
    """A WHERE clause true exactly for deliveries in ``state``: its rule, and no earlier one."""
    for index, rule in enumerate(RULES):
        if rule.state == state:
            earlier = [_condition(r, entity) for r in RULES[:index]]
            return and_(_condition(rule, entity), *(not_(c) for c in earlier))
    return false()
