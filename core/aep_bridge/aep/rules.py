"""Raising a rule violation from inside a pydantic model, with the rule attached."""

from __future__ import annotations

from typing import Final

from pydantic_core import PydanticCustomError

RULE_ERROR: Final = "aep_rule"


def rule_error(rule: str, message: str) -> PydanticCustomError:
    """A pydantic error that carries the rule it enforces, read by `validation.violations_of`."""
    return PydanticCustomError(RULE_ERROR, "{message}", {"rule": rule, "message": message})
