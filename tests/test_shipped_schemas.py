"""The tools' output schemas come from ``src/lingyi/server/output_schemas.json`` at start.

The file is generated (``python tests/test_docs.py``, which also fails when it is stale); the
server publishes what it holds instead of asking pydantic to derive each schema again, and
derives a schema only for a model the file does not have (an upstream's or a plugin's), or
when the file was made by another pydantic or SDK, or is missing or damaged. Either way what
tools/list publishes is byte for byte what the models derive now.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from pydantic.json_schema import GenerateJsonSchema

from lingyi.server import GuardApp, build_server, schemas
from lingyi.server.executors import IMPLEMENTATIONS
from lingyi.server.schemas import model_key, shipped_schema
from lingyi.server.tools import _OWN, ToolTable, derived_schema, output_models, output_schema
from lingyi.verdict import Guarded, SearchHits, Verdict
from tests.test_server import Deployment, deploy, listed_tools

TOOL_MODELS = {name: impl.output for name, impl in IMPLEMENTATIONS.items()} | {
    name: model for name, (_, model) in _OWN.items()
}


class PluginResult(BaseModel):
    """A result model the shipped file cannot know (a plugin's, an upstream's own)."""

    rows: list[str]
    note: str | None = None


@pytest.fixture
def dep(tmp_path: Path) -> Deployment:
    return deploy(tmp_path / "deploy")


@pytest.fixture
def fresh_file() -> Iterator[None]:
    """The shipped file is read once per process: read it again around a test that changes
    what it finds, and forget what that test saw afterwards."""
    schemas._shipped.cache_clear()
    yield
    schemas._shipped.cache_clear()


def test_tools_list_publishes_exactly_what_the_models_derive(dep: Deployment) -> None:
    """Every tool of the guard (its policy tools and its own) is published over MCP with the
    schema pydantic derives from its result model now, flattened as before: the same keys
    in the same order."""
    listed = listed_tools(dep)
    assert set(TOOL_MODELS) <= set(listed)
    for name, model in TOOL_MODELS.items():
        published = json.dumps(listed[name].output_schema, ensure_ascii=False)
        assert published == json.dumps(derived_schema(model), ensure_ascii=False), name


def _counting_generator(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    original = GenerateJsonSchema.generate

    def generate(self: GenerateJsonSchema, *args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(GenerateJsonSchema, "generate", generate)
    return calls


def test_the_server_builds_without_generating_an_output_schema(
    dep: Deployment, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the shipped file, building the tool table asks pydantic for no JSON schema (what
    made it ~80 ms of every start); a model the file lacks still is derived. (The SDK derives
    the one resource template's argument schema itself, as for any server.)"""
    calls = _counting_generator(monkeypatch)
    app = GuardApp(dep.config())
    try:
        ToolTable(app)
        assert calls == []
        build_server(app)  # the whole server builds too
    finally:
        app.close()
    calls.clear()
    assert output_schema(PluginResult) == derived_schema(PluginResult)
    assert calls != []


def test_the_file_holds_every_model_the_guard_serves() -> None:
    """Each output model of the guard's tools (and an upstream tool's) is in the file, and
    a fresh copy is handed out each time (no tool shares another's schema object)."""
    for model in output_models():
        found = shipped_schema(model)
        assert found == derived_schema(model), model_key(model)
        assert found is not shipped_schema(model)


@pytest.mark.parametrize(
    ("model", "key"),
    [
        (Verdict, "lingyi.verdict.Verdict"),
        (Guarded[SearchHits], "lingyi.verdict.Guarded[lingyi.verdict.SearchHits]"),
        (dict[str, Any], "dict[str, typing.Any]"),
        (PluginResult, "tests.test_shipped_schemas.PluginResult"),
    ],
    ids=str,
)
def test_models_are_named_by_module_and_class(model: Any, key: str) -> None:
    """A model's key names where it is defined, and a generic by its origin and arguments
    (``Guarded[X]`` is the same wherever it was parametrised)."""
    assert model_key(model) == key


def test_a_model_the_file_does_not_have_is_derived() -> None:
    """A plugin's model, and one defined inside a function (no stable name), are derived."""

    class Local(BaseModel):
        value: int

    assert model_key(Local) is None
    for model in (PluginResult, Local, Guarded[PluginResult]):
        assert shipped_schema(model) is None
        assert output_schema(model) == derived_schema(model)
        assert output_schema(model)["properties"]


@pytest.mark.parametrize(
    "found",
    [
        {"pydantic": "1.0.0"},  # another pydantic may derive other schemas
        {"mcp": "0.1.0"},  # so may another SDK's generator
    ],
    ids=["other pydantic", "other SDK"],
)
def test_a_file_made_by_other_versions_is_not_used(
    monkeypatch: pytest.MonkeyPatch, fresh_file: None, found: dict[str, str]
) -> None:
    """When the installed pydantic or SDK is not the one the file was made by, every
    schema is derived (and is what was published before)."""
    real = schemas.versions()
    monkeypatch.setattr(schemas, "versions", lambda: {**real, **found})
    for model in output_models():
        assert shipped_schema(model) is None
        assert output_schema(model) == derived_schema(model)


def test_an_sdk_without_metadata_means_deriving(
    monkeypatch: pytest.MonkeyPatch, fresh_file: None
) -> None:
    """An SDK installed without its package metadata (vendored): its version is unknown, so
    the file is not trusted, and the server still starts with the derived schemas."""
    import importlib.metadata

    def missing(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", missing)
    assert schemas.versions()["mcp"] == ""
    assert shipped_schema(Verdict) is None
    assert output_schema(Verdict) == derived_schema(Verdict)


@pytest.mark.parametrize("text", [None, "", "{not json", "[]", '{"schemas": 1}'])
def test_a_missing_or_damaged_file_means_deriving(
    monkeypatch: pytest.MonkeyPatch, fresh_file: None, tmp_path: Path, text: str | None
) -> None:
    """No file, an empty, truncated or foreign-shaped one: the server still starts and
    publishes the derived schemas."""
    package = tmp_path / "package"
    package.mkdir()
    if text is not None:
        (package / schemas.SHIPPED).write_text(text, encoding="utf-8")
    monkeypatch.setattr(schemas.resources, "files", lambda _: package)
    model = Guarded[SearchHits]
    assert shipped_schema(model) is None
    assert output_schema(model) == derived_schema(model)


def test_a_stale_file_is_what_the_docs_test_catches(
    monkeypatch: pytest.MonkeyPatch, fresh_file: None, tmp_path: Path
) -> None:
    """The other side: a file whose schema differs from the model's (a model changed, the
    file not regenerated) is published as it is, which is why tests/test_docs.py compares
    the shipped file with ``schemas_file()`` and fails."""
    from lingyi.server.tools import schemas_file

    body = json.loads(schemas_file())
    key = str(model_key(Verdict))
    body["schemas"][key] = {"type": "object", "title": "stale"}
    package = tmp_path / "package"
    package.mkdir()
    (package / schemas.SHIPPED).write_text(json.dumps(body), encoding="utf-8")
    monkeypatch.setattr(schemas.resources, "files", lambda _: package)
    assert shipped_schema(Verdict) == {"type": "object", "title": "stale"}
    assert json.dumps(body, ensure_ascii=False, indent=1) + "\n" != schemas_file()
