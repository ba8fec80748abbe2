"""Why an attempt's replica ended, as the launcher writes it: plain strings.

The launcher stays import-light, so it does not import the server's
:class:`trainyard.status.Reason` enum; these constants are its wire values,
and ``tests/unit/test_reasons.py`` checks that the two agree.
"""

SUCCEEDED = "Succeeded"
OOM = "OOMKilled"
TIMEOUT = "Timeout"
CANCELLED = "Cancelled"
LOST = "LostContact"  # stopped because the process that started it died (a Ray actor), not by a cancel
SETUP = "SetupFailed"
IMAGE_PULL = "ImagePullFailed"  # the job's image was not here and could not be pulled
MISSING_OUTPUT = "MissingOutput"  # a pipeline step exited 0 without writing a declared output
OUTPUTS_TOO_LARGE = "OutputsTooLarge"  # its outputs passed the server's outputs_max: none were uploaded


def error(exit_code: int) -> str:
    """The reason of a command that exited non-zero on its own: the code is part of the text."""
    return f"Error(exit {exit_code})"
