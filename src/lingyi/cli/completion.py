"""``lingyi completion SHELL``: print click's completion script for bash, zsh or fish."""

from __future__ import annotations

import click
from click.shell_completion import get_completion_class

from lingyi.cli._app import EXIT_OK, App, cli, entry

SHELLS = ("bash", "zsh", "fish")
COMPLETE_VAR = "_LINGYI_COMPLETE"


@cli.command(
    "completion",
    short_help="Print the shell completion script (bash, zsh, fish).",
    epilog='\b\nbash: eval "$(lingyi completion bash)"   (in ~/.bashrc)\n'
    'zsh:  eval "$(lingyi completion zsh)"    (in ~/.zshrc)\n'
    "fish: lingyi completion fish > ~/.config/fish/completions/lingyi.fish",
)
@click.argument("shell", type=click.Choice(SHELLS))
@entry
def completion(app: App, shell: str) -> int:
    """Print the completion script for SHELL. Commands, options, choices, member and tool
    names complete (members and tools from the policies in effect)."""
    complete = get_completion_class(shell)
    assert complete is not None  # every name in SHELLS is one of click's
    app.out(complete(cli, {}, "lingyi", COMPLETE_VAR).source())
    return EXIT_OK
