"""Write docs/testing.md's table of kinds from the policy's one list (``vmmtui/model/policy.py``,
worded by ``vmmtui/words/policy.py``): the rows between the page's markers are replaced.
tests/model/test_policy.py fails when the page and the list differ.

    python scripts/kinds-table.py
"""

from __future__ import annotations

from pathlib import Path

from vmmtui.words.policy import BEGIN, END, kinds_table

PAGE = Path(__file__).resolve().parent.parent / "docs" / "testing.md"


def main() -> None:
    text = PAGE.read_text()
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    PAGE.write_text(head + kinds_table() + tail)


if __name__ == "__main__":
    main()
