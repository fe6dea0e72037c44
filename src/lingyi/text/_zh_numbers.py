"""Chinese numerals read as numbers: 一万二千四百 → 12400, 八十七点四 → 87.4, 百分之五 → 5%,
两点二十 → 2:20 (a clock time); 没有一个 stays none.

Only runs that are quantities are read: a run with a unit (十 百 千 万 亿) or a decimal point,
or any numeral followed by a measure word (三个, 两份, 第三版). 一些, 一直, 统一 and 唯一 stay
words. Hand-written, measured against cn2an 0.5.24 (docs/checks.md, "What reads what"):
cn2an takes 0.10 ms a sentence against 0.01 ms here, reads 统一一下 as 统11下, and reads
neither 两点二十 as a time nor 没有一个 as none.
"""

from __future__ import annotations

import re

_DIGITS = {
    "零": 0,
    "〇": 0,
    "一": 1,
    "二": 2,
    "两": 2,
    "三": 3,
    "四": 4,
    "五": 5,
    "六": 6,
    "七": 7,
    "八": 8,
    "九": 9,
}
_UNITS = {"十": 10, "百": 100, "千": 1000}
_BIG = {"万": 10_000, "亿": 100_000_000}
_MEASURE = "个条份人名位天周月日号年次篇本项版倍岁元块种组场轮页章节首部期届分点"
_RUN = re.compile(
    rf"(百分之)?([零〇一二两三四五六七八九十百千万亿]+(?:点[零〇一二三四五六七八九]+)?)(?=([{_MEASURE}%]?))"
)


def _integer(run: str) -> int:
    total, section, digit = 0, 0, 0
    for char in run:
        if char in _DIGITS:
            digit = _DIGITS[char]
        elif char in _UNITS:
            section += (digit or 1) * _UNITS[char]
            digit = 0
        else:  # 万 or 亿 closes a section
            total = (total + section + digit) * _BIG[char]
            section = digit = 0
    return total + section + digit


def _value(run: str) -> str:
    whole, _, fraction = run.partition("点")
    if len(whole) > 1 and all(c in _DIGITS for c in whole):
        number = "".join(str(_DIGITS[c]) for c in whole)  # 二〇二六: digit by digit
    else:
        number = str(_integer(whole)) if whole else "0"
    return f"{number}.{''.join(str(_DIGITS[c]) for c in fraction)}" if fraction else number


def _is_quantity(run: str, percent: bool, follower: str) -> bool:
    if percent or "点" in run or any(c in _UNITS or c in _BIG for c in run):
        return True
    return bool(follower)  # 三个, 两份: a bare numeral only with a measure word


# 两点二十, 三点十五分, 十点四十五: a time of day (hours up to 24, minutes with 十 or 分), not
# the decimals 2.2 and 3.15. 八十七点四 stays 87.4.
_CLOCK = re.compile(
    r"(?<![零〇一二两三四五六七八九十百千万亿])([零一二两三四五六七八九十]{1,3})点"
    r"([零一二三四五六七八九]?十[一二三四五六七八九]?|[零一二三四五六七八九]{1,2}(?=分))分?"
)
# 没有一个, 没发现一个: none, not one of them (a negation up to four characters before).
_NONE_BEFORE = ("没", "无")


def _clock(match: re.Match[str]) -> str:
    hour, minute = _integer(match.group(1)), _integer(match.group(2))
    if hour > 24 or minute > 59:
        return match.group(0)
    return f"{hour}:{minute:02d}"


def _replace(match: re.Match[str]) -> str:
    percent, run, follower = bool(match.group(1)), match.group(2), match.group(3)
    if not _is_quantity(run, percent, follower):
        return match.group(0)
    if run == "一" and any(
        w in match.string[max(0, match.start() - 4) : match.start()] for w in _NONE_BEFORE
    ):
        return match.group(0)  # 没有一个问题: no issue at all, not one issue
    return _value(run) + ("%" if percent else "")


def arabic_numerals(text: str) -> str:
    """``text`` with its Chinese numeral quantities and clock times written in digits."""
    if not any(c in _DIGITS or c in _UNITS for c in text):
        return text
    text = _CLOCK.sub(_clock, text) if "点" in text else text
    return _RUN.sub(_replace, text)
