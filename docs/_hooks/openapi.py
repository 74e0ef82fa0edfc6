"""A MkDocs hook: the HTTP API page is the server's own OpenAPI document, rendered to Markdown at
build time.

The document is the one ``create_app(...)`` serves at ``GET /openapi.json`` (asked for over ASGI,
with agents and the chat routes on, so every route appears), so the page cannot drift from the
server. A page asks for it with the line ``<!-- openapi -->``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent.parent
MARKER = "<!-- openapi -->"
#: Route groups, by the first segment of the path, in the page's order.
GROUPS = (("/streams", "Streams"), ("/runs", "Runs"), ("/api/", "Chat (useChat)"),
          ("/", "Operations"))


def served_document() -> dict[str, Any]:
    """``GET /openapi.json`` of an app with every route group on (streams, runs, chat)."""
    if str(ROOT / "src") not in sys.path:
        sys.path.insert(0, str(ROOT / "src"))  # document the checkout being built
    from starlette.testclient import TestClient

    from streamwire.log.memory import MemoryLog
    from streamwire.runs.demo_agent import demo
    from streamwire.server import create_app

    app = create_app(MemoryLog(), token="docs-build", agents=[demo], chat_agent="demo")
    with TestClient(app) as client:  # with its lifespan, as a server runs it
        answer = client.get("/openapi.json")
    answer.raise_for_status()
    document: dict[str, Any] = answer.json()
    return document


def _name(ref: str) -> str:
    return ref.rsplit("/", 1)[-1]


def _type(schema: dict[str, Any]) -> str:
    """A schema in one line of Markdown."""
    if "$ref" in schema:
        name = _name(schema["$ref"])
        return f"[`{name}`](#schema-{name.lower()})"
    for key in ("oneOf", "anyOf"):
        if key in schema:
            return " or ".join(_type(s) for s in schema[key])
    if "enum" in schema:
        return " \\| ".join(f"`{json.dumps(v)}`" for v in schema["enum"])
    kind = schema.get("type")
    if isinstance(kind, list):
        return " or ".join(f"`{k}`" for k in kind)
    if kind == "array":
        return f"array of {_type(schema.get('items', {}))}"
    if kind is None:
        return "any JSON"
    limits = [f"{k} `{schema[k]}`" for k in ("minimum", "maximum", "minLength", "maxLength",
                                            "pattern") if k in schema]
    return f"`{kind}`" + (f" ({', '.join(limits)})" if limits else "")


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _fields(schema: dict[str, Any]) -> list[str]:
    """A table of an object's properties (empty when the schema is not an object with some)."""
    if schema.get("type") == "array":
        schema = schema.get("items", {})
    properties: dict[str, Any] = schema.get("properties", {})
    if not properties:
        return []
    required = set(schema.get("required", []))
    rows = ["| field | type | required | description |", "|---|---|---|---|"]
    rows += [f"| `{name}` | {_type(s)} | {'yes' if name in required else 'no'} | "
             f"{_cell(s.get('description', ''))} |" for name, s in properties.items()]
    return rows


def _resolve(document: dict[str, Any], item: dict[str, Any], kind: str) -> dict[str, Any]:
    if "$ref" in item:
        resolved: dict[str, Any] = document["components"][kind][_name(item["$ref"])]
        return resolved
    return item


def _operation(document: dict[str, Any], method: str, path: str, op: dict[str, Any],
               shared: list[dict[str, Any]]) -> list[str]:
    out = [f"### `{method.upper()} {path}`", "", op.get("summary", ""), ""]
    if op.get("description"):
        out += [op["description"], ""]
    if op.get("security"):
        out += ["Needs write access (with `create_app(token=...)`: "
                "`Authorization: Bearer <token>`).", ""]
    parameters = [_resolve(document, p, "parameters") for p in [*shared, *op.get("parameters", [])]]
    if parameters:
        out += ["| parameter | in | type | required | description |", "|---|---|---|---|---|"]
        out += [f"| `{p['name']}` | {p['in']} | {_type(p.get('schema', {}))} | "
                f"{'yes' if p.get('required') else 'no'} | {_cell(p.get('description', ''))} |"
                for p in parameters]
        out.append("")
    body = op.get("requestBody")
    if body:
        for media, content in body["content"].items():
            schema = content.get("schema", {})
            out += [f"Request body (`{media}`): {_type(schema)}", ""]
            table = _fields(schema) if "$ref" not in schema else []
            out += [*table, ""] if table else []
            if "example" in content:
                out += ["```json", json.dumps(content["example"], indent=2), "```", ""]
    out += ["| answer | what | body |", "|---|---|---|"]
    for status, answer in op.get("responses", {}).items():
        answer = _resolve(document, answer, "responses")
        bodies = [f"`{media}` {_type(c.get('schema', {}))}"
                  for media, c in answer.get("content", {}).items()]
        headers = [f"header `{h}`" for h in answer.get("headers", {})]
        out.append(f"| {status} | {_cell(answer.get('description', ''))} | "
                   f"{', '.join(bodies + headers)} |")
    return [*out, ""]


def render(document: dict[str, Any]) -> str:
    """The whole document as Markdown: the routes by group, then the schemas."""
    info = document["info"]
    out = [f"*{info['title']}*, API version {info['version']}: {info.get('description', '')}", ""]
    done: set[str] = set()
    for prefix, title in GROUPS:
        paths = [p for p in document["paths"] if p.startswith(prefix) and p not in done]
        if not paths:
            continue
        out += [f"## {title}", ""]
        for path in paths:
            done.add(path)
            item = document["paths"][path]
            shared = item.get("parameters", [])
            for method, op in item.items():
                if method != "parameters":
                    out += _operation(document, method, path, op, shared)
    out += ["## Schemas", ""]
    for name, schema in document["components"]["schemas"].items():
        out += [f"### `{name}` {{#schema-{name.lower()}}}", ""]
        if schema.get("description"):
            out += [schema["description"], ""]
        if schema.get("type") == "array":
            out += [f"An array of {_type(schema.get('items', {}))}:", ""]
        table = _fields(schema)
        out += [*table, ""] if table else [_type(schema), ""]
        if "example" in schema:
            out += ["```json", json.dumps(schema["example"], indent=2), "```", ""]
    return "\n".join(out)


def on_page_markdown(markdown: str, **_: Any) -> str:
    """Replace the marker line with the rendered document."""
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, render(served_document()))
