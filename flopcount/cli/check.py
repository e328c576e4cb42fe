"""``flopcount check MODEL``: a cost gate for CI. Exit 0 within the budget (and the baseline),
1 with one line per exceeded limit, 2 on bad input (an unreadable budget, an unknown model).

The limits are exact metrics (see :mod:`flopcount.report.budget`): counts and predicted bytes,
never a measured time.
"""

from __future__ import annotations

import click

from ..io_utils import atomic_write
from ..report.budget import METRICS, Budget, against_baseline, baseline_text, metrics_of, parse_tolerance, read_baseline
from .group import CliError
from .render import check_output_path

EXIT_OVER_BUDGET = 1


def limit_options(func):
    """``--max-<metric>`` for every gated metric."""
    for metric in reversed(list(METRICS.values())):
        example = "120MB" if metric.kind == "bytes" else "4.2G"
        func = click.option(f"--max-{metric.name}", f"max_{metric.name.replace('-', '_')}", metavar=example,
                            help=f"Upper limit on the {metric.help}.")(func)
    return func


def budget_from(path: str | None, limits: dict) -> Budget | None:
    """The file's limits, overridden by those given as options."""
    given = {name.removeprefix("max_").replace("_", "-"): value for name, value in limits.items() if value is not None}
    from_file = Budget.read(path).limits if path is not None else {}
    from_options = Budget.parse(given, "--max-*").limits if given else {}
    merged = {**from_file, **from_options}
    return Budget(merged) if merged else None


def check_request(budget_path, baseline, tolerance: str, update: bool, limits: dict) -> tuple:
    """(budget or None, the baseline's metrics or None, tolerance): every file read and every
    limit parsed before the model is counted, and a check with nothing to check refused."""
    if update and baseline is None:
        raise CliError("--update writes the baseline: give its path with --baseline cost.json")
    if update:
        check_output_path(baseline)  # before the model is counted
    budget = budget_from(budget_path, limits)
    if budget is None and baseline is None:
        raise CliError("flopcount check needs limits: --budget budget.toml, --max-macs 4.2G ... or "
                       "--baseline cost.json")
    fraction = parse_tolerance(tolerance)
    return budget, (read_baseline(baseline) if baseline is not None and not update else None), fraction


def run_check(report, budget: Budget | None, baseline_values: dict | None, tolerance: float,
              update_path: str | None, quiet: bool) -> int:
    """Print one line per check (failures first), write the baseline when asked, and return
    the exit code."""
    values = metrics_of(report)
    checks = budget.check(values) if budget is not None else []
    if baseline_values is not None:
        checks += against_baseline(values, baseline_values, tolerance)
    failed = [c for c in checks if not c.ok]
    for c in failed:
        click.echo(f"FAIL {c.line}")
    if not quiet:
        for c in checks:
            if c.ok:
                click.echo(f"ok   {c.line}")
    if update_path is not None:
        atomic_write(update_path, baseline_text(report.model, values))
        click.echo(f"wrote the baseline {update_path}")
    if failed:
        click.echo(f"{report.model}: {len(failed)} of {len(checks)} limits exceeded")
        return EXIT_OVER_BUDGET
    if checks:
        click.echo(f"{report.model}: within {len(checks)} limits")
    return 0
