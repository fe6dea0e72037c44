"""The ``[redact]`` section of lingyi.toml: which personal data is redacted, and whether
encoded text is looked into. Secrets are always redacted; no key turns that off."""

from __future__ import annotations

from functools import cache

from pydantic import BaseModel, ConfigDict, Field, field_validator


@cache
def personal_kinds() -> frozenset[str]:
    """The marker kinds of the packaged catalogue's personal-data formats."""
    from lingyi.redact._catalog import load_catalog

    return frozenset(f.kind for f in load_catalog().formats if f.personal)


class RedactSection(BaseModel):
    """Personal data and encoded text redacted from the log, stats, the report and the judge."""

    model_config = ConfigDict(extra="forbid", strict=True)  # personal = 1 is a typo, not true

    personal: bool = Field(
        True,
        description="Redact personal data (e-mail addresses, phone numbers, Chinese resident "
        "IDs, US SSNs, card numbers, IBANs), validated by python-stdnum and phonenumbers.",
    )
    keep: list[str] = Field(
        default_factory=list,
        description='Kinds of personal data written as they are, e.g. ["email"] '
        "(email, phone, cn_resident_id, us_ssn, card, iban).",
    )
    decode: bool = Field(
        True,
        description="Look inside base64-, hex- and URL-encoded text for secrets and personal "
        "data; an encoded run that holds one is replaced whole.",
    )

    @field_validator("keep")
    @classmethod
    def _known_kinds(cls, value: list[str]) -> list[str]:
        known = personal_kinds()
        if unknown := [k for k in value if k not in known]:
            raise ValueError(
                f"{unknown[0]!r} is no kind of personal data; valid: {', '.join(sorted(known))}"
            )
        return value
