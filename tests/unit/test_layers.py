"""The import contracts in pyproject.toml ([tool.importlinter]) hold: layers stay layers."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_import_contracts_hold():
    lint = Path(sys.executable).parent / "lint-imports"  # installed with the dev extra, beside this Python
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    broken = result.stdout.partition("Broken contracts")[2] or result.stdout + result.stderr
    assert result.returncode == 0, f"import contracts broken (see [tool.importlinter] in pyproject.toml):\n{broken}"
