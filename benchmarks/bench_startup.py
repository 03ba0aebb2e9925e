"""Start-up time: dsctl against a bare one-command Typer app in the same venv, measured side by side.

``python -m benchmarks.bench_startup`` prints, for ``--version``, ``--help`` and ``eplb --help``, the median wall
time of each and their ratio (target: dsctl / bare Typer <= 1.2), runs interleaved so that machine noise hits both
alike; exit 1 if a ratio misses. The general runner (``python -m benchmarks``) shows dsctl's absolute times.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.case import Case

TARGET_RATIO = 1.2

#: what dsctl's console script does
DSCTL = "import sys\nfrom dsctl.cli import main\nsys.exit(main())\n"

#: the yardstick: Typer's hello world with one command and a --version flag
BARE = '''import typer

app = typer.Typer()


def _version(value: bool) -> None:
    if value:
        typer.echo("bare 0")
        raise typer.Exit()


@app.command()
def hello(name: str = "world",
          version: bool = typer.Option(False, "--version", callback=_version, is_eager=True)) -> None:
    """Say hello."""
    typer.echo(f"hello {name}")


if __name__ == "__main__":
    app()
'''

#: (label, dsctl arguments, bare-app arguments)
ROWS = [("--version", ["--version"], ["--version"]),
        ("--help", ["--help"], ["--help"]),
        ("eplb --help", ["eplb", "--help"], ["--help"])]


def _scripts(folder: Path) -> tuple[Path, Path]:
    dsctl, bare = folder / "dsctl_entry.py", folder / "bare_typer.py"
    dsctl.write_text(DSCTL)
    bare.write_text(BARE)
    return dsctl, bare


def _time(script: Path, args: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, str(script), *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   check=True, env={"PATH": "/usr/bin:/bin", "COLUMNS": "100", "PYTHONPATH": _pythonpath()})
    return time.perf_counter() - start


def _pythonpath() -> str:
    return str(Path(__file__).resolve().parents[1])


def measure(repeat: int) -> list[dict[str, Any]]:
    """Median seconds of each row for dsctl and the bare app, runs alternating (one warm-up pair first)."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="dsctl-startup-") as tmp:
        dsctl, bare = _scripts(Path(tmp))
        for label, dsctl_args, bare_args in ROWS:
            _time(dsctl, dsctl_args), _time(bare, bare_args)
            ours, theirs = [], []
            for _ in range(repeat):
                ours.append(_time(dsctl, dsctl_args))
                theirs.append(_time(bare, bare_args))
            a, b = statistics.median(ours), statistics.median(theirs)
            rows.append({"command": label, "dsctl_s": a, "bare_typer_s": b, "ratio": a / b})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_startup", description=__doc__)
    parser.add_argument("--repeat", type=int, default=15, help="timed runs of each program per row")
    args = parser.parse_args(argv)
    rows = measure(max(1, args.repeat))
    print(f"{'command':<12}  {'dsctl_ms':>9}  {'bare_typer_ms':>13}  {'ratio':>6}  {'target':>6}  ok")
    failures = 0
    for row in rows:
        ok = row["ratio"] <= TARGET_RATIO
        failures += not ok
        print(f"{row['command']:<12}  {row['dsctl_s'] * 1e3:>9.1f}  {row['bare_typer_s'] * 1e3:>13.1f}  "
              f"{row['ratio']:>6.2f}  {TARGET_RATIO:>6.2f}  {'yes' if ok else 'NO'}", flush=True)
    return 1 if failures else 0


def _entry() -> Path:
    folder = Path(tempfile.mkdtemp(prefix="dsctl-startup-"))
    return _scripts(folder)[0]


CASES = [Case(f"startup: dsctl {label} (subprocess)", _entry, lambda script, a=dsctl_args: _time(script, a))
         for label, dsctl_args, _ in ROWS]


if __name__ == "__main__":
    sys.exit(main())
