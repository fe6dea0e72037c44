"""The verification log: typed records, one writer, one reader, one chain verifier.

| module | owns |
|---|---|
| :mod:`~lingyi.log.records` | the record models (verification, appeal, resolution), the log's timestamps |
| :mod:`~lingyi.log.writer` | :class:`VerificationLog`, the appender (locks, chain, redaction) |
| :mod:`~lingyi.log.reader` | :func:`read_log` (forwards, streaming) and :func:`tail_records` (backwards) |
| :mod:`~lingyi.log.chain` | :func:`verify_chain` and the incremental :class:`ChainVerifier` stats use |
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
from lingyi.log.chain import (
    GENESIS,
    ChainBreak,
    ChainReport,
    ChainVerifier,
    canonical,
    record_hash,
    verify_chain,
)
from lingyi.log.query import Query, Skipped, format_human, format_jsonl, query_log, tail_log
from lingyi.log.reader import LogLine, read_log, reversed_lines, tail_records
from lingyi.log.records import (
    KINDS,
    OUTCOMES,
    SCHEMA_VERSION,
    AppealRecord,
    AppealResolutionRecord,
    CheckEntry,
    LogRecord,
    Subject,
    VerificationRecord,
    failed_codes,
    parse_record,
    record_kind,
    subject_of,
    verification_record,
)
from lingyi.log.writer import VerificationLog

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
    "LogLine",
    "LogRecord",
    "NoOpenAppealError",
    "NotAVerificationError",
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
    "list_appeals",
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
]
