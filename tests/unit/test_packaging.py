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


#: README examples the walkthrough cannot run here, each with the reason (anything else must run)
NEEDS_A_CLUSTER = {
    "dsctl health check --node": "live NVML on a GPU node",
    "dsctl health record": "live NVML on a GPU node",
    "dsctl health show": "live NVML and sysfs of a GPU node",
    "dsctl health topo": "live NVML and sysfs of a GPU node",
    "dsctl health fleet": "Slurm (srun)",
    "dsctl health check --slurm": "Slurm's HealthCheckProgram on a node",
    "dsctl health check --textfile-dir": "live NVML (and node_exporter's folder)",
    "dsctl launch --nodes 256 --backend slurm": "Slurm (sbatch)",
    "dsctl trace overlap '/local/prof": "Slurm (srun) and traces on the nodes",
    "dsctl health burn-in fabric/ -w": "Slurm (srun) and the probe on GPU nodes",
    "dsctl topology verify big/": "a live ibnetdiscover dump of the 16,384-GPU fabric",
}


def readme_examples() -> list[str]:
    """Every ``$ dsctl ...`` line of the README (continuation lines joined, comments dropped; for
    ``$ X && dsctl ...`` the dsctl part)."""
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    found, i = [], 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("$ "):
            text = line[2:]
            while text.rstrip().endswith("\\") and i + 1 < len(lines):
                i += 1
                text = text.rstrip()[:-1] + " " + lines[i].strip()
            text = text.split("  #", 1)[0].strip()
            text = text.split("&& ", 1)[1] if "&& dsctl" in text else text
            if text.startswith("dsctl "):
                found.append(text)
        i += 1
    return found


@pytest.mark.slow
def test_walkthrough_every_readme_example_on_the_shipped_examples(wheel: Path, tmp_path: Path) -> None:
    """A wheel in a fresh venv; ``dsctl examples`` copies the inputs; every README example runs on them in README
    order (exit 0, or 1 where a check finds the example's planted fault), except those that need a GPU node or
    Slurm (NEEDS_A_CLUSTER)."""
    import shlex

    names = set(zipfile.ZipFile(wheel).namelist())
    assert {"dsctl/_example_data/today.npy", "dsctl/_example_data/traces/rank7.json.gz"} <= names
    env_dir = tmp_path / "venv"
    python = _isolated_venv(env_dir)
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
                    "--no-index", "--ignore-installed", str(wheel)], check=True)
    dsctl = str(env_dir / "bin" / "dsctl")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "DSCTL_PROFILES")}
    env["COLUMNS"] = "80"
    first = subprocess.run([dsctl, "examples", "try"], capture_output=True, text=True, cwd=tmp_path, env=env,
                           check=False)
    assert first.returncode == 0, first.stderr
    work = tmp_path / "try"
    (work / "train.py").write_text("print('train')\n")
    (work / "my-profiles" / "models").mkdir(parents=True)  # the README's own profiles folder: one valid profile
    (work / "my-profiles" / "models" / "deepseek-v3.yaml").write_bytes(
        (ROOT / "profiles" / "models" / "deepseek-v3.yaml").read_bytes())
    ran, failures = [], []
    for example in readme_examples():
        if any(example.startswith(prefix) for prefix in NEEDS_A_CLUSTER):
            continue
        words = shlex.split(example)
        argv = [dsctl, *[w for word in words[1:] for w in (sorted(str(p.relative_to(work)) for p in
                                                                   work.glob(word)) or [word]
                                                         if "*" in word and not word.startswith("'") else [word])]]
        proc = subprocess.run(argv, capture_output=True, text=True, cwd=work, env=env, check=False, timeout=300)
        ran.append(example)
        if proc.returncode not in (0, 1) or "Traceback" in proc.stderr:
            failures.append((example, proc.returncode, proc.stderr.strip().splitlines()[-1:]))
    assert failures == []
    assert len(ran) >= 20, ran
