"""The weekly report as Markdown (the MCP ``lingyi://report/weekly`` resource, ``.md`` file).

Cells are flattened to one line and ``|`` is escaped, so text from the log cannot break a
table.
"""

from __future__ import annotations

from lingyi.report import figures as f
from lingyi.report.judge import criteria_table, judge_figures, judge_table
from lingyi.report.labels import Labels


def _cell(value: object) -> str:
    return " ".join(str(value).split()).replace("|", "\\|")


def md_table(table: f.Table) -> str:
    lines = ["| " + " | ".join(_cell(h) for h in table.head) + " |"]
    lines.append("|" + "|".join("---" for _ in table.head) + "|")
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in table.rows]
    return "\n".join(lines)


def _or_none(table: f.Table, t: Labels) -> str:
    return md_table(table) if table.rows else t["none"]


def _integrity(stats: f.Stats, t: Labels) -> str:
    if stats["integrity"]["ok"]:
        return t["integrity_ok"]
    examples = [f"- {t['line']} {n} ({rid}): {problem}" for n, rid, problem in
                f.integrity_examples(stats, t).rows]  # fmt: skip
    table = md_table(f.integrity_table(stats, t))
    return "\n\n".join([t["integrity_bad"], table, "\n".join(examples)])


def _judge(stats: f.Stats, t: Labels) -> str:
    judge = judge_figures(stats)
    if judge is None:
        return t["judge_none"]
    criteria = criteria_table(judge, t)
    return "\n\n".join(
        [md_table(judge_table(judge, t)), *([md_table(criteria)] if criteria.rows else [])]
    )


def render_markdown(stats: f.Stats, lang: str) -> str:
    t = Labels(lang)
    sections = [
        (t["summary"], md_table(f.summary_table(stats, t))),
        (t["per_day"], md_table(f.day_table(stats, t))),
        (t["top_codes"], _or_none(f.code_table(stats, t), t)),
        (t["reasons"], _or_none(f.reason_table(stats, t), t)),
        (t["per_member"], _or_none(f.member_table(stats, t), t)),
        (t["per_type"], _or_none(f.type_table(stats, t), t)),
        (t["judge"], _judge(stats, t)),
        (t["integrity"], _integrity(stats, t)),
    ]
    parts = [f"# {t['title']} — {stats['window']['label']}", f.window_line(stats, t)]
    for title, body in sections:
        parts += [f"## {title}", body]
    return "\n\n".join(parts) + "\n"
