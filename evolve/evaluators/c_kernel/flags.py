"""Compiler flags chosen by the candidate itself, on a `cflags:` comment line.

The candidate is untrusted, so its flags pass an allowlist: options such as `-fplugin=`,
`-wrapper`, `-B`, `-o` or `@file` could otherwise run code or write files outside the build.
"""

from __future__ import annotations

import re

CFLAGS = re.compile(r"cflags:(?P<flags>.*?)(?:@knob|\*/|$)")


def program_flags(source: str, default: str) -> list[str]:
    """The flags after the first `cflags:` up to `@knob` or the comment's end, else `default`."""
    for line in source.splitlines():
        match = CFLAGS.search(line)
        if match:
            return match["flags"].split()
    return default.split()


def disallowed(flags: list[str], allowed: list[str]) -> list[str]:
    return [flag for flag in flags if flag not in allowed]
