"""The argument parser every command line of ours uses."""

from __future__ import annotations

import argparse
from typing import Any


class Parser(argparse.ArgumentParser):
    """No abbreviated flags: ``--out`` must not be taken for ``--output-dir``. Sub-command
    parsers are of this class too (argparse makes them of their parent's)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)
