"""The vendored front-end libraries are exactly the pinned bytes (static/vendor/manifest.json)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

VENDOR = Path(__file__).resolve().parents[2] / "static" / "vendor"


def test_every_vendored_file_matches_its_pin():
    manifest = json.loads((VENDOR / "manifest.json").read_text())
    pinned = set()
    for package in manifest["packages"]:
        assert package["version"] and package["license"], package["name"]
        assert (VENDOR / f"{package['name']}.LICENSE").is_file(), package["name"]
        for item in package["files"]:
            pinned.add(item["dest"])
            digest = hashlib.sha256((VENDOR / item["dest"]).read_bytes()).hexdigest()
            assert digest == item["sha256"], item["dest"]
    served = {p.name for p in VENDOR.iterdir()} - {"manifest.json"}
    unpinned = {n for n in served if not n.endswith(".LICENSE")} - pinned
    assert not unpinned, f"files in static/vendor/ without a pin: {unpinned}"
