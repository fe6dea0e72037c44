"""Loading ``validators/*.toml`` into a validated :class:`PolicySet` (errors name file and key).

One pass over the folder collects every problem of every file (:func:`policy_errors`, for
``lingyi policy check``): the structure of each file, then each check entry (a registered
check, parameters its check accepts), even when another part of the same file is wrong, so a
user fixes a folder in one round instead of one error per run. :func:`load_policies` raises
the first problem and says how many more there are.

A folder that validates must not weaken the guard silently either: one file per member (a
duplicate id or alias anywhere is an error naming both files), one owner per tool, every check
in a stage that runs, regular expressions compiled now, a shared file present (unless the
config says otherwise), and hidden or editor files (``.lingzhi.toml``, Emacs' ``.#x.toml``
lock) ignored rather than read.
"""

from __future__ import annotations

import difflib
import hashlib
import re
import tomllib
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from lingyi._validation import problems
from lingyi.checks import REGISTRY, CheckParams, load_builtin_checks
from lingyi.errors import PolicyError
from lingyi.models import AssertionType, Stage
from lingyi.policy._judge import JudgeRule, judge_rule_problems
from lingyi.policy._lexicon import (
    Lexicon,
    lexicon_fields,
    lexicon_path,
    load_lexicon,
    parse_toml,
)
from lingyi.policy._model import (
    CheckEntry,
    MemberPolicy,
    Mode,
    PolicySet,
    _CommonFile,
    _MemberFile,
)

M = TypeVar("M", bound=BaseModel)


NO_SHARED = (
    "no shared policy file (_*.toml): without one every member loses the shared checks; add "
    "_common.toml, or set [policies] require_shared = false in the config if that is meant"
)
# Shared checks a member may replace with its own entry but never drop: with the shared entry
# disabled, one of these checks must still run on that type of input. An answer's URLs are
# checked by answer.urls_returned alone (evidence.urls_recorded does not run on answers, so
# that an unknown URL is one finding); disabling it without a replacement left answers with
# no URL check at all.
REPLACE_ONLY: dict[str, tuple[AssertionType, tuple[str, ...], str]] = {
    # check: (the input it must cover, the checks that may stand in, what would go unchecked)
    "answer.urls_returned": (
        AssertionType.ANSWER,
        ("answer.urls_returned", "evidence.urls_recorded"),
        "the URLs an answer cites",
    ),
}
NEVER_RUNS = {
    "stage": "the judge stage runs no policy check (the judge is configured in [judge]); "
    "valid stages for a check: pre_check, tool_validation, boundary, fact_verification",
    "types": "an empty list: the check would never run; leave the key out to run it for every type",
    "tools": "an empty list: the check would never run; leave the key out to run it for every call",
}


def ignored_reason(path: Path) -> str | None:
    """Why a ``*.toml`` in a policy folder is not a policy file (None: it is one)."""
    if path.name.startswith("."):  # hidden, or an Emacs lock (.#lingzhi.toml)
        return "hidden file, ignored"
    if path.name.startswith(("#", "~")):
        return "editor file, ignored"
    if not path.is_file():
        return "not a regular file (a folder, or a link to nothing), ignored"
    return None


def policy_files(folder: Path) -> tuple[list[Path], dict[Path, str]]:
    """The policy files of ``folder`` in name order, and the ``*.toml`` names ignored (why)."""
    files: list[Path] = []
    ignored: dict[Path, str] = {}
    for path in sorted(folder.glob("*.toml")):
        if why := ignored_reason(path):
            ignored[path] = why
        else:
            files.append(path)
    return files, ignored


def load_policies(folder: Path, *, require_shared: bool = True) -> PolicySet:
    """Load and validate every policy file in ``folder``; raise PolicyError on the first problem."""
    policies, errors = _Loader(folder, require_shared).load()
    if errors:
        first, more = errors[0], len(errors) - 1
        if more:  # the server refuses to start on the first; say that it is not the only one
            note = f" (and {more} more problem(s): lingyi policy check lists them all)"
            raise PolicyError(first.path, first.key, first.message + note)
        raise first
    assert policies is not None  # no errors means every file loaded
    return policies


def policy_errors(folder: Path, *, require_shared: bool = True) -> list[PolicyError]:
    """Every problem of every policy file in ``folder``, in file order (empty: it loads)."""
    return _Loader(folder, require_shared).load()[1]


class _Loader:
    """One pass over a policy folder that keeps going after a problem and remembers each."""

    def __init__(self, folder: Path, require_shared: bool = True) -> None:
        self.folder = folder
        self.require_shared = require_shared
        self.errors: list[PolicyError] = []
        self._common_broken = False
        self.shared: dict[str, str] = {}  # shared check → the file that holds it
        self._shared_entries: list[tuple[Path, int, CheckEntry]] = []
        self._shared_judge: list[JudgeRule] = []  # [[judge]] of the shared files

    def load(self) -> tuple[PolicySet | None, list[PolicyError]]:
        load_builtin_checks()
        if not self.folder.is_dir():
            return None, [PolicyError(str(self.folder), "-", "policy folder not found")]
        files, _ = policy_files(self.folder)
        common = [c for f in files if f.name.startswith("_") for c in self._common(f)]
        self._common_broken = bool(self.errors)  # then a member's disable cannot be judged
        members = [m for f in files if not f.name.startswith("_") if (m := self._member(f, common))]
        self._folder_shape(files)
        members = self._one_per_member(members)
        self._one_owner(members)
        self._shared_tools(members)
        self._intent_tools(members)
        aliases = self._alias_map(members)
        lexicons = self._lexicons(members)
        if self.errors:  # one problem may be seen twice (a file's shape and its check's params)
            unique = {(e.path, e.key, e.message): e for e in self.errors}
            return None, list(unique.values())
        version = _version(files + [Path(x.path) for x in lexicons.values()])
        members_by_id = {m.id: m for m in members}
        return PolicySet(
            members=members_by_id,
            aliases=aliases,
            version=version,
            lexicons=lexicons,
            shared=self.shared,
        ), []

    def _folder_shape(self, files: list[Path]) -> None:
        if not any(not f.name.startswith("_") for f in files):
            self._error(self.folder, "-", "no member policy files (*.toml) found")
        elif self.require_shared and not any(f.name.startswith("_") for f in files):
            self._error(self.folder, "-", NO_SHARED)

    def _one_per_member(self, members: list[MemberPolicy]) -> list[MemberPolicy]:
        """The first file of each member id; every other file naming it is an error."""
        first: dict[str, MemberPolicy] = {}
        for member in members:
            if (seen := first.setdefault(member.id, member)) is not member:
                self._error(
                    member.source,
                    "member",
                    f"{member.id!r} is already the member of {seen.source}; one file per member",
                )
        return list(first.values())

    def _one_owner(self, members: list[MemberPolicy]) -> None:
        """A tool declared by two members would run as whichever loaded last: refuse it."""
        owners: dict[str, MemberPolicy] = {}
        for member in members:
            for tool in member.tools:
                if (owner := owners.setdefault(tool, member)) is not member:
                    self._error(
                        member.source,
                        f"tools.{tool}",
                        f"{tool!r} is already a tool of {owner.id} ({owner.source}); "
                        "a tool has one owner",
                    )

    def _intent_tools(self, members: list[MemberPolicy]) -> None:
        """An intent that requires a tool no member owns could never be completed."""
        owned = {t for m in members for t in m.tools}
        known = ", ".join(sorted(owned)) or "-"
        for member in members:
            for name, intent in member.intents.items():
                named = [("requires", t) for t in intent.requires]
                named += [(f"before.{t}", t) for t in intent.before]
                named += [(f"before.{t}", f) for t, first in intent.before.items() for f in first]
                for key, tool in named:
                    if tool not in owned:
                        message = f"{tool!r} is a tool of no member (tools: {known})"
                        self._error(member.source, f"intents.{name}.{key}", message)

    def _shared_tools(self, members: list[MemberPolicy]) -> None:
        """A shared check limited to tools no member owns would never run."""
        owned = sorted({t for m in members for t in m.tools})
        for path, i, entry in self._shared_entries:
            for tool in entry.tools or []:
                if tool not in owned:
                    self._error(
                        path,
                        f"checks[{i}].tools",
                        f"{tool!r} is no member's tool, so the check would never run "
                        f"(tools: {', '.join(owned) or 'none'})",
                    )

    def _stages(self, entries: list[CheckEntry], path: Path) -> None:
        """Every check in a stage the layer runs, with filters that can match."""
        for i, entry in enumerate(entries):
            if entry.stage is Stage.JUDGE:
                self._error(path, f"checks[{i}].stage", NEVER_RUNS["stage"])
            for key in ("types", "tools"):
                if getattr(entry, key) == []:
                    self._error(path, f"checks[{i}].{key}", NEVER_RUNS[key])

    def _patterns(self, raw: _MemberFile, path: Path) -> None:
        """Argument patterns compiled now, not when the first call reaches them."""
        for tool, spec in raw.tools.items():
            for name, arg in spec.args.items():
                try:
                    re.compile(arg.pattern or "")
                except re.error as exc:
                    self._error(
                        path,
                        f"tools.{tool}.args.{name}.pattern",
                        f"not a valid regular expression ({exc}): {arg.pattern!r}",
                    )

    def _lexicons(self, members: list[MemberPolicy]) -> dict[str, Lexicon]:
        """Every lexicon a check parameter names, loaded once (errors name the policy key)."""
        loaded: dict[str, Lexicon] = {}
        for member in members:
            for i, entry in enumerate(member.checks):
                for name, ref in lexicon_fields(entry.parsed) if hasattr(entry, "_parsed") else []:
                    if ref not in loaded:
                        try:
                            key = f"checks[{i}].params.{name}"
                            path = lexicon_path(self.folder, ref, member.source, key)
                            loaded[ref] = load_lexicon(path)
                        except PolicyError as exc:
                            self.errors.append(exc)
        return loaded

    def _error(self, path: Path | str, key: str, message: str) -> None:
        self.errors.append(PolicyError(str(path), key, message))

    def _read(self, path: Path) -> dict[str, Any] | None:
        try:
            return parse_toml(path.read_bytes())
        except tomllib.TOMLDecodeError as exc:
            self._error(path, "-", f"not valid TOML: {exc}")
        except (OSError, UnicodeDecodeError) as exc:
            self._error(path, "-", f"cannot read: {exc}")
        return None

    def _validate(self, model: type[M], data: dict[str, Any], path: Path) -> M | None:
        try:
            return model.model_validate(data)
        except ValidationError as exc:
            for problem in problems(exc, model):
                self._error(path, problem.key, problem.message)
            return None

    def _common(self, path: Path) -> list[CheckEntry]:
        data = self._read(path)
        if data is None:
            return []
        common = self._validate(_CommonFile, data, path)
        params = self._check_params(data, path)
        if common is None:
            return []
        self._stages(common.checks, path)
        self._shared_judge += self._judge_rules(common.judge, path, None)
        for i, entry in enumerate(common.checks):
            self.shared.setdefault(entry.check, str(path))
            self._shared_entries.append((path, i, entry))
        return _attach(_moded(common.checks, common.mode, set()), params)

    def _member(self, path: Path, common: list[CheckEntry]) -> MemberPolicy | None:
        data = self._read(path)
        if data is None:
            return None
        before = len(self.errors)
        raw = self._validate(_MemberFile, data, path)
        params = self._check_params(data, path)
        if raw is None:
            return None
        self._tool_filters(raw, path)
        tools = {name: spec.destructive for name, spec in raw.tools.items()}
        judge = self._judge_rules(raw.judge, path, tools)
        self._signal_overrides(raw, judge + self._shared_judge, path)
        if common and not self._common_broken:  # no shared file: reported once, on the folder
            self._disabled(raw, common, path)
        self._stages(raw.checks, path)
        self._patterns(raw, path)
        if len(self.errors) > before:
            return None
        shared = [c for c in common if c.check not in raw.disable]
        return MemberPolicy(
            id=raw.member.lower(),
            name=raw.name,
            aliases=raw.aliases,
            not_names=raw.not_names,
            description=raw.description,
            language=raw.language,
            tools=raw.tools,
            checks=shared + _attach(_moded(raw.checks, raw.mode, self._replaced(raw)), params),
            source=str(path),
            disabled=list(raw.disable),
            judge=judge + self._shared_judge,
            signals=raw.signals,
            intents=raw.intents,
        )

    def _replaced(self, raw: _MemberFile) -> set[str]:
        """The shared checks this member disables and runs an entry of its own for instead."""
        return {name for name in raw.disable if name in self.shared}

    def _check_params(self, data: dict[str, Any], path: Path) -> dict[int, CheckParams]:
        """Each check entry's parameters, validated by its check (on the raw data, so that a
        problem elsewhere in the file does not hide these)."""
        entries = data.get("checks")
        parsed: dict[int, CheckParams] = {}
        for i, entry in enumerate(entries if isinstance(entries, list) else []):
            name = entry.get("check") if isinstance(entry, dict) else None
            if not isinstance(name, str):
                continue  # the file's own validation reports a missing or odd name
            if (spec := REGISTRY.get(name)) is None:
                self._error(path, f"checks[{i}].check", _unknown_check(name))
                continue
            params = entry.get("params", {})
            try:
                parsed[i] = spec.params.model_validate(params)
            except ValidationError as exc:
                for problem in problems(exc, spec.params, prefix=f"checks[{i}].params"):
                    self._error(path, problem.key, problem.message)
        return parsed

    def _judge_rules(
        self, rules: list[JudgeRule], path: Path, tools: dict[str, bool] | None
    ) -> list[JudgeRule]:
        """The judge's own step (issue 13): ``[[judge]]`` rules, placed and checked against the
        member's tools (``None``: shared rules, which may name any member's tool)."""
        for key, message in judge_rule_problems(rules, tools):
            self._error(path, key, message)
        return [rule.placed(str(path), i) for i, rule in enumerate(rules)]

    def _signal_overrides(self, raw: _MemberFile, rules: list[JudgeRule], path: Path) -> None:
        """A threshold for a signal none of the member's rules scores would never apply."""
        known = sorted({name for rule in rules for name in rule.signals})
        for name in raw.signals:
            if name not in known:
                listed = ", ".join(known) or "none"
                message = f"unknown signal {name!r}; the signals of this member's rules: {listed}"
                self._error(path, f"signals.{name}", message)

    def _tool_filters(self, raw: _MemberFile, path: Path) -> None:
        for i, entry in enumerate(raw.checks):
            for tool in entry.tools or []:
                if tool not in raw.tools:
                    owned = ", ".join(sorted(raw.tools)) or "none"
                    self._error(
                        path,
                        f"checks[{i}].tools",
                        f"{tool!r} is not a tool of {raw.member} (its tools: {owned})",
                    )

    def _disabled(self, raw: _MemberFile, common: list[CheckEntry], path: Path) -> None:
        shared = sorted({c.check for c in common})
        for i, name in enumerate(raw.disable):
            if name not in shared:
                valid = ", ".join(shared) or "none"
                self._error(
                    path, f"disable[{i}]", f"no shared check named {name!r}; shared checks: {valid}"
                )
            elif (problem := _unreplaced(name, raw.checks)) is not None:
                self._error(path, f"disable[{i}]", problem)

    def _alias_map(self, members: list[MemberPolicy]) -> dict[str, str]:
        aliases: dict[str, str] = {}
        sources = {m.id: m.source for m in members}
        for member in members:
            for name in member.names:
                other = aliases.setdefault(name.lower(), member.id)
                if other != member.id:
                    self._error(
                        member.source,
                        "aliases",
                        f"{name!r} also names {other} ({sources[other]}); a name has one member",
                    )
        return aliases


def _unreplaced(name: str, own: list[CheckEntry]) -> str | None:
    """Why disabling the shared ``name`` is refused (None: it may be): a check of
    :data:`REPLACE_ONLY` needs an entry of the member's own that still runs on its type."""
    if name not in REPLACE_ONLY:
        return None
    type_, replacements, what = REPLACE_ONLY[name]
    if any(e.check in replacements and e.applies(type_, None) for e in own):
        return None
    others = " or ".join(repr(r) for r in replacements if r != name)
    return (
        f"{name!r} may be replaced, not dropped: without it no check would verify {what}; "
        f"add a [[checks]] entry of {name!r} (or {others}) that runs on type {type_.value!r}"
    )


def _attach(entries: list[CheckEntry], params: dict[int, CheckParams]) -> list[CheckEntry]:
    """Give each check entry its parsed parameters (an entry without them had a problem, and
    a folder with a problem builds no policy set)."""
    for i, entry in enumerate(entries):
        if i in params:
            entry.attach(params[i])
    return entries


def _moded(entries: list[CheckEntry], mode: Mode, replaced: set[str]) -> list[CheckEntry]:
    """Each entry with its mode settled: its own ``mode``, else its file's.

    A member's entry that replaces a shared check (灵知's medical boundary) does not take its
    file's shadow: putting a file in shadow to try a stricter policy must not quietly stop a
    shared check from blocking; only the entry's own ``mode = "shadow"`` does that.
    """
    for entry in entries:
        inherited: Mode = "enforce" if entry.check in replaced else mode
        entry.mode = entry.mode or inherited
    return entries


def _unknown_check(name: str) -> str:
    known = sorted(REGISTRY)
    close = difflib.get_close_matches(name, known, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"unknown check {name!r}{hint}; known: {', '.join(known)}"


def _version(files: list[Path]) -> str:
    digest = hashlib.sha256()
    for f in files:
        digest.update(f.name.encode() + b"\0" + f.read_bytes())
    return digest.hexdigest()[:12]
