"""Chinese numerals read as numbers: 一万二千四百 → 12400, 八十七点四 → 87.4, 百分之五 → 5%.

Only runs that are quantities are read: a run with a unit (十 百 千 万 亿) or a decimal point,
or any numeral followed by a measure word (三个, 两份, 第三版). 一些, 一直, 统一 and 唯一 stay
words. Hand-written because the library that does this (cn2an) takes about a millisecond per
sentence, the whole budget of a verification.
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


def _replace(match: re.Match[str]) -> str:
    percent, run, follower = bool(match.group(1)), match.group(2), match.group(3)
    if not _is_quantity(run, percent, follower):
        return match.group(0)
    return _value(run) + ("%" if percent else "")


def arabic_numerals(text: str) -> str:
    """``text`` with its Chinese numeral quantities written in digits."""
    return _RUN.sub(_replace, text) if any(c in _DIGITS or c in _UNITS for c in text) else text
