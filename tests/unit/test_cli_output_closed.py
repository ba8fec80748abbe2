"""A command started with its standard output closed (`trainyard ls -o json >&-`) says so and exits 1,
without a traceback; a pipe that closes early (`| head`) is not this case."""

import subprocess
import sys


def test_json_output_to_a_closed_stdout_is_an_error_not_a_traceback():
    code = "from trainyard.cli.output import write; write('[]\\n')"
    out = subprocess.run(f"{sys.executable} -c \"{code}\" >&-", shell=True, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 1
    assert "standard output is closed" in out.stderr and "Traceback" not in out.stderr
