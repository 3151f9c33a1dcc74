"""The ``ruyi`` command as a whole: one flag, ``--url``, names a running Ruyi in every command (``--server`` its hidden old name)."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

import pytest

from proxy.cli import build_parser


def leaves(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every command line's own parser (``ruyi memo show``), with the words that reach it."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield path, parser
    for sub in subs:
        for name, child in sub.choices.items():
            yield from leaves(child, (*path, name))


def option(parser: argparse.ArgumentParser, flag: str) -> argparse.Action | None:
    return next((a for a in parser._actions if flag in a.option_strings), None)


def test_every_command_names_a_running_ruyi_with_url_and_still_takes_server() -> None:
    with_url = []
    for path, parser in leaves(build_parser()):
        url, server = option(parser, "--url"), option(parser, "--server")
        assert server is None or url is not None, f"ruyi {' '.join(path)} names a running Ruyi --server only"
        if url is None:
            continue
        with_url.append(" ".join(path))
        assert server is not None and server.dest == url.dest == "url", f"ruyi {' '.join(path)}: --server is not --url's alias"
        assert server.help == argparse.SUPPRESS and "--server" not in parser.format_help()
    for command in ("anchors list", "memo show", "cards search", "session", "archive", "sessions"):
        assert command in with_url


@pytest.mark.parametrize(
    "argv", [["memo", "show"], ["anchors", "export"], ["cards", "drafts"], ["sessions"], ["session", "reset", "s1"], ["archive", "list", "s1"]]
)
def test_server_is_parsed_as_url_and_says_it_is_deprecated(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    parser = build_parser()
    assert parser.parse_args([*argv, "--url", "http://127.0.0.1:1"]).url == "http://127.0.0.1:1"
    assert capsys.readouterr().err == ""
    assert parser.parse_args([*argv, "--server", "http://127.0.0.1:2"]).url == "http://127.0.0.1:2"
    assert "--server is deprecated, use --url" in capsys.readouterr().err
