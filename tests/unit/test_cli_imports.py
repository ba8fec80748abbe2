"""The CLI loads the spec models, pydantic, yaml and rich's tables only in the commands that use them:
building the models cost every command, `--help` and `--version` included, about half a second."""

import subprocess
import sys

HEAVY = ("trainyard.spec.job", "trainyard.spec.records", "trainyard.sdk.client", "pydantic", "yaml", "rich.table")


def loaded_after(code: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", f"{code}\nimport sys\nprint(' '.join(sys.modules))"],
                         capture_output=True, text=True, check=True).stdout
    return set(out.split())


def test_building_the_whole_cli_loads_none_of_the_heavy_modules():
    loaded = loaded_after("from typer.main import get_command\nfrom trainyard.cli.main import app\n"
                          "group = get_command(app)\n"
                          "[group.get_command(None, name) for name in group.list_commands(None)]  # the context goes unused")
    assert "trainyard.cli.usage" in loaded and "trainyard.cli.admin" in loaded  # every command was built
    assert loaded.isdisjoint(HEAVY), sorted(loaded & set(HEAVY))


def test_spec_names_still_import_from_the_package_and_load_on_first_use():
    loaded = loaded_after("import trainyard.spec.units")
    assert "trainyard.spec.job" not in loaded
    from trainyard.spec import JobSpec, parse_job
    from trainyard.spec.job import JobSpec as direct

    assert JobSpec is direct and parse_job("command: x").command == "x"


def test_the_choices_the_cli_offers_are_the_models_own():
    from trainyard.spec import identity, monitoring
    from trainyard.spec.choices import ROLES, UsageBy

    assert identity.ROLES is ROLES and monitoring.UsageBy is UsageBy
    assert monitoring.UsageReport.model_fields["by"].annotation is UsageBy


def test_the_sdk_loads_httpx_without_its_command_line_client_which_still_runs_when_called():
    loaded = loaded_after("import trainyard.sdk.client")
    assert "httpx" in loaded and loaded.isdisjoint({"click", "pygments", "rich"}), sorted(loaded & {"click", "pygments", "rich"})
    out = subprocess.run([sys.executable, "-c", "import trainyard, httpx; httpx.main(['--help'])"],
                         capture_output=True, text=True)
    assert out.returncode == 0 and "Usage: " in out.stdout and "httpx" in out.stdout


def test_a_plain_http_client_reads_no_ca_bundle_and_its_context_verifies_against_nothing():
    import ssl

    from trainyard.sdk.http import verify_for

    plain = verify_for("http://127.0.0.1:8000")
    assert isinstance(plain, ssl.SSLContext) and plain.get_ca_certs() == []  # no bundle read
    assert plain.verify_mode == ssl.CERT_REQUIRED and plain.check_hostname  # a TLS peer would be refused
    assert verify_for("https://example.org") is True  # httpx's own: the CA bundle, SSL_CERT_FILE
