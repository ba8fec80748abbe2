"""The GPU type a node reports is the model a spec names (`gpu_type: H100`), not NVML's whole product name."""

import pytest

from trainyard.engines.detect import gpu_family
from trainyard.scheduler.fit import check_fits_some_node
from trainyard.spec import parse_job
from trainyard.spec.records import NodeInfo


@pytest.mark.parametrize("name, family", [
    ("NVIDIA H100 80GB HBM3", "H100"),
    ("NVIDIA H100 NVL", "H100"),
    ("NVIDIA H200", "H200"),
    ("NVIDIA A100-SXM4-40GB", "A100"),
    ("NVIDIA A100 80GB PCIe", "A100"),
    ("Tesla V100-SXM2-16GB", "V100"),
    ("Tesla T4", "T4"),
    ("NVIDIA A10G", "A10G"),
    ("NVIDIA L40S", "L40S"),
    ("NVIDIA L4", "L4"),
    ("NVIDIA GH200 480GB", "GH200"),
    ("NVIDIA B200", "B200"),
    ("NVIDIA GeForce RTX 4090", "RTX-4090"),
    ("NVIDIA RTX A6000", "RTX-A6000"),
    ("Quadro RTX 8000", "RTX-8000"),
    ("NVIDIA RTX 6000 Ada Generation", "RTX-6000"),
])
def test_product_names_give_the_model(name, family):
    assert gpu_family(name) == family


def test_an_unknown_naming_keeps_the_whole_name():
    assert gpu_family("Some Future Accelerator") == "Some-Future-Accelerator"


def test_a_spec_naming_the_model_fits_a_detected_node():
    detected = NodeInfo(name="gpu-1", cpu=16, memory=2**37, gpu=1, gpu_ids=["0"],
                        gpu_type=gpu_family("NVIDIA H100 80GB HBM3"))
    h100 = parse_job("name: t\ncommand: x\nresources: {gpu: 1, gpu_type: H100}\n")
    a100 = parse_job("name: t\ncommand: x\nresources: {gpu: 1, gpu_type: A100}\n")
    assert check_fits_some_node(h100, [detected]) is None
    assert check_fits_some_node(a100, [detected]) == (
        "resources.gpu_type", "no node has GPU type A100 (have: H100)")
