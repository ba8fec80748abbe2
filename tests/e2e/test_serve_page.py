"""The IMDB walkthrough's last step in a real browser: the averaged model served, a review typed into
the try page, positive or negative shown with its probability, straight and behind a path prefix.

The model is trained here by the example's own scripts (copier → one trainer → aggregator
``--vocab``) on its synthetic stand-in, and served with ``--module serving:ReviewClassifier``: by the
model server alone, and by ``trainyard serve`` as a service, tried from the UI's services page.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.conftest import need_module
from tests.support.browser import named_frame, open_signed_in, screenshot
from tests.support.model_server import ModelServer, export_scorer, free_port

pytestmark = pytest.mark.slow
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "imdb"


def step(*args: str | Path) -> None:
    done = subprocess.run([sys.executable, *map(str, args)], cwd=EXAMPLE, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.fixture(scope="module")
def imdb_model(tmp_path_factory) -> Path:
    """The averaged model (a folder), trained by the example's own scripts: seconds on the synthetic corpus."""
    need_module("torch", "pip install 'trainyard[torch]'")
    out = tmp_path_factory.mktemp("imdb-serve")
    step("copier.py", "--workers", "1", "--shards", out / "shards", "--heldout", out / "heldout",
         "--vocab", out / "vocab")
    step("trainer.py", "--data", out / "shards" / "0", "--epochs", "3", "--out", out / "models" / "0")
    step("aggregator.py", "--models", out / "models", "--vocab", out / "vocab", "--out", out / "averaged")
    return out / "averaged"


@pytest.fixture(scope="module")
def imdb_server(imdb_model):
    server = ModelServer(imdb_model, "imdb", "--module", "serving:ReviewClassifier", cwd=EXAMPLE)
    server.start().wait()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def prefix_proxy(imdb_server):
    """What the platform's /serve/NAME/ proxy does to the page: strip the prefix and forward."""
    import uvicorn
    from starlette.applications import Starlette
    from starlette.responses import Response
    from starlette.routing import Route

    async def forward(request):  # noqa: ANN001, ANN202
        async with httpx.AsyncClient() as client:
            r = await client.request(request.method, imdb_server.url + "/" + request.path_params["rest"],
                                     content=await request.body(), headers={"content-type": "application/json"})
        return Response(r.content, r.status_code, media_type=r.headers.get("content-type"))

    app = Starlette(routes=[Route("/serve/imdb/{rest:path}", forward, methods=["GET", "POST"])])
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}/serve/imdb/"
    server.should_exit = True
    thread.join(10)


def predict(page, review: str) -> tuple[str, float]:  # noqa: ANN001
    page.wait_for_selector("textarea#text")
    page.fill("textarea#text", review)
    page.evaluate("document.getElementById('result').replaceChildren()")
    page.click("#predict")
    row = page.wait_for_selector('#result [data-row="0"]')
    return row.evaluate("e => e.firstChild.textContent"), float(row.query_selector("[data-probability]")
                                                                 .get_attribute("data-probability"))


def test_typing_a_review_shows_its_sentiment_and_probability(imdb_server, page):
    page.goto(imdb_server.url + "/")
    assert page.inner_text("#title") == "imdb"
    label, p = predict(page, "What a luminous drama: honest, sincere and beguiling from start to end.")
    assert label == "positive" and 0.5 < p <= 1
    assert "probability" in page.inner_text("#result") and "negative" in page.inner_text("#result")
    screenshot(page, "serve")
    label, p = predict(page, "The pacing was tedious, the plot was dreary and the acting clumsy.")
    assert label == "negative" and 0.5 < p <= 1


def test_the_page_works_behind_the_proxys_path_prefix(prefix_proxy, page):
    page.goto(prefix_proxy)
    label, _ = predict(page, "A classic. Fantastic and honest.")
    assert label == "positive"


def test_the_imdb_model_served_by_trainyard_answers_a_review_typed_in_the_ui(imdb_model, auth_server, page):
    # given the README's command, from the example's folder (its snapshot holds serving.py), on a server with users
    server = auth_server
    done = server.cli("serve", imdb_model.as_uri(), "--name", "imdb", "--module", "serving:ReviewClassifier",
                      cwd=EXAMPLE)
    assert done.returncode == 0, done.stdout + done.stderr
    # when the service's page in the UI shows the model server's try page, through /serve/imdb/
    open_signed_in(page, server.url, server.token, "/services/imdb")
    frame = named_frame(page, "try", timeout=120)  # once a replica has loaded the model
    # then a review typed there comes back positive or negative, with its probability: the page runs sandboxed,
    # in an origin of its own, its requests sent by the services page around it
    label, p = predict(frame, "What a luminous drama: honest, sincere and beguiling from start to end.")
    assert label == "positive" and 0.5 < p <= 1
    assert frame.evaluate("self.origin") == "null"
    label, p = predict(frame, "The pacing was tedious, the plot was dreary and the acting clumsy.")
    assert label == "negative" and 0.5 < p <= 1
    assert server.client().services.get("imdb").traffic.requests >= 3  # the page's and its two predictions
    # and opened at its address, the same page in the frame page's frame
    page.goto(server.url + "/serve/imdb/")
    page.wait_for_selector("iframe[sandbox]")
    framed = next(f for f in page.frames if f.parent_frame is not None)
    label, p = predict(framed, "A classic. Fantastic and honest.")
    assert label == "positive" and framed.evaluate("self.origin") == "null"


def test_a_tabular_model_gets_a_field_per_feature_and_a_json_box(tmp_path, page):
    import joblib
    from sklearn.datasets import load_digits
    from sklearn.linear_model import LogisticRegression

    x, y = load_digits(return_X_y=True)
    model = LogisticRegression(max_iter=300).fit(x, y)
    joblib.dump(model, tmp_path / "digits.joblib")
    server = ModelServer(tmp_path / "digits.joblib", "digits").start()
    try:
        server.wait()
        page.goto(server.url + "/")
        page.wait_for_selector("[data-feature='63']")
        assert page.locator("[data-feature]").count() == 64
        for i, value in enumerate(x[7]):  # the form, one field per feature
            page.fill(f"[data-feature='{i}']", str(value))
        page.click("#predict")
        row = page.wait_for_selector('#result [data-row="0"]')
        assert row.evaluate("e => e.firstChild.textContent") == str(model.predict(x[7:8])[0])
        page.fill("textarea#rows", str(x[20:22].tolist()))  # the JSON box: two rows at once
        page.evaluate("document.getElementById('result').replaceChildren()")
        page.click("#predict")
        page.wait_for_selector('#result [data-row="1"]')
        shown = page.eval_on_selector_all("#result [data-row]", "rows => rows.map(e => e.firstChild.textContent)")
        assert shown == [str(v) for v in model.predict(x[20:22])]
        page.fill("textarea#rows", "[[1, 2, 3]]")
        page.click("#predict")
        assert "64 features per row, got 3" in page.wait_for_selector("#error").inner_text()
    finally:
        server.stop()


def test_a_program_with_several_inputs_gets_a_box_for_each_and_shows_every_output(tmp_path, page):
    torch = need_module("torch", "pip install 'trainyard[torch]'")
    net = export_scorer(torch, tmp_path / "scorer.pt2")
    server = ModelServer(tmp_path / "scorer.pt2", "scorer").start()
    try:
        server.wait()
        page.goto(server.url + "/")
        # given a box per input, named with its type and shape: four numbers, three checkboxes, one number
        page.wait_for_selector("fieldset[data-input='2'] #value-2")
        legends = page.eval_on_selector_all("legend", "ls => ls.map(l => l.textContent)")
        assert legends == ["input-0 · FP32 [-1, 4]", "input-1 · BOOL [-1, 3]", "input-2 · FP32 []"]
        assert page.locator("fieldset[data-input='1'] input[type=checkbox]").count() == 3
        assert page.is_hidden("#v1-alt")  # KServe v1 takes one input: not offered
        x = [0.5, -1.0, 2.0, 0.25]
        for i, v in enumerate(x):
            page.fill(f"fieldset[data-input='0'] [data-feature='{i}']", str(v))
        for i in (0, 2):
            page.check(f"fieldset[data-input='1'] [data-feature='{i}']")
        page.fill("#value-2", "0.5")
        page.click("#predict")
        # then the first output is the row's line, the other named beneath it: both the module's own
        row = page.wait_for_selector('#result [data-row="0"]')
        with torch.no_grad():
            want = net(torch.tensor([x]), torch.tensor([[True, False, True]]), temperature=torch.tensor(0.5))
        shown = [float(v) for v in json.loads(row.get_attribute("data-values"))]
        assert shown == pytest.approx(want["proba"][0].tolist(), rel=1e-5)
        assert shown[1] < 1e-6  # the masked class
        assert page.inner_text("[data-output='output-1']") == f"output-1: {int(want['label'][0])}"
        screenshot(page, "serve-inputs")
        # and the JSON boxes take whole rows; a ragged one is refused naming its input
        page.fill("#rows", "[[1, 2, 3, 4], [0, 0, 0, 1]]")
        page.fill("#rows-1", "[[true, true, true], [true, false, true]]")
        page.evaluate("document.getElementById('result').replaceChildren()")
        page.click("#predict")
        page.wait_for_selector('#result [data-row="1"]')
        labels = page.eval_on_selector_all("[data-output='output-1']", "ls => ls.map(l => l.textContent)")
        with torch.no_grad():
            want = net(torch.tensor([[1.0, 2, 3, 4], [0, 0, 0, 1]]), torch.tensor([[True] * 3, [True, False, True]]),
                       temperature=torch.tensor(0.5))
        assert labels == [f"output-1: {v}" for v in want["label"].tolist()]
        page.fill("#rows-1", "[[true, true, true], [true]]")
        page.click("#predict")
        assert page.wait_for_selector("#error").inner_text() == "input-1: rows of different lengths"
        page.fill("#rows-1", "")
        page.fill("#value-2", "")
        page.click("#predict")
        page.wait_for_function("document.getElementById('error').textContent.startsWith('input-2')")
        assert page.inner_text("#error") == "input-2: a value is needed"
    finally:
        server.stop()


def test_an_image_model_gets_a_pad_to_draw_on_and_an_image_file_to_pick(tmp_path, page):
    torch = need_module("torch", "pip install 'trainyard[torch]'")
    from PIL import Image

    class Digits(torch.nn.Module):  # an MNIST-sized convolutional net, untrained: its answer is what is compared
        def __init__(self) -> None:
            super().__init__()
            torch.manual_seed(0)
            self.conv = torch.nn.Conv2d(1, 4, 5, stride=2)
            self.out = torch.nn.Linear(4, 3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.out(torch.relu(self.conv(x)).mean(dim=(2, 3)))

    net = Digits().eval()
    program = torch.export.export(net, (torch.zeros(2, 1, 28, 28),),
                                  dynamic_shapes={"x": {0: torch.export.Dim("batch")}})
    torch.export.save(program, tmp_path / "digits.pt2")
    server = ModelServer(tmp_path / "digits.pt2", "digits").start()
    try:
        server.wait()
        page.goto(server.url + "/")
        pad = page.wait_for_selector("canvas#draw")

        def predicted() -> tuple[list[float], list[float]]:
            """What the page sent (the picture as a tensor) and the first output it shows."""
            page.evaluate("document.getElementById('result').replaceChildren()")
            with page.expect_request(lambda r: r.url.endswith("/infer")) as sent:
                page.click("#predict")
            row = page.wait_for_selector('#result [data-row="0"]')
            [given] = sent.value.post_data_json["inputs"]
            assert given["shape"] == [1, 1, 28, 28] and given["datatype"] == "FP32"
            return given["data"], [float(v) for v in json.loads(row.get_attribute("data-values"))]

        def module(data: list[float]) -> list[float]:
            with torch.no_grad():
                return net(torch.tensor(data, dtype=torch.float32).reshape(1, 1, 28, 28))[0].tolist()

        # given a stroke drawn across the pad: white on black, scaled to 28×28 values in 0..1
        box = pad.bounding_box()
        page.mouse.move(box["x"] + box["width"] * 0.3, box["y"] + box["height"] * 0.2)
        page.mouse.down()
        page.mouse.move(box["x"] + box["width"] * 0.6, box["y"] + box["height"] * 0.8, steps=12)
        page.mouse.up()
        data, shown = predicted()
        assert all(0 <= v <= 1 for v in data) and max(data) > 0.9 and sum(v > 0.5 for v in data) < 28 * 28 / 3
        assert shown == pytest.approx(module(data), rel=1e-4, abs=1e-6)  # what the model answers to that picture
        largest = max(range(3), key=lambda k: shown[k])
        assert page.get_attribute("#result [data-largest]", "data-largest") == str(largest)
        # when an image file is picked instead: a white square in the middle of a black 56×56 picture
        picture = Image.new("RGB", (56, 56))
        picture.paste((255, 255, 255), (14, 14, 42, 42))
        picture.save(tmp_path / "square.png")
        page.set_input_files("#image", str(tmp_path / "square.png"))
        page.wait_for_selector("canvas#draw[data-loaded='square.png']")
        data, shown = predicted()
        grid = [data[r * 28:(r + 1) * 28] for r in range(28)]
        assert grid[14][14] > 0.95 and grid[0][0] < 0.05 and grid[27][27] < 0.05  # scaled by half, corners dark
        assert shown == pytest.approx(module(data), rel=1e-4, abs=1e-6)
        screenshot(page, "serve-image")
        # and Clear leaves a black pad
        page.click("fieldset button.plain")
        data, _ = predicted()
        assert max(data) == 0
    finally:
        server.stop()
