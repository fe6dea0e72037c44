"""Public names of a package that import their module on first use (PEP 562).

For the packages whose import must stay cheap: ``lingyi`` (the warm client of ``lingyi
verify`` imports it), ``lingyi.log`` and ``lingyi.backends.kb`` (a server's start). Each keeps
a table of name → module and a one-line ``__getattr__`` that calls :func:`attribute`. Only
``sys`` is imported here, for the same reason.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # not typing's: importing typing costs more than the warm client
if TYPE_CHECKING:
    from typing import Any


def attribute(package: str, homes: dict[str, str], namespace: dict[str, Any], name: str) -> Any:
    """``name`` of ``package``, imported from its module in ``homes`` and kept in
    ``namespace`` (the package's globals) so that later look-ups are plain reads."""
    home = homes.get(name)
    if home is None:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    __import__(home)  # not importlib.import_module: importlib itself may not be loaded yet
    value = getattr(sys.modules[home], name)
    namespace[name] = value
    return value
