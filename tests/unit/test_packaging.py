"""The wheel ships the top-level profiles/ and a NON-editable install finds them."""

from __future__ import annotations

import json
import subprocess
import sys
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


@pytest.mark.slow
def test_non_editable_install_finds_the_profiles(wheel: Path, tmp_path: Path) -> None:
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(system_site_packages=True, with_pip=True).create(env_dir)
    python = env_dir / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)], check=True)
    # run from an unrelated folder so that the source checkout is not importable
    proc = subprocess.run([str(env_dir / "bin" / "dsctl"), "profiles", "show", "deepseek-v3", "--format", "json"],
                          capture_output=True, text=True, cwd=tmp_path, check=False)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["hidden_size"] == 7168 and "_profile_data" in data["path"]
