"""The argument parser every command line of ours uses."""

from __future__ import annotations

import argparse
import textwrap
from typing import Any


class Parser(argparse.ArgumentParser):
    """No abbreviated flags: ``--out`` must not be taken for ``--output-dir``. Sub-command
    parsers are of this class too (argparse makes them of their parent's)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)


class KubectlParser(Parser):
    """Help laid out as kubectl's own: the description, ``Available Commands:``,
    ``Arguments:``, ``Options:`` (``--flag=VALUE: what it does``), ``Usage:``, and where
    to read more."""

    def format_help(self) -> str:
        width = 80
        out = [textwrap.fill(self.description or "", width), ""]
        commands: list[tuple[str, str]] = []
        arguments: list[tuple[str, str]] = []
        options: list[tuple[str, str]] = []
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                commands += [(c.dest, c.help or "") for c in action._choices_actions]
            elif action.help == argparse.SUPPRESS:
                continue
            elif not action.option_strings:
                if action.choices:
                    arguments.append(("|".join(map(str, action.choices)), action.help or ""))
                else:
                    arguments.append((str(action.metavar or action.dest), action.help or ""))
            else:
                names = ", ".join(action.option_strings)
                if action.nargs != 0:
                    names += f"={action.metavar or action.dest.upper()}"
                options.append((names, action.help or ""))
        for title, rows in (
            ("Available Commands", commands),
            ("Arguments", arguments),
            ("Options", options),
        ):
            if not rows:
                continue
            out.append(f"{title}:")
            if title == "Available Commands":
                column = max(len(name) for name, _ in rows) + 3
                for name, text in rows:
                    out.append(f"  {name:<{column}}{text}")
            else:
                for name, text in rows:
                    out.append(f"    {name}:")
                    if text:
                        fill = textwrap.fill(text, width, initial_indent="\t")
                        out.append(fill.replace("\n", "\n\t"))
                    out.append("")
                out.pop()  # the blank line after the last entry comes below
            out.append("")
        usage = self.format_usage().removeprefix("usage: ").strip()
        out += ["Usage:", f"  {' '.join(usage.split())}", ""]
        if commands:
            out.append(
                f'Use "{self.prog} <command> --help" for more information about a given command.'
            )
        return "\n".join(out).rstrip() + "\n"
