"""``CliError``: bad command-line input. ``tidu.cli`` reports it as one line
(``tidu: error: ...``) with exit status 2. Kept apart from ``tidu.cli`` so that
subcommands defined elsewhere (``tidu.checkrules``) raise it without importing the CLI."""


class CliError(Exception):
    """Bad command-line input; reported as one line, exit status 2."""


__all__ = ["CliError"]
