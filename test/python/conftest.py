"""pytest set-up for kolo.torch: every rank of `mpirun -np N python3 -m pytest` runs the same
tests in the same order (collectives pair up by name). Data come from a seed and a rank, so
each rank computes every rank's input and the exact expected result by itself."""
import os

import pytest
import torch

import kolo.torch as hvd

torch.set_num_threads(1)
hvd.init()


def pytest_configure(config):
    # One line per rank in the report header, so a failing rank is easy to find.
    config._kolo_rank = hvd.rank()


def pytest_report_header(config):
    return "kolo rank %d of %d (pid %d)" % (hvd.rank(), hvd.size(), os.getpid())


@pytest.fixture
def n():
    return hvd.size()


@pytest.fixture
def r():
    return hvd.rank()
