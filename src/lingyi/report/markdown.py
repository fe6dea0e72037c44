"""The weekly report as Markdown (the MCP ``lingyi://report/weekly`` resource, ``.md`` file).

Cells are flattened to one line and ``|`` is escaped, so text from the log cannot break a
table.
"""

from __future__ import annotations

from lingyi.report import figures as f
from lingyi.report import review as r
from lingyi.report.judge import criteria_table, judge_figures, judge_table
from lingyi.report.labels import Labels


def _cell(value: object) -> str:
    return " ".join(str(value).split()).replace("|", "\\|")


def _line(value: object) -> str:
    """A text from the log outside a table: one line, no Markdown of its own."""
    return _cell(value).replace("*", "\\*").replace("_", "\\_").replace("`", "\\`")


def md_table(table: f.Table) -> str:
    lines = ["| " + " | ".join(_cell(h) for h in table.head) + " |"]
    lines.append("|" + "|".join("---" for _ in table.head) + "|")
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in table.rows]
    return "\n".join(lines)


def _or_none(table: f.Table, t: Labels, empty: str = "none") -> str:
    return md_table(table) if table.rows else t[empty]


def _integrity(stats: f.Stats, t: Labels) -> str:
    if stats["integrity"]["ok"]:
        return t["integrity_ok"]
    examples = [f"- {t['line']} {n} ({rid}): {problem}" for n, rid, problem in
                f.integrity_examples(stats, t).rows]  # fmt: skip
    table = md_table(f.integrity_table(stats, t))
    return "\n\n".join([t["integrity_bad"], table, "\n".join(examples)])


def _changes(stats: f.Stats, t: Labels) -> str:
    lines = r.change_lines(stats, t)
    return "\n".join(f"- {_line(x)}" for x in lines) if lines else t["changes_none"]


def _appeals(stats: f.Stats, t: Labels) -> str:
    more = r.appeals_more(stats, t)
    return "\n\n".join(
        [_or_none(r.appeals_table(stats, t), t, "to_decide_none"), *([more] if more else [])]
    )


def _unknown(stats: f.Stats, t: Labels) -> str:
    table = r.unknown_table(stats, t)
    return "\n\n".join([t["unknown_note"], md_table(table)]) if table.rows else t["unknown_none"]


def _subsections(
    parts: list[tuple[str, f.Table]], note: str, t: Labels, empty: str = "none"
) -> str:
    if not parts:
        return t[empty]
    return "\n\n".join(
        [note, *(f"### {_line(name)}\n\n{md_table(table)}" for name, table in parts)]
    )


def _what_changed(stats: f.Stats, t: Labels) -> str:
    before = r.versions_before(stats, t)
    parts = [f"### {t['policies']}", _or_none(r.versions_table(stats, t), t, "policies_none")]
    parts += [_line(before)] if before else []
    if checks := r.check_changes(stats, t):
        parts.append(_line(checks))
    judge = judge_figures(stats)
    if judge is not None:  # no section at all when the judge was not consulted
        criteria = criteria_table(judge, t)
        before_judge = stats.get("previous", {}).get("judge")
        parts += [f"### {t['judge']}", md_table(judge_table(judge, t, before_judge))]
        parts += [md_table(criteria)] if criteria.rows else []
    shadow = r.shadow_table(stats, t)
    if shadow is not None:
        parts += [f"### {t['shadow']}", md_table(shadow)]
    return "\n\n".join(parts)


def render_markdown(stats: f.Stats, lang: str) -> str:
    t = Labels(lang)
    fp = "\n\n".join([t.fmt("fp_note", min=stats["appeals"].get("measured_fp_min", 0)),
                      md_table(r.fp_table(stats, t))])  # fmt: skip
    sections = [
        (t["changes"], _changes(stats, t)),
        (t["to_decide"], _appeals(stats, t)),
        (t["summary"], md_table(f.summary_table(stats, t))),
        (t["fp_section"], fp),
        (t["unknown"], _unknown(stats, t)),
        (t["per_day"], md_table(f.day_table(stats, t))),
        (t["top_codes"], _or_none(f.code_table(stats, t), t)),
        (t["examples"], _subsections(r.example_tables(stats, t), t["examples_note"], t)),
        (t["per_member"], _or_none(f.member_table(stats, t), t)),
        (t["per_type"], _or_none(f.type_table(stats, t), t)),
        (t["drill"], _subsections(r.drill_tables(stats, t), t["drill_note"], t, "drill_none")),
        (t["what_changed"], _what_changed(stats, t)),
        (t["integrity"], _integrity(stats, t)),
    ]
    parts = [f"# {t['title']} — {stats['window']['label']}", f.window_line(stats, t)]
    parts.append(r.records_line(stats, t))
    for title, body in sections:
        parts += [f"## {title}", body]
    return "\n\n".join(parts) + "\n"
