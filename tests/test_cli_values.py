"""`--at` values: numbers or expressions of constants, with an error that says so."""

import math

import pytest

from tidu.cli import CliError, parse_at


def test_a_name_as_a_value_is_reported_as_a_value_error_not_an_unknown_variable():
    with pytest.raises(CliError) as e:
        parse_at("x=abc", ["x"])
    msg = str(e.value)
    assert msg.startswith("--at x=abc: a value is a number or an expression of constants")
    assert "not of the name abc" in msg and "unknown variable" not in msg


def test_constant_expressions_still_evaluate():
    assert parse_at("x=sqrt(2)*pi", ["x"]) == [math.sqrt(2) * math.pi]
    with pytest.raises(CliError, match="unknown variable 'z'"):
        parse_at("z=1", ["x"])
