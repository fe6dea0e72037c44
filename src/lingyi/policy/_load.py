"""Loading ``validators/*.toml`` into a validated :class:`PolicySet` (errors name file and key)."""

from __future__ import annotations

import hashlib
import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from lingyi.checks import REGISTRY, load_builtin_checks
from lingyi.errors import PolicyError
from lingyi.policy._lexicon import Lexicon, lexicon_fields, lexicon_path, load_lexicon
from lingyi.policy._model import CheckEntry, MemberPolicy, PolicySet, _CommonFile, _MemberFile


def load_policies(folder: Path) -> PolicySet:
    """Load and validate every policy file in ``folder``; raise PolicyError on the first bad key."""
    load_builtin_checks()
    if not folder.is_dir():
        raise PolicyError(str(folder), "-", "policy folder not found")
    files = sorted(folder.glob("*.toml"))
    common = [c for f in files if f.name.startswith("_") for c in _load_common(f).checks]
    members = [_load_member(f, common) for f in files if not f.name.startswith("_")]
    if not members:
        raise PolicyError(str(folder), "-", "no member policy files (*.toml) found")
    lexicons = _load_lexicons(folder, members)
    return PolicySet(
        members={m.id: m for m in members},
        aliases=_alias_map(members),
        version=_version(files + [Path(x.path) for x in lexicons.values()]),
        lexicons=lexicons,
    )


def _load_lexicons(folder: Path, members: list[MemberPolicy]) -> dict[str, Lexicon]:
    """Every lexicon a check parameter names, loaded once (errors name the policy key)."""
    loaded: dict[str, Lexicon] = {}
    for member in members:
        for i, entry in enumerate(member.checks):
            for name, ref in lexicon_fields(entry.parsed):
                if ref not in loaded:
                    key = f"checks[{i}].params.{name}"
                    loaded[ref] = load_lexicon(lexicon_path(folder, ref, member.source, key))
    return loaded


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise PolicyError(str(path), "-", f"not valid TOML: {exc}") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise PolicyError(str(path), "-", f"cannot read: {exc}") from exc


def _validate(model: type[BaseModel], data: dict[str, Any], path: Path) -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise PolicyError(str(path), _key(err["loc"]), err["msg"]) from exc


def _key(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "-"


def _load_common(path: Path) -> _CommonFile:
    common: _CommonFile = _validate(_CommonFile, _read_toml(path), path)
    _parse_checks(common.checks, path)
    return common


def _load_member(path: Path, common: list[CheckEntry]) -> MemberPolicy:
    raw: _MemberFile = _validate(_MemberFile, _read_toml(path), path)
    _parse_checks(raw.checks, path)
    _check_tool_filters(raw, path)
    for i, name in enumerate(raw.disable):
        if name not in {c.check for c in common}:
            raise PolicyError(str(path), f"disable[{i}]", f"no shared check named {name!r}")
    shared = [c for c in common if c.check not in raw.disable]
    return MemberPolicy(
        id=raw.member.lower(),
        name=raw.name,
        aliases=raw.aliases,
        description=raw.description,
        language=raw.language,
        tools=raw.tools,
        checks=shared + raw.checks,
        source=str(path),
    )


def _parse_checks(entries: list[CheckEntry], path: Path) -> None:
    for i, entry in enumerate(entries):
        spec = REGISTRY.get(entry.check)
        if spec is None:
            known = ", ".join(sorted(REGISTRY))
            raise PolicyError(
                str(path), f"checks[{i}].check", f"unknown check {entry.check!r}; known: {known}"
            )
        try:
            entry._parsed = spec.params.model_validate(entry.params)
        except ValidationError as exc:
            err = exc.errors()[0]
            raise PolicyError(
                str(path), f"checks[{i}].params.{_key(err['loc'])}", err["msg"]
            ) from exc


def _check_tool_filters(raw: _MemberFile, path: Path) -> None:
    for i, entry in enumerate(raw.checks):
        for tool in entry.tools or []:
            if tool not in raw.tools:
                raise PolicyError(
                    str(path), f"checks[{i}].tools", f"{tool!r} is not a tool of {raw.member}"
                )


def _alias_map(members: list[MemberPolicy]) -> dict[str, str]:
    aliases: dict[str, str] = {}
    for member in members:
        for name in member.names:
            other = aliases.setdefault(name.lower(), member.id)
            if other != member.id:
                raise PolicyError(member.source, "aliases", f"{name!r} also names {other}")
    return aliases


def _version(files: list[Path]) -> str:
    digest = hashlib.sha256()
    for f in files:
        digest.update(f.name.encode() + b"\0" + f.read_bytes())
    return digest.hexdigest()[:12]
