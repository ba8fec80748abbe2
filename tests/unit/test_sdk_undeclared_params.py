"""The SDK warns, as the CLI does, of a param the spec does not declare; it still passes it on."""

import warnings

import pytest

from trainyard import errors
from trainyard.sdk.client import Client
from trainyard.spec.loader import UndeclaredParamWarning

NOWHERE = "http://127.0.0.1:9"  # the discard port: the submit fails after what it decides before sending


def submit(spec, **kw):
    with pytest.raises(errors.TrainyardError):
        Client(NOWHERE, token="t").submit(spec, **kw)


def test_a_spec_file_given_a_param_it_does_not_declare_warns_naming_it_and_the_declared_ones(tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text("name: j\ncommand: python t.py --lr {{params.lr}}\nparams: {lr: 0.1, epochs: 3}\n")
    with pytest.warns(UndeclaredParamWarning) as seen:
        submit(path, params={"lrr": 0.5, "lr": 0.2})
    # only ours: a socket an earlier test left may be collected meanwhile and warn (ResourceWarning) too
    ours = [w for w in seen if issubclass(w.category, UndeclaredParamWarning)]
    assert [str(w.message) for w in ours] == [
        f"{path} declares no param lrr (its params: lr, epochs), so its command cannot use it: the job sees it "
        "only in trainyard.params()"]
    assert ours[0].filename == __file__  # pointed at the caller's line, not the SDK's


def test_declared_params_and_specs_that_declare_none_pass_quietly(tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text("name: j\ncommand: python t.py --lr {{params.lr}}\nparams: {lr: 0.1}\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error", UndeclaredParamWarning)
        submit(path, params={"lr": 0.2})
        submit({"name": "j", "command": "python t.py"}, params={"seed": 1})  # it reads trainyard.params()


def test_a_dict_spec_that_declares_params_warns_of_the_others():
    spec = {"name": "j", "command": "python t.py --lr {{params.lr}}", "params": {"lr": 0.1}}
    with pytest.warns(UndeclaredParamWarning, match=r"spec 'j' declares no params a, b \(its params: lr\)"):
        submit(spec, params={"b": 1, "a": 2})
