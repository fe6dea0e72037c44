"""``lingyi init DIR``: a deployment a newcomer can run and then make their own.

It writes ``config/lingyi.toml`` (so that ``cd DIR && lingyi …`` finds it by the search
order) listing every key with its default as a comment, the shipped member policies
(``_common.toml`` included), a sample knowledge-base document, a CSV registered as the data
source ``sample``, a transcript of policy tests, and an empty ``repos/`` folder for the
repositories members may act on. It never overwrites a file.
"""

from __future__ import annotations

from pathlib import Path

import click

from lingyi.cli._app import EXIT_OK, App, cli, entry, json_option
from lingyi.cli._reference import config_template
from lingyi.config import defaults_dir
from lingyi.errors import LingyiError

CONFIG = Path("config/lingyi.toml")
REPOS = Path("repos")
VALUES = {  # relative to config/, where the config file lives
    "paths.validators": "../validators",
    "paths.knowledge_base": "../kb",
    "paths.data_roots": ["../data"],
    "paths.repo_roots": ["../repos"],
    "paths.log": "../var/verification.jsonl",
    "paths.council": "../var/council.jsonl",
}
DATA_SOURCES = {
    "data_sources.sample": {
        "path": "sample.csv",
        "description": "Sample weekly sign-ups: week, region, signups, churned (replace with yours)",
    }
}


def files_to_write() -> dict[Path, bytes]:
    """Every file of a new deployment, by its path inside DIR."""
    shipped = defaults_dir()
    files = {CONFIG: config_template(VALUES, DATA_SOURCES).encode()}
    policies = shipped / "validators"  # member policies and the lexicons they name
    files |= {
        Path("validators") / p.relative_to(policies): p.read_bytes()
        for p in sorted(policies.rglob("*.toml"))
    }
    skeleton = shipped / "skeleton"
    files |= {
        p.relative_to(skeleton): p.read_bytes() for p in sorted(skeleton.rglob("*")) if p.is_file()
    }
    return files


@cli.command("init", short_help="Create a deployment: config, policies, KB, data, repos.")
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@json_option
@entry
def init(app: App, directory: Path, as_json: bool) -> int:
    """Create a deployment in DIRECTORY (made if needed): config/lingyi.toml with every key
    and its default, the shipped member policies, a sample knowledge-base document, a CSV
    registered as a data source, transcripts of policy tests and a repos/ folder. Existing
    files are never overwritten."""
    files = files_to_write()
    taken = [p for p in files if (directory / p).exists()]
    if taken:
        shown = ", ".join(str(directory / p) for p in taken[:5])
        raise LingyiError(f"{directory}: would overwrite {shown}; choose an empty folder")
    for rel, data in files.items():
        (directory / rel).parent.mkdir(parents=True, exist_ok=True)
        (directory / rel).write_bytes(data)
    (directory / REPOS).mkdir(exist_ok=True)
    if as_json:
        created = [str(directory / p) for p in [*files, REPOS]]
        app.json(
            {
                "ok": True,
                "directory": str(directory),
                "config": str(directory / CONFIG),
                "created": created,
            }
        )
    else:
        app.out(summary(directory, len(list((directory / "validators").glob("*.toml")))))
    return EXIT_OK


def summary(directory: Path, policies: int) -> str:
    return f"""Created a LingYi Guard deployment in {directory}:
  config/lingyi.toml        the config: every key, defaults as comments
  validators/               {policies} member policies (_common.toml: checks every member runs)
  kb/sample-001.md          a knowledge-base document (add yours beside it)
  data/sample.csv           a CSV, registered as the data source "sample"
  transcripts/sample.jsonl  policy tests: assertions with the decision they expect
  repos/                    put or clone the repositories members may commit to here

Next:
  cd {directory}
  lingyi config show                      what is in effect, and from where
  lingyi policy check                     validate the policies
  lingyi replay --check transcripts/      run the policy tests
  lingyi serve                            the MCP server (stdio); see README for clients"""
