"""mkdocs hooks for the documentation site (mkdocs.yml names this file).

The pages link the repository's own pictures as ``../screenshots/NAME.png`` and
``../bench/results/NAME.png``, so they show on GitHub too; the site has no such folders above its
docs, so the pictures are added to the site's files and the links are pointed at them.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parent.parent
#: folders of the repository whose pictures the pages show
PICTURES = ("screenshots", "bench/results")
LINK = re.compile(r"\]\(\.\./(" + "|".join(re.escape(p) for p in PICTURES) + r")/")


def on_files(files: Files, config: Any) -> Files:
    for folder in PICTURES:
        for path in sorted((ROOT / folder).glob("*.png")):
            files.append(
                File(
                    f"{folder}/{path.name}",
                    str(ROOT),
                    config["site_dir"],
                    config["use_directory_urls"],
                )
            )
    return files


def on_page_markdown(markdown: str, **_: Any) -> str:
    return LINK.sub(r"](\1/", markdown)
