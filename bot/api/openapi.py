"""The OpenAPI document of ``/v1``, served at ``/v1/openapi.json``: its words from
``routes.yaml``, every schema generated from the pydantic models the API reads and writes."""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Any, Final

import yaml
from pydantic import BaseModel
from pydantic.json_schema import JsonSchemaMode, models_json_schema

from bot.api.answers import Problem, Question
from bot.api.body import ApprovalPost, QuestionPost

_REF: Final = "#/components/schemas/{model}"
_MODELS: Final[list[tuple[type[BaseModel], JsonSchemaMode]]] = [
    (QuestionPost, "validation"),
    (ApprovalPost, "validation"),
    (Question, "serialization"),
    (Problem, "serialization"),
]
_HEADERS: Final = {
    "Location": ("The question's URL, /v1/questions/{id}", "string"),
    "Retry-After": ("Seconds to wait before retrying", "integer"),
}
_EVERY_ROUTE: Final[dict[int, Any]] = {
    401: "Missing or wrong bearer token; answered before any of the body is read",
    421: {"$ref": "#/components/responses/Misdirected"},
    500: {"$ref": "#/components/responses/Internal"},
}


def _response(given: str | dict[str, Any]) -> dict[str, Any]:
    """A response from its short form: a Problem's description, or schema/headers/media."""
    spec = {"description": given} if isinstance(given, str) else given
    if "$ref" in spec:
        return spec
    schema = spec.get("schema", "Problem")
    body = {"type": "object"} if schema == "object" else {"$ref": _REF.format(model=schema)}
    response: dict[str, Any] = {"description": spec["description"]}
    if headers := spec.get("headers"):
        response["headers"] = {
            name: {"description": _HEADERS[name][0], "schema": {"type": _HEADERS[name][1]}}
            for name in headers
        }
    response["content"] = {spec.get("media", "application/json"): {"schema": body}}
    return response


def _operation(operation: dict[str, Any]) -> dict[str, Any]:
    """An operation of ``routes.yaml`` in full: its body's schema, every route's answers."""
    if isinstance(body := operation.get("requestBody"), str):
        schema = {"$ref": _REF.format(model=body)}
        operation["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": schema}},
        }
    answers = {**_EVERY_ROUTE, **operation["responses"]}
    operation["responses"] = {str(code): _response(answers[code]) for code in sorted(answers)}
    return operation


@functools.cache
def document() -> dict[str, Any]:
    """The whole document (built once)."""
    made: dict[str, Any] = yaml.safe_load(
        resources.files("bot.api").joinpath("routes.yaml").read_text()
    )
    for item in made["paths"].values():
        item.update({m: _operation(op) for m, op in item.items() if m != "parameters"})
    _, schemas = models_json_schema(_MODELS, by_alias=True, ref_template=_REF)
    parts = made["components"]
    parts["schemas"] = schemas["$defs"]
    parts["responses"] = {name: _response(words) for name, words in parts["responses"].items()}
    return made


@functools.cache
def document_text() -> str:
    """The document as served."""
    return json.dumps(document(), ensure_ascii=False)
