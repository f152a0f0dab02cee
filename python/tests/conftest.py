"""Shared fixtures: the passes and requests the Rust side made (tests/it/python_package.rs writes
them to the JSON file KYA_PASSES names, the shape tests/js/pass-interop.test.mjs reads)."""

from __future__ import annotations

import json
import os
from typing import Any, Dict

import pytest

#: Anvil's first development key (public test material), as kya-core's own tests use it.
SECRET = "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80"
SIGNER = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"
CHAIN = 84532
CREATED = 1_767_225_600
EXPIRES = CREATED + 60


@pytest.fixture(scope="session")
def fixture() -> Dict[str, Any]:
    path = os.environ.get("KYA_PASSES")
    if not path:
        pytest.fail("KYA_PASSES names the fixture file tests/it/python_package.rs writes")
    with open(path, encoding="utf-8") as file:
        loaded: Dict[str, Any] = json.load(file)
        return loaded


@pytest.fixture()
def trust(fixture: Dict[str, Any]) -> Dict[str, Any]:
    return {
        "jwks": fixture["jwks"],
        "issuer": fixture["issuer"],
        "chain_id": fixture["chainId"],
        "registry": fixture["registry"],
    }
