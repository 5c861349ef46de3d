"""`bench/record.py` keeps what a benchmark printed, with when, where, how loaded and how run.

Run as a real subprocess around a real command, as `make`/an engineer runs it: the record
must hold the last JSON document the command printed (progress before it ignored), the
exact command, and the machine's load before and after; a command that prints no JSON is
refused rather than recorded as empty.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

RECORD = Path(__file__).resolve().parents[3] / "bench" / "record.py"


def _record(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(RECORD), "--results-dir", str(tmp_path), *args],
        capture_output=True,
        text=True,
        check=False,
    )


def test_a_record_holds_the_last_document_the_command_and_the_load(tmp_path: Path) -> None:
    script = "print('warming up {not json'); print('{\"p50_ms\": 12.5, \"runs\": [1, 2]}')"
    done = _record(tmp_path, "bench-x", "--", sys.executable, "-c", script)
    assert done.returncode == 0, done.stderr
    record = json.loads((tmp_path / "bench-x.json").read_text())
    assert record["benchmark"] == "bench-x"
    assert record["results"] == {"p50_ms": 12.5, "runs": [1, 2]}
    assert record["command"].endswith("-c " + "'" + script.replace("'", "'\"'\"'") + "'")
    for when in ("before", "after"):
        load = record["load"][when]
        assert len(load) == 3 and all(isinstance(x, float | int) and x >= 0 for x in load)
    assert record["machine"]["cpus"] >= 1 and record["date"].endswith(" UTC")


def test_a_json_file_given_before_the_name_is_read_instead_of_stdout(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    report.write_text('{"seed": 11, "full": false}')
    done = _record(
        tmp_path, "--json-file", str(report), "chaos", "--", sys.executable, "-c", "print(1)"
    )
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "chaos.json").read_text())["results"] == {
        "seed": 11,
        "full": False,
    }


def test_a_command_that_prints_no_json_is_refused(tmp_path: Path) -> None:
    done = _record(tmp_path, "bench-y", "--", sys.executable, "-c", "print('done')")
    assert done.returncode != 0
    assert "printed no JSON document" in done.stderr
    assert not (tmp_path / "bench-y.json").exists()
