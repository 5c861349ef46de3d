"""The generated reference says what the code says, all of it, and `make verify` notices drift.

Each test derives what must be documented from the code itself (the models' fields, the
plugin's parser, the chart's values model, the metric collectors, the condition constants),
so a field, flag, value, metric or reason added without `make generate` fails here, and the
drift check is shown to fail on a stale or stray page.
"""

from __future__ import annotations

import argparse
import html
import json
import re
import shutil
import statistics
from pathlib import Path

from swarmkit_api import conditions
from swarmkit_api.resources import KINDS
from swarmkit_api.topology import ServeSpec
from swarmkit_codegen import chart_values
from swarmkit_codegen.docgen import REFERENCE, cli, render_all, verify
from swarmkit_codegen.docgen.schema import rows
from swarmkit_operator import metrics

REPO = Path(__file__).resolve().parents[3]


def _text(page: Path) -> str:
    """A generated page with the entities undone, as a reader sees it."""
    return html.unescape((REPO / page).read_text())


def _row(page: str, path: str) -> list[str]:
    for line in _text(Path(page)).splitlines():
        cells = [c.strip() for c in line.split(" | ")]
        if cells and cells[0] == f"| <code>{path}</code>":
            return cells
    raise AssertionError(f"{path} has no row in {page}")


def test_a_crd_field_row_carries_type_default_validation_description() -> None:
    field = ServeSpec.model_fields["drain_seconds"]
    cells = _row("docs/reference/crds/topologies.md", "spec.serve.drainSeconds")
    assert cells[1] == "integer"
    assert cells[2] == f"<code>{field.default}</code>"
    bounds = {m.ge for m in field.metadata if hasattr(m, "ge")} | {
        m.le for m in field.metadata if hasattr(m, "le")
    }
    for bound in bounds:
        assert str(bound) in cells[3]
    assert (field.description or "").split()[0] in cells[4]


def test_every_field_of_every_kind_is_documented() -> None:
    for info in KINDS:
        page = _text(Path(f"docs/reference/crds/{info.plural}.md"))
        for part, model in (("spec", info.spec), ("status", info.status)):
            for row in rows(model.model_json_schema(by_alias=True, mode="validation"), part):
                assert f"<code>{row.path}</code>" in page, f"{info.kind}: {row.path}"
        for rule in info.spec.cel_rules:
            assert rule.rule in page


def test_cel_rules_of_nested_models_are_listed() -> None:
    page = _text(Path("docs/reference/crds/topologies.md"))
    for rule in ServeSpec.cel_rules:
        assert rule.rule in page and rule.message in page


def test_every_cli_command_and_flag_is_documented() -> None:
    page = _text(REFERENCE / "cli.md")
    commands = cli.commands()
    assert {"import", "pin", "logs", "status", "review"} <= set(commands)
    for path, parser in commands.items():
        assert f"## `kubectl swarmkit {path}`" in page
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
                continue
            for flag in action.option_strings:
                assert flag in page, f"{path}: {flag}"


def test_every_helm_value_is_documented() -> None:
    page = _text(REFERENCE / "helm-values.md")
    readme = _text(chart_values.CHART_DIR / "README.md")
    schema = chart_values.ChartValues.model_json_schema(by_alias=True, mode="validation")
    for row in rows(schema, ""):
        key = row.path.lstrip(".")
        assert f"<code>{key}</code>" in page, key
        assert f"<code>{key}</code>" in readme, key
    assert "<code>replicaCount</code> | <code>1</code>" in readme  # values.yaml's default


def test_every_metric_and_reason_is_documented() -> None:
    page = _text(REFERENCE / "metrics.md")
    for value in vars(metrics).values():
        if hasattr(value, "_name") and hasattr(value, "_labelnames"):
            assert value._name in page
    assert metrics.OBJECTS_NAME in page
    reasons = _text(REFERENCE / "conditions-and-events.md")
    for name in conditions.__all__:
        assert f"<code>{getattr(conditions, name)}</code> | <code>{name}</code>" in reasons
    assert "<code>Scheduled</code>" in reasons  # runs/schedule.py posts it as a literal


def test_committed_pages_are_current() -> None:
    assert verify(REPO) == []


def test_verify_fails_on_a_stale_or_stray_page(tmp_path: Path) -> None:
    # The generated files and their non-code inputs, in a scratch tree.
    inputs = [
        Path("Makefile"),
        Path("deploy/argocd/argocd-cm.yaml"),
        chart_values.CHART_DIR / "Chart.yaml",
        chart_values.CHART_DIR / "values.yaml",
        *(p.relative_to(REPO) for p in (REPO / "bench" / "results").glob("*.json")),
        *(p.relative_to(REPO) for p in (REPO / "bench").glob("*.py")),  # their docstrings
    ]
    for rel in [*render_all(REPO), *inputs]:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / rel, tmp_path / rel)
    assert verify(tmp_path) == []
    page = tmp_path / REFERENCE / "cli.md"
    page.write_text(page.read_text().replace("--skip-invalid", "--skip-broken"))
    (tmp_path / REFERENCE / "old.md").write_text("# gone\n")
    problems = "\n".join(verify(tmp_path))
    assert "docs/reference/cli.md" in problems and "--skip-invalid" in problems
    assert re.search(r"docs/reference/old\.md: not produced by the generator", problems)


def test_performance_page_shows_each_recorded_result_and_the_gaps() -> None:
    page = (REPO / "docs/performance/index.md").read_text()
    records = sorted((REPO / "bench" / "results").glob("*.json"))
    assert records, "no committed benchmark results"
    for path in records:
        record = json.loads(path.read_text())
        assert f"## {path.stem}" in page
        assert record["date"] in page and record["command"] in page
    scale = json.loads((REPO / "bench/results/bench.json").read_text())["results"]
    for n, at in scale["summary"].items():
        if isinstance(at, dict) and "readySeconds" in at:
            assert f"N={n} ({at['objects']} objects)" in page
            assert "{min:g} / {median:g} / {max:g}".format(**at["readySeconds"]) in page
    assert "<svg" in page and "floor: the same writes, bare client" in page
    # Every benchmark target the Makefile offers is listed under "Not recorded yet" until
    # its record is committed (and the section is gone once all are).
    gaps = page.split("## Not recorded yet", 1)[1] if "## Not recorded yet" in page else ""
    makefile = (REPO / "Makefile").read_text()
    for target in re.findall(r"^(bench(?:-[a-z]+)*):", makefile, flags=re.MULTILINE):
        recorded = (REPO / "bench/results" / f"{target}.json").exists()
        assert (f"- `make {target}`" in gaps) != recorded, target


def test_every_committed_result_with_a_headline_shows_in_the_readme() -> None:
    """A benchmark whose JSON changed shape would silently drop out of the README's
    figures: every committed result that has a headline must still produce its rows, and
    each row's value is the benchmark's own number."""
    from swarmkit_codegen.docgen import headlines

    root = Path(__file__).resolve().parents[3]
    shown = {row[2] for row in headlines.rows(root)}
    for path in sorted((root / "bench" / "results").glob("*.json")):
        if path.stem in headlines.HEADLINES:
            record = json.loads(path.read_text())
            produced = headlines.HEADLINES[path.stem](record["results"])
            assert produced, path.stem
            assert any(path.stem in command or record["command"] in command for command in shown)
    readme = (root / "README.md").read_text()
    block = readme[readme.index(headlines.BEGIN) : readme.index(headlines.END)]
    review = json.loads((root / "bench/results/bench-review.json").read_text())["results"]
    median = review["decision_to"]["succeeded"]["median_s"]
    assert f"{median:.3g} /" in block or f"/ {median:.3g} /" in block


def test_the_promotion_record_headlines_both_of_its_measurements() -> None:
    """``make bench-promotion`` records two figures: spec change → promoted and an EvalRun's
    overhead per evaluated case; both are README rows with the recorded numbers (a record
    of the older shape, without the overhead, still gives its one row)."""
    from swarmkit_codegen.docgen import headlines

    results = json.loads((REPO / "bench/results/bench-promotion.json").read_text())["results"]
    promoted, overhead = headlines.HEADLINES["bench-promotion"](results)
    assert f"/ {statistics.median(results['spec_change_to_promoted_s']):.1f} /" in promoted[1]
    per_case = results["overhead"]["per_case_s"]
    assert overhead[1].startswith(f"{per_case['min']:.3g} / {per_case['median']:.3g} / ")
    assert f"vs the same {results['overhead']['case_runs']} Runs created by hand" in overhead[0]
    readme = (REPO / "README.md").read_text()
    assert f"| {overhead[0]} | {overhead[1]} |" in readme
    older = {k: v for k, v in results.items() if k != "overhead"}
    assert headlines.HEADLINES["bench-promotion"](older) == [promoted]
