"""The log's secret keys: where they come from, and the MACs made with them.

The config names the key (``[log] key_env = "VAR"`` or ``key_file = PATH``); it is read from
there when the log is opened and is never written anywhere. The variable or file holds one or
more keys separated by whitespace (one a line, say): the **last** one makes new MACs, the
earlier ones are retired keys, kept so that records made with them still verify. Rotating is
appending a new key: the writer records the change in the chain (a ``key_rotation`` record).

Why keys are derived: one secret serves several purposes (record MACs, checkpoint MACs, the
key id that names it in records, redaction markers, approvals' argument digests). Each gets its own key, ``HMAC(secret, purpose)``, so a MAC made
for one purpose can never be passed off as another, and the key id reveals nothing of the key.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from lingyi.errors import ConfigError

MIN_KEY_CHARS = 32  # e.g. `openssl rand -hex 32` gives 64; fewer is too easy to guess
_RECORD = b"lingyi log record mac v1"
_CHECKPOINT = b"lingyi log checkpoint mac v1"
_KEY_ID = b"lingyi log key id v1"
_MARKER = b"lingyi redaction marker v1"
_APPROVAL = b"lingyi approval args digest v1"
_INDEX = b"lingyi log index seal v1"


def _derive(secret: bytes, purpose: bytes) -> bytes:
    return hmac.new(secret, purpose, hashlib.sha256).digest()


@dataclass(frozen=True)
class LogKey:
    """One key: its public id, and the derived keys (kept out of ``repr``)."""

    key_id: str
    record_key: bytes = field(repr=False)
    checkpoint_key: bytes = field(repr=False)
    # Keys the short hashes in redaction markers, so that a reviewer can tell two secrets
    # apart but nobody without the key can test a guess of a weak password against one.
    marker_key: bytes = field(repr=False, default=b"")
    # Keys the argument digest an approval is bound to, for the same reason: the arguments
    # are redacted in the log, and a plain digest of them would let a guess be tested.
    approval_key: bytes = field(repr=False, default=b"")
    # Seals the state the index beside the log resumes from (lingyi.store).
    index_key: bytes = field(repr=False, default=b"")

    @classmethod
    def from_secret(cls, secret: bytes) -> LogKey:
        key_id = _derive(secret, _KEY_ID).hex()[:16]
        derived = (_derive(secret, p) for p in (_RECORD, _CHECKPOINT, _MARKER, _APPROVAL, _INDEX))
        return cls(key_id, *derived)

    def record_mac(self, *parts: bytes | memoryview) -> str:
        """The MAC of a record's canonical bytes (given in parts: no copy of a large line)."""
        mac = hmac.new(self.record_key, digestmod=hashlib.sha256)
        for part in parts:
            mac.update(part)
        return mac.hexdigest()

    def checkpoint_mac(self, body: bytes) -> str:
        return hmac.new(self.checkpoint_key, body, hashlib.sha256).hexdigest()

    def index_mac(self, body: bytes) -> str:
        return hmac.new(self.index_key, body, hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class KeyRing:
    """The current key (new MACs) and every key that verifies (current and retired)."""

    current: LogKey
    keys: Mapping[str, LogKey]
    source: str  # where the keys came from, for messages: "$VAR" or a path

    def get(self, key_id: object) -> LogKey | None:
        return self.keys.get(key_id) if isinstance(key_id, str) else None

    def after(self, key_id: object, current: str | None) -> bool:
        """Is ``key_id`` later in the ring than ``current`` (the chain's key now)? A rotation
        goes forward only: one back to a retired key is what someone holding only that key
        would forge. None (a plain chain) and a key not in the ring come before every key."""
        order = list(self.keys)
        if key_id not in order:
            return False
        return current not in order or order.index(str(key_id)) > order.index(str(current))

    @classmethod
    def from_text(cls, text: str, source: str, where: str) -> KeyRing:
        """Keys separated by whitespace, the last one current; ``where`` names the config key."""
        secrets = text.split()
        if not secrets:
            raise ConfigError(f"{where}: {source} holds no key")
        short = [i + 1 for i, s in enumerate(secrets) if len(s) < MIN_KEY_CHARS]
        if short:
            raise ConfigError(
                f"{where}: key {', '.join(map(str, short))} in {source} is shorter than "
                f"{MIN_KEY_CHARS} characters (make one with: openssl rand -hex 32)"
            )
        keys = [LogKey.from_secret(s.encode()) for s in secrets]
        return cls(keys[-1], {k.key_id: k for k in keys}, source)


def load_keys(env: str | None, file: Path | None, where: str) -> KeyRing | None:
    """The keys named by ``[log] key_env`` or ``key_file``; None when neither is set.

    ``where`` is the config file, so that an error names it and the key.
    """
    if env:
        value = os.environ.get(env)
        if value is None:
            raise ConfigError(f"{where}: log.key_env: the environment variable {env} is not set")
        return KeyRing.from_text(value, f"${env}", f"{where}: log.key_env")
    if file is not None:
        try:
            text = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{where}: log.key_file: cannot read {file}: {exc}") from exc
        return KeyRing.from_text(text, str(file), f"{where}: log.key_file")
    return None
