"""The verification log: typed records, one writer, one reader, one chain verifier.

| module | owns |
|---|---|
| :mod:`~lingyi.log.records` | the record models (verification, appeal, resolution), the log's timestamps |
| :mod:`~lingyi.log.writer` | :class:`VerificationLog`, the appender (locks, chain, redaction, limits) |
| :mod:`~lingyi.log.io` | whole-line appends: short writes continued, failed ones taken back |
| :mod:`~lingyi.log.keys` | the log key (env or file, rotation), the MACs of records and checkpoints |
| :mod:`~lingyi.log.limits` | values over the size limit stored cut, with their length and hash |
| :mod:`~lingyi.log.reader` | :func:`read_log` (forwards, streaming) and :func:`tail_records` (backwards) |
| :mod:`~lingyi.log.chain` | :func:`verify_chain` and the incremental :class:`ChainVerifier` the index uses |
| :mod:`~lingyi.log.checkpoints` | signed checkpoints (seq, hash) in another file, and their check |
| :mod:`~lingyi.log.audit` | :func:`verify_log`: chain, keyed chain, checkpoints, and which were checked |
| :mod:`~lingyi.log.setup` | the log a config describes (key, checkpoints, limits) for every writer |
| :mod:`~lingyi.log.query` | the filters of ``lingyi log tail|query`` and their output |
| :mod:`~lingyi.log.appeals` | appeals and their resolutions, appended to the same log |

Every reader of the log goes through :mod:`~lingyi.log.reader`, every chain check through
:mod:`~lingyi.log.chain`. The contract is in DESIGN.md ("Verification log").
"""

from lingyi.log.appeals import (
    AlreadyResolvedError,
    AppealError,
    AppealOpenError,
    NoOpenAppealError,
    NotAVerificationError,
    UnknownRecordError,
    default_actor,
    file_appeal,
    list_appeals,
    resolve_appeal,
)
from lingyi.log.audit import Guarantee, LogVerification, verify_log
from lingyi.log.chain import (
    GENESIS,
    ChainBreak,
    ChainReport,
    ChainVerifier,
    canonical,
    record_hash,
    verify_chain,
)
from lingyi.log.checkpoints import CheckpointReport
from lingyi.log.keys import KeyRing, LogKey, load_keys
from lingyi.log.limits import limit_record
from lingyi.log.query import Query, Skipped, format_human, format_jsonl, query_log, tail_log
from lingyi.log.reader import LogLine, read_log, reversed_lines, tail_records
from lingyi.log.records import (
    KINDS,
    OUTCOMES,
    SCHEMA_VERSION,
    AppealRecord,
    AppealResolutionRecord,
    CheckEntry,
    KeyRotationRecord,
    LogRecord,
    OutcomeRecord,
    Subject,
    VerificationRecord,
    failed_codes,
    parse_record,
    record_kind,
    subject_of,
    verification_record,
)
from lingyi.log.writer import LogOptions, VerificationLog

__all__ = [
    "GENESIS",
    "KINDS",
    "OUTCOMES",
    "SCHEMA_VERSION",
    "AlreadyResolvedError",
    "AppealError",
    "AppealOpenError",
    "AppealRecord",
    "AppealResolutionRecord",
    "ChainBreak",
    "ChainReport",
    "ChainVerifier",
    "CheckEntry",
    "CheckpointReport",
    "Guarantee",
    "KeyRing",
    "KeyRotationRecord",
    "LogKey",
    "LogLine",
    "LogOptions",
    "LogRecord",
    "LogVerification",
    "NoOpenAppealError",
    "NotAVerificationError",
    "OutcomeRecord",
    "Query",
    "Skipped",
    "Subject",
    "UnknownRecordError",
    "VerificationLog",
    "VerificationRecord",
    "canonical",
    "default_actor",
    "failed_codes",
    "file_appeal",
    "format_human",
    "format_jsonl",
    "limit_record",
    "list_appeals",
    "load_keys",
    "parse_record",
    "query_log",
    "read_log",
    "record_hash",
    "record_kind",
    "resolve_appeal",
    "reversed_lines",
    "subject_of",
    "tail_log",
    "tail_records",
    "verification_record",
    "verify_chain",
    "verify_log",
]
