"""The wheel ships the top-level profiles/ and a NON-editable install finds them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(ROOT)],
        capture_output=True, text=True, check=False,
    )
    if proc.returncode != 0:
        pytest.fail(f"building the wheel failed:\n{proc.stderr}")
    (path,) = out.glob("dsctl-*.whl")
    return path


def test_wheel_contains_every_profile(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {f"dsctl/_profile_data/{p.relative_to(ROOT / 'profiles')}" for p in (ROOT / "profiles").rglob("*.yaml")}
    assert expected and expected <= names


def _outer_site_dirs() -> list[str]:
    paths = sysconfig.get_paths()
    return sorted({paths["purelib"], paths["platlib"]})


def _isolated_venv(env_dir: Path) -> Path:
    """A venv that sees neither the base interpreter's packages nor the source checkout; dsctl's runtime
    dependencies come from the venv running this test, through a ``.pth`` line (no network, no stray packages)."""
    venv.EnvBuilder(system_site_packages=False, with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    site_dir = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                              capture_output=True, text=True, check=True).stdout.strip()
    # A plain path line: the outer folder joins sys.path AFTER the nested site-packages, and the outer folder's
    # own .pth files (an editable dsctl) are not run, so the wheel's dsctl is the one imported.
    (Path(site_dir) / "outer_deps.pth").write_text("".join(f"{p}\n" for p in _outer_site_dirs()))
    return python


@pytest.mark.slow
def test_non_editable_install_finds_the_profiles(wheel: Path, tmp_path: Path) -> None:
    env_dir = tmp_path / "venv"
    python = _isolated_venv(env_dir)
    # --ignore-installed: through the .pth the nested venv also sees the outer dsctl (a non-editable install in CI),
    # and pip would skip "the same version" and leave no dsctl script in the nested venv
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
                    "--no-index", "--ignore-installed", str(wheel)], check=True)
    work = tmp_path / "elsewhere"  # an unrelated folder, so that the source checkout is not importable
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "DSCTL_PROFILES")}
    proc = subprocess.run([str(env_dir / "bin" / "dsctl"), "profiles", "show", "deepseek-v3", "--format", "json"],
                          capture_output=True, text=True, cwd=work, env=env, check=False)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["hidden_size"] == 7168 and "_profile_data" in data["path"]
    assert Path(data["path"]).resolve().is_relative_to(env_dir.resolve())
    # the nested venv does not see the base interpreter's own packages (the bug this test once hid)
    base = sysconfig.get_paths(vars={"base": sys.base_prefix, "platbase": sys.base_prefix})
    hidden = {base["purelib"], base["platlib"]} - set(_outer_site_dirs())
    probe = subprocess.run([str(python), "-c", "import sys; print('\\n'.join(sys.path))"],
                           capture_output=True, text=True, env=env, cwd=work, check=True)
    assert not hidden & set(probe.stdout.splitlines())


@pytest.mark.slow
def test_walkthrough_every_readme_example_on_the_shipped_examples(wheel: Path, tmp_path: Path) -> None:
    """A wheel in a fresh venv: every ``$`` line of the README runs as written with the installed ``dsctl`` (the
    README's own ``dsctl examples try/`` and ``cd try/`` first) and ends with the exit code the README states,
    except those that need a GPU node, Slurm or a live fabric (tests/cli/test_docs_as_written.py: NEEDS)."""
    from tests.cli.test_docs_as_written import run_page

    names = set(zipfile.ZipFile(wheel).namelist())
    assert {"dsctl/_example_data/today.npy", "dsctl/_example_data/traces/rank7.json.gz"} <= names
    env_dir = tmp_path / "venv"
    python = _isolated_venv(env_dir)
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
                    "--no-index", "--ignore-installed", str(wheel)], check=True)
    work = tmp_path / "work"
    work.mkdir()
    results = run_page(ROOT / "README.md", work, dsctl=env_dir / "bin" / "dsctl")
    wrong = [(line.command, line.exit_code, code) for line, code in results if code is not None
             and code != line.exit_code]
    assert wrong == []
    assert sum(1 for _, code in results if code is not None) >= 30, results
