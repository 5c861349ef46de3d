"""The plugin skeleton: subcommand discovery, exit codes, colour only where it belongs."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

from swarmkit_cli.console import Console, wants_color
from swarmkit_cli.main import build_parser, command_modules

from .support import FakeTTY, run_cli


def test_every_command_module_registers_a_subcommand() -> None:
    parser = build_parser()
    actions = [a for a in parser._actions if a.dest == "command"]
    assert actions, "no subcommands registered"
    choices = set(actions[0].choices or {})  # type: ignore[arg-type]
    assert "pin" in choices
    assert len(choices) == len(command_modules())


def test_unknown_subcommand_is_a_usage_error_exit_2() -> None:
    result = run_cli("frobnicate")
    assert result.code == 2
    assert "invalid choice: 'frobnicate'" in result.err


def test_missing_argument_is_a_usage_error_exit_2() -> None:
    result = run_cli("pin")
    assert result.code == 2
    assert "the following arguments are required" in result.err


def test_no_color_on_a_pipe_even_without_no_color() -> None:
    assert not wants_color(io.StringIO(), {})


def test_color_on_a_tty_unless_no_color_or_dumb_terminal() -> None:
    assert wants_color(FakeTTY(), {})
    assert not wants_color(FakeTTY(), {"NO_COLOR": "1"})
    assert not wants_color(FakeTTY(), {"TERM": "dumb"})
    assert wants_color(FakeTTY(), {"NO_COLOR": ""})  # empty means unset (no-color.org)


def test_errors_are_red_on_a_tty_and_plain_with_no_color(tmp_path: Path) -> None:
    colored = run_cli("pin", str(tmp_path), tty=True)
    plain = run_cli("pin", str(tmp_path), tty=True, environ={"NO_COLOR": "1"})
    assert colored.code == plain.code == 1
    assert "\033[31merror\033[0m:" in colored.err
    assert "\033[" not in plain.err
    assert plain.err.startswith("error: ")


def test_table_aligns_columns_and_styles_rows_only_on_a_tty() -> None:
    out = FakeTTY()
    con = Console(out=out, err=io.StringIO(), environ={})
    con.table(["name", "ready"], [["a", "True"], ["longer-name", "False"]], [None, "red"])
    lines = out.getvalue().splitlines()
    assert lines[0] == "NAME          READY"
    assert lines[1] == "a             True"
    assert lines[2] == "\033[31mlonger-name   False\033[0m"


def test_console_script_is_installed_and_runs() -> None:
    exe = Path(sys.executable).parent / "kubectl-swarmkit"
    proc = subprocess.run([str(exe), "--help"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0
    assert "usage: kubectl swarmkit" in proc.stdout


# --- kubectl's global flags ----------------------------------------------------------


def test_global_flags_are_taken_from_anywhere_on_the_line() -> None:
    from swarmkit_cli.main import split_globals

    assert split_globals(["-n", "team-a", "status"]) == ({"namespace": "team-a"}, ["status"])
    assert split_globals(["review", "approve", "-n", "team-a", "r1"]) == (
        {"namespace": "team-a"},
        ["review", "approve", "r1"],
    )
    found, rest = split_globals(
        ["--context=prod", "logs", "-nteam-b", "run-1", "--kubeconfig", "/k", "--as", "alice",
         "--as-group=sre", "--", "-n", "x"]
    )  # fmt: skip
    assert found == {
        "context": "prod",
        "namespace": "team-b",
        "kubeconfig": "/k",
        "as_user": "alice",
        "as_group": "sre",
    }
    assert rest == ["logs", "run-1", "--", "-n", "x"]


def test_review_approve_takes_the_namespace_before_the_name(tmp_path: Path) -> None:
    # used to be "unrecognized arguments"; now it reaches the kubeconfig (which is missing)
    for argv in (
        ["review", "approve", "-n", "team-a", "r1"],
        ["-n", "team-a", "review", "approve", "r1"],
        ["--namespace=team-a", "status"],
    ):
        res = run_cli(*argv, "--kubeconfig", str(tmp_path / "none"))
        assert res.code == 1, (argv, res.err)
        assert "kubeconfig" in res.err and "not found" in res.err


def test_kubeconfig_files_merge_as_kubectl_merges_them(tmp_path: Path) -> None:
    import yaml

    from swarmkit_cli.kube import kubeconfig_paths, merge_kubeconfigs

    a = tmp_path / "a" / "config"
    b = tmp_path / "b" / "config"
    a.parent.mkdir()
    b.parent.mkdir()
    a.write_text(yaml.safe_dump({
        "clusters": [{"name": "c1", "cluster": {"server": "https://one",
                                                "certificate-authority": "ca.crt"}}],
        "contexts": [{"name": "dev", "context": {"cluster": "c1", "user": "u1",
                                                 "namespace": "from-a"}}],
        "users": [{"name": "u1", "user": {"token": "t1"}}],
    }))  # fmt: skip
    b.write_text(yaml.safe_dump({
        "current-context": "dev",
        "clusters": [{"name": "c1", "cluster": {"server": "https://shadowed"}}],
        "contexts": [{"name": "dev", "context": {"cluster": "c1", "user": "u1",
                                                 "namespace": "from-b"}},
                     {"name": "prod", "context": {"cluster": "c1", "user": "u1"}}],
        "users": [],
    }))  # fmt: skip
    merged = merge_kubeconfigs([str(a), str(tmp_path / "missing"), str(b)])
    assert merged is not None
    assert merged["current-context"] == "dev"  # the first file that sets it: b
    (c1,) = merged["clusters"]  # the first definition of a name wins
    assert c1["cluster"] == {"server": "https://one",
                             "certificate-authority": str(a.parent / "ca.crt")}  # fmt: skip
    assert [c["name"] for c in merged["contexts"]] == ["dev", "prod"]
    assert merged["contexts"][0]["context"]["namespace"] == "from-a"
    import os

    os.environ["KUBECONFIG"] = f"{a}{os.pathsep}{b}"
    try:
        assert kubeconfig_paths(None) == [str(a), str(b)]
        assert kubeconfig_paths("/only/this") == ["/only/this"]
    finally:
        del os.environ["KUBECONFIG"]
    assert merge_kubeconfigs([str(tmp_path / "missing")]) is None
