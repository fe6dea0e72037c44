"""The base of the models that pydantic builds on their first use, not at import."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class DeferredModel(BaseModel):
    """A model built by its first validation, dump or schema, not when its class is defined.

    For the results of tools and backends: a server's start defines dozens of them and uses
    none before a call returns one (building them cost about 20 ms of every start,
    BENCHMARKS.md Part S4). Only pydantic is imported here, so the knowledge base (which the
    bare benchmark server imports) gains nothing else of lingyi's.
    """

    model_config = ConfigDict(defer_build=True)
