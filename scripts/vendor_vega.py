"""Rebuild .dvc/vega/page.html: DVC's plots page with Vega, Vega-Lite and vega-embed inlined.

  python scripts/vendor_vega.py

DVC's own page loads the three libraries from a CDN, so offline its interactive plots draw
nothing. .dvc/config points `plots.html_template` at this page instead, so `dvc plots show`
and `dvc plots diff` need no network and no extra option. The libraries are inlined rather
than linked because DVC writes the page wherever `-o` says; a relative link would break.

The minified builds come from the npm registry (`npm pack`, which checks each package's
integrity hash), at the versions pinned below. Their BSD-3-Clause licenses are kept in
.dvc/vega/ (vega's npm package ships none; its LICENSE is the one in github.com/vega/vega)
and are copied into the page, which redistributes the code.
"""

from __future__ import annotations

import subprocess
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / ".dvc" / "vega"
# name, version, the minified build inside the package
PACKAGES = (
    ("vega", "5.33.1", "package/build/vega.min.js"),
    ("vega-lite", "5.23.0", "package/build/vega-lite.min.js"),
    ("vega-embed", "6.29.0", "package/build/vega-embed.min.js"),
)
# DVC fills these by plain text replacement; {scripts} is left out on purpose: DVC would put
# its CDN <script> tags there.
PLACEHOLDERS = ("{plot_divs}", "{refresh_tag}", "{scripts}")

PAGE = """<!DOCTYPE html>
<html>
<head>
    {{refresh_tag}}
    <meta charset="utf-8">
    <title>DVC Plot</title>
    <!-- Built by scripts/vendor_vega.py: {versions}, inlined so the plots draw offline.
{licenses}
    -->
{scripts}
    <style>
        table {{
            border-spacing: 15px;
        }}
    </style>
</head>
<body>
    {{plot_divs}}
</body>
</html>
"""


def minified(name: str, version: str, member: str, tmp: Path) -> str:
    subprocess.run(
        ["npm", "pack", "--silent", f"{name}@{version}"], cwd=tmp, check=True, capture_output=True
    )
    with tarfile.open(tmp / f"{name}-{version}.tgz") as tar:
        extracted = tar.extractfile(member)
        if extracted is None:
            raise SystemExit(f"{name}@{version}: no {member} in the package")
        code = extracted.read().decode("utf-8")
    # Inline code must not end its own <script> element or collide with DVC's placeholders.
    bad = [s for s in ("</script", "<!--", *PLACEHOLDERS) if s in code.lower()]
    if bad:
        raise SystemExit(f"{name}@{version}: cannot be inlined, it contains {bad}")
    return code


def main() -> None:
    licenses = []
    for name, version, _ in PACKAGES:
        text = (OUT / f"LICENSE-{name}").read_text(encoding="utf-8").strip()
        licenses.append(f"{name} {version}:\n{text}".replace("--", "- -"))
    with tempfile.TemporaryDirectory() as tmp:
        scripts = [
            f"    <script>/* {name} {version} */\n{minified(name, version, member, Path(tmp))}"
            "\n    </script>"
            for name, version, member in PACKAGES
        ]
    page = PAGE.format(
        versions=", ".join(f"{n} {v}" for n, v, _ in PACKAGES),
        licenses="\n\n".join(licenses),
        scripts="\n".join(scripts),
    )
    (OUT / "page.html").write_text(page, encoding="utf-8")
    print(f"wrote {OUT / 'page.html'} ({len(page) // 1024} KiB)")


if __name__ == "__main__":
    main()
