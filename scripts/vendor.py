"""Fetch the pinned front-end libraries from the npm registry into static/vendor/.

`make vendor` runs this. The manifest (static/vendor/manifest.json) pins each package's
version and the sha256 of every file we serve; a fetch that yields different bytes fails
instead of silently changing what browsers run. `--update` rewrites the hashes after a
deliberate version bump (edit the version in the manifest first).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENDOR = ROOT / "static" / "vendor"
MANIFEST = VENDOR / "manifest.json"


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def fetch(package: dict, workdir: Path) -> Path:
    """`npm pack` one pinned package (the registry configured for npm) and unpack it."""
    spec = f"{package['npm']}@{package['version']}"
    out = (
        # npm from PATH on purpose (the machine's configured registry); spec is our pin.
        subprocess.run(  # noqa: S603
            ["npm", "pack", "--silent", spec],  # noqa: S607
            cwd=workdir,
            check=True,
            capture_output=True,
            text=True,
        )
        .stdout.strip()
        .splitlines()[-1]
    )
    target = workdir / package["npm"].replace("/", "_")
    with tarfile.open(workdir / out) as tar:
        tar.extractall(target, filter="data")
    return target / "package"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--update", action="store_true", help="rewrite the sha256 pins")
    args = parser.parse_args()
    manifest = json.loads(MANIFEST.read_text())
    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        for package in manifest["packages"]:
            src = fetch(package, Path(tmp))
            for item in package["files"]:
                dest = VENDOR / item["dest"]
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(src / item["src"], dest)
                digest = sha256(dest)
                if args.update:
                    item["sha256"] = digest
                elif digest != item.get("sha256"):
                    print(f"sha256 mismatch: {item['dest']} ({digest})", file=sys.stderr)
                    failed = True
            licence = src / package.get("license_file", "LICENSE")
            if licence.exists():
                shutil.copyfile(licence, VENDOR / f"{package['name']}.LICENSE")
    if args.update:
        MANIFEST.write_text(json.dumps(manifest, indent=2) + "\n")
    print("vendor: " + ("FAILED" if failed else "ok"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
