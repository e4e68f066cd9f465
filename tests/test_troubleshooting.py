"""Every failure code the code can raise has a cause and a fix; some depend on the call."""

import re
from pathlib import Path

from vmmtui.words.troubleshooting import TABLE, explain, failure


def test_every_code_raised_in_the_package_is_explained():
    src = "\n".join(p.read_text() for p in (Path(__file__).parent.parent / "vmmtui").rglob("*.py"))
    raised = set(re.findall(r'failure\("([A-Z_]+)"', src))
    assert raised and raised <= set(TABLE), raised - set(TABLE)


def test_same_code_different_call_different_explanation():
    export = failure("CUDA_ERROR_INVALID_VALUE", "cuMemExportToShareableHandle")
    create = failure("CUDA_ERROR_INVALID_VALUE", "cuMemCreate")
    assert "requestedHandleTypes" in export.cause and "granularity" in create.cause
    assert "cuMemRelease" in explain("CUDA_ERROR_INVALID_VALUE", "cuMemFree")[1]
    assert explain("NO_SUCH_CODE") == (
        "unexpected error",
        "see the message; report it if it persists",
    )
