"""The weekly report: Markdown and self-contained HTML, charts checked in a real browser."""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import zlib
from pathlib import Path
from typing import Any

import pytest

from lingyi.log import file_appeal, resolve_appeal
from lingyi.messages import catalog
from lingyi.report import (
    ReportError,
    nice_ceiling,
    render_html,
    render_markdown,
    weekly_report_markdown,
    weekly_stats,
    write_report,
)
from lingyi.stats import last_full_week, resolve_zone
from tests.test_stats import WEEK, config_for, run_lingyi, vrec, write_config, write_log

CHROMIUM = Path("/usr/bin/chromium")


@pytest.fixture
def report_config(tmp_path: Path) -> Any:
    """A config (zh, UTC) whose log holds the W48 test week plus one overturned appeal."""
    config = config_for(tmp_path, language="zh")
    written = write_log(config.log_path, WEEK)
    file_appeal(config.log_path, written[2]["id"], "不是医疗问题", by="alice")
    resolve_appeal(config.log_path, written[2]["id"], "overturned", "故障诊断", by="bob")
    return config


def test_markdown_has_the_figures(report_config: Any) -> None:
    """Markdown report: title with the week, the summary figures, per-day and per-code tables."""
    md = weekly_report_markdown(report_config, "2026-W48")
    assert md.startswith("# 灵依守卫 周报 — 2026-W48\n")
    assert "时间范围: 2026-11-23 .. 2026-11-29 (UTC)" in md
    assert "| 校验总数 | 6 |  |" in md and "| 拒绝 | 3 | 50.0% |" in md
    assert "| 虚构的沟通 | 1 |  |" in md and "| 越界行为 | 2 |  |" in md
    assert "| 周一 11-23 | 1 | 1 | 0 | 2 |" in md
    assert "| boundary.medical | 2 | 2 | 0 | 0 | 0 | +2 |" in md
    assert "| 误报率下限（推翻 / 全部拦截） | 1 | 25.0% | 0 | 0.0% | +1 · +25.0 pp |" in md
    assert "| 检查代码 | boundary.medical | 1 | 1 | 无数据（n=1 < 5） | 50.0% |" in md
    assert "哈希链完整" in md


EVIL = "<script>alert(1)</script>|x"
EVIL_HTML = "&lt;script&gt;alert(1)&lt;/script&gt;|x"


def _evil_record() -> dict[str, Any]:
    """A record whose every text field carries markup: the log's text is untrusted."""
    record = vrec("2026-11-24T10:00:00.000Z", member=EVIL, decision="rejected",
                  failed=((EVIL, "reject"),), tool=EVIL, content=EVIL)  # fmt: skip
    record["checks"][-1]["reason"] = EVIL
    return record


def test_untrusted_text_is_escaped(tmp_path: Path) -> None:
    """Markup in a record (content, member, code, reason, tool) is text in the HTML page,
    and cannot break a Markdown table."""
    config = config_for(tmp_path, language="en")
    write_log(config.log_path, [_evil_record()])
    stats = weekly_stats(config, "2026-W48")
    md = render_markdown(stats, "en")
    assert "# LingYi Guard weekly report — 2026-W48" in md
    assert "<script>alert(1)</script>\\|x" in md and f"| {EVIL} |" not in md
    page = render_html(stats, "en")
    assert "<script" not in page.lower()
    assert page.count(EVIL_HTML) >= 4  # member and code in tables, charts and tooltips
    assert "font-family:'Noto Sans CJK SC'" in page  # our own CSS is not escaped


@pytest.mark.parametrize(
    ("config_lang", "lang", "title"),
    [("zh", None, "# 灵依守卫 周报"), ("zh", "en", "# LingYi Guard weekly report"),
     ("en", None, "# LingYi Guard weekly report"), ("en", "zh", "# 灵依守卫 周报")],
)  # fmt: skip
def test_report_language_is_the_config_or_lang(
    tmp_path: Path, config_lang: str, lang: str | None, title: str
) -> None:
    """The report is in the configured language unless ``lang`` asks for the other one."""
    config = config_for(tmp_path, language=config_lang)
    write_log(config.log_path, WEEK)
    assert weekly_report_markdown(config, "2026-W48", lang=lang).startswith(title)
    page = write_report(config, "2026-W48", out=tmp_path / "r", formats=("html",), lang=lang)[0]
    html_lang = "zh-CN" if title.endswith("周报") else "en"
    assert f'<html lang="{html_lang}">' in page.read_text(encoding="utf-8")


def test_unknown_language_or_format_is_refused(tmp_path: Path) -> None:
    """A language or a format the report does not have is a clear error naming the valid ones."""
    config = config_for(tmp_path)
    with pytest.raises(ReportError, match="no report language 'fr': use one of zh, en"):
        weekly_report_markdown(config, "2026-W48", lang="fr")
    with pytest.raises(ReportError, match="no report format 'pdf': use md or html"):
        write_report(config, "2026-W48", out=tmp_path / "r", formats=("pdf",))
    assert not (tmp_path / "r").exists()


def test_every_report_word_is_in_both_catalogs() -> None:
    """The zh and en catalogs have the same report keys, none empty, placeholders alike."""
    zh = {k: v for k, v in catalog("zh").items() if k.startswith("report.")}
    en = {k: v for k, v in catalog("en").items() if k.startswith("report.")}
    assert set(zh) == set(en) and len(en) > 40
    for key, text in en.items():
        assert text.strip() and zh[key].strip(), key
        assert set(re.findall(r"{(\w+)}", text)) == set(re.findall(r"{(\w+)}", zh[key])), key


def test_html_is_self_contained_with_three_charts(report_config: Any) -> None:
    """One file: inline CSS and SVG, no scripts, no external URLs; charts have legends and axes."""
    page = render_html(weekly_stats(report_config, "2026-W48"), "zh")
    assert page.count("<svg") == 3 and "<script" not in page.lower()
    urls = set(re.findall(r"(?:src|href|url)\s*[=(]\s*[\"']?([^\"' )>]+)", page))
    assert urls == set(), urls
    assert re.findall(r'xmlns="([^"]+)"', page) == ["http://www.w3.org/2000/svg"] * 3
    for label in (
        "每日裁决",
        "失败最多的检查",
        "按成员",
        "通过",
        "拒绝",
        "降级",
        "日期（本地时间）",
    ):
        assert label in page, label
    assert '<html lang="zh-CN">' in page and 'role="img"' in page


def test_write_report_files_and_default_week(report_config: Any, tmp_path: Path) -> None:
    """Files are named after the week; without --week the last full week in the zone is used."""
    out = tmp_path / "reports"
    paths = write_report(report_config, "2026-W48", out=out)
    assert [p.name for p in paths] == ["lingyi-report-2026-W48.md", "lingyi-report-2026-W48.html"]
    assert all(p.stat().st_size > 500 for p in paths)
    default = write_report(report_config, out=out, formats=("md",))
    expected = last_full_week(resolve_zone("UTC"))
    assert default == [out / f"lingyi-report-{expected}.md"]


def test_cli_report(report_config: Any, tmp_path: Path) -> None:
    """`lingyi report --week --out --format` writes the files and prints their paths."""
    out = tmp_path / "out"
    args = ["--config", write_config(tmp_path, language="zh"), "--log", report_config.log_path,
            "report", "--week", "2026-W48", "--out", out]  # fmt: skip
    done = run_lingyi(*args, "--format", "html")
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{out / 'lingyi-report-2026-W48.html'}\n"
    bad = run_lingyi(*args, "--week", "2025-W53")
    assert bad.returncode == 2 and "2025 has no ISO week 53" in bad.stderr


def test_nice_axis_steps() -> None:
    """Axis maxima round up on a 1-2-5 step so ticks are readable."""
    assert [nice_ceiling(v) for v in (0, 3, 5, 7, 23, 49, 101, 999)] == [
        (1, 1), (3, 1), (5, 1), (8, 2), (25, 5), (50, 10), (150, 50), (1000, 200),
    ]  # fmt: skip


# --------------------------------------------------------------------------- browser


def _chromium_args(profile: Path) -> list[str]:
    return [
        str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
        "--no-first-run", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", f"--user-data-dir={profile}",
    ]  # fmt: skip


def _need_chromium() -> None:
    if not CHROMIUM.exists():
        if os.environ.get("CI"):
            pytest.fail("chromium is required on CI (apt-get install -y chromium)")
        pytest.skip("chromium is not installed")


def png_pixels(data: bytes) -> tuple[int, int, bytes]:
    """Width, height and the raw (still filtered) scanlines of a PNG file."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    pos, idat = 8, b""
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos : pos + 8])
        if kind == b"IDAT":
            idat += data[pos + 8 : pos + 8 + length]
        pos += 12 + length
    return width, height, zlib.decompress(idat)


def test_report_renders_in_headless_chromium(report_config: Any, tmp_path: Path) -> None:
    """Chromium renders the page: the screenshot is full size and not blank, the DOM has charts."""
    _need_chromium()
    html_path = write_report(report_config, "2026-W48", out=tmp_path / "r", formats=("html",))[0]
    shot = tmp_path / "report.png"
    args = _chromium_args(tmp_path / "profile")
    run = [*args, f"--screenshot={shot}", "--window-size=1200,1800", html_path.as_uri()]
    subprocess.run(run, check=True, capture_output=True, timeout=120)
    width, height, raw = png_pixels(shot.read_bytes())
    assert (width, height) == (1200, 1800)
    assert len(set(raw)) > 64, "the screenshot looks blank"
    dom = subprocess.run(
        [*args, "--dump-dom", html_path.as_uri()], check=True, capture_output=True, timeout=120
    ).stdout.decode()
    assert dom.count("<svg") == 3 and "每日裁决" in dom and "boundary.medical" in dom
    if os.environ.get("LINGYI_KEEP_SCREENSHOT"):  # to look at it: the charts must be readable
        shutil.copy(shot, os.environ["LINGYI_KEEP_SCREENSHOT"])
