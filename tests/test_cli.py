"""The command line (book.cli): plain-text help for the top level and every command, one spelling per idea."""

from __future__ import annotations

import argparse

import pytest

from attention_dynamics.book import cli
from attention_dynamics.core.settings import SCALES

#: reStructuredText that argparse would print as it is.
MARKUP = ("``", ":mod:", ":func:", ":class:", ":data:", ":meth:", ":attr:")


def _commands() -> dict[str, argparse.ArgumentParser]:
    parser = cli._parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


def _help(capsys, *argv: str) -> str:
    with pytest.raises(SystemExit) as exit_:
        cli.main([*argv, "--help"])
    assert exit_.value.code == 0
    return capsys.readouterr().out


def test_every_command_is_described():
    assert set(_commands()) == set(cli.COMMANDS)


@pytest.mark.parametrize("command", [None, *cli.COMMANDS])
def test_help_is_plain_text(capsys, command):
    out = _help(capsys, *([command] if command else []))
    assert out.strip()
    found = [m for m in MARKUP if m in out]
    assert not found, f"`{command or 'the top level'} --help` shows markup {found}:\n{out}"
    if command:
        assert cli.COMMANDS[command][1].split()[0] in out  # its own description, not the top level's


def test_reproduce_and_compute_take_the_same_scale_names():
    def choices(parser: argparse.ArgumentParser) -> tuple:
        (scale,) = [a for a in parser._actions if "--scale" in a.option_strings]
        return tuple(scale.choices)

    commands = _commands()
    assert choices(commands["reproduce"]) == choices(commands["compute"]) == SCALES == ("fast", "book", "paper")


def test_one_spelling_of_the_smoke_run(capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["reproduce", "--fast"])
    assert exit_.value.code == 2 and "unrecognized arguments: --fast" in capsys.readouterr().err
    assert "--fast" not in _help(capsys, "reproduce")
