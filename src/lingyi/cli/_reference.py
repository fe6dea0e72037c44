"""References generated from the code: every config key, and every check's parameters.

``docs/configuration.md``, the config ``lingyi init`` writes, ``docs/checks.md`` and
``lingyi policy checks`` all come from here, and here everything comes from the pydantic models
(:mod:`lingyi.config`, each check's params model) and the check registry, so documentation
cannot list a key the code does not accept or miss one it does. ``python tests/test_docs.py``
rewrites the two documents; the test fails when they are stale.
"""

from __future__ import annotations

import json
import types
from collections import Counter
from dataclasses import dataclass, field
from enum import Enum
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from lingyi.checks import REGISTRY, CheckSpec, load_builtin_checks
from lingyi.config import ConfigFile
from lingyi.layer import MANDATORY_TOOL_CHECKS
from lingyi.policy import PolicySet

REQUIRED = object()  # a key without a default


@dataclass(frozen=True)
class Key:
    name: str
    type: str
    default: Any  # REQUIRED, None (unset), or the value
    description: str
    example: Any = None


@dataclass
class Table:
    """A TOML table of the config: ``""`` (top level), ``paths``, ``data_sources.NAME``, …"""

    name: str
    header: str
    description: str
    keys: list[Key] = field(default_factory=list)
    example_only: bool = False  # a table with a name the user chooses, or an array of tables


# --------------------------------------------------------------------------- types and values


def type_text(annotation: Any) -> str:
    """A type as a TOML user reads it: ``string``, ``array of strings``, ``"zh" | "en"``."""
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Annotated:  # a validated value (a regex) reads as its plain type
        return type_text(args[0])
    if origin in (Union, types.UnionType):
        return " or ".join(type_text(a) for a in args if a is not type(None))
    if origin is Literal:
        return " | ".join(json.dumps(a, ensure_ascii=False) for a in args)
    if origin is list:
        return "array of " + _plural(type_text(args[0]))
    if origin is dict:
        return "table of " + _plural(type_text(args[1]))
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return " | ".join(json.dumps(m.value, ensure_ascii=False) for m in annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "table (" + ", ".join(annotation.model_fields) + ")"
    names = {str: "string", int: "integer", float: "number", bool: "boolean"}
    return names.get(annotation, getattr(annotation, "__name__", str(annotation)))


def _plural(text: str) -> str:
    """``array of string`` reads ``array of strings``; a literal's values stay as they are."""
    head, _, rest = text.partition(" ")
    if head not in ("string", "integer", "number", "boolean", "array", "table"):
        return text
    return f"{head}s {rest}".rstrip()


def toml_value(value: Any) -> str:
    """A Python value in TOML spelling (strings quoted as JSON, which TOML accepts)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {toml_value(v)}" for k, v in value.items()) + " }"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def _key(name: str, info: FieldInfo) -> Key:
    default = REQUIRED if info.is_required() else info.get_default(call_default_factory=True)
    example = info.examples[0] if info.examples else None
    return Key(name, type_text(info.annotation), default, info.description or "", example)


def _model_of(annotation: Any) -> type[BaseModel] | None:
    return (
        annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None
    )


def model_keys(model: type[BaseModel]) -> list[Key]:
    """The scalar keys of a model (nested tables are left to :func:`config_tables`)."""
    return [_key(n, f) for n, f in model.model_fields.items() if not _is_table(f.annotation)]


def _is_table(annotation: Any) -> bool:
    args = get_args(annotation)
    inner = args[-1] if get_origin(annotation) in (dict, list) and args else annotation
    return _model_of(inner) is not None


# --------------------------------------------------------------------------- the config


def config_tables(model: type[BaseModel] = ConfigFile, prefix: str = "") -> list[Table]:
    """Every table of the config, top level first, each with its keys in model order."""
    top = Table(
        prefix, f"[{prefix}]" if prefix else "", (model.__doc__ or "").strip(), model_keys(model)
    )
    tables = [top]
    for name, info in model.model_fields.items():
        path = f"{prefix}.{name}" if prefix else name
        annotation, args = info.annotation, get_args(info.annotation)
        if (sub := _model_of(annotation)) is not None:
            tables += config_tables(sub, path)
        elif get_origin(annotation) is dict and (sub := _model_of(args[1])) is not None:
            tables += _named(config_tables(sub, f"{path}.NAME"), f"[{path}.NAME]", info)
        elif get_origin(annotation) is list and (sub := _model_of(args[0])) is not None:
            tables += _named(config_tables(sub, path), f"[[{path}]]", info)
    return tables


def _named(tables: list[Table], header: str, info: FieldInfo) -> list[Table]:
    tables[0].header, tables[0].example_only = header, True
    tables[0].description = " ".join(filter(None, [info.description, tables[0].description]))
    return tables


def config_markdown() -> str:
    """docs/configuration.md: every key, its type, its default and what it does."""
    out = [
        "# Configuration reference\n",
        "Generated from the config models in `src/lingyi/config.py` (`python tests/test_docs.py` "
        "rewrites it; a test fails when it is stale). `lingyi init DIR` writes a config with every "
        "key below, defaults as comments.\n",
        "lingyi finds its config in this order: `--config PATH`, `$LINGYI_CONFIG`, "
        "`./config/lingyi.toml`, then the defaults packaged with it. Paths inside the file are "
        "relative to the file (`~` expands). `--log PATH` and `$LINGYI_LOG` override "
        "`paths.log`, `$LINGYI_COUNCIL` overrides `paths.council`. `lingyi config show` prints "
        "what is in effect and where each value came from.\n",
    ]
    for table in config_tables():
        out.append(f"## {'`' + table.header + '`' if table.header else 'Top level'}\n")
        if table.description:
            out.append(table.description + "\n")
        out.append("| key | type | default | description |\n|---|---|---|---|")
        out += [_key_row(k) for k in table.keys]
        out.append("")
    return "\n".join(out)


def _key_row(key: Key, *, described: bool = True) -> str:
    if key.default is REQUIRED:
        default = "required"
    elif key.default is None:
        default = "unset"
    else:
        default = f"`{toml_value(key.default)}`"
    cells = [f"`{key.name}`", key.type, default] + ([key.description] if described else [])
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


def config_template(values: dict[str, Any], named: dict[str, dict[str, Any]]) -> str:
    """A config file listing every key: ``values`` (``"paths.log"`` → value) are set, the
    other keys are comments showing their default; ``named`` fills tables whose name the user
    chooses (``"data_sources.sample"`` → its keys)."""
    out = [
        "# LingYi Guard configuration, written by `lingyi init`.",
        "# Every key is listed. A commented `key = value` line shows the default: remove the `#`",
        "# to change it. Paths are relative to this file. Reference: docs/configuration.md",
        "",
    ]
    for table in config_tables():
        instances = _instances(table, named)
        for name, given in instances.items():
            out += _table_lines(table, f"[{name}]", given, commented=False)
        if not instances:
            given = {
                k.rpartition(".")[2]: v
                for k, v in values.items()
                if k.rpartition(".")[0] == table.name
            }
            out += _table_lines(table, table.header, given, commented=table.example_only)
    return "\n".join(out).rstrip() + "\n"


def _instances(table: Table, named: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The tables given for a table whose name the user chooses (``data_sources.NAME``)."""
    if not table.name.endswith(".NAME"):
        return {}
    parent = table.name.removesuffix(".NAME")
    return {n: v for n, v in named.items() if n.rpartition(".")[0] == parent}


def _table_lines(table: Table, header: str, given: dict[str, Any], *, commented: bool) -> list[str]:
    lines = [f"# {table.description}"] if table.description and header else []
    if header:
        lines.append(f"# {header}" if commented else header)
    for key in table.keys:
        lines += [f"# {key.description}"] if key.description else []
        lines += [_key_line(key, given), ""]
    return lines


def _key_line(key: Key, given: dict[str, Any]) -> str:
    if key.name in given:
        return f"{key.name} = {toml_value(given[key.name])}"
    shown = key.example if key.default is REQUIRED or key.default is None else key.default
    return f"# {key.name} = {toml_value('' if shown is None else shown)}"


# --------------------------------------------------------------------------- the checks


def check_entries(
    policies: PolicySet | None, *, builtin_only: bool = False
) -> list[dict[str, Any]]:
    """Each registered check: code, the stage policies run it in, who runs it, doc, params."""
    load_builtin_checks()
    usage: dict[str, list[tuple[str, str]]] = {}
    for member in policies.members.values() if policies else []:
        for entry in member.checks:
            usage.setdefault(entry.check, []).append((member.id, entry.stage.value))
    specs = [s for s in REGISTRY.values() if not builtin_only or _builtin(s)]
    return [
        _check_entry(spec, usage.get(spec.name, []), policies)
        for spec in sorted(specs, key=lambda s: s.name)
    ]


def _builtin(spec: CheckSpec) -> bool:
    return spec.func.__module__.startswith("lingyi.")


def _check_entry(
    spec: CheckSpec, used: list[tuple[str, str]], policies: PolicySet | None
) -> dict[str, Any]:
    always = spec.name in MANDATORY_TOOL_CHECKS  # the layer runs these on every tool call
    stages = Counter(stage for _, stage in used)
    members = sorted(policies.members) if always and policies else sorted({m for m, _ in used})
    return {
        "code": spec.name,
        "stage": "tool_validation" if always else (stages.most_common(1)[0][0] if stages else None),
        "always": always,
        "used_by": members,
        "module": spec.func.__module__,
        "doc": spec.doc,
        "params": spec.params.model_json_schema(),
    }


_OUTCOMES = """## Comparing a claim with the record: three outcomes

`communication.on_record` (a relay against the council record and recorded work),
`evidence.subject_supported` (a fact against the session's evidence, or the council record of
another member's work) and `evidence.cited_documents` (a fact against the whole text of the
documents it cites) each say in their result's `detail["outcome"]` what they found, with the
records they compared with (`compared_with`, `evidence`, `documents`):

| outcome | when | result |
|---|---|---|
| `entailed` | what the claim states is in the record (values agree, its wording is covered) | passes |
| `contradicted` | the record gives the same quantity, state, version, date or entity another value, or the opposite polarity | fails (`on_fail`) |
| `not_settled` | the record is on the subject but has nothing comparable: one detail with no counterpart, a number of a kind the evidence gives no value of, words across languages the lexicons do not know | `uncertain`, routed by `on_uncertain` |
| `no_record` | nothing on record at all: no message from that member on that subject, a claimed state or action no record makes | fails: a fabrication looks like that |

The shipped policies send `uncertain` to the judge (`on_uncertain = "judge"`); with no judge
configured it passes, degraded, and the result and the log record say `uncertain` (the log
record's `uncertain` lists the codes).

Incidental numbers are no claims about the evidence: list numbering (`1.`, `2)`, `3、`), a
round or an attempt (`round 4`, `第 2 轮`), how many members (`the fewest of the four`), HTTP
status codes (`504`, `the 502s`), week numbers (`w16`). Values derived from the evidence pass
where the text speaks of a total, a difference or arithmetic (`5,140 − 37 = 5,103`, `共 388 条`).

What reads what. Claims are read by two extractors over canonical text (`lingyi.text`):
`lingyi.checks.claims` (relays and the council record: clauses, concepts from the glossary,
states from the status lexicon, negations, counts, bindings of a value to its label, times)
and `lingyi.checks._agreement` (facts and documents: numbers with their unit and kind, names,
titles, counts, owners, orders, findings). Entities (numbers, dates, versions, ids, titles)
come from `lingyi.text.entities`; Chinese numerals from `lingyi.text._zh_numbers` (12400 =
一万二千四百, 两点二十 = 2:20, 没有一个 = none), kept after measuring cn2an 0.5.24, which is ten
times slower (0.10 ms a sentence against 0.01 ms), turns 统一一下 into 统11下 and reads
neither 两点二十 as a time nor 没有一个 as none. Traditional script goes to simplified through
OpenCC (`opencc`), in the canonical form. Cited documents come from the knowledge base
(SQLite FTS5) through the `knowledge_base.document` lookup.
"""


HAND_WRITTEN = "<!-- Hand-written below this line: the generator keeps it as it is. -->"


def hand_written(doc: str) -> str:
    """The part of a generated document after :data:`HAND_WRITTEN` (with the marker)."""
    at = doc.find(HAND_WRITTEN)
    return doc[at:] if at >= 0 else ""


def checks_markdown(entries: list[dict[str, Any]], tail: str = "") -> str:
    """docs/checks.md: each check, where it runs, and its parameters; then ``tail``, the
    hand-written sections (how checks read a text), kept as written."""
    out = [
        "# Checks reference\n",
        "Generated from the check registry and each check's parameters model (`python "
        "tests/test_docs.py` rewrites it; a test fails when it is stale). `lingyi policy checks "
        "--json` prints the same, with each parameters model as JSON Schema. The stage is where "
        "the shipped policies run the check; a policy may put it in another.\n",
        _OUTCOMES,
    ]
    for entry in entries:
        spec = REGISTRY[entry["code"]]
        where = (
            "every tool call (no policy can switch it off)"
            if entry["always"]
            else ", ".join(entry["used_by"]) or "no shipped policy"
        )
        out.append(f"## `{entry['code']}`\n")
        out.append(entry["doc"] + "\n")
        out.append(f"Stage: `{entry['stage'] or '-'}` · runs for: {where}\n")
        keys = [_key(n, f) for n, f in spec.params.model_fields.items()]
        described = any(k.description for k in keys)
        if keys:
            out.append("| parameter | type | default |" + (" description |" if described else ""))
            out.append("|---|---|---|" + ("---|" if described else ""))
            out += [_key_row(k, described=described) for k in keys]
        else:
            out.append("No parameters.")
        out.append("")
    return "\n".join(out) + (tail and "\n" + tail)
