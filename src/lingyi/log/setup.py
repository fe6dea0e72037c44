"""The log a config describes: its key, checkpoints and limits, in one place for every writer
(the guard, appeals) and for ``lingyi log verify``."""

from __future__ import annotations

from pathlib import Path

from lingyi.config import Config
from lingyi.log.audit import NOT_CONFIGURED
from lingyi.log.keys import KeyRing, load_keys
from lingyi.log.writer import LogOptions, VerificationLog


def log_keys(config: Config) -> KeyRing | None:
    """The keys ``[log] key_env`` or ``key_file`` name (ConfigError naming the key if they
    cannot be read); None for a plain chain."""
    section = config.raw.log
    return load_keys(section.key_env or None, config.log_key_file, str(config.source))


def store_path(config: Config) -> Path | None:
    """The index ``[store] path`` names for the config's own log; None: beside the log."""
    return config.store_path


def log_options(config: Config) -> LogOptions:
    section = config.raw.log
    return LogOptions(
        fsync=section.fsync,
        keys=log_keys(config),
        checkpoints=config.checkpoints_path,
        checkpoint_every=section.checkpoint_every,
        max_field_bytes=section.max_field_bytes,
        index=config.store_path,
    )


def open_log(config: Config) -> VerificationLog:
    """The writer of the log in effect, as the config says it is written."""
    return VerificationLog(config.log_path, log_options(config))


def checkpoints_skipped(config: Config) -> str:
    """Why the log in effect has no checkpoints checked."""
    if config.raw.log.checkpoints and config.checkpoints_path is None:
        detail = config.origins["log"].detail if "log" in config.origins else "an override"
        return f"the log was given by {detail}; checkpoints are kept for paths.log only"
    return NOT_CONFIGURED
