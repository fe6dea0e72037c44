"""Relays: where a text reports what another council member said or did.

A text may hold several relays ("灵通说…，灵研也说…", "LingFlow and LingZhi both said…"); each
names a member as the speaker of a claim. The speaker's own name is no relay ("灵研：灵知说…"
relays 灵知 only), and a member's name alone claims nothing (a to-do list, a message addressed
to a member, a description of its role). Texts are canonical (lingyi.text), so the verbs and
names here are in canonical form: case-folded, simplified, full-width punctuation as ASCII.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from lingyi.policy import PolicySet

_VERB_ZH = (
    r"(?:刚才|之前|刚刚|已经|昨天|今天|上午|下午|也|都|还|又)?(?:跟我|对我|和我|向我|在群里)?"
    r"(?:说过|说|表示|告诉我|告诉|称|提到|提醒|强调|透露|说明|确认|报告|反馈|通知|讲|回复|宣布|汇报|指出)"
    r"(?:了|过)?"
)
_VERB_EN = (
    r"(?:(?:also|both|all|has|had|have|just|already)\s+)*(?:said|says|told\s+(?:me|us)|tells\s+(?:me|us)|"
    r"reported|reports|confirmed|confirms|mentioned|mentions|announced|announces|stated|states|"
    r"wrote|writes|noted|notes|claims|claimed|posted|let\s+(?:me|us)\s+know)(?:\s+that)?"
)
_VERB = rf"(?:{_VERB_ZH}|{_VERB_EN})"
_JOIN = r"\s*(?:和|与|跟|及|、|,|&|and)\s*"  # 灵通和灵研都说, "LingFlow and LingZhi said"
_LEAD = r"(?:据|according\s+to\s+)"
_AFTER_VERB = re.compile(r"[\s,:\"'“”‘’]*")
_SENTENCE_END = re.compile(r"[。！？!?\n]|\.(?:\s|$)|;\s")


@dataclass(frozen=True)
class Relay:
    """One member named as the speaker of a claim, and where the claim is in the text."""

    member: str  # canonical member id
    name: str  # the name as it appears (canonical)
    start: int  # where the relay begins (the name, or 据/according to)
    claim_start: int
    end: int  # where the claim ends (the next relay or the end of the sentence)

    def claim(self, text: str) -> str:
        return text[self.claim_start : self.end].strip(" ,.;:。，；")


@lru_cache(maxsize=64)
def _names_pattern(names: tuple[str, ...]) -> re.Pattern[str]:
    alt = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    name = rf"(?<![a-z0-9])(?:{alt})(?![a-z0-9])"
    group = rf"(?P<names>{name}(?:{_JOIN}{name})*)"
    return re.compile(
        rf"(?P<lead>{_LEAD})?{group}(?:的消息|'s\s+message)?\s*(?(lead)(?:{_VERB})?|{_VERB})"
    )


@lru_cache(maxsize=64)
def _one_name(names: tuple[str, ...]) -> re.Pattern[str]:
    alt = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    return re.compile(rf"(?<![a-z0-9])(?:{alt})(?![a-z0-9])")


def find_relays(text: str, policies: PolicySet, speaker: str) -> list[Relay]:
    """Every relay in canonical ``text`` of a member other than ``speaker``, in order."""
    names = tuple(n.casefold() for n in policies.names)
    found: list[Relay] = []
    for match in _names_pattern(names).finditer(text):
        claim_start = _AFTER_VERB.match(text, match.end()).end()  # type: ignore[union-attr]
        for name in _one_name(names).finditer(match.group("names")):
            member = policies.resolve(name.group(0))
            if member is not None and member.id != speaker:
                found.append(Relay(member.id, name.group(0), match.start(), claim_start, len(text)))
    return _bounded(text, found)


def _bounded(text: str, relays: list[Relay]) -> list[Relay]:
    """Each claim ends at the next relay that starts after it, or at the end of its sentence."""
    starts = sorted({r.start for r in relays})
    out = []
    for relay in relays:
        following = [s for s in starts if s > relay.claim_start]
        limit = min(following, default=len(text))
        stop = _SENTENCE_END.search(text, relay.claim_start, limit)
        end = stop.start() if stop else limit
        out.append(Relay(relay.member, relay.name, relay.start, relay.claim_start, end))
    return out
