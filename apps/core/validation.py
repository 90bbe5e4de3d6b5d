"""Files people upload (exports to import): text PostgreSQL can keep, and a Pydantic validation
error told in one sentence of our own rather than the parser's."""

from __future__ import annotations

import json
from typing import Annotated

from pydantic import AfterValidator, ValidationError

# The longest part of a field's path quoted back: keys come from the file, and may be huge.
PATH_PART_CHARS = 40

_PROBLEMS = {
    "missing": "is missing",
    "string_type": "should be text",
    "dict_type": "should be an object",
    "model_type": "should be an object",
    "model_attributes_type": "should be an object",
    "list_type": "should be a list",
    "int_type": "should be a whole number",
    "int_parsing": "should be a whole number",
    "int_from_float": "should be a whole number",
    "float_type": "should be a number",
    "float_parsing": "should be a number",
    "finite_number": "should be a finite number",
    "bool_type": "should be true or false",
    "string_too_short": "is empty",
    "enum": "is not one of the values Thalamus knows",
    "literal_error": "is not one of the values Thalamus knows",
    "datetime_type": "should be a date and time",
    "datetime_parsing": "should be a date and time",
    "datetime_from_date_parsing": "should be a date and time",
    "text_too_long": "is too long to keep",
    "string_unicode": "holds a character that is not text (a lone surrogate)",
}


def storable_text(value: str) -> str:
    """`value` less what PostgreSQL's text refuses: NUL characters, and lone surrogates (which
    JSON's \\ud800 escapes make and UTF-8 cannot encode)."""
    return value.replace("\x00", "").encode("utf-8", "ignore").decode("utf-8")


StorableText = Annotated[str, AfterValidator(storable_text)]


class UnreadableJSON(ValueError):
    """Bytes that are not a JSON document, with a sentence saying why."""


def json_load(data: bytes, *, name: str) -> object:
    """The JSON document in `data`, or UnreadableJSON saying in one sentence what is wrong.

    NaN and Infinity, which Python's parser accepts and JSON does not have, are refused too.
    """
    try:
        return json.loads(data.decode("utf-8-sig"), parse_constant=_not_json)
    except UnicodeDecodeError:
        raise UnreadableJSON(f"{name} is not a text file (it is not UTF-8)") from None
    except json.JSONDecodeError as exc:
        raise UnreadableJSON(
            f"{name} is not valid JSON (it goes wrong at line {exc.lineno}, column {exc.colno})"
        ) from None
    except ValueError:
        # NaN, or a number of more digits than Python will read.
        raise UnreadableJSON(f"{name} holds a number that is not one JSON can have") from None
    except RecursionError:
        raise UnreadableJSON(f"{name} nests lists or objects too deeply") from None


def _not_json(constant: str) -> None:
    raise ValueError(constant)


def validation_problem(error: ValidationError, *, whole: str = "the file") -> str:
    """The first problem Pydantic found, as words ending a sentence: "“memories[2].kind” is not
    one of the values Thalamus knows", or "`whole` should be an object" when the value itself
    is wrong. Nothing of the input is repeated."""
    first = error.errors(include_url=False, include_input=False, include_context=True)[0]
    problem = _PROBLEMS.get(first["type"], "is not valid")
    context = first.get("ctx") or {}
    if first["type"] == "string_too_long":
        problem = f"is longer than {context['max_length']} characters"
    elif first["type"] in ("greater_than_equal", "greater_than"):
        problem = f"should be at least {context.get('ge', context.get('gt'))}"
    elif first["type"] in ("less_than_equal", "less_than"):
        problem = f"should be at most {context.get('le', context.get('lt'))}"
    path = ""
    for part in first["loc"]:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            part = str(part)
            part = part if len(part) <= PATH_PART_CHARS else part[:PATH_PART_CHARS] + "…"
            path += f".{part}" if path else part
    return f"“{storable_text(path)}” {problem}" if path else f"{whole} {problem}"
